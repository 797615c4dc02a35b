"""``advisor verify``'s verdict over a sweep's trials, the pruner's protected pair, and validation patterns.

Expected numbers come from the curves written here: a pair is compared at the last step both trials reached
(``sweeps/_verdict.py``), so a difference is the candidate's tail mean there minus the baseline's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sweeps import Objective
from sweeps._result import TrialRecord
from sweeps._tail import MetricsTail
from sweeps.verify._verdict import DIFFERENT_VALUE, FIX_CONFIRMED, INSUFFICIENT, KEEP_BASELINE, judge, more_evidence

KEY = "actor_rollout_ref.actor.optim.lr"
BASE, PROP, THIRD = {KEY: 1e-4}, {KEY: 1e-6}, {KEY: 1e-5}
OBJ = Objective("val-core/*/mean@*", "maximize")
SEEDS = (1, 2, 3)


def _record(n: int, values: dict[str, Any], seed: int, curve: dict[int, float], state: str = "complete"
            ) -> TrialRecord:
    last = max(curve)
    return TrialRecord(number=n, values=values, seed=seed, role="candidate", state=state, objective=curve[last],
                       steps=last, feasible=True, curve=curve)


def _flat(value: float, last: int = 30, every: int = 5) -> dict[int, float]:
    return {s: value for s in range(every, last + 1, every)}


def _trials(base: float, prop: dict[int, float] | float, third: dict[int, float] | float | None,
            prop_state: str = "complete", third_state: str = "complete") -> list[TrialRecord]:
    out, n = [], 0
    for seed in SEEDS:
        out.append(_record(n, BASE, seed, _flat(base + 0.01 * seed)))
        curve = prop if isinstance(prop, dict) else _flat(prop + 0.01 * seed)
        out.append(_record(n + 1, PROP, seed, curve, prop_state))
        if third is not None:
            tcurve = third if isinstance(third, dict) else _flat(third + 0.01 * seed)
            out.append(_record(n + 2, THIRD, seed, tcurve, third_state))
        n += 3
    return out


def test_the_proposal_that_beats_the_baseline_on_every_seed_is_confirmed() -> None:
    v = judge(_trials(0.5, 0.7, 0.6), BASE, PROP, THIRD, OBJ, (), steps=30)
    assert v.decision == FIX_CONFIRMED and v.value == PROP
    assert v.interval == pytest.approx((0.2, 0.2))  # 0.7 - 0.5 on every seed
    assert [r.role for r in v.runs] == ["baseline", "proposed", "third"]
    assert all(r.steps == {1: 30, 2: 30, 3: 30} for r in v.runs)


def test_a_third_value_better_than_the_proposal_is_named() -> None:
    v = judge(_trials(0.5, 0.6, 0.8), BASE, PROP, THIRD, OBJ, (), steps=30)
    assert v.decision == DIFFERENT_VALUE and v.value == THIRD
    assert v.versus_proposal is not None and v.versus_proposal.mean_difference == pytest.approx(0.2)


def test_a_value_pruned_before_the_comparison_step_cannot_appear_as_confirmed() -> None:
    # the proposal leads the baseline at step 10, where the third value (better still) pruned it on every seed;
    # it never ran steps 15-30, so it is neither confirmed nor the value named
    pruned = {5: 0.9, 10: 0.9}
    v = judge(_trials(0.5, pruned, 0.95, prop_state="pruned"), BASE, PROP, THIRD, OBJ, (), steps=30)
    assert v.decision != FIX_CONFIRMED and v.value != PROP
    assert v.decision == DIFFERENT_VALUE and v.value == THIRD
    proposed = next(r for r in v.runs if r.role == "proposed")
    assert proposed.steps == {1: 10, 2: 10, 3: 10} and set(proposed.states.values()) == {"pruned"}
    # alone (no third value to name), the pruned proposal is still not confirmed
    alone = judge([r for r in _trials(0.5, pruned, None, prop_state="pruned")], BASE, PROP, None, OBJ, (), steps=30)
    assert alone.decision == INSUFFICIENT and alone.value is None
    assert "pruned" in alone.reason


def test_a_constraint_the_baseline_breaks_itself_does_not_keep_the_baseline() -> None:
    from sweeps import Constraint

    clip = Constraint("response_length/clip_ratio", "<=", 0.05)
    recs = _trials(0.4, 0.8, None)
    for r in recs:  # the baseline cuts 90% of its responses, the fix still 20%: both break the bound
        r.constraints = {clip.metric: 0.9 if r.values == BASE else 0.2}
        r.feasible = False
    v = judge(recs, BASE, PROP, None, OBJ, [clip], steps=30)
    assert v.decision == FIX_CONFIRMED and v.constraints_dropped == ["response_length/clip_ratio<=0.05"]
    for r in recs:  # a bound the baseline keeps still rules the fix out
        r.constraints = {clip.metric: 0.01 if r.values == BASE else 0.2}
        r.feasible = r.values == BASE
    assert judge(recs, BASE, PROP, None, OBJ, [clip], steps=30).decision == KEEP_BASELINE


def test_every_value_worse_keeps_the_baseline() -> None:
    v = judge(_trials(0.8, 0.5, 0.6), BASE, PROP, THIRD, OBJ, (), steps=30)
    assert v.decision == KEEP_BASELINE and v.value is None and v.exit_code == 1


def test_insufficient_evidence_says_how_many_more_seeds_the_spread_asks_for() -> None:
    # differences +0.1, -0.02, +0.04 (seeds 1-3): mean 0.04, sd 0.06; at 97.5% (two candidates), z = 2.2414,
    # n >= (2.2414 * 0.06 / 0.04)^2 = 11.3 -> 12 seeds, 9 more than the 3 run
    recs = []
    for i, (seed, d) in enumerate(zip(SEEDS, (0.1, -0.02, 0.04), strict=True)):
        recs += [_record(3 * i, BASE, seed, _flat(0.5)), _record(3 * i + 1, PROP, seed, _flat(0.5 + d)),
                 _record(3 * i + 2, THIRD, seed, _flat(0.4))]
    v = judge(recs, BASE, PROP, THIRD, OBJ, (), steps=30)
    assert v.decision == INSUFFICIENT
    assert v.more is not None and v.more.startswith("about 9 more seed(s)")


def test_more_evidence_asks_for_steps_when_a_pair_stopped_early() -> None:
    # the proposal was stopped at step 10 of 30 on every seed, unclear against the baseline there
    recs = []
    for i, (seed, d) in enumerate(zip(SEEDS, (0.1, -0.02, 0.04), strict=True)):
        recs += [_record(2 * i, BASE, seed, _flat(0.5)),
                 _record(2 * i + 1, PROP, seed, {5: 0.5, 10: 0.5 + d}, state="pruned")]
    v = judge(recs, BASE, PROP, None, OBJ, (), steps=30)
    assert v.decision == INSUFFICIENT
    assert v.more is not None and "compared before step 30 on seed 1 at step 10" in v.more
    assert more_evidence(None, 3, 30) is None


def test_a_validation_pattern_is_the_mean_over_data_sources(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    rows = [{"step": 0, "data": {"val-core/a/reward/mean@1": 0.1, "val-core/b/acc/mean@1": 0.3}},
            {"step": 5, "data": {"val-core/a/reward/mean@1": 0.4, "val-core/b/acc/mean@1": 0.8,
                                 "val-aux/a/reward/std@1": 9.0, "val-core/a/reward/best@4/mean": 7.0}},
            {"step": 6, "data": {"critic/score/mean": 0.2}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tail = MetricsTail(path, "jsonl", ["val-core/*/mean@*", "critic/score/mean"])
    assert tail.poll()
    assert tail.values("val-core/*/mean@*") == [pytest.approx((0.4 + 0.8) / 2)]  # step 0 is left out, as verl's
    assert tail.steps("val-core/*/mean@*") == [5]
    assert tail.values("critic/score/mean") == [0.2]


# --- the pruner's protected pair ----------------------------------------------------------------------------

optuna = pytest.importorskip("optuna")
DIST = {"lr": optuna.distributions.FloatDistribution(1e-7, 1.0, log=True)}
LEADER = {1: 0.5, 2: 0.6, 3: 0.7, 4: 0.8, 5: 0.9, 6: 0.9}
BEHIND = {1: 0.1, 2: 0.1, 3: 0.1, 4: 0.1}


def _study(protected: list[dict[str, Any]]) -> Any:
    from sweeps._pruner import seed_paired_pruner

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="maximize", pruner=seed_paired_pruner(2, 0, 0.5, protected))


def _finished(study: Any, lr: float, seed: int, curve: dict[int, float]) -> None:
    study.add_trial(optuna.trial.create_trial(params={"lr": lr}, distributions=DIST, value=curve[max(curve)],
                                              intermediate_values=curve, user_attrs={"seed": seed}))


def _running(study: Any, lr: float, seed: int, curve: dict[int, float]) -> Any:
    study.enqueue_trial({"lr": lr}, user_attrs={"seed": seed})
    trial = study.ask(DIST)
    for step, value in curve.items():
        trial.report(value, step)
    return trial


def test_a_protected_baseline_waits_for_the_proposal_to_reach_its_step() -> None:
    # the third value (1e-5) leads on seed 0, but the proposal (1e-6) has not run there yet: the baseline
    # (1e-4) is not stopped, since it could not be compared with the proposal at equal steps
    study = _study([{"lr": 1e-4}, {"lr": 1e-6}])
    _finished(study, 1e-5, 0, LEADER)
    assert _running(study, 1e-4, 0, BEHIND).should_prune() is False
    # once the proposal reached step 4 on the seed, the baseline may be stopped at step 4
    study = _study([{"lr": 1e-4}, {"lr": 1e-6}])
    _finished(study, 1e-5, 0, LEADER)
    _finished(study, 1e-6, 0, {1: 0.2, 2: 0.3, 3: 0.3, 4: 0.3})
    assert _running(study, 1e-4, 0, BEHIND).should_prune() is True


def test_an_unprotected_value_is_pruned_as_before() -> None:
    study = _study([{"lr": 1e-4}, {"lr": 1e-6}])
    _finished(study, 1e-6, 0, LEADER)
    assert _running(study, 1e-5, 0, BEHIND).should_prune() is True


# --- settings and imports -----------------------------------------------------------------------------------


def test_run_sweep_takes_one_settings_object_or_its_fields_by_name() -> None:
    import inspect

    from sweeps import RunSettings, run_sweep

    assert list(inspect.signature(run_sweep).parameters) == ["config", "spec", "settings", "fields"]
    settings = RunSettings(command=["python", "-m", "sweeps.sandbox"], overrides=["a=1"], parallel=2)
    assert settings.command == ("python", "-m", "sweeps.sandbox") and settings.overrides == ("a=1",)
    assert settings.plus_overrides(["b=2"]).overrides == ("a=1", "b=2")
    with pytest.raises(TypeError, match="parallell"):
        run_sweep(None, None, parallell=2)  # type: ignore[arg-type]


def test_verify_settings_refuse_a_warmup_under_a_third() -> None:
    from advisor.errors import SweepError
    from sweeps.verify import VerifySettings

    assert VerifySettings().warmup_share == pytest.approx(1 / 3)
    with pytest.raises(SweepError, match="at least a third"):
        VerifySettings(warmup_share=0.1)
    assert VerifySettings().with_run(parallel=3).run.parallel == 3


def test_verify_imports_only_public_advisor_names() -> None:
    import ast

    import advisor

    root = Path(__file__).resolve().parents[3] / "sweeps"
    for name in (*(f"verify/{p.name}" for p in sorted((root / "verify").glob("*.py"))), "_settings.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "advisor":
                assert not any(part.startswith("_") for part in node.module.split(".")), (name, node.module)
                for alias in node.names:
                    assert not alias.name.startswith("_"), (name, alias.name)
                    if node.module == "advisor":
                        assert alias.name in advisor.__all__, (name, alias.name)
