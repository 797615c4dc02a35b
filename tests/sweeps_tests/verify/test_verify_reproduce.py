"""``advisor verify`` reads the diagnosis on its own trials: a fix cannot be refuted on trials without the problem.

Trial metrics here are the rule fixtures' runs (``tests/rules_tests/fixtures``: AD001's hand-labelled ``fires``
and ``quiet`` cases), written as a trial writes them; verdicts come from the curves written here, as in
``test_verify_judge.py``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from advisor import load_config
from advisor.playbook import load_playbook
from sweeps import Objective
from sweeps._result import TrialRecord
from sweeps.verify._reproduce import read_trials
from sweeps.verify._verdict import FIX_CONFIRMED, INSUFFICIENT, KEEP_BASELINE, judge, with_reproduction
from tests.rules_tests._runs import build_run, load_fixture

REPO = Path(__file__).resolve().parents[3]
KEY = "actor_rollout_ref.rollout.temperature"
BASE, PROP = {KEY: 0.3}, {KEY: 1.0}
OBJ = Objective("val-core/*/mean@*", "maximize")
AD001 = next(r for r in load_playbook() if r.id == "AD001")
FIRES = load_fixture("AD001")["fires"][0]  # advantages ~0 while some responses score: every group flat
QUIET = next(c for c in load_fixture("AD001")["quiet"] if c["name"] == "healthy spread")


def _trial_dir(root: Path, n: int, case: dict[str, Any] | None, name: str = "metrics.jsonl") -> str:
    """A trial directory as the runner leaves it: cmd.json naming the metrics file, and that file."""
    d = root / f"{n:04d}"
    d.mkdir(parents=True)
    (d / "cmd.json").write_text(json.dumps({"argv": [], "metrics_path": str(d / name)}))
    if case is not None:
        _, frame = build_run(case)
        with (d / name).open("w") as fh:
            for step, row in frame.iterrows():
                fh.write(json.dumps({"step": int(step), "data": {k: float(v) for k, v in row.items()}}) + "\n")
    return str(d)


def _record(n: int, values: dict[str, Any], seed: int, value: float, trial_dir: str | None = None,
            state: str = "complete") -> TrialRecord:
    curve = {s: value for s in range(5, 31, 5)}
    return TrialRecord(number=n, values=values, seed=seed, role="candidate", state=state, objective=value, steps=30,
                       feasible=True, curve=curve, dir=trial_dir)


def _configs() -> dict[str, Any]:
    cfg, _ = build_run(FIRES)
    return {"baseline": cfg, "proposed": cfg}


def test_the_diagnosis_is_read_on_every_trial_from_the_file_its_cmd_names(tmp_path: Path) -> None:
    records = []
    for i, seed in enumerate((1, 2, 3)):
        records.append(_record(2 * i, BASE, seed, 0.5, _trial_dir(tmp_path, 2 * i, FIRES, name="elsewhere.jsonl")))
        no_metrics = seed == 3  # a trial that died before logging
        records.append(_record(2 * i + 1, PROP, seed, 0.7,
                               _trial_dir(tmp_path, 2 * i + 1, None if no_metrics else QUIET)))
    r = read_trials(AD001, _configs(), [("baseline", BASE), ("proposed", PROP)], records, (225, 300))
    base, prop = r.role("baseline"), r.role("proposed")
    assert base.shown == [1, 2, 3] and base.shows and r.reproduced is True
    assert prop.shown == [] and prop.shows is False and sorted(prop.readings) == [1, 2] and list(prop.unread) == [3]
    assert r.describe() == "AD001 on the trials: baseline 3/3 seeds, proposed 0/2 seeds"


def test_a_baseline_without_the_problem_is_not_a_reproduction_and_says_where_it_stood(tmp_path: Path) -> None:
    records = [_record(i, BASE, seed, 0.5, _trial_dir(tmp_path, i, QUIET)) for i, seed in enumerate((1, 2, 3))]
    r = read_trials(AD001, _configs(), [("baseline", BASE)], records, (225, 300))
    assert r.reproduced is False
    level = QUIET["metrics"]["critic/advantages/max"]  # a constant curve: its median over the window
    assert r.role("baseline").levels()["critic/advantages/max"] == pytest.approx(level)
    assert "AD001 needs critic/advantages/max below 0.05" in r.why_not() and f"critic/advantages/max {level:g}" in \
        r.why_not()


def test_no_readable_baseline_trial_leaves_the_question_open(tmp_path: Path) -> None:
    records = [_record(0, BASE, 1, 0.5, _trial_dir(tmp_path, 0, None)), _record(1, BASE, 2, 0.5, None)]
    r = read_trials(AD001, _configs(), [("baseline", BASE)], records, (1, 30))
    assert r.reproduced is None and "could be read" in r.why_not()


def _trials(base: float, prop: float) -> list[TrialRecord]:
    out = []
    for i, seed in enumerate((1, 2, 3)):
        out += [_record(2 * i, BASE, seed, base + 0.01 * seed), _record(2 * i + 1, PROP, seed, prop + 0.01 * seed)]
    return out


def _reproduction(tmp_path: Path, baseline_case: dict[str, Any]):
    records = [_record(i, BASE, seed, 0.5, _trial_dir(tmp_path, i, baseline_case)) for i, seed in enumerate((1, 2, 3))]
    return read_trials(AD001, _configs(), [("baseline", BASE)], records, (225, 300))


def test_keep_baseline_on_trials_without_the_problem_becomes_insufficient_evidence(tmp_path: Path) -> None:
    verdict = judge(_trials(0.7, 0.5), BASE, PROP, None, OBJ, (), steps=30)
    assert verdict.decision == KEEP_BASELINE
    verdict = with_reproduction(verdict, _reproduction(tmp_path, QUIET), steps=30)
    assert verdict.decision == INSUFFICIENT and verdict.exit_code == 1 and verdict.value is None
    assert "do not show AD001" in verdict.reason and "worse than the baseline" in verdict.reason
    assert "steps 225-300" in verdict.more and "ran 30" in verdict.more
    assert verdict.to_dict()["reproduction"]["reproduced"] is False


def test_keep_baseline_stands_when_the_trials_show_the_problem(tmp_path: Path) -> None:
    verdict = with_reproduction(judge(_trials(0.7, 0.5), BASE, PROP, None, OBJ, (), steps=30),
                                _reproduction(tmp_path, FIRES), steps=30)
    assert verdict.decision == KEEP_BASELINE and verdict.reproduction.reproduced is True


def test_a_value_measured_better_keeps_its_verdict_without_the_problem(tmp_path: Path) -> None:
    # better on held-out validation is a finding on its own; that it cures AD001 is what the caveat says is unshown
    verdict = with_reproduction(judge(_trials(0.5, 0.7), BASE, PROP, None, OBJ, (), steps=30),
                                _reproduction(tmp_path, QUIET), steps=30)
    assert verdict.decision == FIX_CONFIRMED and verdict.value == PROP
    assert verdict.reproduction.reproduced is False


@pytest.mark.slow
def test_verify_on_the_sandbox_reads_the_diagnosis_on_its_trials(tmp_path: Path) -> None:
    # the bundled grpo_flat_groups run (AD001, temperature 0.3 -> 1.0) verified with the sandbox as the trainer:
    # whatever the sandbox does at 0.3, the verdict must agree with what its baseline trials show
    pytest.importorskip("optuna")
    ex = REPO / "examples" / "grpo_flat_groups"
    proc = subprocess.run([sys.executable, "-m", "advisor", "verify", str(ex / "run.sh"), str(ex / "metrics.jsonl"),
                           "--skip-tree", "throughput", "--skip-tree", "memory", "--command",
                           f"{sys.executable} -m sweeps.sandbox", "--steps", "30", "--parallel", "2",
                           "--out", str(tmp_path / "out"), "-f", "json"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(result, json.loads((REPO / "advisor" / "schemas" / "verify.output.json").read_text()))
    verdict, repro = result["verdict"], result["verdict"]["reproduction"]
    assert repro["rule"] == "AD001" and [v["role"] for v in repro["values"]] == ["baseline", "proposed", "third"]
    baseline = repro["values"][0]
    # AD001 recomputed from the baseline trials' own files with the rule's thresholds (knowledge/rules/advantage/
    # AD001-grpo-flat-groups.yaml): over suggest's window (the last 20 of 30 steps), the median advantage max is
    # below 0.05, the median min above -0.05, and the median score max above 0; its harm is its conditions
    expected, levels = [], []
    for trial in result["sweep"]["trials"]:
        if trial["values"] != {KEY: 0.3} or trial["state"] in ("interrupted", "waiting"):
            continue
        rows = [json.loads(line)["data"] for line in Path(trial["dir"], "metrics.jsonl").read_text().splitlines()]
        window = rows[-20:]
        level = {m: statistics.median(r[m] for r in window) for m in
                 ("critic/advantages/max", "critic/advantages/min", "critic/score/max")}
        levels.append(level["critic/advantages/max"])
        if level["critic/advantages/max"] < 0.05 and level["critic/advantages/min"] > -0.05 and \
                level["critic/score/max"] > 0:
            expected.append(trial["seed"])
    assert len(levels) == 3 == len(baseline["seeds"])
    assert sorted(baseline["seeds_showing"]) == sorted(expected)
    assert repro["reproduced"] is (2 * len(expected) > 3)
    got = sorted(s["levels"]["critic/advantages/max"] for s in baseline["seeds"].values())
    assert got == pytest.approx(sorted(levels))
    if not repro["reproduced"]:  # no trial can refute the fix for a problem its baseline does not have
        assert verdict["decision"] != KEEP_BASELINE
    cfg = load_config(ex / "run.sh")
    assert cfg.get(KEY) == 0.3  # the example itself is unchanged by the trials
