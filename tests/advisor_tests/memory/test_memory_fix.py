"""The smallest performance-only change that brings every phase under 80%."""

from __future__ import annotations

import subprocess
import sys

from memory_validation import GRPO_7B

from advisor import Change, load_config
from advisor.memory import estimate_memory, find_memory_fix

ALGORITHM_KEYS = {
    "data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.rollout.n",
    "data.max_prompt_length", "data.max_response_length", "actor_rollout_ref.actor.optim.lr",
}
BASE = list(GRPO_7B)


def cfg(*overrides: str):
    return load_config(None, verl_version="0.8.0.dev", overrides=[*BASE, *overrides])


def test_a_config_that_fits_needs_no_change():
    fix = find_memory_fix(cfg(), {"gpu": "H100"})
    assert fix.fits and fix.changes == ()
    assert "nothing to change" in fix.explanation


def test_a_too_large_micro_batch_is_fixed_with_performance_knobs_only():
    # 256 prompts x 8 responses / 8 GPUs = 256 responses per mini batch per GPU, all in one micro batch,
    # with an entropy bonus (two more bf16 logit gradients)
    broken = cfg("actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.entropy_coeff=0.001",
                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=256",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=256")
    assert estimate_memory(broken, gpu="H100").verdict == "oom"
    fix = find_memory_fix(broken, {"gpu": "H100"})
    assert fix.fits
    assert 1 <= len(fix.changes) <= 2
    assert all(isinstance(c, Change) for c in fix.changes)
    assert not {c.key for c in fix.changes} & ALGORITHM_KEYS
    # the patched config really is ok everywhere, by the public estimate
    patched = estimate_memory(broken.with_changes(fix.changes), gpu="H100")
    assert all(s.risk == "ok" for s in patched.stages)


def test_the_cheapest_fix_wins():
    # only the engine budget is too large: lowering gpu_memory_utilization beats offloading anything
    fix = find_memory_fix(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.85"), {"gpu": "H100"})
    assert [c.key for c in fix.changes] == ["actor_rollout_ref.rollout.gpu_memory_utilization"]
    assert fix.changes[0].new < 0.85


def test_an_invalid_candidate_is_skipped_for_the_next_cheapest():
    broken = cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.85")
    key = "actor_rollout_ref.rollout.gpu_memory_utilization"

    cheapest = find_memory_fix(broken, {"gpu": "H100"}).changes[0].new

    def refuse_the_cheapest(patched) -> bool:
        return patched.get(key) != cheapest

    fix = find_memory_fix(broken, {"gpu": "H100"}, refuse_the_cheapest)
    assert fix.fits
    assert refuse_the_cheapest(broken.with_changes(fix.changes))
    assert {c.key: c.new for c in fix.changes}.get(key) != cheapest


def test_when_nothing_fits_it_says_so_and_changes_nothing():
    # a 72B full fine-tune on eight 24 GB cards
    fix = find_memory_fix(cfg("actor_rollout_ref.model.path=Qwen/Qwen2.5-72B-Instruct"), {"gpu": "RTX-4090"})
    assert not fix.fits and fix.changes == ()
    assert "no one- or two-key performance change" in fix.explanation
    assert "GPUs with more memory" in fix.explanation
    assert "algorithm change you must choose yourself" in fix.explanation
    # the size of the gap is stated: the worst phase's peak minus 80% of the card
    worst = fix.before.peak
    gap = worst.peak_gib - 0.8 * worst.capacity_gib
    assert f"{gap:.1f} GiB over the 80% line" in fix.explanation
    assert "more than 8x" not in fix.explanation


def test_fix_to_dict_carries_pasteable_overrides():
    fix = find_memory_fix(cfg("actor_rollout_ref.rollout.gpu_memory_utilization=0.85"), {"gpu": "H100"})
    out = fix.to_dict()
    assert out["fits"] is True
    assert out["overrides"][0].startswith("actor_rollout_ref.rollout.gpu_memory_utilization=")
    assert out["verdict_before"] == "oom" and out["verdict_after"] == "ok"


def test_importing_the_memory_model_loads_no_heavy_library():
    code = ("import sys, advisor.memory; "
            "print(sorted(m for m in ('torch', 'numpy', 'pandas', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
