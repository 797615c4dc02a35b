"""`advisor watch` decides as `advisor suggest` does: at a step, watch's decision (verdict, deciding rule, diff) is
suggest's on the file cut at that step, and replaying a file gives the alerts of following it live.

Every bundled example (examples/*/run.sh + metrics.jsonl) is fed to a Watcher one record at a time, as a live
follower reads it, and compared with `suggest_run` on the file's first lines at the steps watch judges: every step
of the warm-up (the first 30 records), every 10th after, and the last (each comparison reads a file, so every
step of 13 examples would cost minutes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor import load_config
from advisor.errors import MetricsError
from advisor.metrics import parse_metrics_line
from advisor.playbook import suggest_run
from advisor.watch import WARM_UP_STEPS, Watcher, WatchOptions

EXAMPLES = sorted(p.parent for p in (Path(__file__).resolve().parents[3] / "examples").glob("*/metrics.jsonl"))


def _decision(result) -> tuple | None:
    if result is None:
        return None
    return (result.verdict, result.decided_by.id if result.decided_by else None,
            [c.override() for c in result.changes])


def _events(payloads: list[dict]) -> list[tuple]:
    return [(p["event"], p["step"], p["id"]) for p in payloads]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_watch_decides_as_suggest_on_the_file_so_far(example: Path, tmp_path: Path) -> None:
    cfg = load_config(example / "run.sh")
    lines = (example / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    live = Watcher(cfg, str(example), WatchOptions())
    events = []
    cut = tmp_path / "metrics.jsonl"
    for i, line in enumerate(lines, start=1):
        events += live.feed([parse_metrics_line(line, "jsonl")])
        if i == len(lines):
            events += live.finish()  # the source ended: the last step is judged
        elif not live.judged(i) or (i > 30 and i % 10):
            continue
        cut.write_bytes(b"".join(lines[:i]))
        try:
            expected = _decision(suggest_run(cfg, cut))
        except MetricsError:  # nothing suggest reads yet (a validation-only first row)
            expected = None
        assert _decision(live.decision) == expected, f"{example.name}: step {i}"
    replay = Watcher(cfg, str(example), WatchOptions())
    replayed = replay.feed([parse_metrics_line(line, "jsonl") for line in lines]) + replay.finish()
    assert _events(replayed) == _events(events)
    # the last decision is suggest's on the whole file: an example's documented verdict is watch's too
    assert _decision(live.decision) == _decision(suggest_run(cfg, example / "metrics.jsonl"))
    assert all(e["step"] >= WARM_UP_STEPS - 1 or e["diagnosis"]["area"] == "numerics" for e in events)


def test_kl_spike_loss_alerts_kl001_and_no_warm_up_transient() -> None:
    # issue #25: followed live, this example alerted a transient CF005 at step 7 (warm-up gradient norms) and
    # never KL001, which suggest decides on the same data
    example = next(e for e in EXAMPLES if e.name == "kl_spike_loss")
    cfg = load_config(example / "run.sh")
    watcher = Watcher(cfg, "kl_spike_loss", WatchOptions())
    events = []
    for line in (example / "metrics.jsonl").read_bytes().splitlines():
        events += _events(watcher.feed([parse_metrics_line(line, "jsonl")]))
    assert [e for e in events if e[0] == "alert"] and {e[2] for e in events} == {"KL001"}
    assert suggest_run(cfg, example / "metrics.jsonl").decided_by.id == "KL001"
