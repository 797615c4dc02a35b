"""Host RAM per node of an offload config, term by term by hand (issue 37, item 3).

Each expected number is the formula of knowledge/memory.yaml ``host`` applied by hand to Qwen2.5-7B's shapes
(P counted from its config.json, as test_memory_estimate does), not read from the code under test.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml
from memory_validation import GRPO_7B

from advisor import load_config
from advisor.memory import estimate_memory

REPO = Path(__file__).resolve().parents[3]
GIB = 1024**3
H, FFN, KV, L, V = 3584, 18944, 512, 28, 152064  # Qwen2.5-7B config.json
P = L * (2 * H * H + 2 * H * KV + (H + 2 * KV) + 3 * H * FFN + 2 * H) + 2 * V * H + H
G = 8  # GPUs (worker processes) on the node
OFFLOAD = (*GRPO_7B, f"trainer.n_gpus_per_node={G}", "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
           "actor_rollout_ref.actor.fsdp_config.param_offload=True",
           "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
           "actor_rollout_ref.actor.use_kl_loss=True", "trainer.save_freq=20")


def _fitted_baseline() -> float:
    """The per-worker baseline as knowledge/memory.yaml says it was taken: the median of the fit runs' logged
    node RAM per GPU (bench/published_runs/memory_points.yaml)."""
    host = yaml.safe_load((REPO / "knowledge/memory.yaml").read_text(encoding="utf-8"))["host"]
    points = yaml.safe_load((REPO / "bench/published_runs/memory_points.yaml").read_text(encoding="utf-8"))["points"]
    per_gpu = [p["cpu_memory_used_gb"] / p["gpus"] for p in points if p["id"] in host["worker_baseline_fit_ids"]]
    assert len(per_gpu) == 7
    assert host["worker_baseline_gib"] == pytest.approx(statistics.median(per_gpu), abs=0.005)
    return host["worker_baseline_gib"]


def test_host_terms_of_an_offload_config_by_hand():
    """verl 0.4.1, 8 GPUs, FSDP fp32 actor with param + optimizer offload, KL loss (a CPU-offloaded bf16
    reference), vLLM TP 2 (level-1 sleep, V0 swap space), checkpoints saved."""
    est = estimate_memory(load_config(None, verl_version="0.4.1", overrides=list(OFFLOAD)), gpu="H100",
                          host_memory_gib=512)
    parts = {label.split(" (")[0]: gib for label, gib in est.host.details}
    baseline = G * _fitted_baseline()
    expected = {
        "per-worker process baseline": baseline,
        "actor parameters offloaded": G * 4 * P / G / GIB,  # fp32 shard per rank (model_dtype default)
        "actor Adam states offloaded": G * 8 * P / G / GIB,  # exp_avg + exp_avg_sq, fp32
        "reference model": G * 2 * P / G / GIB,  # verl 0.4.1 builds the reference in bf16
        "vLLM level-1 sleep: engine weights copied to host": G * 2 * P / 2 / GIB,  # bf16 over rollout TP 2
        "vLLM V0 swap space": G * 4.0,  # EngineArgs.swap_space default, GiB per worker
        "checkpoint save, shards copied to host": G * (4 + 8) * P / G / GIB,
        "checkpoint load at start-up": 4 * P / GIB,  # rank 0, the whole fp32 model (embeddings not tied)
    }
    assert parts == pytest.approx(expected)
    during_run = sum(v for k, v in expected.items() if k not in ("per-worker process baseline",
                                                                  "checkpoint load at start-up"))
    assert est.host.peak_gib == pytest.approx(baseline + during_run)  # 34 P + 32 GiB + the baseline
    assert est.host.peak_gib == pytest.approx(baseline + (34 * P / GIB + 32))
    assert est.host.risk == "ok" and est.host.peak_gib / 512 < 0.8
    # verl's own metric leaves every pinned buffer out: the baseline alone
    assert est.host.sampled_gib == pytest.approx(baseline)


def test_level_two_sleep_drops_the_engine_copy_unless_layered_summon():
    """verl >= 0.6 sleeps vLLM at level 2 (weights dropped) unless rollout.layered_summon; no V0 swap space."""
    def labels(*extra: str) -> set[str]:
        est = estimate_memory(load_config(None, verl_version="0.7.0", overrides=[*OFFLOAD, *extra]), gpu="H100")
        return {label.split(" (")[0] for label, _gib in est.host.details}

    assert "vLLM level-1 sleep: engine weights copied to host" not in labels()
    assert "vLLM V0 swap space" not in labels()
    assert "vLLM level-1 sleep: engine weights copied to host" in labels(
        "actor_rollout_ref.rollout.layered_summon=True")


def test_host_risk_from_the_peak_not_the_sample():
    """The risk uses the peak per node (pinned pages hold RAM whether or not psutil's `used` shows them)."""
    cfg = load_config(None, verl_version="0.4.1", overrides=list(OFFLOAD))
    peak = estimate_memory(cfg, gpu="H100").host.peak_gib
    assert estimate_memory(cfg, gpu="H100", host_memory_gib=peak / 0.85).host.risk == "tight"
    assert estimate_memory(cfg, gpu="H100", host_memory_gib=peak / 1.2).host.risk == "oom"
