"""A sweep for people: the table of trials and the verdict (rich), and a progress bar on stderr."""

from __future__ import annotations

import sys
from typing import Any

from ._result import SweepResult
from ._settings import TrialEvent
from ._space import format_value, same_point

_STATE_STYLE = {"complete": "green", "stopped": "green", "pruned": "yellow", "failed": "red", "diverged": "red",
                "interrupted": "dim",
                "running": "cyan", "waiting": "dim"}
_DECISION_STYLE = {"fix confirmed": "bold green", "keep baseline": "bold yellow",
                   "insufficient evidence": "bold magenta"}


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def trials_table(result: SweepResult) -> Any:
    from rich.table import Table

    keys = [p["key"] for p in result.spec["params"]]
    constraints = [c["metric"] for c in result.spec["constraints"]]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("#", justify="right")
    for key in keys:
        table.add_column(_short(key), justify="right")
    table.add_column("seed", justify="right")
    table.add_column("role")
    table.add_column("state")
    table.add_column(result.spec["objective"]["metric"], justify="right")
    for metric in constraints:
        table.add_column(metric, justify="right")
    table.add_column("steps", justify="right")
    table.add_column("note", overflow="fold")
    for t in sorted(result.trials, key=lambda t: t.number):
        style = _STATE_STYLE.get(t.state, "")
        note = t.reason or ""
        if t.state in ("pruned", "stopped"):  # the step is in its own column
            note = note.split(": ", 1)[-1]
        table.add_row(
            str(t.number), *(format_value(t.values.get(k)) for k in keys), _number(t.seed), t.role,
            f"[{style}]{t.state}[/]" if style else t.state, _number(t.objective),
            *(_number(t.constraints.get(m)) for m in constraints), _number(t.steps),
            _escape(note),
        )
    return table


def render_sweep(result: SweepResult, console: Any, *, verdict: bool = True) -> None:
    """Print the sweep's header, trials, verdict (unless ``verdict`` is False: ``advisor verify`` prints its
    own) and how to open the study."""
    spec = result.spec
    params = "; ".join(_escape(_describe_param(p)) for p in spec["params"])
    cons = ", ".join(f"{c['metric']}{c['op']}{c['bound']:g}" for c in spec["constraints"]) or "none"
    console.print(f"[bold]sweep[/] {_escape(result.study)}{' (resumed)' if result.resumed else ''}: {params}")
    console.print(f"  objective {_escape(spec['objective']['metric'])} ({spec['objective']['direction']}), "
                  f"constraints {_escape(cons)}, {spec['steps']} steps, seeds {spec['seeds']}, {spec['mode']}"
                  f"{' (staged)' if spec.get('staged') else ''}, "
                  f"{'pruning after step ' + str(spec['warmup_steps']) if spec['prune'] else 'no pruning'}"
                  f"{', racing' if spec.get('race') else ''}")
    console.print(f"  baseline: {_escape(_values(result.baseline))}")
    console.print()
    console.print(trials_table(result))
    console.print()
    v = result.verdict
    if verdict:
        console.print(f"[{_DECISION_STYLE.get(v.decision, 'bold')}]{v.decision.upper()}[/]"
                      + (f": {_escape(_values(v.candidate))}" if v.candidate else ""))
        console.print(f"  {_escape(v.reason)}")
    race = v.race or {}
    if race.get("stopped"):
        console.print(f"  {_escape(race['summary'])}")
    console.print(f"  {result.trial_steps} training steps in {len(result.trials)} trials")
    console.print(f"  trials: {_escape(result.out)}/trials/")
    console.print(f"  open the study: {_escape(result.dashboard)}")


def _describe_param(p: dict[str, Any]) -> str:
    if "values" in p:
        return f"{p['key']} in {{{', '.join(format_value(v) for v in p['values'])}}}"
    return f"{p['key']} in [{format_value(p['low'])}, {format_value(p['high'])}]{' log' if p.get('log') else ''}"


def _values(values: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in (values or {}).items())


def trial_line(event: TrialEvent, role: str | None = None) -> str:
    """One line for a trial that started or ended: its values, seed and role (``role`` instead of the sweep's);
    then its state, the step it reached and its objective."""
    values = ", ".join(f"{_short(k)}={format_value(v)}" for k, v in event.values.items())
    role = role or event.role
    what = f"trial #{event.number} {values}, seed {event.seed}" + (f" ({role})" if role else "")
    if event.state == "started":
        return f"{what}: started"
    text = f"{what}: {event.state}"
    if event.steps is not None:
        text += f" at step {event.steps}"
    if event.objective is not None:
        text += f", {event.metric} {event.objective:.4g}"
    if event.state in ("failed", "diverged") and event.reason:
        text += f": {event.reason}"
    return text + f" [{event.done}/{max(event.total, event.done)} done]"


def plan_text(plan: Any, out_dir: Any) -> str:
    """The sweep's plan in one line, before any trial starts (``plan``: a ``_plan.Plan``)."""
    spec = plan.spec
    seeds = f"{len(plan.seeds)} seed{'s' if len(plan.seeds) != 1 else ''}"
    if plan.is_grid:
        what = (f"{plan.keys[0]} over {', '.join(format_value(v) for v in plan.grid_values)} (the first, the "
                f"config's, is the baseline) on {seeds}")
    else:
        params = "; ".join(_describe_param(p) for p in plan.fingerprint["params"])
        what = f"{params}: {plan.n_explore} values TPE picks, against the baseline {_values(plan.baseline)}, on {seeds}"
    return (f"sweep plan: {what}: at most {plan.total_trials} trials of {spec.steps} steps; objective "
            f"{spec.objective.metric} ({spec.objective.direction}); trials in {out_dir}")


class LineProgress:
    """Progress as plain lines on stderr, each flushed as it happens (stderr piped or redirected): one when a
    trial starts and one when it ends; the sweep's plan on ``plan_stream``, when one is given."""

    def __init__(self, stream: Any = None, roles: dict[str, dict[str, Any]] | None = None,
                 plan_stream: Any = None) -> None:
        self._stream = stream
        self._roles = roles or {}
        self._plan_stream = plan_stream

    def plan(self, text: str) -> None:
        if self._plan_stream is not None:  # advisor verify prints its own plan
            self._plan_stream.write(text + "\n")
            self._plan_stream.flush()

    def update(self, done: int, total: int, running: str) -> None:
        pass

    def trial(self, event: TrialEvent) -> None:
        stream = self._stream or sys.stderr
        stream.write(trial_line(event, _role(event, self._roles)) + "\n")
        stream.flush()

    def close(self) -> None:
        pass


def _role(event: TrialEvent, roles: dict[str, dict[str, Any]]) -> str | None:
    """The caller's name for the trial's values (``advisor verify``: baseline, proposed, third), if it has one."""
    return next((role for role, values in roles.items() if same_point(values, event.values)), None)


class RichProgress:
    """A progress bar on stderr: trials finished of planned, and the step each running trial is at; a line above
    it as each trial starts and ends.

    Args:
        roles: a name for some trials' values (``advisor verify``: baseline, proposed, third), shown in the lines.
    """

    def __init__(self, roles: dict[str, dict[str, Any]] | None = None, plan_stream: Any = None) -> None:
        self._roles = roles or {}
        self._plan_stream = plan_stream
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("{task.description}"), console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task("", total=None)
        self._progress.start()

    def update(self, done: int, total: int, running: str) -> None:
        self._progress.update(self._task, completed=done, total=max(total, done), description=running)

    def trial(self, event: TrialEvent) -> None:
        self._progress.console.print(trial_line(event, _role(event, self._roles)), markup=False, highlight=False)

    def plan(self, text: str) -> None:
        if self._plan_stream is not None:  # advisor verify prints its own plan
            self._plan_stream.write(text + "\n")
            self._plan_stream.flush()

    def close(self) -> None:
        self._progress.stop()
