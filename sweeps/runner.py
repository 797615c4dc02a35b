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
"""

from __future__ import annotations

import contextlib
import difflib
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

from . import _staged as staged
from ._launchers import Launcher, LocalLauncher, RunningTrial, stop_orphan
from ._liveness import HEARTBEAT_S, DriverIdentity, Lease, is_orphaned
from ._objective import is_validation, tail_fraction, tail_mean
from ._plan import (
    Plan,
    SweepSpec,
    default_study_name,
    ignored,
    make_plan,
    record_of,
    seed_of,
    state_name,
    values_of,
)
from ._pruner import seed_paired_pruner
from ._race import RACE_ATTR, SeedTrial, won_seed
from ._result import FAILED_STATES, SweepResult, TrialRecord
from ._settings import FIELDS, Progress, RunSettings, TrialEvent
from ._space import same_point, same_value
from ._storage import import_optuna, load_or_create_study, open_storage, storage_url
from ._tail import MetricsTail
from ._trial import TrialCommand, exit_status, failure_reason
from ._verdict import INSUFFICIENT, KEEP_BASELINE, Verdict, decide, lead

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


def _planned(ft: Any) -> int:
    """Where a trial stands in the planned order: its number, or for a re-queued copy the number of the original."""
    planned = ft.user_attrs.get("planned")
    return int(planned) if isinstance(planned, int) else ft.number


class _Driver:
    """This process's part in a study: what to run next, the trials it runs, their reports, and recovery of
    trials whose driver died. Every decision is re-derived from the storage, so a new driver resumes."""

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
        self.optuna = import_optuna()
        self._last_heartbeat = 0.0
        self._last_recovery = time.monotonic()
        me = self.identity.to_dict()
        seen = [d for d in study.user_attrs.get("drivers", []) if d != me]
        self.other_drivers = seen[-(_DRIVERS_KEPT - 1):]
        study.set_user_attr("drivers", [*self.other_drivers, me])

    # -- study bookkeeping --------------------------------------------------------------------------------------

    def trials(self) -> list[Any]:
        return self.study.get_trials(deepcopy=False)

    def _counted(self) -> list[Any]:
        return [t for t in self.trials() if not ignored(t)]

    def _covered(self, trials: list[Any], values: dict[str, Any], seed: int) -> bool:
        return any(seed_of(t, self.plan) == seed and same_point(values_of(t, self.plan.keys), values)
                   for t in trials)

    def _enqueue(self, values: dict[str, Any], seed: int, role: str, **extra: Any) -> None:
        self.study.enqueue_trial(values, user_attrs={"seed": seed, "role": role, **extra})

    def _requeue(self, ft: Any, reason: str) -> None:
        trial = self.optuna.trial.Trial(self.study, ft._trial_id)
        trial.set_user_attr("interrupted", True)
        trial.set_user_attr("reason", reason)
        self.study.tell(ft.number, state=self.optuna.trial.TrialState.FAIL, skip_if_finished=True)
        values = values_of(ft, self.plan.keys)
        role = ft.user_attrs.get("role") or ("explore" if not self.plan.is_grid else self.plan.role(values))
        planned = _planned(ft)
        self._enqueue(values, seed_of(ft, self.plan), role, requeued_from=ft.number, planned=planned)
        self._queue_behind(ft.number, planned)

    def _queue_behind(self, number: int, planned: int) -> None:
        """Waiting trials planned after the re-queued trial ``number`` go behind it again. Optuna hands out waiting
        trials by trial number, and a later seed's pair must run in its planned order (the value trailing on the
        first seed first) for the pruner and the race to act (``_staged.trailing_first``)."""
        later = sorted((t for t in self.trials() if t.state.name == "WAITING" and _planned(t) > planned), key=_planned)
        for t in later:
            if not self.study._storage.set_trial_state_values(t._trial_id, state=self.optuna.trial.TrialState.RUNNING):
                continue  # another driver took it meanwhile
            moved = self.optuna.trial.Trial(self.study, t._trial_id)
            moved.set_user_attr("interrupted", True)  # not run, not counted: its copy below is
            moved.set_user_attr("reason", f"re-queued behind #{number}, which was planned before it")
            self.study.tell(t.number, state=self.optuna.trial.TrialState.FAIL)
            values = values_of(t, self.plan.keys)
            self._enqueue(values, seed_of(t, self.plan), t.user_attrs.get("role") or self.plan.role(values),
                          requeued_from=t.number, planned=_planned(t))

    def recover_orphans(self) -> int:
        """Stop and re-queue RUNNING trials whose driver is gone; returns how many."""
        now = time.time()
        count = 0
        for ft in self.trials():
            if ft.state.name != "RUNNING" or ft.number in self.active:
                continue
            trial_dir = ft.user_attrs.get("dir")
            lease = Lease(Path(trial_dir)) if trial_dir else None
            started = now - ft.datetime_start.timestamp() if ft.datetime_start else None
            if not is_orphaned(ft.user_attrs.get("driver"), lease, started, self.stale_after_s, self.other_drivers):
                continue
            data = lease.read() if lease else None
            if data and isinstance(data.get("handle"), dict):
                stop_orphan(data["handle"])
            self._requeue(ft, "interrupted: its sweep driver stopped; re-queued")
            count += 1
        return count

    # -- what to run next -----------------------------------------------------------------------------------------

    def _rank(self, trials: list[Any]) -> list[Any]:
        """Grid values, the one that went furthest on the seeds run so far (and then scored best) first: on each
        further seed it runs first, and the pruner measures the others against it. A running trial counts with
        the steps it has reported: the leader of a seed still running goes before a value already pruned."""
        key, sign = self.plan.keys[0], self.plan.spec.objective.sign
        best: dict[int, tuple[int, float]] = {}
        for t in trials:
            record = record_of(t, self.plan)
            if (record.usable or record.state == "running") and record.steps is not None and \
                    record.objective is not None:
                i = next(i for i, v in enumerate(self.plan.grid_values) if same_value(v, record.values[key]))
                score = lead(record, sign, self.plan.spec.steps)
                best[i] = max(best.get(i, score), score)
        order = sorted(range(len(self.plan.grid_values)), key=lambda i: (i not in best, [-x for x in best.get(i, ())]))
        return [self.plan.grid_values[i] for i in order]

    def _next_grid(self, trials: list[Any]) -> bool:
        """Grid: the sampler's grid over the values on the first seed, then the other seeds: staged (the
        candidates in turn, :meth:`_next_confirmation`), or every value on each seed, best value first."""
        if any(t.state.name == "WAITING" for t in trials):
            return True
        key, seeds = self.plan.keys[0], self.plan.seeds
        if any(not self._covered(trials, {key: v}, seeds[0]) for v in self.plan.grid_values):
            return True  # ask: GridSampler hands out a value not yet tried
        if self.plan.staged:
            return self._next_confirmation(trials)
        for seed in seeds[1:]:
            for v in self._rank(trials):
                if not self._covered(trials, {key: v}, seed):
                    self._enqueue({key: v}, seed, self.plan.role({key: v}))
                    return True
        return False

    def _next_confirmation(self, trials: list[Any]) -> bool:
        """Staged grid (``_staged``), once the first seed has been handed out: queue the next pair, if any."""
        records = [record_of(t, self.plan) for t in trials]
        spec = self.plan.spec
        better: list[dict[str, Any]] | None = None  # the verdict's better candidates, computed once if asked

        def confirmed(values: dict[str, Any]) -> bool:
            nonlocal better
            if better is None:
                verdict = decide(records, self.plan.baseline, spec.objective, spec.constraints, level=spec.level,
                                 min_pairs=spec.min_pairs, steps=spec.steps)
                better = [c.values for c in verdict.comparisons if c.status == "better"]
            return any(same_point(v, values) for v in better)

        points = staged.next_points(records, self.plan.baseline, self.plan.seeds, spec.objective.sign, spec.steps,
                                    spec.min_pairs, confirmed)
        for values, seed in points:
            self._enqueue(values, seed, self.plan.role(values))
        return bool(points)

    def total_trials(self) -> int:
        """For the progress bar: a staged grid's first seed and the candidates begun on the others (at least
        one); otherwise the plan's count."""
        if not self.plan.staged:
            return self.plan.total_trials
        points = [(values_of(t, self.plan.keys), seed_of(t, self.plan)) for t in self._counted()]
        begun = staged.candidates_begun(points, self.plan.baseline, self.plan.seeds[0])
        return len(self.plan.grid_values) + (len(self.plan.seeds) - 1) * (1 + max(1, begun))

    def candidate(self) -> dict[str, Any] | None:
        """TPE: the explored value picked for confirmation on the other seeds (chosen once, then stored)."""
        stored = self.study.user_attrs.get("candidate")
        return dict(stored) if stored is not None else None

    def _choose_candidate(self, trials: list[Any]) -> dict[str, Any] | None:
        sign = self.plan.spec.objective.sign
        best = None
        for t in trials:
            if t.user_attrs.get("role") != "explore" or t.state.name != "COMPLETE":
                continue
            record = record_of(t, self.plan)
            if record.feasible is False or record.objective is None or same_point(record.values, self.plan.baseline):
                continue
            if best is None or sign * record.objective > sign * (best.objective or 0.0):
                best = record
        if best is None:
            return None
        self.study.set_user_attr("candidate", best.values)
        return best.values

    def _next_tpe(self, trials: list[Any]) -> bool:
        """TPE: the baseline and TPE's values on the first seed, then the best value and the baseline on the
        other seeds. Enqueues what comes next; True when a trial should be asked for now."""
        if any(t.state.name == "WAITING" for t in trials):
            return True
        s0 = self.plan.seeds[0]
        if not self._covered(trials, self.plan.baseline, s0):
            self._enqueue(self.plan.baseline, s0, "baseline")
            return True
        explored = [t for t in trials if t.user_attrs.get("role") == "explore"]
        if len(explored) < self.plan.n_explore:
            return True  # ask: TPE proposes the next value
        if any(t.state.name == "RUNNING" for t in explored):
            return False  # the candidate is picked once every explored value is in
        candidate = self.candidate() or self._choose_candidate(trials)
        if candidate is None:
            return False
        spec, baseline = self.plan.spec, self.plan.baseline
        order = staged.first_seed_order([record_of(t, self.plan) for t in trials], baseline, self.plan.seeds[0],
                                        spec.objective.sign, spec.steps)
        pair = [("baseline" if same_point(v, baseline) else "confirm", v)
                for v in staged.trailing_first(order, baseline, candidate)]  # as in a staged grid
        for seed in self.plan.seeds[1:]:
            missing = [(role, values) for role, values in pair if not self._covered(trials, values, seed)]
            for role, values in missing:  # both at once: the pruner's stand-in and the race see the other planned
                self._enqueue(values, seed, role)
            if missing:
                return True
        return False

    def want_more(self) -> bool:
        trials = self._counted()
        return self._next_grid(trials) if self.plan.is_grid else self._next_tpe(trials)

    # -- running one trial ------------------------------------------------------------------------------------------

    def launch(self) -> None:
        with _quiet_optuna():
            trial = self.study.ask(fixed_distributions=self.plan.distributions)
        trial.set_user_attr("driver", self.identity.to_dict())  # first: it is what tells an orphan
        values = {k: trial.params[k] for k in self.plan.keys}
        seed = trial.user_attrs.get("seed")
        seed = self.plan.seeds[0] if seed is None else int(seed)
        role = trial.user_attrs.get("role") or ("explore" if not self.plan.is_grid else self.plan.role(values))
        trial.set_user_attr("seed", seed)
        trial.set_user_attr("role", role)
        if self.plan.is_grid and any(t.number != trial.number and t.state.name != "WAITING" and
                                     seed_of(t, self.plan) == seed and
                                     same_point(values_of(t, self.plan.keys), values) for t in self._counted()):
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
        return self.plan.spec.race and self.plan.spec.prune

    def _planned_on(self, seed: int, counted: list[Any]) -> list[dict[str, Any]] | None:
        """Every value planned on ``seed``, a seed other than the first, or None while a TPE sweep has no
        candidate yet."""
        if self.plan.staged:  # the baseline and the candidates begun there so far (one more only if none wins)
            return [self.plan.baseline, *(values_of(t, self.plan.keys) for t in counted
                                          if seed_of(t, self.plan) == seed)]
        if self.plan.is_grid:
            return [{self.plan.keys[0]: v} for v in self.plan.grid_values]
        candidate = self.candidate()
        return None if candidate is None else [self.plan.baseline, candidate]

    def _race(self, a: _Active, counted: list[Any] | None = None) -> Callable[[int], str | None]:
        """Why the race stops ``a`` at a given step (``_race``), or None. The study's trials (``counted``, read
        here when not given) are read once, not at every step: the other trials on the seed do not change while
        ``a``'s lines are read."""
        spec = self.plan.spec
        seed = seed_of(a.trial, self.plan)
        if not self.racing or seed == self.plan.seeds[0]:
            # the first seed runs as the pruner leaves it, so the value that leads runs all the steps once (and
            # for TPE the sampler is still proposing values there)
            return lambda step: None
        counted = self._counted() if counted is None else counted
        planned = self._planned_on(seed, counted)
        if planned is None:
            return lambda step: None
        values = values_of(a.trial, self.plan.keys)
        others = [SeedTrial(values_of(t, self.plan.keys), state_name(t),
                            max(t.intermediate_values) if t.intermediate_values else None)
                  for t in counted if t.number != a.trial.number and seed_of(t, self.plan) == seed]
        return lambda step: None if step >= spec.steps or step < spec.warmup else \
            won_seed(values, seed, step, others, planned, spec.warmup)

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
        close = difflib.get_close_matches(metric, sorted(a.tail.seen), n=2, cutoff=0.6)
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
            a.tail.close()
            self.active.pop(a.trial.number, None)
            ft = self.study._storage.get_trial(a.trial._trial_id)
            if ft.state.name == "RUNNING":
                self._requeue(ft, "interrupted: the sweep was stopped; re-queued")

    def _foreign_running(self) -> bool:
        return any(t.state.name == "RUNNING" and t.number not in self.active for t in self.trials())

    def _done_count(self) -> int:
        return sum(1 for t in self._counted() if t.state.is_finished())

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

    class LoopGridSampler(optuna.samplers.GridSampler):  # type: ignore[misc,name-defined]
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
