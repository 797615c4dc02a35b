"""bench/bench_suggest_corpus.py's case selection, without running the sandbox.

The representative subset (``--subset``) must still be a corpus: every fault, every mode and KL placement, each
fault case measured against a healthy run of its own mode and placement, and each fault at its harshest
severity; the language model's response caps must cut its answers (at most 20 tokens as it was taught them)
while the healthy cap lets them finish.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import bench_suggest_corpus as bench  # noqa: E402


@pytest.mark.parametrize("policy", bench.POLICIES)
def test_the_subset_covers_every_fault_and_every_mode_and_kl_placement(policy: str) -> None:
    faults = bench.faults_for(policy)
    subset = bench.subset_cases(1, None, faults)
    fault_cases = [c for c in subset if c.kind == "fault"]
    assert {c.name.split("@")[0] for c in fault_cases} == {f.name for f in faults}
    assert {(c.mode, c.placement) for c in fault_cases} == set(bench.ALL)
    healthy = [c for c in subset if c.kind == "healthy"]
    assert {(c.mode, c.placement) for c in healthy if c.name == "healthy0"} == set(bench.ALL)
    assert {c.name for c in healthy} == {f"healthy{i}" for i in range(len(bench.HEALTHY))}
    assert {c.seed for c in subset} == {1}


def test_each_subset_fault_runs_at_its_last_severity_in_modes_it_applies_to() -> None:
    faults = {f.name: f for f in bench.faults_for("lm")}
    for case in bench.subset_cases(2, None, tuple(faults.values())):
        if case.kind != "fault":
            continue
        fault = faults[case.name.split("@")[0]]
        assert case.name == f"{fault.name}@{len(fault.severities)}"
        assert case.overrides == fault.severities[-1] and case.accept == fault.accept
        assert (case.mode, case.placement) in fault.modes


def test_the_subset_is_part_of_the_full_matrix_and_smaller() -> None:
    faults = bench.faults_for("lm")
    full = bench.cases([1, 2, 3], None, faults)
    subset = bench.subset_cases(1, None, faults)
    key = [(c.kind, c.name, c.mode, c.placement, c.overrides, c.seed) for c in full]
    assert all((c.kind, c.name, c.mode, c.placement, c.overrides, c.seed) in key for c in subset)
    assert len(subset) < len(full) / 5
    # each fault in two of its modes (every fault applies to at least two), plus 6 baselines and 2 variations
    assert len(subset) == 2 * len(faults) + len(bench.ALL) + len(bench.HEALTHY) - 1


def test_only_narrows_the_subset_to_the_named_faults_and_keeps_the_baselines() -> None:
    subset = bench.subset_cases(1, ["critic_lr_too_low"], bench.faults_for("lm"))
    assert {c.name for c in subset if c.kind == "fault"} == {"critic_lr_too_low@2"}
    assert sum(c.name == "healthy0" for c in subset) == len(bench.ALL)


def test_the_language_models_response_caps_cut_its_answers_and_the_healthy_cap_does_not() -> None:
    # the longest answer the language model was taught (sweeps/sandbox/lm_task.py sft_response): 3 opener words, the
    # working "999 + 99 = 1098" (3 + 1 + 2 + 1 + 4 tokens), then "#### 1098" and EOS (1 + 4 + 1)
    longest = 3 + (3 + 1 + 2 + 1 + 4) + (1 + 4 + 1)
    caps = [int(s[0].split("=")[1]) for f in bench.faults_for("lm") if f.name == "response_too_short"
            for s in f.severities]
    healthy_cap = int(next(o for o in bench.COMMON if o.startswith("data.max_response_length=")).split("=")[1])
    # a direct answer with no opener ("#### 12<eos>") still fits the harshest cap; the working does not
    assert all(4 <= cap < longest for cap in caps) and healthy_cap >= longest
    assert all(int(h[0].split("=")[1]) >= longest for h in bench.HEALTHY if h and "max_response_length" in h[0])
    # the log-linear policy keeps the caps of its published figures
    assert [f.severities for f in bench.faults_for("loglinear")] == [f.severities for f in bench.FAULTS]
