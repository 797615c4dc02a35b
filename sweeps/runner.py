"""The study loop: turn a sweep definition into trials, run them, prune the bad ones, and decide.

:func:`run_sweep` is the entry point (``advisor sweep`` and ``advisor verify`` call it). It

1. reads the config and checks every swept key and value as ``advisor check`` would;
2. plans the trials: one variable with listed values is a grid, the baseline value included (Optuna's
   ``GridSampler`` hands out the values on the first seed; then, staged, the candidates in the first seed's
   order run on the other seeds beside the baseline until one is confirmed, or with ``every_seed`` every
   value runs on every seed, the value that went furthest first); ranges or several variables are searched
   with TPE on the first seed, and the best value found is then re-run, with the baseline, on the other seeds;
3. opens the study (resuming it when it exists: trials orphaned by a killed driver are stopped and
   re-queued; finished trials are kept);
4. runs up to ``parallel`` trials at a time; each reports its objective at every step, and the pruner
   (``_pruner``: behind the pace of another value on the same seed, after a warm-up) stops the bad ones;
   the race (``_race``) stops the trial that is left on its seed once every other value there was pruned;
5. returns a :class:`SweepResult` with every trial and the :class:`Verdict` (``_verdict``).

What runs next (2 and 3) is decided by ``_schedule`` over plain snapshots of the study's trials; the driver here
carries it out through Optuna's public API, and through ``_optuna_adapter`` where it must reach past it.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor import VerlConfig
from advisor.errors import AdvisorError, SweepError
from advisor.spelling import closest

from . import _optuna_adapter as adapter
from . import _schedule as schedule
from ._launchers import Launcher, LocalLauncher, RunningTrial, stop_orphan
from ._liveness import HEARTBEAT_S, DriverIdentity, Lease
from ._objective import is_validation, tail_fraction, tail_mean
from ._plan import (
    Plan,
    SweepSpec,
    default_study_name,
    make_plan,
    record_of,
    seed_of,
    values_of,
)
from ._pruner import seed_paired_pruner
from ._race import RACE_ATTR
from ._render import plan_text
from ._result import FAILED_STATES, SweepResult, TrialRecord
from ._settings import FIELDS, Progress, RunSettings, TrialEvent
from ._storage import import_optuna, load_or_create_study, open_storage, storage_url
from ._tail import MetricsTail
from ._trial import TrialCommand, exit_status, failure_reason
from ._verdict import INSUFFICIENT, KEEP_BASELINE, Verdict, decide

_UNKNOWN_VIOLATION = 1e12  # constraints_func value for a constraint metric that was never logged
_DRIVERS_KEPT = 20  # the study remembers this many of the drivers that ran it


class _NoProgress:
    def update(self, done: int, total: int, running: str) -> None:
        pass

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------------
# the loop


@dataclass
class _Active:
    trial: Any  # optuna.Trial
    run: RunningTrial
    tail: MetricsTail
    lease: Lease
    cmd: TrialCommand
    reported: int = 0  # last step reported to Optuna


class _Driver:
    """This process's part in a study: the trials it runs, their reports, and carrying out what the schedule
    (``_schedule``) decides: what to run next, the recovery of trials whose driver died, the race. Every decision
    is re-derived from the storage, so a new driver resumes."""

    def __init__(self, plan: Plan, study: Any, launcher: Launcher, out: Path, parallel: int,
                 progress: Progress, stale_after_s: float, poll_s: float, stall_timeout_s: float | None = None) -> None:
        self.plan = plan
        self.study = study
        self.launcher = launcher
        self.out = out
        self.parallel = parallel
        self.progress = progress
        self.stale_after_s = stale_after_s
        self.poll_s = poll_s
        self.stall_timeout_s = stall_timeout_s
        self.identity = DriverIdentity.current()
        self.active: dict[int, _Active] = {}
        self._finished: dict[int, schedule.Trial] = {}  # snapshots of finished trials (they never change)
        self.optuna = import_optuna()
        self._last_heartbeat = 0.0
        self._last_recovery = time.monotonic()
        me = self.identity.to_dict()
        seen = [d for d in study.user_attrs.get("drivers", []) if d != me]
        self.other_drivers = seen[-(_DRIVERS_KEPT - 1):]
        study.set_user_attr("drivers", [*self.other_drivers, me])

    # -- study bookkeeping --------------------------------------------------------------------------------------

    def trials(self) -> list[schedule.Trial]:
        return adapter.trials(self.study, self.plan, self._finished)

    def _counted(self) -> list[schedule.Trial]:
        return schedule.counted(self.trials())

    def _enqueue(self, point: schedule.Point) -> None:
        self.study.enqueue_trial(point.values, user_attrs=point.user_attrs())

    def _requeue(self, t: schedule.Trial, reason: str) -> None:
        adapter.mark_interrupted(self.study, t, reason)
        copy = schedule.requeued(self.plan, t)
        self._enqueue(copy)
        self._queue_behind(t.number, t.planned)

    def _queue_behind(self, number: int, planned: int) -> None:
        """Waiting trials planned after the re-queued trial ``number`` go behind it again (``schedule.behind``)."""
        for t in schedule.behind(self.trials(), planned):
            if not adapter.take_waiting(self.study, t):
                continue  # another driver took it meanwhile
            # not run, not counted: its copy below is
            adapter.mark_interrupted(self.study, t, f"re-queued behind #{number}, which was planned before it")
            self._enqueue(schedule.requeued(self.plan, t))

    def recover_orphans(self) -> int:
        """Stop and re-queue RUNNING trials whose driver is gone; returns how many."""
        lost = schedule.orphaned(self.trials(), self.active, self.stale_after_s, self.other_drivers)
        for t in lost:
            data = Lease(Path(t.dir)).read() if t.dir else None
            if data and isinstance(data.get("handle"), dict):
                stop_orphan(data["handle"])
            self._requeue(t, "interrupted: its sweep driver stopped; re-queued")
        return len(lost)

    # -- what to run next -----------------------------------------------------------------------------------------

    def total_trials(self) -> int:
        return schedule.total_trials(self.plan, self.trials())

    def candidate(self) -> dict[str, Any] | None:
        """TPE: the explored value picked for confirmation on the other seeds (chosen once, then stored)."""
        stored = self.study.user_attrs.get("candidate")
        return dict(stored) if stored is not None else None

    def want_more(self) -> bool:
        step = schedule.next_step(self.plan, self.trials(), self.candidate())
        if step.candidate is not None:
            self.study.set_user_attr("candidate", step.candidate)
        for point in step.enqueue:
            self._enqueue(point)
        return step.ask

    # -- running one trial ------------------------------------------------------------------------------------------

    def launch(self) -> None:
        with _quiet_optuna():
            trial = self.study.ask(fixed_distributions=self.plan.distributions)
        trial.set_user_attr("driver", self.identity.to_dict())  # first: it is what tells an orphan
        values = {k: trial.params[k] for k in self.plan.keys}
        seed = trial.user_attrs.get("seed")
        seed = self.plan.seeds[0] if seed is None else int(seed)
        role = schedule.role_of(self.plan, values, trial.user_attrs.get("role"))
        trial.set_user_attr("seed", seed)
        trial.set_user_attr("role", role)
        if self.plan.is_grid and schedule.is_duplicate(self._counted(), trial.number, values, seed):
            trial.set_user_attr("duplicate", True)
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            return
        trial_dir = (self.out / "trials" / f"{trial.number:04d}").resolve()
        trial_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("metrics.jsonl", "stdout.log", "stderr.log", "lease.json", "result.json"):
            (trial_dir / stale).unlink(missing_ok=True)
        trial.set_user_attr("dir", str(trial_dir))
        cmd = self.plan.template.command({**values, **{k: seed for k in self.plan.seed_keys}}, self.plan.spec.steps,
                                         trial_dir, trial.number)
        (trial_dir / "cmd.json").write_text(json.dumps(cmd.to_dict(), indent=2))
        lease = Lease(trial_dir)
        try:
            run = self.launcher.start(cmd, name=f"{self.study.study_name}-{trial.number}")
        except SweepError as err:
            trial.set_user_attr("reason", str(err))
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            raise
        lease.write(self.identity, run.handle())
        self.active[trial.number] = _Active(trial, run, MetricsTail(cmd.metrics_path, cmd.metrics_format,
                                                                    self.plan.spec.metrics, self.plan.spec.steps),
                                             lease, cmd)
        self._tell(trial.number, values, seed, role, "started")

    def _tell(self, number: int, values: dict[str, Any], seed: int, role: str, state: str, **result: Any) -> None:
        """A trial's start or end, to a progress that takes per-trial lines (``Progress``)."""
        hook = getattr(self.progress, "trial", None)
        if hook is not None:
            hook(TrialEvent(number, values, seed, role, state, self.plan.spec.objective.metric, **result,
                            done=self._done_count(), total=self.total_trials()))

    # -- the race ---------------------------------------------------------------------------------------------------

    @property
    def racing(self) -> bool:
        return schedule.racing(self.plan)

    def _race(self, a: _Active, counted: list[schedule.Trial] | None = None) -> Callable[[int], str | None]:
        """Why the race stops ``a`` at a given step (``schedule.race``), or None. The study's trials (``counted``,
        read here when not given) are read once, not at every step."""
        seed = seed_of(a.trial, self.plan)
        if not self.racing or seed == self.plan.seeds[0]:
            return lambda step: None
        counted = self._counted() if counted is None else counted
        return schedule.race(self.plan, a.trial.number, values_of(a.trial, self.plan.keys), seed, counted,
                             self.candidate())

    # -- running one trial (continued) --------------------------------------------------------------------------

    def _report(self, a: _Active, prune: bool) -> tuple[str, str | None] | None:
        """Report the objective at each new step; ("pruned", None) as soon as the pruner says stop, ("stopped",
        why) as soon as the trial has won its seed's race (later steps are not reported: a slow verl step is
        read long before the next one, the sandbox writes several per poll)."""
        metric = self.plan.spec.objective.metric
        race: Callable[[int], str | None] | None = None
        diverged = a.tail.diverged
        for step in a.tail.steps(metric):
            if step <= a.reported:
                continue
            if diverged is not None and step >= diverged.step:
                break  # the steps from the divergence on are not results: the trial is recorded diverged
            value = tail_mean(a.tail.values(metric, up_to_step=step), tail_fraction(metric))
            if value is None:
                continue
            a.trial.report(value, step)
            a.reported = step
            if not prune:
                continue
            if step < self.plan.spec.steps and a.trial.should_prune():
                return "pruned", None
            race = race or self._race(a)
            why = race(step)
            if why is not None:
                return "stopped", why
        return None

    def _finish(self, a: _Active, code: int | None, stop: str | None = None, why: str | None = None) -> None:
        """Record a trial that ended (``code``) or that this driver stopped (``stop``: "pruned" or "stopped" by
        the race, ``why``)."""
        TrialState = self.optuna.trial.TrialState
        del self.active[a.trial.number]
        with contextlib.suppress(AdvisorError, OSError):
            a.tail.poll()
        a.tail.close()
        if stop is None:
            self._report(a, prune=False)
        if stop in (None, "pruned", "stopped") and a.tail.diverged is not None and \
                (stop is None or a.tail.diverged.step <= a.reported):
            stop, why = "diverged", None
        spec = self.plan.spec
        upto = a.reported if stop is not None else None
        constraints = {c.metric: tail_mean(a.tail.values(c.metric, up_to_step=upto), tail_fraction(c.metric))
                       for c in spec.constraints}
        trial = a.trial
        trial.set_user_attr("constraints", constraints)
        violations = [min(c.violation(constraints[c.metric]), _UNKNOWN_VIOLATION) for c in spec.constraints]
        trial.set_user_attr("constraint_violations", violations)
        if _HAS_SET_CONSTRAINT:  # Optuna >= 5: samplers and the dashboard read these
            for c, violation in zip(spec.constraints, violations, strict=True):
                trial.set_constraint(c.describe(), violation)
        objective = tail_mean(a.tail.values(spec.objective.metric, up_to_step=upto),
                              tail_fraction(spec.objective.metric))
        if stop == "diverged":
            divergence = a.tail.diverged
            assert divergence is not None
            trial.set_user_attr("diverged", divergence.to_dict())
            trial.set_user_attr("reason", divergence.describe())
            self.study.tell(trial, state=TrialState.FAIL)
            state, objective = "diverged", None
        elif stop == "failed":
            trial.set_user_attr("reason", why)
            trial.set_user_attr("exit", exit_status(code))
            self.study.tell(trial, state=TrialState.FAIL)
            state = "failed"
        elif stop == "stopped" and objective is not None:
            # Optuna state COMPLETE (it produced its result: it led its seed); the attribute tells it apart
            trial.set_user_attr(RACE_ATTR, {"step": a.reported, "why": why})
            trial.set_user_attr("reason", f"stopped at step {a.reported} by the race: {why}")
            self.study.tell(trial, objective)
            state = "stopped"
        elif stop is not None:
            trial.set_user_attr("reason", f"pruned at step {a.reported}: behind the pace of another value")
            self.study.tell(trial, state=TrialState.PRUNED)
            state = "pruned"
        elif code == 0 and objective is not None:
            self.study.tell(trial, objective)
            state = "complete"
        else:
            reason = self._missing_metric(a) if code == 0 else failure_reason([a.cmd.stderr_path, a.cmd.stdout_path],
                                                                              code)
            trial.set_user_attr("reason", reason)
            trial.set_user_attr("exit", exit_status(code))
            self.study.tell(trial, state=TrialState.FAIL)
            state = "failed"
        result = {"number": trial.number, "state": state, "exit_code": code, "objective": objective,
                  "steps": a.reported or None, "constraints": constraints, "reason": trial.user_attrs.get("reason"),
                  "diverged": trial.user_attrs.get("diverged")}
        with contextlib.suppress(OSError):  # a trial that removed its folder is failed above, not fatal here
            (a.cmd.cwd / "result.json").write_text(json.dumps(result, indent=2, default=str))
        self._tell(trial.number, values_of(trial, self.plan.keys), seed_of(trial, self.plan),
                   str(trial.user_attrs.get("role") or ""), state, steps=a.reported or None, objective=objective,
                   reason=trial.user_attrs.get("reason"))

    def _missing_metric(self, a: _Active) -> str:
        metric = self.plan.spec.objective.metric
        if metric in a.tail.seen:
            return f"objective metric '{metric}' was logged but never finite (NaN or inf at every step)"
        if not a.tail.seen:
            return (f"the run logged no metrics to {a.cmd.metrics_path.name}; is --command a verl trainer "
                    "that honours trainer.logger?")
        close = closest(metric, a.tail.seen, limit=2)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"objective metric '{metric}' was never logged{hint}"

    def _trouble(self, a: _Active, now: float) -> tuple[str, str | None] | None:
        """Why a running trial must end now: ("failed", why) for a trial that removed its own folder, whose
        metrics path is not a file, or that stalled; ("diverged", None) for one whose judged value went
        non-finite."""
        if not a.cmd.cwd.is_dir():
            return "failed", f"the trial removed its own folder {a.cmd.cwd}"
        if a.tail.diverged is not None:
            return "diverged", None
        stall = self.stall_timeout_s
        if stall is not None and now - a.tail.last_record_at > stall:
            where = f"after step {a.tail.last_step}" if a.tail.last_step is not None else "before its first step"
            return "failed", (f"stalled: no new metrics line for {stall:g} s ({where}); a hung collective (NCCL), "
                              "a stopped process or a deadlock; raise --stall-timeout if its steps are that slow")
        return None

    def poll(self) -> None:
        for a in list(self.active.values()):
            try:
                stop = self._report(a, prune=self.plan.spec.prune) if a.tail.poll() else None
            except AdvisorError as err:  # its metrics path is a FIFO or a device: never read it
                stop = ("failed", f"cannot follow its metrics: {err}")
            if stop is None and a.run.poll() is None:
                stop = self._trouble(a, time.monotonic())
            if stop is not None:
                a.run.stop()
                self._finish(a, a.run.poll() if stop[0] == "failed" else None, *stop)
                continue
            code = a.run.poll()
            if code is not None:
                self._finish(a, code)
        counted = self._counted() if self.racing and self.active else []
        for a in list(self.active.values()):  # a trial whose seed was decided after it reported, in this poll
            why = self._race(a, counted)(a.reported) if a.reported else None
            if why is not None:
                a.run.stop()
                self._finish(a, None, "stopped", why)
        now = time.monotonic()
        if now - self._last_heartbeat > HEARTBEAT_S:
            for a in self.active.values():
                a.lease.refresh()
            self._last_heartbeat = now

    def interrupt(self) -> None:
        """Stop this driver's trials and re-queue them for the next run."""
        for a in list(self.active.values()):
            with contextlib.suppress(Exception):
                a.run.stop()
            with contextlib.suppress(OSError):
                a.tail.close()
            self.active.pop(a.trial.number, None)
            stored = adapter.reread(self.study, a.trial, self.plan)
            if stored.state == "RUNNING":
                self._requeue(stored, "interrupted: the sweep was stopped; re-queued")

    def _foreign_running(self) -> bool:
        return any(t.state == "RUNNING" and t.number not in self.active for t in self.trials())

    def _done_count(self) -> int:
        return sum(1 for t in self._counted() if t.finished)

    def _running_text(self) -> str:
        return ", ".join(f"#{n} step {a.reported}" for n, a in sorted(self.active.items()))

    def loop(self) -> None:
        while True:
            while len(self.active) < self.parallel and self.want_more():
                self.launch()
            self.progress.update(self._done_count(), self.total_trials(), self._running_text())
            if not self.active:
                if not self._foreign_running():
                    if not self.want_more():
                        return
                    continue
                if time.monotonic() - self._last_recovery > min(10.0, self.stale_after_s / 4):
                    self.recover_orphans()
                    self._last_recovery = time.monotonic()
            time.sleep(self.poll_s)
            self.poll()


def _has_set_constraint() -> bool:
    try:
        from optuna.trial import Trial
    except ImportError:
        return False
    return hasattr(Trial, "set_constraint")


_HAS_SET_CONSTRAINT = _has_set_constraint()


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    optuna = import_optuna()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Fixed parameter .* is out of range")
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        yield


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _grid_sampler_class() -> Any:
    optuna = import_optuna()

    class LoopGridSampler(optuna.samplers.GridSampler):  # type: ignore[name-defined]
        """GridSampler whose ``after_trial`` does not call ``study.stop()`` (only valid inside ``optimize``;
        the sweep loop itself knows when the grid is covered)."""

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            pass

    return LoopGridSampler


def _sampler_and_pruner(plan: Plan) -> tuple[Any, Any]:
    optuna = import_optuna()
    spec = plan.spec
    pruner = seed_paired_pruner(spec.warmup, plan.seeds[0], spec.pace, spec.protected,
                                sparse=is_validation(spec.objective.metric)) if spec.prune else \
        optuna.pruners.NopPruner()
    with _quiet_optuna():
        if plan.is_grid:
            sampler = _grid_sampler_class()({plan.keys[0]: plan.grid_values}, seed=0)
        else:
            constraints_func = None
            if spec.constraints and not _HAS_SET_CONSTRAINT:  # Optuna 4: the sampler asks for them
                n = len(spec.constraints)

                def constraints_func(ft: Any) -> list[float]:
                    return list(ft.user_attrs.get("constraint_violations") or [_UNKNOWN_VIOLATION] * n)

            sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=max(2, min(10, plan.n_explore // 3)),
                                                 constraints_func=constraints_func)
    return sampler, pruner


def _collect(plan: Plan, study: Any, driver_candidate: dict[str, Any] | None) -> tuple[list[TrialRecord], Verdict]:
    records = [record_of(t, plan) for t in study.get_trials(deepcopy=False)]
    spec = plan.spec
    if plan.is_grid:
        verdict = decide(records, plan.baseline, spec.objective, spec.constraints, level=spec.level,
                         min_pairs=spec.min_pairs, steps=spec.steps)
    elif driver_candidate is None:
        explored = [r for r in records if r.role == "explore" and r.state != "interrupted"]
        counts = {s: sum(1 for r in explored if r.state == s) for s in ("complete", "pruned", "failed", "diverged")}
        decision = KEEP_BASELINE if explored and all(r.state in ("pruned", *FAILED_STATES) or r.feasible is False
                                                      for r in explored) else INSUFFICIENT
        verdict = Verdict(decision, f"no explored value completed within the constraints ({counts['pruned']} pruned, "
                                    f"{counts['failed']} failed, {counts['diverged']} diverged, "
                                    f"{counts['complete']} complete)",
                          plan.baseline, level=spec.level, min_pairs=spec.min_pairs)
    else:
        verdict = decide(records, plan.baseline, spec.objective, spec.constraints, candidates=[driver_candidate],
                         level=spec.level, min_pairs=spec.min_pairs, steps=spec.steps)
    verdict.race = race_summary(records, spec.steps, spec.race and spec.prune)
    return records, verdict


def race_summary(records: Sequence[TrialRecord], steps: int, enabled: bool) -> dict[str, Any]:
    """The verdict's ``race``: which trials the race stopped, at which step and why."""
    stopped = sorted((r for r in records if r.state == "stopped"), key=lambda r: (r.seed or 0, r.number))
    saved = sum(steps - (r.steps or 0) for r in stopped)
    if stopped:
        where = ", ".join(f"seed {r.seed} at step {r.steps}" for r in stopped)
        summary = (f"the race stopped {len(stopped)} trial(s) early ({where}): each had outrun every other value "
                   f"on its seed; {saved} steps not run")
    else:
        summary = "the race stopped no trial" if enabled else "racing is off"
    return {"enabled": enabled, "summary": summary, "steps_not_run": saved,
            "stopped": [{"number": r.number, "seed": r.seed, "values": r.values, "step": r.steps, "why": r.reason}
                        for r in stopped]}


_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,99}")


def run_sweep(config: str | Path | VerlConfig | None, spec: SweepSpec, settings: RunSettings | None = None,
              **fields: Any) -> SweepResult:
    """Run (or resume) a sweep and return its trials and verdict.

    Args:
        config: a verl YAML, Hydra run directory, launch script, or a loaded :class:`~advisor.VerlConfig`;
            its current value of each swept key is the baseline.
        spec: what to sweep and how to judge it.
        settings: how and where the trials run (:class:`RunSettings`: command, overrides, launcher, storage,
            study name, parallel, out, progress, verl version); any of its fields may instead be passed by name
            (``run_sweep(cfg, spec, command=..., parallel=2)``), and then replaces the one in ``settings``.

    Raises:
        SweepError: the sweep cannot be set up (bad key or value, no command, storage, launcher).
        KeyboardInterrupt: stopped by Ctrl-C or SIGTERM; the running trials were stopped and re-queued.
    """
    unknown = set(fields) - FIELDS
    if unknown:
        raise TypeError(f"run_sweep() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    run = (settings or RunSettings()).with_(**fields)
    parallel, study_name, out = run.parallel, run.study_name, run.out
    progress = run.progress or _NoProgress()
    try:
        if parallel < 1:
            raise SweepError(f"--parallel must be at least 1 but got {parallel}")
        stall = run.stall_timeout_s
        if stall is not None and not (isinstance(stall, (int, float)) and stall > 0 and stall == stall):
            raise SweepError(f"--stall-timeout must be a positive number of seconds but got {stall}")
        if study_name is not None and (not _STUDY_NAME.fullmatch(study_name) or ".." in study_name):
            # ../../x or /etc would put the sweep directory (sweeps-out/NAME) outside sweeps-out
            raise SweepError(f"--study {study_name[:80]!r}: a study name is one folder name (letters, digits, '.', "
                             "'_', '-'; at most 100), kept under sweeps-out/",
                             suggestion="pass --out DIR to choose the folder")
        launcher = run.launcher or LocalLauncher()
        plan = make_plan(config, spec, run.command, run.overrides, launcher, run.verl_version)
        name = study_name or default_study_name(plan.fingerprint)
        out_dir = Path(out) if out is not None else Path("sweeps-out") / name
        out_dir.mkdir(parents=True, exist_ok=True)
        announce = getattr(progress, "plan", None)
        if announce is not None:  # before Optuna loads and the first trial starts
            announce(plan_text(plan, out_dir))
        url = storage_url(run.storage, out_dir)
        optuna = import_optuna()
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            sampler, pruner = _sampler_and_pruner(plan)
            study, resumed = load_or_create_study(open_storage(url), name, spec.objective.direction, sampler, pruner,
                                                  plan.fingerprint)
            (out_dir / "sweep.json").write_text(json.dumps({"study": name, "storage": url, **plan.fingerprint},
                                                           indent=2, default=str))
            driver = _Driver(plan, study, launcher, out_dir, parallel, progress, run.stale_after_s, run.poll_s,
                             run.stall_timeout_s)
            driver.recover_orphans()
            with _sigterm_as_interrupt():
                try:
                    driver.loop()
                except BaseException:
                    driver.interrupt()
                    raise
            records, verdict = _collect(plan, study, driver.candidate())
        finally:
            optuna.logging.set_verbosity(verbosity)
    finally:
        progress.close()
    return SweepResult(
        study=name, storage=url, out=str(out_dir.resolve()),
        spec={"params": plan.fingerprint["params"], "objective": spec.objective.to_dict(),
              "constraints": [c.to_dict() for c in spec.constraints], "steps": spec.steps, "seeds": plan.seeds,
              "seed_keys": plan.seed_keys, "mode": "grid" if plan.is_grid else "tpe", "staged": plan.staged,
              "prune": spec.prune,
              "race": spec.race and spec.prune, "warmup_steps": spec.warmup, "pace": spec.pace},
        baseline=plan.baseline, trials=records, verdict=verdict,
        trial_steps=sum(r.steps or 0 for r in records), resumed=resumed, launcher=launcher.describe(),
        command=plan.template.base_argv,
    )
