"""The metric alias table and the version hint (advisor/metrics/_aliases.py, knowledge/metric_aliases.yaml)."""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from advisor.metrics import canonical_metric_name
from advisor.metrics._aliases import aliases, parse_version, rename, rename_in, version_hint

VERL_GIT = Path(os.environ.get("VERL_GIT", "/work/.mirror/verl-project+verl/repo"))


@pytest.mark.parametrize(
    ("old", "new", "scale"),
    [
        pytest.param("timing/gen", "timing_s/gen", 1.0, id="timing"),
        pytest.param("actor/entropy_loss", "actor/entropy", 1.0, id="entropy"),
        pytest.param("critic/kl", "actor/reward_kl_penalty", 1.0, id="in-reward-kl"),
        pytest.param("critic/kl_coeff", "actor/reward_kl_penalty_coeff", 1.0, id="in-reward-kl-coeff"),
        pytest.param("val/test_score/openai/gsm8k", "val-core/openai/gsm8k/reward/mean@1", 1.0, id="validation"),
        pytest.param("mfu/actor", "perf/mfu/actor", 1.0, id="mfu"),
        pytest.param("mismatch/mismatch_k3_kl", "rollout_corr/k3_kl", 1.0, id="mismatch"),
        pytest.param("mismatch/rollout_is_eff_sample_size", "rollout_corr/rollout_is_eff_sample_size", 1.0,
                     id="mismatch-is"),
        pytest.param("actor/lr(1e-4)", "actor/lr", 1e-4, id="scaled-lr"),
        # v0.8.0: the engine workers' memory peaks come back under actor/ (rename_dict in ray_trainer.py:1328)
        pytest.param("actor/perf/max_memory_allocated_gb", "perf/max_memory_allocated_gb", 1.0, id="0.8-memory"),
        pytest.param("actor/perf/max_memory_reserved_gb", "perf/max_memory_reserved_gb", 1.0, id="0.8-reserved"),
        pytest.param("actor/perf/cpu_memory_used_gb", "perf/cpu_memory_used_gb", 1.0, id="0.8-host-memory"),
    ],
)
def test_old_names_become_current_ones(old, new, scale):
    renamed = rename(old)

    assert renamed is not None and (renamed.new, renamed.scale) == (new, scale)
    assert canonical_metric_name(old) == new


@pytest.mark.parametrize(
    "name",
    ["actor/entropy", "timing_s/gen", "critic/kl_loss", "actor/kl_loss", "critic/vf_loss", "val-core/x/reward/mean@1",
     "perf/mfu/actor", "rollout_corr/kl", "actor/lr", "critic/klx", "xtiming/gen",
     # v0.8+ names with no older spelling: the critic's own memory peaks, the total loss
     "critic/perf/max_memory_allocated_gb", "actor/loss", "critic/loss", "training/num_turns/mean"],
)
def test_current_names_are_left_alone(name):
    assert rename(name) is None
    assert canonical_metric_name(name) == name


def test_every_entry_renames_its_own_example():
    for rule in aliases():
        old, new = rule.example
        renamed = rename(old)
        assert renamed is not None and renamed.rule is rule and renamed.new == new, rule.example


@cache
def _show(at: str) -> str:
    result = subprocess.run(["git", "-C", str(VERL_GIT), "show", at], capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else ""


@pytest.mark.parametrize("rule", aliases(), ids=lambda r: r.example[0])
def test_every_source_quote_is_in_verl_at_that_tag(rule):
    if not (VERL_GIT / "HEAD").exists():
        pytest.skip(f"no verl git clone at {VERL_GIT} (set VERL_GIT)")
    for at, contains in rule.source:
        text = _show(at)
        assert text, f"{at} not found in {VERL_GIT}"
        assert contains in text, f"{at} does not contain {contains!r}"


def test_entropy_loss_beside_entropy_is_the_update_time_entropy_of_v0_8():
    # verl <= 0.4.0 wrote only actor/entropy_loss (the entropy); from v0.8.0 the engine workers write it
    # next to actor/entropy for the update-time entropy (0.9.1:verl/workers/utils/losses.py:129)
    assert rename_in("actor/entropy_loss", {"actor/entropy_loss", "actor/pg_loss"}).new == "actor/entropy"
    assert rename_in("actor/entropy_loss", {"actor/entropy_loss", "actor/entropy"}) is None
    assert version_hint(["actor/entropy", "actor/entropy_loss", "actor/perf/max_memory_allocated_gb"]).spec == ">=0.8.0"


@pytest.mark.parametrize(
    ("names", "spec"),
    [
        # the V1 trainer, default from v0.9.0 (trainer_base.py:1795,1822-1830)
        (["actor/pg_loss", "actor/perf/max_memory_allocated_gb", "training/num_turns/mean",
          "training/off_policy/trajectory_staleness/mean", "rollout_corr/kl"], ">=0.9.0"),
        # v0.8.0's legacy driver over the engine workers
        (["actor/loss", "critic/perf/max_memory_allocated_gb", "timing_s/agent_loop/compute_score/mean"], ">=0.8.0"),
        # the legacy FSDP workers of v0.7: bare perf/max_memory_* and perf/mfu/actor_infer
        (["perf/max_memory_allocated_gb", "perf/mfu/actor_infer", "actor/entropy"], ">=0.7.0,<0.8.0"),
    ],
)
def test_hint_dates_0_8_and_0_9_logs(names, spec):
    hint = version_hint(names)

    assert hint.consistent and hint.spec == spec, hint.evidence


def test_hint_intersects_the_ranges_of_every_name_seen():
    hint = version_hint(["actor/entropy", "rollout_corr/kl", "actor/pg_loss"])

    assert (hint.lower, hint.upper, hint.consistent) == ("0.6.1", None, True)
    assert hint.spec == ">=0.6.1"
    assert "rollout_corr/kl: >=0.6.1" in hint.evidence


def test_hint_from_names_and_format_markers():
    hint = version_hint(["actor/entropy_loss", "actor/reward_kl_penalty"], ["console_three_decimals"])

    assert hint.spec == ">=0.4.0,<0.4.1"


def test_contradicting_evidence_is_flagged():
    hint = version_hint(["timing/gen", "rollout_corr/kl"])

    assert not hint.consistent


def test_no_hint_without_dating_names():
    assert version_hint(["actor/pg_loss", "critic/score/mean"]) is None


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [("0.3.0.rc0", "0.3.0"), ("0.3.0", "0.3.0.post1"), ("0.7.0", "0.8.0.dev"), ("0.8.0.dev", "0.8.0"),
     ("0.4", "0.4.1"), ("v0.6.1", "main")],
)
def test_version_order(smaller, larger):
    assert parse_version(smaller) < parse_version(larger)


def test_bad_version_text():
    with pytest.raises(ValueError, match=re.escape("verl version must look like '0.9.1' but got 'latest-ish'")):
        parse_version("latest-ish")
