"""The validation set: verl's device-tuning results and example scripts, predicted on the right side.

A configuration that ran must not be predicted ``oom``; one that ran out of memory must be. Cases the
model gets wrong are listed with their reason under ``known_miss`` in validation_set.yaml and marked
xfail(strict): fixing one makes its test fail until the list is updated, so the score stays honest.
"""

from __future__ import annotations

import pytest
import yaml
from memory_validation import HERE, VERL_SCRIPTS, cases

_CASES = cases()


def _param(case):
    marks = [pytest.mark.xfail(reason=case.known_miss, strict=True)] if case.known_miss else []
    return pytest.param(case, id=f"{case.kind}:{case.id}", marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in _CASES])
def test_predicted_on_the_right_side(case):
    estimate = case.estimate()
    peak = estimate.peak
    assert case.right(estimate), (
        f"expected {case.expected}, predicted {estimate.verdict}: {peak.stage} "
        f"{peak.peak_gib:.1f}/{peak.capacity_gib:.1f} GiB")


def test_every_known_miss_names_a_case():
    ids = {c.id for c in _CASES}
    listed = yaml.safe_load((HERE / "validation_set.yaml").read_text(encoding="utf-8"))["known_miss"]
    assert set(listed) <= ids


def test_validation_set_covers_every_example_script():
    scripts = {p.relative_to(VERL_SCRIPTS / "examples").as_posix()
               for p in (VERL_SCRIPTS / "examples").rglob("*.sh")}
    assert scripts == {c.id for c in _CASES if c.kind in ("example", "cannot_run")}
    assert len(scripts) == 86


GIB = 1024**3
H100_GIB = 81559 / 1024  # knowledge/gpus.yaml memory_mib
H20_GIB = 97871 / 1024


def _dense_params(layers: int, hidden: int, intermediate: int, vocab: int, kv_dim: int, lm_head: bool) -> int:
    """A Llama-style decoder: embedding (+ lm_head), q/o + k/v projections, gate/up/down MLP, two norms a layer."""
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden * (2 if lm_head else 1) + layers * per_layer + hidden


# deepseek-llm-7b (knowledge/models.yaml: 30 layers, h 4096, I 11008, vocab 102400, MHA): 6.91B; the critic
# drops the lm_head for a value head
_DS7B = _dense_params(30, 4096, 11008, 102400, 4096, lm_head=True)
_DS7B_CRITIC = _dense_params(30, 4096, 11008, 102400, 4096, lm_head=False)


def _megatron_state_at_init(params: int, model_parallel: int, dp: int) -> float:
    """bf16 weights + fp32 grad buffer (grad_reduce_in_fp32, megatron_utils.py) per model-parallel shard, and the
    distributed optimizer's fp32 main parameters over the data-parallel ranks; Adam's moments come later."""
    return (2 + 4) * params / model_parallel + 4 * params / model_parallel / dp


def test_a_script_that_cannot_run_as_written_fails_by_plain_arithmetic():
    by_id = {c.id: c for c in _CASES if c.kind == "cannot_run"}
    assert set(by_id) == {"ppo_trainer/run_deepseek_full_hh_rlhf.sh",
                          "ppo_trainer/run_deepseek_math_gsm8k_megatron_nsys.sh", "grpo_trainer/run_seed_oss_36b.sh"}
    assert _DS7B / 1e9 == pytest.approx(6.91, abs=0.01)
    # full_hh_rlhf: TP = PP = 1 on 8 GPUs, no offload: actor and critic state alone is over the card
    state = _megatron_state_at_init(_DS7B, 1, 8) + _megatron_state_at_init(_DS7B_CRITIC, 1, 8)
    assert state / GIB > H100_GIB
    # nsys: TP 2 x PP 2 (dp 2) on an H20; vLLM needs 0.8 x total free at start-up, even with no CUDA context counted
    state = _megatron_state_at_init(_DS7B, 4, 2) + _megatron_state_at_init(_DS7B_CRITIC, 4, 2)
    assert H20_GIB - state / GIB < 0.8 * H20_GIB - 5  # short by more than 5 GiB
    # seed_oss_36b: one 524288-token sequence of K and V (64 layers, 8 KV heads x 128, bf16) split over rollout TP 2,
    # against the 0.6 pool minus the 36B bf16 weights over TP 2
    kv_one_seq = 2 * 64 * 8 * 128 * 2 * 524288 / 2
    weights = 2 * _dense_params(64, 5120, 27648, 155136, 8 * 128, lm_head=True) / 2
    assert kv_one_seq > 0.6 * H100_GIB * GIB - weights
    # the model agrees, for the reason the arithmetic gives
    for case in by_id.values():
        assert case.estimate().verdict == "oom", case.id
    assert "KV cache" in by_id["grpo_trainer/run_seed_oss_36b.sh"].estimate().stage("generate").reason
    assert "cannot start" in by_id["ppo_trainer/run_deepseek_math_gsm8k_megatron_nsys.sh"].estimate().stage(
        "generate").reason


def test_the_named_lora_sp_residual_is_what_the_trails_leave_unexplained():
    # knowledge/memory.yaml residuals.multi_gpu_lora_sp: 79.19 GiB minus the estimate at each trail's first
    # OOM point; kept in step with the model (re-read it when the model moves)
    from advisor.datafiles import load_knowledge

    seen = load_knowledge("memory.yaml")["residuals"]["multi_gpu_lora_sp"]["seen"]
    by_id = {c.id: c for c in _CASES}
    for point in seen:
        case = by_id[point["trail"].rsplit("/", 1)[1]]
        assert case.expected == "oom"
        estimate = case.estimate()
        assert 79.19 - estimate.peak.peak_gib == pytest.approx(point["gib"], abs=0.15)
        assert any("multi-GPU LoRA trails with Ulysses SP" in a for a in estimate.assumptions)
