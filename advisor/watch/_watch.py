"""The watch loop: read what the run appended, update the frame, decide as suggest does, turn decisions into alerts.

The decision at a step is ``advisor suggest``'s on the file up to that step: the same function
(``advisor.playbook.suggest_frame``: the same window rule, harm and cross-check of config against metrics), on the
run's metrics so far (``LiveFrame``: exact for the first 2,048 steps, then a thinned past and every recent step).
It is taken at fixed steps (``judged``: every step for the first 256, then every 2nd, 4th, ... step as the run
grows, and the last step when the source ends), counted by arrival, never by how the file was read, so following
a run live and replaying its file give the same alerts. No alert comes before suggest's smallest window (20 steps)
is full, except NaN/inf: the warm-up's transients (gradient norms above the clip in the first steps) are not the
run's state.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from advisor.errors import AdvisorError, ExitCode, MetricsError
from advisor.plural import plural

from ._actions import emit, run_command
from ._alerts import SEVERITY_RANK, AlertState, Event, uses_nonfinite
from ._frame import LiveFrame
from ._open import open_source
from ._sources import Source

if TYPE_CHECKING:
    from advisor.load import VerlConfig
    from advisor.playbook import Rule, Suggestion

EXIT_ALERT = ExitCode.ALERT  # --exit-on: an alert at that level or above
DEFAULT_CONFIRM = 3
EVERY_STEP_UNTIL = 256  # judged at every step up to here, then every 2nd, 4th, ...: a window of 25% of the run
# holds 32+ judged steps, and a writer of 1,000 steps/s is followed (bench/bench_watch.py)
WARM_UP_STEPS = 20  # suggest's smallest window (advisor/playbook/_signals.py DEFAULT_WINDOW_STEPS)


@dataclass
class WatchOptions:
    alert: str = "warning"  # the lowest severity that alerts
    exit_on: str | None = None  # exit with EXIT_ALERT after the first alert at this severity or above
    on_alert: list[list[str]] = field(default_factory=list)  # commands, each an argument list
    idle_stop_minutes: float | None = None  # stop when nothing new arrived for this long
    fmt: str = "text"
    confirm: int = DEFAULT_CONFIRM
    window: int | None = None  # suggest's window rule (the larger of 20 steps and 25% of the run) when None
    poll_s: float = 0.2
    gpu_memory_gib: float | None = None
    rules: tuple[Rule, ...] | None = None  # playbook rules (suggest's default when None)
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

    def __init__(self, cfg: VerlConfig, source_name: str, options: WatchOptions) -> None:
        self.cfg = cfg
        self.source_name = source_name
        self.options = options
        self.frame = LiveFrame(dense=max(64, (options.window or 0) + 16))
        self.state = AlertState(level=options.alert, confirm=options.confirm)
        self.steps_read = 0
        self.evaluations = 0
        self.fmt = "jsonl"
        self.decision: Suggestion | None = None  # the last Suggestion (suggest's decision at the last judged step)

    def judged(self, count: int) -> bool:
        """Whether the ``count``-th record read is judged: every one up to EVERY_STEP_UNTIL, then every 2nd, ..."""
        every = 1
        while count > EVERY_STEP_UNTIL * every:
            every *= 2
        return count % every == 0

    def feed(self, records: Sequence[tuple[int, dict[str, float]]]) -> list[dict[str, Any]]:
        """Add the records, deciding at the judged ones; the alert payloads."""
        payloads: list[dict[str, Any]] = []
        for step, values in records:
            # a step logged on two lines (verl's validation line, then its training line) is one step read,
            # judged again when its row is judged, so the decision is the one on the file so far
            self.steps_read += self.frame.add(step, values)
            if self.steps_read and self.judged(self.steps_read):
                payloads += self.evaluate()
        return payloads

    def finish(self) -> list[dict[str, Any]]:
        """The source ended: decide at its last step too, if it was not judged."""
        return [] if not self.steps_read or self.judged(self.steps_read) else self.evaluate()

    def evaluate(self) -> list[dict[str, Any]]:
        """Decide at the newest step, as suggest decides on the file up to it; the alert payloads it brings."""
        from advisor.metrics import frame_from_rows
        from advisor.playbook import normalized_for, suggest_frame

        step = self.frame.last_step
        if step is None:
            return []
        steps, names, values = self.frame.arrays()
        frame = normalized_for(self.cfg, frame_from_rows(steps, names, values, fmt=self.fmt,  # type: ignore[arg-type]
                                                         path=self.source_name))
        if frame.all_nan:
            return []
        try:
            result = suggest_frame(self.cfg, frame, window=self.options.window,
                                   gpu_memory_gib=self.options.gpu_memory_gib, rules=self.options.rules)
        except MetricsError:  # none of the metrics the playbook reads has arrived yet
            return []
        self.evaluations += 1
        self.decision = result
        diagnoses = result.diagnoses
        if self.frame.rows < WARM_UP_STEPS:  # the warm-up: only NaN/inf alerts
            diagnoses = [d for d in diagnoses if uses_nonfinite(d.rule)]
        return [self._payload(e, result) for e in self.state.update(step, diagnoses)]

    def _payload(self, event: Event, result: Suggestion) -> dict[str, Any]:
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


def watch(cfg: VerlConfig, source: str | Source, options: WatchOptions | None = None, *, out: TextIO | None = None,
          err: TextIO | None = None, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> WatchResult:
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

    try:
        return _follow(src, watcher, options, handle, clock, sleep, idle_s, events)
    except (AdvisorError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug of the advisor: said on every channel the user chose, then exit 3 (cli)
        handle([failure_payload(exc, watcher)])
        raise


def failure_payload(exc: BaseException, watcher: Watcher) -> dict[str, Any]:
    """The ``error`` event: the watcher itself failed, so the run is no longer watched."""
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return {"schema": 1, "event": "error", "step": watcher.frame.last_step, "onset_step": None, "id": None,
            "severity": "error", "source": watcher.source_name,
            "error": f"advisor watch stopped on an internal error ({detail}); the run is no longer watched"}


def _follow(src: Source, watcher: Watcher, options: WatchOptions,
            handle: Callable[[list[dict[str, Any]]], int | None], clock: Callable[[], float],
            sleep: Callable[[float], None],
            idle_s: float | None, events: list[dict[str, Any]]) -> WatchResult:
    last_new = clock()
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
                reason = f"nothing new for {options.idle_stop_minutes:g} {plural('minute', options.idle_stop_minutes)}"
                break
            sleep(options.poll_s)
    except KeyboardInterrupt:
        reason = "interrupted"
    rest = src.close()
    code = handle(watcher.feed(rest) if rest else [])
    if code is None and reason == "the source ended":
        code = handle(watcher.finish())
    if code is not None:
        return WatchResult(code, watcher.steps_read, events, f"an alert at {options.exit_on} or above")
    return WatchResult(0, watcher.steps_read, events, reason)
