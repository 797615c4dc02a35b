"""The watch loop: read what the run appended, update the frame, re-run suggest, turn diagnoses into alerts.

The diagnosis is ``advisor suggest``'s own (advisor/playbook/_suggest.py) on the bounded frame (``LiveFrame``)
with a fixed recent window (``--window``, default 20 steps: suggest's smallest default window,
advisor/playbook/_signals.py DEFAULT_WINDOW_STEPS); a finished log's ``suggest`` widens the window to 25% of the
run, which would hide an onset for a quarter of the run. Suggest runs once per poll that brought new
steps, at the newest step, so a writer faster than the diagnosis is read in batches and never falls behind.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from advisor.errors import MetricsError

from ._actions import emit, run_command
from ._alerts import SEVERITY_RANK, AlertState, Event
from ._frame import LiveFrame
from ._open import open_source
from ._sources import Source

EXIT_ALERT = 4  # --exit-on: an alert at that level or above (0/1/2/3 are taken: advisor/cli/_app.py)
DEFAULT_WINDOW = 20
DEFAULT_CONFIRM = 3
MAX_EVALUATIONS_PER_BATCH = 16


@dataclass
class WatchOptions:
    alert: str = "warning"  # the lowest severity that alerts
    exit_on: str | None = None  # exit with EXIT_ALERT after the first alert at this severity or above
    on_alert: list[list[str]] = field(default_factory=list)  # commands, each an argument list
    idle_stop_minutes: float | None = None  # stop when nothing new arrived for this long
    fmt: str = "text"
    confirm: int = DEFAULT_CONFIRM
    window: int = DEFAULT_WINDOW
    poll_s: float = 0.2
    gpu_memory_gib: float | None = None
    rules: Any = None  # playbook rules (suggest's default when None)
    address: str | None = None  # Ray job server for ray://JOB_ID
    max_steps: int | None = None  # stop after this many steps were read (tests, benchmarks)


@dataclass
class WatchResult:
    exit_code: int
    steps: int
    events: list[dict[str, Any]]
    reason: str


class Watcher:
    """One followed run: feed it records, it evaluates and returns the alert payloads."""

    def __init__(self, cfg: Any, source_name: str, options: WatchOptions) -> None:
        self.cfg = cfg
        self.source_name = source_name
        self.options = options
        self.frame = LiveFrame(dense=max(64, options.window + 16))
        self.state = AlertState(level=options.alert, confirm=options.confirm)
        self.steps_read = 0
        self.evaluations = 0
        self.fmt = "jsonl"

    def feed(self, records: Sequence[tuple[int, dict[str, float]]]) -> list[dict[str, Any]]:
        """Add the records, evaluating at the steps the batch is judged at; the alert payloads."""
        n = len(records)
        stride = max(1, -(-n // MAX_EVALUATIONS_PER_BATCH))
        judged = {i for i in range(stride - 1, n, stride)} | set(range(max(0, n - self.options.confirm), n))
        payloads: list[dict[str, Any]] = []
        for i, (step, values) in enumerate(records):
            self.frame.add(step, values)
            self.steps_read += 1
            if i in judged:
                payloads += self.evaluate()
        return payloads

    def evaluate(self) -> list[dict[str, Any]]:
        """Run suggest at the newest step; the alert payloads it brings."""
        from advisor.metrics import frame_from_rows
        from advisor.playbook import normalized_for, suggest

        step = self.frame.last_step
        if step is None:
            return []
        steps, names, values = self.frame.arrays()
        frame = normalized_for(self.cfg, frame_from_rows(steps, names, values, fmt=self.fmt,  # type: ignore[arg-type]
                                                         path=self.source_name))
        if frame.all_nan:
            return []
        try:
            result = suggest(self.cfg, frame.table, window=self.options.window,
                             gpu_memory_gib=self.options.gpu_memory_gib, rules=self.options.rules)
        except MetricsError:  # none of the metrics the playbook reads has arrived yet
            return []
        self.evaluations += 1
        return [self._payload(e, result) for e in self.state.update(step, result.diagnoses)]

    def _payload(self, event: Event, result: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {"schema": 1, "event": event.kind, "step": event.step,
                                   "onset_step": event.onset_step, "id": event.diagnosis_id,
                                   "severity": event.severity, "source": self.source_name}
        if event.diagnosis is not None:
            payload["diagnosis"] = event.diagnosis.to_dict({})
        payload["suggest"] = {"verdict": result.verdict,
                              "decided_by": result.decided_by.id if result.decided_by else None,
                              "overrides": result.overrides, "changes": [c.to_dict() for c in result.changes],
                              "diagnoses": [d.id for d in result.diagnoses if d.severity != "info"],
                              "window": {"first_step": result.window.first_step,
                                         "last_step": result.window.last_step}}
        return payload


def watch(cfg: Any, source: str | Source, options: WatchOptions | None = None, *, out: TextIO | None = None,
          err: TextIO | None = None, clock: Any = time.monotonic, sleep: Any = time.sleep) -> WatchResult:
    """Follow ``source`` (a path, ``ray://JOB_ID`` or an opened Source) until it ends, goes idle for
    ``idle_stop_minutes``, reaches ``max_steps``, or an alert at ``exit_on`` stops the watch.

    Raises:
        MetricsError: the source cannot be followed (no such Ray job, tensorboard missing).
    """
    options = options or WatchOptions()
    out = out or sys.stdout
    err = err or sys.stderr
    src = open_source(source, address=options.address) if isinstance(source, str) else source
    watcher = Watcher(cfg, src.name, options)
    events: list[dict[str, Any]] = []
    last_new = clock()
    idle_s = options.idle_stop_minutes * 60 if options.idle_stop_minutes is not None else None
    exit_rank = SEVERITY_RANK[options.exit_on] if options.exit_on else None

    def handle(payloads: list[dict[str, Any]]) -> int | None:
        for payload in payloads:
            events.append(payload)
            emit(payload, options.fmt, out)
            for argv in options.on_alert:
                run_command(argv, payload, err=err)
            if (exit_rank is not None and payload["event"] in ("alert", "worse")
                    and SEVERITY_RANK[payload["severity"]] >= exit_rank):
                return EXIT_ALERT
        return None

    reason = "the source ended"
    try:
        while True:
            records = src.poll()
            if src.fmt:
                watcher.fmt = src.fmt
            if records:
                last_new = clock()
                if options.max_steps is not None:
                    records = records[: max(0, options.max_steps - watcher.steps_read)]
                code = handle(watcher.feed(records))
                if code is not None:
                    return WatchResult(code, watcher.steps_read, events, f"an alert at {options.exit_on} or above")
                if options.max_steps is not None and watcher.steps_read >= options.max_steps:
                    reason = f"read {options.max_steps} steps"
                    break
                continue
            if src.ended:
                break
            if idle_s is not None and clock() - last_new >= idle_s:
                reason = f"nothing new for {options.idle_stop_minutes:g} minute(s)"
                break
            sleep(options.poll_s)
    except KeyboardInterrupt:
        reason = "interrupted"
    rest = src.close()
    if rest:
        code = handle(watcher.feed(rest))
        if code is not None:
            return WatchResult(code, watcher.steps_read, events, f"an alert at {options.exit_on} or above")
    return WatchResult(0, watcher.steps_read, events, reason)
