"""The intervention-labelled world of bench/world/ (issue 35): determinism, labels, splits, the dataset file.

CI never regenerates the world: the generator runs here on a tiny slice (the log-linear policy, 3 steps), and the
committed dataset is read, not rebuilt.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "world"))

import generate  # noqa: E402
import world  # noqa: E402

TINY = {"steps": 3, "test_freq": 1, "val_size": 16, "policy": "loglinear"}
FAULT_KEY = "actor_rollout_ref.actor.optim.lr"
RANDOM_KEY = "actor_rollout_ref.actor.clip_ratio"


def without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "seconds"}


def test_a_world_run_on_a_tiny_slice_is_deterministic() -> None:
    seed = world.world_seed("train", 3)
    first = generate.json_safe(generate.evaluate_world("train", seed, TINY))
    second = generate.json_safe(generate.evaluate_world("train", seed, TINY))
    assert "error" not in first
    assert first["candidates"], "a world run is labelled by at least its random changes"
    assert without_timing(first) == without_timing(second)
    other = generate.json_safe(generate.evaluate_world("train", seed + 1, TINY))
    assert other["overrides"] != first["overrides"] or other["val"] != first["val"]


def candidate(key: str, value: object, gains: list[float], source: str) -> dict:
    return {"overrides": [f"{key}={value}"], "keys": [key], "sources": [source], "gains": gains}


def test_the_label_is_the_set_of_keys_whose_change_improves_beyond_noise() -> None:
    # the fault key's revert: paired gains 0.30 and 0.26 on the two seeds, mean 0.28 > the floor 0.02 and > the
    # spread 0.04; a random change: mean 0.0; a change whose mean 0.05 is below its spread 0.10 is noise
    revert = candidate(FAULT_KEY, 1e-6, [0.30, 0.26], "fault")
    random_key = candidate(RANDOM_KEY, 0.22, [0.01, -0.01], "random")
    noisy = candidate("actor_rollout_ref.rollout.temperature", 0.9, [0.10, 0.00], "random")
    assert world.label([revert, random_key, noisy]) == [FAULT_KEY]
    # with nothing improving, the run is healthy: its label is empty
    assert world.label([random_key, noisy]) == []
    # a gain under the floor is not an improvement however steady
    assert not world.improves([0.015, 0.015])
    # a missing seed (a counterfactual that could not run) never counts
    assert not world.improves([0.3, math.nan])


def test_the_stored_labels_follow_from_the_stored_gains() -> None:
    records = [r for r in world.read(world.DATA)[:40] if "error" not in r]
    if not records:
        pytest.skip("no world dataset committed yet")
    for r in records:
        expected = set()
        for c in r["candidates"]:
            gains = [g for g in c["gains"] if g is not None]
            if len(c["keys"]) == 1 and len(gains) == 2:
                mean = sum(gains) / 2
                if mean > 0.02 and mean > abs(gains[0] - gains[1]):
                    expected.add(c["keys"][0])
        assert set(r["label"]) == expected, r["seed"]
        if r["fault"]:  # the fault's key put back is always one of the candidates
            revert = world.render(r["fault"]["key"], r["fault"]["base_value"])
            assert any(c["overrides"] == [revert] for c in r["candidates"])


def test_the_splits_are_disjoint_in_seeds_and_in_config_space() -> None:
    (train_lo, train_hi), (test_lo, test_hi) = world.SEED_RANGES["train"], world.SEED_RANGES["test"]
    assert train_lo < train_hi <= test_lo < test_hi <= world.SEED_RANGES["fresh"][0]
    # the sandbox seeds of the last train world stay below those of the first test world
    assert max(world.sandbox_seeds(train_hi - 1)) < min(world.sandbox_seeds(test_lo))
    for index in range(120):
        train, _, _ = world.draw_world("train", world.world_seed("train", index))
        test, _, _ = world.draw_world("test", world.world_seed("test", index))
        assert not world.in_test_region(train)
        assert world.in_test_region(test)
    with pytest.raises(ValueError):
        world.world_seed("train", train_hi)
    # a fresh test split draws from the test region on seeds neither split uses
    fresh = world.world_seed("fresh", 0, 5_000_000)
    assert fresh >= test_hi and world.in_test_region(world.draw_world("fresh", fresh)[0])
    # the committed dataset keeps them apart too
    records = world.read(world.DATA)
    seeds = {split: {s for r in records if r["split"] == split for s in r["sandbox_seeds"]} for split in
             ("train", "test")}
    assert not seeds["train"] & seeds["test"]
    for r in records:
        assert world.in_test_region(r) == (r["split"] == "test")


def test_random_changes_are_one_key_each_and_never_the_fault_key() -> None:
    rng = np.random.default_rng(7)
    for index in range(40):
        base, fault, _ = world.draw_world("train", world.world_seed("train", index))
        changes = world.random_changes(rng, base, "train", fault)
        keys = [world.key_of(c) for c in changes]
        assert len(keys) == len(set(keys)) == world.RANDOM_CANDIDATES
        assert not fault or fault["key"] not in keys


def test_generation_resumes_and_a_record_cut_short_is_dropped(tmp_path: Path) -> None:
    out = tmp_path / "world.jsonl.gz"
    first = generate.generate(out, ["train"], 1, size=TINY)
    assert [r["seed"] for r in first] == [0]
    with open(out, "ab") as fh:  # a generator killed mid-write leaves a gzip member cut short
        fh.write(gzip.compress(b'{"split": "train", "seed": 99}\n')[:20])
    assert [r["seed"] for r in world.read(out)] == [0]
    again = generate.generate(out, ["train"], 2, size=TINY)
    assert [r["seed"] for r in again] == [0, 1]
    assert again[0] == first[0]


def test_the_bench_counts_each_line_by_its_definition(capsys: pytest.CaptureFixture[str]) -> None:
    import bench_world

    lr, ent = FAULT_KEY, "actor_rollout_ref.actor.entropy_coeff"

    def record(seed: int, label: list[str], candidates: list[dict]) -> dict:
        return {"seed": seed, "label": label, "candidates": candidates, "fault": None, "mode": "grpo", "kl": "none"}

    records = [
        # a fault the advisor names, with a stored diff that improves: key right, change improves
        record(1, [lr], [candidate(lr, "1e-6", [0.3, 0.25], "fault")]),
        # a fault the advisor names with a diff whose stored gains are noise: key right only
        record(2, [lr], [candidate(lr, "1e-6", [0.3, 0.25], "fault"), candidate(lr, "5e-6", [0.05, -0.05], "advisor")]),
        # two keys improve; the advisor changes the second (stored, improving): key right, change improves
        record(3, [lr, ent], [candidate(ent, 0.0, [0.1, 0.09], "advisor")]),
        # a fault the advisor misses
        record(4, [lr], []),
        # healthy runs: one left alone, one changed
        record(5, [], []),
        record(6, [], [candidate(ent, 0.0, [0.0, 0.0], "random")]),
    ]
    proposals = {1: ([f"{lr}=1e-6"], lr), 2: ([f"{lr}=5e-6"], lr), 3: ([f"{ent}=0.0"], ent), 4: ([], None),
                 5: ([], None), 6: ([f"{ent}=0.0"], ent)}
    lines = bench_world.score(records, False, False, "train", propose=lambda r: proposals[r["seed"]])
    assert lines == ["world train: key right 3/4", "world train: change improves 2/4",
                     "world train: healthy no change 1/2"]
    # a proposed diff with no stored counterfactual counts as not improving, and the bench says so
    lines = bench_world.score([record(7, [lr], [])], False, False, "test",
                              propose=lambda r: ([f"{lr}=2e-6"], lr))
    assert lines[1] == "world test: change improves 0/1"
    assert "not in the stored counterfactuals" in capsys.readouterr().out


def test_a_fresh_split_never_goes_into_the_dataset(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[Path] = []
    monkeypatch.setattr(generate, "generate", lambda out, *args, **kw: written.append(out) or [])
    assert generate.main(["--fresh", "1", "--start", "2000150", "--out", str(world.DATA)]) == 2
    assert "not into world-v1.jsonl.gz" in capsys.readouterr().err and written == []
    # by default a fresh split from seed S is kept where bench_world.py --fresh N --start S reads it
    assert generate.main(["--fresh", "1", "--start", "2000150"]) == 0
    assert written == [world.DATA.parent / "fresh-2000150.jsonl.gz"]


def test_a_pilot_at_another_lr_scale_runs_at_it_and_is_never_the_dataset(capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    written: list[tuple[Path, dict | None]] = []
    monkeypatch.setattr(generate, "generate", lambda out, *args, size=None, **kw: written.append((out, size)) or [])
    assert generate.main(["--worlds", "1", "--splits", "train", "--lr-scale", "100"]) == 2
    assert "--out" in capsys.readouterr().err and written == []
    assert generate.main(["--worlds", "1", "--lr-scale", "100", "--out", str(world.DATA)]) == 2
    assert f"not {world.DATA.name}" in capsys.readouterr().err and written == []
    pilot = tmp_path / "pilot.jsonl.gz"
    assert generate.main(["--worlds", "1", "--splits", "train", "--lr-scale", "100", "--out", str(pilot)]) == 0
    assert written == [(pilot, {**world.SIZE, "lr_scale": 100.0})]
    # the scale reaches the sandbox: the same world's runs differ from the default scale's (the Adam step is
    # lr x lr_scale, sweeps/sandbox/args.py), and the record keeps the size it ran at
    monkeypatch.undo()
    default = generate.json_safe(generate.evaluate_world("train", world.world_seed("train", 0), TINY))
    [scaled] = generate.generate(pilot, ["train"], 1, size={**TINY, "lr_scale": 1.0})
    assert "+sandbox.lr_scale=1.0" in scaled["overrides"] and "+sandbox.lr_scale=1.0" not in default["overrides"]
    assert scaled["size"]["lr_scale"] == 1.0 and scaled["metrics"] != default["metrics"]
    assert json.loads(pilot.with_name("pilot.meta.json").read_text())["size"] == scaled["size"]


def test_the_bench_scores_the_first_worlds_alone_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    import bench_world

    # the committed pilot holds train worlds 0-59 (bench/world/README.md); --first 3 reads worlds 0, 1 and 2 of it
    pilot = world.DATA.parent / "pilot-lrscale100.jsonl.gz"
    assert bench_world.main(["--data", str(pilot), "--splits", "train", "--two-seeds", "--first", "3"]) == 0
    out = capsys.readouterr().out
    described = next(line for line in out.splitlines() if line.startswith("train: "))
    assert described.startswith("train: 3 world runs")
    # on two seeds the labels are the stored ones: the faults counted are those of worlds 0-2
    faults = sum(1 for r in world.read(pilot) if r["seed"] < 3 and "error" not in r and r["label"])
    assert re.search(rf"^world train: key right \d+/{faults}$", out, re.MULTILINE)
    # every pilot record ran at the scale its meta file states
    meta = json.loads(pilot.with_name("pilot-lrscale100.meta.json").read_text())
    assert all(r["size"] == meta["size"] and "+sandbox.lr_scale=100.0" in r["overrides"] for r in world.read(pilot))
