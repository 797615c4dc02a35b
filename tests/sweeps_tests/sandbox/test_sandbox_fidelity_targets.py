"""bench/fidelity_targets.yaml and bench/bench_sandbox_fidelity.py's measures, without running the sandbox.

The target file parses, every target has a range, a source and a derivation; the published figures it states are
recomputed from the logs in bench/published_runs/; each measure is checked on hand-made records whose expected
value is worked out in the test; the bench's last line is exactly ``sandbox fidelity: N/M targets in range``.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "scripts"))

import bench_sandbox_fidelity as bench  # noqa: E402
from published_run_bands import parse  # noqa: E402

LOGS = REPO / "bench" / "published_runs"


def test_every_target_parses_with_a_range_a_source_and_a_derivation() -> None:
    targets = bench.load_targets()
    assert len(targets) >= 10
    names = [t["name"] for t in targets]
    assert len(set(names)) == len(names)
    for t in targets:
        low, high = t["range"]
        assert low is not None or high is not None, t["name"]
        assert low is None or high is None or low <= high, t["name"]
        assert t["source"].strip() and t["derived"].strip() and t["cite"].strip(), t["name"]
        assert t["run"] in bench.RUNS and t["measure"] in bench.MEASURES, t["name"]


def test_a_target_without_a_source_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "targets.yaml"
    bad.write_text("targets:\n  - {name: x, run: grpo, metric: actor/entropy, measure: first, range: [0, 1],"
                   " cite: c, derived: d}\n")
    with pytest.raises(ValueError, match=r"targets\[0\] lacks source"):
        bench.load_targets(bad)


# The seven runs the targets were derived from (fidelity_targets.yaml's header: Q1 Q2 G AG AP M MM); runs added to
# bench/published_runs later do not move the sandbox's calibration targets.
TARGET_RUNS = ("Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log.gz",
               "Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538.log.gz",
               "gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log.gz", "amd_grpo_run_deepseek7b_llm.log.gz",
               "amd_ppo_run_deepseek7b_llm.log.gz", "gpg_qwen2-7b_math.log.gz", "gpg_qwen2-7b_math_megatron.log.gz")


def _first_and_end(metric: str) -> dict[str, tuple[float, float]]:
    out = {}
    for path in (LOGS / name for name in TARGET_RUNS):
        with gzip.open(path, "rt", errors="replace") as fh:
            rows = [r for r in parse(fh.read()) if "actor/pg_loss" in r or "actor/entropy" in r]
        values = [r[metric] for r in rows if metric in r]
        if values:
            tail = values[-max(1, len(values) // 10):]
            out[path.name] = (values[0], sum(tail) / len(tail))
    return out


def _target(name_start: str) -> dict[str, Any]:
    return next(t for t in bench.load_targets() if t["name"].startswith(name_start))


def test_the_published_entropy_figures_are_the_logs() -> None:
    entropy = _first_and_end("actor/entropy")  # entropy_loss is read as actor/entropy (published_run_bands)
    assert len(entropy) == 7
    firsts = [first for first, _ in entropy.values()]
    low, high = _target("step-0 entropy")["range"]
    assert low <= min(firsts) and max(firsts) <= high  # 0.336 .. 0.526
    assert min(firsts) - low < 0.01 and high - max(firsts) < 0.01  # the range is theirs, rounded outwards
    falls = [first / end for first, end in entropy.values()]
    low, high = _target("GRPO entropy fall")["range"]
    assert low <= min(falls) < low + 0.05 and high - 0.2 < max(falls) <= high  # 2.73 .. 27.9


def test_the_published_score_figures_are_the_logs() -> None:
    score = _first_and_end("critic/score/mean")
    gains = [end - first for first, end in score.values()]
    low, high = _target("GRPO score gain")["range"]
    assert low <= min(gains) < low + 0.01 and high - 0.01 < max(gains) <= high
    ends = [end for _, end in score.values()]
    low, high = _target("GRPO score at the end")["range"]
    assert low <= min(ends) < low + 0.01 and high - 0.01 < max(ends) <= high


def _run(tmp_path: Path, rows: list[dict[str, float]], dump: list[list[float]] | None = None, n: int = 2,
         val: float = 0.5) -> bench.Run:
    records = [(0, {"val-core/sandbox/add/reward/mean@1": val})]
    records += [(i + 1, row) for i, row in enumerate(rows)]
    dump_dir = tmp_path / f"dump{len(list(tmp_path.iterdir()))}"
    dump_dir.mkdir()
    for step, scores in enumerate(dump or [], start=1):
        lines = [json.dumps({"input": f"p{i // n}", "score": s}) for i, s in enumerate(scores)]
        (dump_dir / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    return bench.Run(records, dump_dir, n, 1.0)


def test_measures_by_hand(tmp_path: Path) -> None:
    # entropy 2.0, then 1.0 x 9 steps: end = mean of the last 10% (1 step) = 1.0, fall 2.0; score 0.2 .. 0.6
    rows = [{"actor/entropy": 2.0, "critic/score/mean": 0.2}] + [{"actor/entropy": 1.0, "critic/score/mean": 0.6}] * 9
    # step 1: groups (1,1) flat, (0,1) not; step 2: (0,0) flat, (1,1) flat -> 3 of 4 flat
    run = _run(tmp_path, rows, dump=[[1, 1, 0, 1], [0, 0, 1, 1]])
    kl_free = _run(tmp_path, [{"actor/entropy": 0.5}] * 10)
    runs = {"grpo": run, "no_kl": kl_free}

    def measure(kind: str, metric: str, **extra: str) -> float:
        return bench.MEASURES[kind](runs, {"run": "grpo", "metric": metric, **extra})

    assert measure("first", "actor/entropy") == 2.0
    assert measure("end", "actor/entropy") == 1.0
    assert measure("fall", "actor/entropy") == 2.0
    assert measure("gain", "critic/score/mean") == pytest.approx(0.4)
    assert measure("mean", "actor/entropy") == pytest.approx((2.0 + 9 * 1.0) / 10)
    assert measure("peak", "actor/entropy") == 2.0
    assert measure("sampled_over_greedy", "critic/score/mean") == pytest.approx(0.2 / 0.5)
    assert measure("flat_groups", "critic/score/mean") == 0.75
    no_kl = bench.MEASURES["end_ratio_of"](runs, {"run": "no_kl", "of": "grpo", "metric": "actor/entropy"})
    assert no_kl == 2.0  # 1.0 with KL / 0.5 without


def test_a_dump_out_of_group_order_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path, [{"actor/entropy": 1.0}], dump=[[1, 1, 0, 1]], n=2)  # inputs p0 p0 p1 p1
    run.n = 3  # read as groups of 3: p0 p0 p1 is no group
    with pytest.raises(SystemExit, match="not one prompt's group"):
        run.flat_groups()


def test_in_range_and_open_bounds() -> None:
    assert bench.in_range(0.5, [0.0, 1.0]) and bench.in_range(5.0, [2.0, None]) and not bench.in_range(1.0, [2.0, None])
    assert not bench.in_range(math.nan, [None, 1.0])


def test_the_bench_ends_with_exactly_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"actor/entropy": 0.4, "critic/score/mean": 0.3, "response_length/mean": 10.0}] * 10
    monkeypatch.setattr(bench, "sandbox_policy_overrides", lambda policy: [])
    monkeypatch.setattr(bench, "run_one", lambda name, overrides, tmp, verbose: _run(tmp_path, rows, [[1, 1]]))
    assert bench.main(["--policy", "loglinear"]) == 0
    lines = capsys.readouterr().out.splitlines()
    targets = bench.load_targets()
    assert len(lines) == len(targets) + 2
    hits = sum(line.startswith("ok ") for line in lines[: len(targets)])
    assert lines[-1] == f"sandbox fidelity: {hits}/{len(targets)} targets in range"
    assert all("(range " in line for line in lines[: len(targets)])
