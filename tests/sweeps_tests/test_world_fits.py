"""The world bench's kept counterfactuals and the train-split measurements the fitted rules cite (issue 35).

A diff --run-missing ran is kept beside the dataset and read back as stored (so a bench line never depends on
re-running the sandbox); bench/world/train_fits.py reads the train split only, never a test record.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "world"))

import bench_world  # noqa: E402
import lr_optimum  # noqa: E402
import train_fits  # noqa: E402
import world  # noqa: E402

LR = "actor_rollout_ref.actor.optim.lr"


def record(split: str, seed: int, label: list[str], candidates: list[dict]) -> dict:
    return {"split": split, "seed": seed, "label": label, "candidates": candidates, "fault": None, "mode": "grpo",
            "kl": "none", "knobs": {LR: 2e-5}}


def test_a_diff_run_once_is_kept_and_read_back_as_stored(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "world-v9.jsonl.gz"
    keep = bench_world.extra_path(data)
    assert keep.name == "world-v9-extra.jsonl.gz"
    runs: list[list[str]] = []

    def fake_run(rec: dict, diff: list[str]) -> list[float]:  # paired gains 0.30, 0.26: mean 0.28 > spread 0.04
        runs.append(diff)
        return [0.30, 0.26]

    monkeypatch.setattr(bench_world, "run_gains", fake_run)
    records = [record("train", 1, [LR], [])]
    extra: bench_world.Extra = {}
    lines = bench_world.score(records, True, False, "train", propose=lambda r: ([f"{LR}=1e-6"], LR),
                              extra=extra, keep=keep)
    assert lines[1] == "world train: change improves 1/1" and runs == [[f"{LR}=1e-6"]]
    # read back from the file, the same diff is stored: no sandbox run, the same line
    again = bench_world.read_extra(keep)
    assert again == {("train", 1, (f"{LR}=1e-6",)): [0.30, 0.26]}
    lines = bench_world.score(records, False, False, "train", propose=lambda r: ([f"{LR}=1e-6"], LR), extra=again)
    assert lines[1] == "world train: change improves 1/1" and len(runs) == 1
    # a kept counterfactual of one world is no other world's
    assert bench_world.stored_gains(record("train", 2, [LR], []), [f"{LR}=1e-6"], again) is None
    assert bench_world.stored_gains(record("test", 1, [LR], []), [f"{LR}=1e-6"], again) is None


def test_the_fits_read_the_train_split_only() -> None:
    revert = {"overrides": [f"{LR}=4e-7"], "keys": [LR], "sources": ["fault"], "gains": [0.8, 0.75]}
    halve = {"overrides": [f"{LR}=1e-5"], "keys": [LR], "sources": ["advisor"], "gains": [0.004, None]}
    records = [record("train", 41, [LR], [revert, halve]), record("test", 1_000_041, [LR], [revert])]
    rows = train_fits.rows(records, LR)
    assert len(rows) == 2 and all(" 41 " in line for _, line in rows)
    revert_line = next(line for _, line in rows if "-> 4e-7 " in line)
    halve_line = next(line for _, line in rows if "-> 1e-5 " in line)
    # '+' exactly where world.improves holds: the revert improves, the halving (one seed missing) does not
    assert world.improves([0.8, 0.75]) and " + " in revert_line
    assert " + " not in halve_line and "nan" in halve_line


def test_the_fits_add_the_kept_train_diffs_and_never_a_test_ones(tmp_path: Path) -> None:
    data = tmp_path / "world-v9.jsonl.gz"
    keep = bench_world.extra_path(data)
    world.append(keep, {"split": "train", "seed": 41, "overrides": [f"{LR}=1e-6"], "gains": [0.7, 0.66]})
    world.append(keep, {"split": "test", "seed": 41, "overrides": [f"{LR}=3e-6"], "gains": [0.5, 0.5]})
    world.append(keep, {"split": "train", "seed": 41, "overrides": [f"{LR}=1e-6", "trainer.x=1"], "gains": [0.1, 0.1]})
    extra = train_fits.extra_candidates(keep)
    assert list(extra) == [41] and [c["overrides"] for c in extra[41]] == [[f"{LR}=1e-6"]]  # one-key, train only
    rec = record("train", 41, [LR], [])
    rec["knobs"]["actor_rollout_ref.rollout.n"] = 8
    rows = train_fits.rows([rec], LR, ("actor_rollout_ref.rollout.n",), extra)
    assert len(rows) == 1
    line = rows[0][1]
    # the kept diff, marked extra, its '+' from world.improves (mean 0.68 > 0.02 and > the spread 0.04), the run's n
    assert "-> 1e-6 " in line and " + " in line and " extra " in line and line.endswith(" n=8")
    # a diff the record stores already is not listed twice
    stored = {"overrides": [f"{LR}=1e-6"], "keys": [LR], "sources": ["advisor"], "gains": [0.7, 0.66]}
    assert len(train_fits.rows([record("train", 41, [LR], [stored])], LR, (), extra)) == 1


def test_a_kept_one_key_diff_that_improves_joins_the_label() -> None:
    # the candidates are every fix any rule offers: a fix first run by the bench is an intervention too
    ent = "actor_rollout_ref.actor.entropy_coeff"
    extra: bench_world.Extra = {
        ("train", 5, (f"{LR}=5e-7",)): [0.05, 0.04],  # mean 0.045 > 0.02 and > spread 0.01: improves
        ("train", 6, (f"{LR}=5e-7",)): [0.05, -0.01],  # mean 0.02: noise
        ("train", 7, (f"{LR}=5e-7", f"{ent}=0.0")): [0.3, 0.3],  # two keys: no key's own change
        ("test", 8, (f"{LR}=5e-7",)): [0.3, 0.3],  # another split's world 8
    }
    healthy = [record("train", seed, [], []) for seed in (5, 6, 7, 8)]
    assert [bench_world.label_of(r, extra) for r in healthy] == [{LR}, set(), set(), set()]
    assert bench_world.label_of(record("train", 5, [ent], []), extra) == {LR, ent}
    proposals = {5: [f"{LR}=5e-7"], 6: [f"{LR}=5e-7"], 7: [f"{LR}=5e-7", f"{ent}=0.0"], 8: []}
    lines = bench_world.score(healthy, False, False, "train", propose=lambda r: (proposals[r["seed"]], LR),
                              extra=extra)
    # world 5 is a fault the advisor fixed; 6 and 7 stay healthy and were changed; 8 healthy, left alone
    assert lines == ["world train: key right 1/1", "world train: change improves 1/1",
                     "world train: healthy no change 1/3"]


def test_the_stored_labels_leave_out_the_kept_diffs() -> None:
    extra: bench_world.Extra = {("train", 5, (f"{LR}=5e-7",)): [0.05, 0.04]}
    healthy = [record("train", 5, [], [])]
    lines = bench_world.score(healthy, False, False, "train", propose=lambda r: ([f"{LR}=5e-7"], LR), extra=extra,
                              grown=False)
    assert lines == ["world train: key right 0/0", "world train: change improves 0/0",
                     "world train: healthy no change 0/1"]


def test_the_rule_record_table_splits_at_the_seed_and_orders_by_decisions() -> None:
    from collections import Counter

    import rule_record

    counts = {("CF009", "before"): Counter({"decides": 20, "improves": 10, "key right": 10, "healthy changed": 9}),
              ("CF009", "after"): Counter({"decides": 4, "improves": 1, "key right": 1, "healthy changed": 3}),
              ("KL004", "before"): Counter({"decides": 33, "improves": 33, "key right": 33})}
    head, first, second = rule_record.table(counts)
    assert head.startswith("rule    before: decides, improves") and "| after: decides" in head
    assert first.split() == ["KL004", "before:", "33", "33", "33", "0", "|", "after:", "0", "0", "0", "0"]
    assert second.split() == ["CF009", "before:", "20", "10", "10", "9", "|", "after:", "4", "1", "1", "3"]


def test_the_lr_optimum_reads_lr_moves_of_train_runs_without_a_fault() -> None:
    def lr_change(value: float, gains: list) -> dict:
        return {"overrides": [f"{LR}={value}"], "keys": [LR], "sources": ["random"], "gains": gains}

    run = record("train", 1, [], [lr_change(1e-6, [0.1, 0.3]), lr_change(8e-5, [-0.2, None]),
                                  {"overrides": ["data.max_response_length=64"], "keys": ["data.max_response_length"],
                                   "sources": ["random"], "gains": [0.5, 0.5]}])
    faulty = {**record("train", 2, [LR], [lr_change(1e-6, [0.9, 0.9])]), "fault": {"name": "lr_too_high"}}
    held_out = record("test", 3, [], [lr_change(1e-6, [0.9, 0.9])])
    moves = lr_optimum.lr_moves([run, faulty, held_out])
    # the run's lr 2e-5 is log10 -4.7, the half-decade -4.5; a NaN seed is left out of the mean
    assert dict(moves) == {(-4.5, "down"): [0.2], (-4.5, "up"): [-0.2]}
    assert lr_optimum.table(moves)[1].split() == ["-4.5", "+0.200", "(n=1)", "-0.200", "(n=1)"]
