"""Render reports for people (rich) and machines (JSON)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from advisor.codes import MEMORY_NOT_ESTIMATED, UNDEFINED_VARIABLE
from advisor.findings import Finding
from advisor.plural import counted
from advisor.verl import render_value  # a value as verl's YAML writes it (null, true), not repr

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from advisor.checks import CheckReport
    from advisor.diff import FileEdit
    from advisor.findings import Change
    from advisor.load import VerlConfig
    from advisor.memory import GpuSpec, Largest, MemoryEstimate
    from advisor.playbook import Diagnosis, Suggestion

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# Piped or redirected output (CI logs, `| less`, a file) is not wrapped: a line is as long as its text.
_UNWRAPPED = 10_000


class _LineWriter:
    """A text stream that drops the spaces rich pads a line's end with (table cells, grid columns).

    Whole lines are written as they complete; ``flush`` writes the rest.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        *done, self._pending = (self._pending + text).split("\n")
        if done:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in done))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._pending.rstrip(" "))
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def fileno(self) -> int:
        return int(self._stream.fileno())

    @property
    def encoding(self) -> str:
        return str(getattr(self._stream, "encoding", None) or "utf-8")


def get_console(stderr: bool = False, *, width: int | None = None) -> Console:
    """A rich Console for one invocation, fitted to where the output goes.

    On a terminal: its width and colours (rich reads ``NO_COLOR`` and ``COLUMNS``). Piped or
    redirected: no colour, no wrapping (unless ``width`` is given) and no trailing spaces.
    """
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    unwrapped = width is None and not tty
    if unwrapped:
        width = _UNWRAPPED  # tables still need a width to lay out in
    # emoji=False: a ':name:' in a key, path or message is printed as written, never as a picture;
    # soft_wrap when unwrapped: lines go out as they are, without rich working out where they would break
    console = Console(file=cast(IO[str], _LineWriter(stream)), width=width, highlight=False, soft_wrap=unwrapped,
                      emoji=False, force_terminal=tty or None, color_system="auto" if tty else None)
    console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]  # rich's exits 1 ("errors found"): 141
    return console


def _broken_pipe() -> None:
    raise BrokenPipeError("the reader of the output went away")


def print_json(data: dict[str, Any]) -> None:
    import json

    from ._jobs import jsonable

    sys.stdout.write(json.dumps(jsonable(data), indent=2) + "\n")


def findings_table(findings: list[Finding]) -> Table:
    """Findings as a two-column grid: severity and id, then the message, where, and the fix."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1), expand=False)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for f in findings:
        lines = [_escape(f.message)]
        if f.where:
            lines.append(f"[dim]{_escape(f.where)}[/dim]")
        if f.fix:
            lines.append("fix: [bold]" + _escape("  ".join(describe_change(c) for c in f.fix)) + "[/bold]")
        grid.add_row(f"[{_STYLE[f.severity]}]{f.severity:<7}[/] {f.id}", "\n".join(lines))
    return grid


def describe_change(change: Change) -> str:
    """A change in a few words: the override, or the rename of a misspelt key."""
    if getattr(change, "renames", None):
        return f"rename {change.renames} to {change.key}"
    return str(change.override())


def render_changes(changes: list[Change], edit: FileEdit | None, console: Console, *, overrides_intro: str,
                   comment: Callable[[Change], str] | None = None) -> None:
    """The changes as an edit of the user's file (a unified diff) and, for the rest, Hydra overrides."""
    rest = list(changes) if edit is None else edit.overrides
    if edit is not None and edit.changed:
        console.print(f"Edit [bold]{_escape(edit.path)}[/bold] (--write applies it, keeping "
                      f"{_escape(edit.path)}.bak; --format diff prints it as a patch):")
        from rich.text import Text

        for line in edit.diff().splitlines()[2:]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else \
                "cyan" if line.startswith("@@") else ""
            console.print(Text("  " + line, style=style))
    for change, why in getattr(edit, "refused", ()):
        console.print(f"[yellow]not proposed[/yellow]: {_escape(describe_change(change))}: {_escape(why)}")
    if rest:
        console.print(overrides_intro)
        for change in rest:
            note = comment(change) if comment else ""
            console.print(f"  {_escape(change.override())}" + (f"    [dim]# {_escape(note)}[/dim]" if note else ""))


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# set by every login shell: a script's $HOME is the user's home when it runs, so a note that the advisor read it
# literally changes no answer (shown with -v)
LOGIN_VARIABLES = frozenset({"HOME", "USER", "LOGNAME", "PWD", "PATH", "SHELL"})


def _changes_no_answer(finding: Finding) -> bool:
    return finding.id == UNDEFINED_VARIABLE.id and finding.details.get("variable") in LOGIN_VARIABLES


def render_check(report: CheckReport, console: Console, edit: FileEdit | None = None, *, verbose: bool = False) -> None:
    from rich.table import Table

    cfg = report.config
    detected = f"installed at {cfg.version_installed}" if cfg.version_installed else \
        "detected" if cfg.version_detected else "given"
    note = getattr(report, "version_note", None)
    if note is not None:
        detected = f"detected: {_escape(note.why)}"
    console.print(f"[bold]{_escape(str(cfg.path or '(verl defaults)'))}[/bold]  verl {cfg.version} ({detected}), "
                  f"config {cfg.config_name}, read as {cfg.kind}")
    if origin := config_origin(cfg):
        console.print(_escape(origin))
    if note is not None and note.newest_line:
        console.print(f"[yellow]{_escape(note.newest_line)}[/yellow]")
    findings = [f for f in report.findings if verbose or not _changes_no_answer(f)]
    if findings:
        console.print()
        console.print(findings_table(findings))
    console.print()
    console.print("[bold]Batch layers[/bold]")
    for line in report.batch.words:
        console.print(f"  • {_escape(line)}")
    table = Table(show_header=True, title=None, expand=False)
    for col in ("role", "mini-batch", "per GPU", "opt steps", "micro/GPU", "grad acc", "tokens/micro"):
        table.add_column(col, justify="right" if col != "role" else "left", no_wrap=True)
    plan = report.batch
    for layer in (plan.actor, plan.critic):
        if layer is None:
            continue
        table.add_row(layer.role, _n(layer.mini_batch_responses), _n(layer.mini_batch_per_gpu),
                      _n(layer.optimizer_steps_per_step), "dynamic" if layer.dynamic else _n(layer.micro_batch_per_gpu),
                      _n(layer.grad_accum_steps), _n(layer.max_tokens_per_micro_batch))
    for fwd in (plan.old_log_prob, plan.ref, plan.values):
        if fwd is None:
            continue
        table.add_row(fwd.role, "", "", "", "dynamic" if fwd.dynamic else _n(fwd.micro_batch_per_gpu), "",
                      _n(fwd.max_tokens_per_micro_batch))
    console.print(table)
    if report.memory is not None:
        render_memory(report.memory, console)
    elif not any(f.id == MEMORY_NOT_ESTIMATED.id for f in report.findings):  # no GPU given: name the flag
        console.print("GPU memory per phase: not checked; pass --gpu NAME (`advisor check --gpu list` names them) "
                      "or --gpu-memory-gib N", style="dim", highlight=False)
    limits = getattr(report, "limits", None)
    if limits:
        render_limits(limits, console)
    if report.changes:
        console.print("[bold]Proposed changes[/bold], applied together and re-checked as one:")
        render_changes(report.changes, edit, console,
                       overrides_intro="Hydra overrides, paste after your command:",
                       comment=lambda c: f"{c.key}: {render_value(c.old)} -> {render_value(c.new)}: {c.reason}")
        if edit is not None and edit.changed:  # every key the edit sets or adds, with why
            for change in edit.in_file:
                console.print(f"  [dim]# {_escape(change.key)}: {_escape(render_value(change.old))} -> "
                              f"{_escape(render_value(change.new))}: "
                              f"{_escape(change.reason)}[/dim]")
    verdict = "errors found" if report.errors else "no errors"
    console.print(f"\n{counted(len(report.errors), 'error')}, {counted(len(report.warnings), 'warning')}: {verdict}.")


def render_memory(estimate: MemoryEstimate, console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"GPU memory per phase: {estimate.model.name} on {estimate.gpu.name} "
                        f"({estimate.gpu_memory_gib:.0f} GiB)", title_justify="left")
    table.add_column("phase", no_wrap=True)
    table.add_column("peak GiB", justify="right")
    table.add_column("of GPU", justify="right")
    table.add_column("risk")
    table.add_column("largest parts (GiB)", overflow="fold")
    for row in estimate.rows():
        risk_style = {"ok": "green", "unknown": "cyan", "tight": "yellow", "oom": "bold red"}.get(row["risk"], "")
        share = f"{row['percent']}%" if row["percent"] is not None else "unknown"
        table.add_row(row["stage"], f"{row['peak_gib']:.1f}", share, f"[{risk_style}]{row['risk']}[/]",
                      _escape(row["largest"] + (f"; {row['reason']}" if row["reason"] else "")))
    console.print(table)
    console.print(_escape(estimate.host.summary()), highlight=False)


def render_gpus(gpus: Iterable[GpuSpec], console: Console) -> None:
    """``advisor check --gpu list``: the hardware catalog (knowledge/gpus.yaml)."""
    from rich.table import Table

    table = Table(title="GPUs the memory check knows (--gpu NAME; any other: --gpu-memory-gib N)",
                  title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("memory (GiB)", justify="right")
    table.add_column("vendor")
    table.add_column("also answers to", overflow="fold")
    for gpu in gpus:
        table.add_row(gpu.name, f"{gpu.memory_gib:.1f}", gpu.vendor, ", ".join(gpu.aliases))
    console.print(table)


def render_limits(limits: Sequence[Largest], console: Console) -> None:
    """``advisor check --max``: the largest value of each phase's knob that keeps the phase ok.

    The answer holds with every sequence at its max length (responses grow during GRPO training); the value at
    the typical lengths stands beside it, not as the answer."""
    from rich.table import Table

    table = Table(title="Largest value that fits (ok) with every sequence at max length, per phase",
                  title_justify="left")
    table.add_column("phase", no_wrap=True)
    table.add_column("key", overflow="fold")
    table.add_column("now", justify="right")
    table.add_column("largest", justify="right")
    typical = any(limit.typical_source for limit in limits)
    if typical:
        table.add_column("at typical lengths", justify="right")
    for limit in limits:
        fraction = limit.key.endswith("gpu_memory_utilization")  # two decimals, not one
        largest = _largest_text(limit.largest, fraction) if not limit.missing else "cannot say"
        if limit.capped:
            largest += " (all searched)"
        now = f"{limit.current:.2f}" if fraction and limit.current is not None else _n(limit.current)
        row = [limit.stage, limit.key, now, largest]
        if typical:
            row.append(_largest_text(limit.typical, fraction) if limit.typical_source else "")
        table.add_row(*row)
    console.print(table)
    for missing in dict.fromkeys(limit.missing for limit in limits if limit.missing):
        console.print(f"cannot say: {missing.removeprefix('cannot say: ')}", highlight=False)
    sources = {limit.typical_source for limit in limits if limit.typical_source}
    if sources:
        console.print(f"Typical lengths: {', '.join(sorted(sources))}; a value that fits only those runs out of "
                      "memory when responses grow to max_response_length.", highlight=False)


def _largest_text(value: float | None, fraction: bool) -> str:
    if value is None:
        return "none fits"
    return f"{value:.2f}" if fraction else _n(value)


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def config_origin(cfg: VerlConfig) -> str | None:
    """Where a config read from a run's log came from (None for a config file)."""
    found = getattr(cfg, "from_log", None)
    if found is None:
        return None
    return f"config: {found.description} of {cfg.path}"  # the log's own path: whose config it is


def render_suggest(result: Suggestion, console: Console, *, metrics_path: str | None = None,
                   edit: FileEdit | None = None, verbose: bool = False) -> None:
    """The diagnoses, the chosen diff and its alternatives, for people."""
    cfg, facts, window = result.config, result.facts, result.window
    mode = {"ppo": "PPO with a critic", "grpo": f"{facts.estimator} (group estimator, no critic)"}.get(
        facts.mode, facts.estimator)
    kl = {"reward": "KL in the reward", "loss": "KL in the loss", "both": "KL in reward and loss",
          "none": "no KL"}[facts.kl_placement]
    if getattr(cfg, "from_log", None) is not None and str(cfg.path) == str(metrics_path):  # `advisor suggest LOG`
        console.print(f"[bold]{_escape(str(metrics_path))}[/bold]")
    else:
        console.print(f"[bold]{_escape(str(cfg.path or '(verl defaults)'))}[/bold] + "
                      f"[bold]{_escape(str(metrics_path or 'metrics'))}[/bold]")
    if origin := config_origin(cfg):
        console.print(_escape(origin))
    console.print(f"verl {cfg.version}, {mode}, {kl}; window steps {window.first_step}-{window.last_step} "
                  f"({counted(window.size, 'step')})")
    for warning in getattr(result, "warnings", ()):
        console.print(f"[yellow]warning: {_escape(warning)}[/yellow]")
    console.print()
    learning, performance = result.learning, result.performance
    harms: dict[str, str] = {}
    if not learning:
        console.print("[green]No learning diagnosis:[/green] every learning metric the playbook reads looks "
                      "healthy.")
    else:
        _diagnosis_grid(result, learning, console, harms)
    if performance:
        console.print()
        console.print("[bold]Performance and memory[/bold] (never ahead of a learning problem):")
        _diagnosis_grid(result, performance, console, harms)
    console.print()
    shown: list[str] = []  # notes the verdict line prints
    decided = result.decided_by  # None: no diagnosis decided ("no change")
    if result.changes:
        assert decided is not None  # changes are the fix of the diagnosis that decided them
        console.print(f"[bold]Change[/bold] (decided by {decided.id}):")
        render_changes(result.changes, edit, console, overrides_intro="Hydra overrides, paste after your verl command:",
                       comment=lambda c: f"{render_value(c.old)} -> {render_value(c.new)}: {c.reason}")
        if edit is not None and edit.changed:
            for change in edit.in_file:
                console.print(f"  [dim]# {_escape(change.key)}: {_escape(render_value(change.old))} -> "
                              f"{_escape(render_value(change.new))}: "
                              f"{_escape(change.reason)}[/dim]")
        from advisor.playbook import Safety  # the playbook's, loaded only for suggest

        safety = [f for f, ch in decided.fixes if list(ch) == result.changes[: len(ch)]]
        if safety and safety[0].safety is Safety.NEEDS_SWEEP:
            console.print("  [yellow]an algorithm knob: confirm it with `advisor verify` before a long run[/yellow]")
    elif decided is not None and decided.fixes:  # "inspect", and fixes exist: say why none was proposed
        why = next((n for n in result.notes if n.startswith(f"{decided.id}:")), "")
        shown.append(why)
        console.print(f"[bold]No config change[/bold]: {_escape(why)}")
    elif decided is not None:  # "inspect"
        shown.extend(n for n in result.notes if n.startswith(f"{decided.id}:"))
        console.print(f"[bold]No config change[/bold]: {decided.id}'s remedy is outside the config; "
                      "follow its checks above.")
    else:
        reason = " ".join(result.notes[:1])
        shown.extend(result.notes[:1])
        console.print("[bold green]No change[/bold green]" + (f": {_escape(reason)}" if reason else "."))
    if result.alternatives:
        console.print("\n[bold]Alternatives[/bold] (ranked):")
        for i, alt in enumerate(result.alternatives, 1):
            console.print(f"  {i}. " + _escape("  ".join(c.override() for c in alt)))
    # the footer repeats nothing the verdict said; a note that changes no verdict stays in the JSON only
    advice = {n.rsplit(": ", 1)[-1] for n in shown if ": " in n}  # "pass --gpu NAME" once, where the verdict says it
    reading = [n for n in result.notes if n not in shown and (verbose or n not in result.quiet_notes)
               and n.rsplit(": ", 1)[-1] not in advice]
    if result.metrics is not None and reading:
        console.print()
        for note in reading:
            console.print(f"[dim]note: {_escape(note)}[/dim]")


def _diagnosis_grid(result: Suggestion, diagnoses: list[Diagnosis], console: Console, harms: dict[str, str]) -> None:
    """``harms``: each harm already shown -> the id that showed it (a second finding points at it, not repeats it)."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for d in diagnoses:
        summary, detail = d.summary, getattr(d, "harm_detail", "")
        if detail and detail in harms:
            summary = summary.replace(f"harm: {detail}", f"harm: the same as {harms[detail]}'s")
        elif detail:
            harms[detail] = d.id
        place = getattr(d, "envelope_text", "")
        if place and place in harms:
            summary = summary.replace(f"envelope: {place}", f"envelope: as {harms[place]}'s")
        elif place:
            harms[place] = d.id
        lines = [f"[bold]{_escape(summary)}[/bold]"]
        shown = [f"{e.metric} {_num(e.value)}" + (f" (healthy {e.healthy})" if e.healthy else "")
                 for e in d.evidence[:5]]
        if shown:
            lines.append("evidence: " + _escape(", ".join(shown)))
        # a rule whose harm is its own conditions has nothing to add here: the summary states them
        if d.rule.harm is not None and d.rule.harm.any_of and d.harmful and d.harm_held not in ("", d.harm_detail):
            lines.append(f"harm held: {_escape(d.harm_held)}")
        if d.rule.harm is not None and not d.harmful:
            lines.append("[dim]a trend without harm, nothing to change; it would matter if "
                         f"{_escape(d.rule.harm.text)}[/dim]")
        if d is result.decided_by or len(result.diagnoses) == 1:  # the why, for the one that decides
            lines.append(f"[dim]{_escape(d.rule.rationale)}[/dim]")
            if d.rule.sources:
                lines.append("[dim]sources: " + _escape("; ".join(d.rule.sources)) + "[/dim]")
            for check in d.rule.checks:
                lines.append(f"check: {_escape(check)}")
        grid.add_row(f"[{_STYLE[d.severity]}]{d.severity:<7}[/] {d.id} {d.rule.tree}", "\n".join(lines))
    console.print(grid)


def _num(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    return f"{value:.4g}"
