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
    assert scripts == {c.id for c in _CASES if c.kind == "example"}
    assert len(scripts) == 86


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
