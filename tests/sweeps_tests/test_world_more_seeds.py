"""Two more seeds for the world's undecided changes (issue 35: a change is the fix when making it makes the run
better, judged beyond noise).

Two seeds test a change with one degree of freedom; a candidate whose two gains leave the verdict open is run on two
more (bench/world/reseed.py) and judged on the four: the mean paired gain must exceed the floor and twice its
standard error, which on two seeds is exactly the spread |g1 - g2| the generator used from the start.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "world"))

import bench_world  # noqa: E402
import reseed  # noqa: E402
import world  # noqa: E402

LR = "actor_rollout_ref.actor.optim.lr"
TOP_P = "actor_rollout_ref.rollout.top_p"


def two_seed_rule(g: list[float]) -> bool:  # the criterion the dataset was labelled with
    mean = sum(g) / 2
    return mean > world.GAIN_FLOOR and mean > abs(g[0] - g[1])


@pytest.mark.parametrize("gains", [[0.06, 0.02], [0.05, 0.01], [0.1, 0.08], [0.03, 0.03], [0.4, 0.1], [0.2, -0.1],
                                   [0.0234, 0.0156], [0.0625, 0.02734]])
def test_on_two_seeds_the_criterion_is_the_spread_as_before(gains: list[float]) -> None:
    assert world.improves(gains) == two_seed_rule(gains)


def test_on_four_seeds_the_mean_must_exceed_twice_its_standard_error() -> None:
    gains = [0.05, 0.01, 0.04, 0.02]  # mean 0.03; 2 * stdev / sqrt(4) = stdev = 0.0183
    assert statistics.mean(gains) > statistics.stdev(gains) and world.improves(gains)
    assert not world.improves(gains[:2])  # two seeds: mean 0.03 < spread 0.04
    refuted = [0.06, 0.03, -0.02, 0.01]  # two seeds said improves (0.045 > 0.03); four: mean 0.02, not above floor
    assert world.improves(refuted[:2]) and not world.improves(refuted)
    assert not world.improves([0.05, 0.04, math.nan, 0.03])  # a failed run leaves it unproven


def test_undecided_is_a_mean_above_the_floor_with_t_between_one_and_six() -> None:
    # t = mean / (|g1 - g2| / 2)
    assert world.undecided([0.05, 0.01])  # t = 0.03 / 0.02 = 1.5
    assert world.undecided([0.06, 0.03])  # t = 0.045 / 0.015 = 3: improves on two, still open
    assert not world.undecided([0.10, 0.08])  # t = 9: decided
    assert not world.undecided([0.03, 0.03])  # no spread: decided
    assert not world.undecided([0.3, -0.2])  # t = 0.05 / 0.25 = 0.2: decided against
    assert not world.undecided([0.02, 0.01])  # mean under the floor
    assert not world.undecided([0.05, 0.01, 0.04, 0.02])  # four seeds: judged


def test_the_more_seeds_are_disjoint_from_every_worlds_first_two() -> None:
    last = world.SEED_RANGES["fresh"][1] - 1
    assert max(world.sandbox_seeds(last)) < min(world.more_seeds(0))
    assert world.more_seeds(7) != world.more_seeds(8)


def record(seed: int, candidates: list[dict]) -> dict:
    return {"split": "train", "seed": seed, "label": world.label(candidates), "candidates": candidates,
            "fault": None, "mode": "grpo", "kl": "none", "knobs": {}, "overrides": ["x=1"]}


def cand(override: str, gains: list[float]) -> dict:
    return {"overrides": [override], "keys": [world.key_of(override)], "gains": gains, "sources": ["advisor"]}


def test_four_seeds_decide_the_label_either_way() -> None:
    open_no = record(1, [cand(f"{LR}=1e-6", [0.05, 0.01])])  # two seeds: healthy
    open_yes = record(2, [cand(f"{TOP_P}=1.0", [0.06, 0.03])])  # two seeds: improves
    more = bench_world.MoreSeeds(gains={("train", 1, (f"{LR}=1e-6",)): [0.04, 0.02],
                                        ("train", 2, (f"{TOP_P}=1.0",)): [-0.02, 0.01]})
    assert bench_world.label_of(open_no) == set() and bench_world.label_of(open_yes) == {TOP_P}
    assert bench_world.label_of(open_no, None, more) == {LR}  # mean 0.03 > 2 SE
    assert bench_world.label_of(open_yes, None, more) == set()  # mean 0.02: not above the floor
    lines = bench_world.score([open_no, open_yes], False, False, "train", propose=lambda r: ([f"{LR}=1e-6"], LR),
                              more=more)
    # world 1 a fault fixed; world 2 healthy, and its proposed lr (not stored) is no candidate: a change
    assert lines == ["world train: key right 1/1", "world train: change improves 1/1",
                     "world train: healthy no change 0/1"]


def test_reseed_runs_each_open_candidate_once_and_resumes(tmp_path: Path, monkeypatch) -> None:
    import generate

    runs: list[tuple[tuple[str, ...], int]] = []

    def fake_validation(overrides: list[str], seed: int) -> tuple[float, list, str]:
        runs.append((tuple(overrides), seed))
        return (0.6 if f"{LR}=1e-6" in overrides else 0.5), [], ""

    monkeypatch.setattr(generate, "validation", fake_validation)
    data = tmp_path / "world-v9.jsonl.gz"
    world.append(data, record(3, [cand(f"{LR}=1e-6", [0.05, 0.01]), cand(f"{TOP_P}=1.0", [0.2, 0.19])]))
    world.append(data, record(4, [cand(f"{TOP_P}=1.0", [0.0, 0.01])]))  # nothing open: no run
    world.append(bench_world.extra_path(data), {"split": "train", "seed": 3, "overrides": [f"{TOP_P}=0.9"],
                                               "gains": [0.05, 0.01]})  # a kept diff, open: run too
    assert reseed.reseed(data) == 2
    # the base once on each further seed, each open candidate once on each
    assert sorted(s for o, s in runs if o == ("x=1",)) == sorted(world.more_seeds(3))
    assert len(runs) == 6
    bases, gains = reseed.read_more_seeds(reseed.more_seeds_path(data))
    assert bases == {("train", 3): [0.5, 0.5]}
    assert gains == {("train", 3, (f"{LR}=1e-6",)): [pytest.approx(0.1)] * 2,
                     ("train", 3, (f"{TOP_P}=0.9",)): [0.0, 0.0]}
    assert reseed.reseed(data) == 0 and len(runs) == 6  # resumed: nothing run twice
    more = bench_world.MoreSeeds.of(data)
    assert bench_world.label_of(world.read(data)[0], None, more) == {LR, TOP_P}


def test_the_fits_show_and_judge_the_four_seeds() -> None:
    import train_fits

    rec = record(9, [cand(f"{LR}=1e-6", [0.05, 0.01])])
    rec["knobs"] = {LR: 2e-7}
    (_, two), = train_fits.rows([rec], LR)
    (_, four), = train_fits.rows([rec], LR, more={("train", 9, (f"{LR}=1e-6",)): [0.04, 0.02]})
    assert " + " not in two and "[+0.050, +0.010]" in two
    assert " + " in four and "[+0.050, +0.010, +0.040, +0.020]" in four
