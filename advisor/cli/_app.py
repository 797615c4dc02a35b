"""The ``advisor`` command line: parse arguments, call the API, render. No diagnosis logic here.

Exit codes (as ruff; :class:`advisor.errors.ExitCode`): 0 ran and found no error; 1 ran and found errors (or an
out-of-memory verdict); 2 could not run (unreadable input, bad arguments, input past a size or depth limit); 3
an internal error of the advisor (a bug: one line naming it and the inputs, and a hint to rerun with
``--debug`` for the traceback); 4 ``advisor watch --exit-on``: an alert at that level; 74 the output could not be
written (stdout closed, a full disk); 141 the reader of stdout went away (a broken pipe: quietly, :mod:`._output`).
Errors are one line on stderr; a traceback only with ``--debug``.

Each command calls its job (:mod:`._jobs`) once and renders the result it returns: :func:`run_job` turns
unreadable input into the one-line error, :func:`show` renders text, JSON, overrides, yaml or a diff from the
one result. Options several commands take are declared here once (:func:`gpu_option`, :func:`window_option`,
...); a command hands its options to its job as they are.

Built on Click rather than Typer: Typer 0.29 builds pydantic adapters for every parameter, which
alone costs ~0.1 s of the 0.4 s start-up budget of ``advisor check`` (bench/bench_check_startup.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from advisor.errors import AdvisorError, ExitCode
from advisor.plural import counted

from ._jobs import LAUNCHERS, ChangeResult, JobResult

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound=JobResult)


class FiniteFloat(click.FloatRange):
    """A float option that refuses ``inf`` and ``nan`` (Python's float() reads both; no GPU has either)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


GIB = FiniteFloat(min=1)  # --gpu-memory-gib


class State:
    debug = False
    width: int | None = None  # --width: wrap text output at this many columns
    verbose = False  # -v: also the notes that change no answer


EVERY_COMMAND_EXITS = (f"Every command also exits {int(ExitCode.BAD_INPUT)} on bad arguments, "
                       f"{int(ExitCode.INTERNAL)} on an internal error of the advisor (a bug: the message asks you "
                       f"to report it), {int(ExitCode.OUTPUT_FAILED)} when the output cannot be written (stdout "
                       f"closed, disk full), {int(ExitCode.BROKEN_PIPE)} on a broken pipe and "
                       f"{int(ExitCode.INTERRUPTED)} when interrupted (Ctrl-C).")


def _set_verbose(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    State.verbose = State.verbose or value
    return value


def verbose_option(fn: F) -> F:
    return click.option("-v", "--verbose", is_flag=True, expose_value=False, callback=_set_verbose, is_eager=True,
                        help="Also print notes that change no answer (an undefined $HOME in the script, ...).")(fn)


def _set_width(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        State.width = value
    return value


def width_option(fn: F) -> F:
    return click.option("--width", type=click.IntRange(min=20), default=None, expose_value=False,
                        callback=_set_width, is_eager=True, metavar="N",
                        help="Wrap text output at N columns (default: the terminal's width; no wrapping when "
                             "piped).")(fn)


def make_console() -> Any:
    from ._render import get_console

    return get_console(width=State.width)


def fail(err: BaseException) -> NoReturn:
    if State.debug:
        raise err
    click.echo(f"advisor: {err}", err=True)
    sys.exit(ExitCode.BAD_INPUT)


COMMANDS = ("calibrate", "check", "explain", "mcp", "report", "rule", "suggest", "sweep", "verify", "watch")
# Commands whose input is capped small (a config, a metric name, a finding id): they read, print and end, and run()
# keeps the cyclic garbage collector off for them (every other command turns it back on when it is resolved).
SMALL_INPUT = frozenset({"check", "explain", "rule"})


class Commands(click.Group):
    """The ``advisor`` group, loading each command's module (``advisor.cli.<name>``, which registers it) when the
    command is asked for: ``advisor check`` does not import the other nine (Click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            import importlib

            importlib.import_module(f"advisor.cli.{cmd_name}")
        command = super().get_command(ctx, cmd_name)
        if command is not None and not command.epilog:  # the codes main() returns for every command
            command.epilog = EVERY_COMMAND_EXITS
        return command

    def invoke(self, ctx: click.Context) -> Any:
        from ._output import OutputFailed, is_output_error

        try:
            return super().invoke(ctx)
        except OSError as err:
            if is_output_error(err):
                raise OutputFailed(err) from err
            raise

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in COMMANDS:  # not a command: load them all, for Click's "Did you mean"
            for known in COMMANDS:
                self.get_command(ctx, known)
        name, command, rest = super().resolve_command(ctx, args)
        if name not in SMALL_INPUT:
            import gc

            gc.enable()  # a long log, a sweep or a server: collect reference cycles as Python always does
        return name, command, rest


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for unreadable input.")
@click.version_option(package_name="verl-advisor", prog_name="advisor")
def app(debug: bool) -> None:
    """Config advisor and auto-tuner for verl RL post-training runs."""
    State.debug = debug
    State.width = None  # each command's --width sets it again


class DataHelpOption(click.Option):
    """An option whose help lists knowledge data (the verl versions, the GPUs): built from the files the code
    reads when --help is shown, so it cannot go stale and costs nothing at start-up."""

    def __init__(self, *args: Any, help_from: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help_from = help_from

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if self.help is None:
            self.help = self.help_from()
        return super().get_help_record(ctx)


def verl_versions_help() -> str:
    """The versions --verl-version takes, from knowledge/verl_defaults/versions.yaml (and an installed verl)."""
    from advisor.verl import supported_versions

    names = [f"main ({v.version})" if v.tag == "main" else v.version for v in supported_versions()]
    return (f"verl version: {', '.join(names)}; 0.9 means the newest 0.9.x, latest the newest release; "
            "detected when omitted.")


def gpus_help(purpose: str) -> Callable[[], str]:
    """--gpu's help: what it is for, then the GPUs of knowledge/gpus.yaml."""
    def text() -> str:
        from advisor.memory import gpu_catalog

        return (f"{purpose}: {', '.join(g.name for g in gpu_catalog())} (`advisor check --gpu list` shows their "
                "memory and other spellings).")
    return text


def verl_version_option(fn: F) -> F:
    return click.option("--verl-version", default=None, metavar="VERSION", cls=DataHelpOption,
                        help_from=verl_versions_help)(fn)


def gpu_option(purpose: str, **extra: Any) -> Callable[[F], F]:
    """``--gpu NAME``; its help lists the GPUs of knowledge/gpus.yaml after ``purpose``."""
    return click.option("--gpu", default=None, metavar="NAME", cls=DataHelpOption, help_from=gpus_help(purpose),
                        **extra)


def gpu_memory_option(fn: F) -> F:
    return click.option("--gpu-memory-gib", type=GIB, default=None, help="GPU memory, instead of --gpu.")(fn)


def model_config_option(fn: F) -> F:
    return click.option("--model-config", type=click.Path(path_type=Path), default=None,
                        help="The model's HF config.json (when the model path does not name a known model).")(fn)


def window_option(text: str, *, least: int = 1) -> Callable[[F], F]:
    """``--window STEPS``: the recent window of suggest's rules (``text``: its help)."""
    return click.option("--window", type=click.IntRange(min=least), default=None, help=text)


def skip_tree_option(text: str) -> Callable[[F], F]:
    return click.option("--skip-tree", "skip_trees", multiple=True, metavar="TREE", help=text)


def format_option(choices: list[str] | None = None, help: str | None = None) -> Callable[[F], F]:
    """``--format/-f`` (``fmt``): text and json unless ``choices`` says more; ``help`` as click's."""
    return click.option("--format", "-f", "fmt", type=click.Choice(choices or ["text", "json"]), default="text",
                        show_default=True, help=help)


CHANGE_FORMAT_HELP = ("text; json; overrides (the Hydra override lines); yaml (the edited YAML config, or the whole "
                      "patched config); diff (the edit of CONFIG as a unified diff).")


def run_args(fn: F) -> F:
    """``CONFIG [METRICS] [KEY=VALUE]...`` of a command that reads a run (see :func:`run_inputs`)."""
    fn = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")(fn)
    fn = click.argument("metrics", type=click.Path(path_type=Path), required=False)(fn)
    return click.argument("config", type=click.Path(path_type=Path))(fn)


def config_args(fn: F) -> F:
    fn = verl_version_option(fn)
    fn = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")(fn)
    fn = click.argument("config", type=click.Path(path_type=Path))(fn)
    return fn


def run_inputs(config: Path, metrics: Path | None, overrides: tuple[str, ...]) -> tuple[Path | None, Path,
                                                                                     tuple[str, ...]]:
    """(CONFIG, METRICS, overrides) of ``advisor suggest|report CONFIG [METRICS]``: with one file, it is the run's
    log and the config is the one it printed (None here: read from METRICS)."""
    if metrics is not None and "=" in metrics.name and not metrics.exists():  # `suggest LOG key=value`
        overrides, metrics = (str(metrics), *overrides), None
    if metrics is None:
        return None, config, overrides
    return config, metrics, overrides


def run_job(job: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run one job of :mod:`._jobs`; input it cannot read is the one-line error and exit 2."""
    try:
        return job(*args, **kwargs)
    except AdvisorError as err:
        fail(err)


def _print_overrides(result: ChangeResult) -> None:
    click.echo("\n".join(f"    {c.override()} \\" for c in result.changes))


def _print_yaml(result: ChangeResult) -> None:
    edit = result.edit
    if edit is not None and result.cfg.kind == "yaml" and not edit.overrides:
        click.echo(edit.after, nl=False)
    else:
        click.echo(result.cfg.with_changes(result.changes).to_yaml(), nl=False)


def _print_diff(result: ChangeResult) -> None:
    edit = result.edit
    if edit is not None and edit.changed:
        click.echo(edit.diff(), nl=False)
    rest = result.changes if edit is None else edit.overrides
    if rest:
        click.echo("advisor: not in the file; pass as overrides: " + " ".join(c.override() for c in rest), err=True)


# --format overrides / yaml / diff: the changes alone, ready for a script, a file or `patch`
CHANGE_RENDERERS: dict[str, Callable[[ChangeResult], None]] = {
    "overrides": _print_overrides, "yaml": _print_yaml, "diff": _print_diff}
CHANGE_FORMATS = ["text", "json", *CHANGE_RENDERERS]


def show(result: JobResult, fmt: str, text: Callable[[], None]) -> None:
    """Render a job's result: ``json`` its document, ``text`` through ``text()``, a change format (a result with
    changes) the changes alone."""
    if fmt == "json":
        from ._render import print_json

        print_json(result.document())
    elif fmt == "text":
        text()
    else:
        assert isinstance(result, ChangeResult)  # only check and suggest offer the change formats
        CHANGE_RENDERERS[fmt](result)


def write_and_recheck(result: ChangeResult, overrides: list[str], verl_version: str | None, fmt: str) -> ExitCode:
    """--write: edit CONFIG in place (CONFIG.bak keeps the original), then check the written file again."""
    from advisor.checks import check as run_check
    from advisor.load import load_config

    cfg, edit = result.cfg, result.edit
    def say(text: str) -> None:  # with --format json/diff/... stdout holds the document alone
        click.echo(text, err=fmt != "text")

    if not result.changes:
        say("nothing to write: no change proposed")
        return ExitCode.OK
    try:
        if edit is None:
            raise AdvisorError(f"--write edits a YAML config or a launch script, not a {cfg.kind} config",
                               path=cfg.path, suggestion="pass the proposed overrides instead")
        _refuse_moves(result, overrides)
        if not edit.in_file:
            say("nothing written: " + ("; ".join(why for _, why in edit.refused) if edit.refused
                                       else "no change is an edit of the file"))
            if edit.overrides:
                say("pass as overrides: " + " ".join(c.override() for c in edit.overrides))
            return ExitCode(getattr(result, "exit_code", ExitCode.OK))
        backup = edit.write()
        after = run_check(load_config(edit.path, overrides, verl_version=verl_version,
                                      script_vars=cfg.launch.variables if cfg.launch is not None else None))
    except AdvisorError as err:
        fail(err)
    say(f"wrote {edit.path} ({counted(len(edit.in_file), 'change')}; the original is {backup}); re-checked: "
        f"{counted(len(after.errors), 'error')}, {counted(len(after.warnings), 'warning')}")
    if edit.overrides:
        say("not in the file; pass as overrides: " + " ".join(c.override() for c in edit.overrides))
    return ExitCode(after.exit_code)


def _refuse_moves(result: ChangeResult, overrides: list[str]) -> None:
    """Read the edited text back before writing it: an edit that moves any key besides its own is refused."""
    from advisor.diff import unintended_moves

    edit = result.edit
    assert edit is not None  # write_and_recheck refused a config that is not a file first
    moved = unintended_moves(result.cfg, edit.after, edit.in_file, overrides)
    if moved:
        shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(moved.items())[:5])
        raise AdvisorError(f"the edit would change {counted(len(moved), 'other key')} besides the ones it names "
                           f"({shown}); not written", path=edit.path,
                           suggestion="apply the proposed overrides by hand instead")


def playbook_rules(skip_trees: tuple[str, ...]) -> Any:
    from ._jobs import rules_without

    return rules_without(skip_trees)


def trial_options(fn: F) -> F:
    """Where and how trials run: the options `sweep` and `verify` share."""
    options = [
        click.option("--launcher", type=click.Choice(list(LAUNCHERS)), default="local", show_default=True),
        click.option("--address", default=None, metavar="ADDR", help="Ray job server (default $RAY_ADDRESS or :8265)."),
        click.option("--gpus-per-trial", type=FiniteFloat(min=0), default=None,
                     help="Ray: GPUs per trial job (default: n_gpus_per_node x nnodes of the config)."),
        click.option("--storage", default=None, metavar="URL", help="Optuna storage URL or journal file."),
        click.option("--study", "study_name", default=None, metavar="NAME",
                     help="Study name (default: from the sweep)."),
        click.option("--parallel", type=int, default=1, show_default=True, help="Trials at once."),
        click.option("--out", type=click.Path(path_type=Path), default=None, metavar="DIR",
                     help="Sweep directory (default sweeps-out/<study>)."),
        click.option("--prune/--no-prune", default=True, show_default=True, help="Stop trials that fall behind."),
        click.option("--race/--no-race", default=True, show_default=True,
                     help="Stop the trial left on its seed once every other value there was pruned."),
        click.option("--stall-timeout", "stall_timeout", type=click.IntRange(min=0), default=1800, show_default=True,
                     metavar="SECONDS", help="Fail a trial that logs no new metrics line for this long (0: never)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def every_seed_option(*, hidden: bool = False) -> Callable[[F], F]:
    """``--every-seed``: a grid sweep runs every value on every seed. verify always does, so there it is hidden
    and has no effect (kept so a command line that passes it still runs)."""
    return click.option("--every-seed", is_flag=True, hidden=hidden,
                        help="Grid: run every value on every seed (default: every value on the first seed, then "
                             "its best values in turn on the others until one is confirmed).")


class SweepCommand(click.Command):
    """Keeps which ``--values``/``--range`` follows which ``--param`` (Click collects each option apart)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        order: list[tuple[str, str]] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                break
            name, eq, inline = arg.partition("=")
            if name in ("--param", "--values", "--range"):
                value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
                order.append((name, value))
                i += 1 if eq else 2
                continue
            i += 1
        ctx.meta["sweep.param_order"] = order
        return super().parse_args(ctx, args)


def paired_params(order: list[tuple[str, str]]) -> list[Any]:
    from advisor.errors import SweepError
    from sweeps import parse_param

    params = []
    key: str | None = None
    for name, value in order:
        if name == "--param":
            if key is not None:
                raise SweepError(f"--param {key} needs --values v1,v2,... or --range LOW:HIGH[:log] after it")
            key = value
        elif key is None:
            raise SweepError(f"{name} {value} comes before any --param; write --param KEY {name} {value}")
        else:
            params.append(parse_param(key, **({"values": value} if name == "--values" else {"range_": value})))
            key = None
    if key is not None:
        raise SweepError(f"--param {key} needs --values v1,v2,... or --range LOW:HIGH[:log] after it")
    return params


_NO_ARGS: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", type("_Never", (Exception,), {}))


@contextmanager
def study_errors(what: str) -> Iterator[None]:
    """Input errors of a sweep or verify as one line (exit 2); Ctrl-C stops its trials, re-queued for a rerun (130)."""
    try:
        yield
    except AdvisorError as err:
        fail(err)
    except KeyboardInterrupt:
        click.echo(f"advisor: {what} interrupted; its running trials were stopped and re-queued; "
                   "rerun the same command to resume", err=True)
        sys.exit(ExitCode.INTERRUPTED)


def main() -> None:
    from ._output import OutputFailed, is_output_error, output_failed, stdout_closed

    if stdout_closed():
        output_failed(None)
    try:
        code = app.main(prog_name="advisor", standalone_mode=False)
        sys.stdout.flush()  # a write error of the output shows here, while it can still be told from a read's
    except _NO_ARGS as err:  # `advisor` alone: the help
        click.echo(err.format_message() if isinstance(err, click.ClickException) else str(err), err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except OutputFailed as failed:
        output_failed(failed.err)
    except click.UsageError as err:  # one line, as for bad input, instead of Click's usage block
        where = err.ctx.command_path if err.ctx else "advisor"
        click.echo(f"{where}: {err.format_message()} (see '{where} --help')", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except click.ClickException as err:
        click.echo(f"advisor: {err.format_message()}", err=True)
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("advisor: aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except AdvisorError as err:  # raised outside a command's own handler
        if State.debug:
            raise
        click.echo(f"advisor: {err}", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except OSError as err:  # a path the OS refuses (a name over 255 bytes, a permission) is the input's problem
        if is_output_error(err):  # ... but a broken pipe or a full disk is the output's
            output_failed(err)
        if State.debug:
            raise
        name = str(err.filename) if err.filename is not None else _inputs()
        name = name if len(name) <= 80 else f"{name[:60]}... ({len(name):,} characters)"
        click.echo(f"advisor: {name}: cannot read ({err.strerror or type(err).__name__})", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except (RecursionError, MemoryError) as err:  # input past a limit no reader caught: still the input's problem
        if State.debug:
            raise
        what = "nested too deeply" if isinstance(err, RecursionError) else "too large to hold in memory"
        click.echo(f"advisor: {_inputs()}: input {what} to read", err=True)
        sys.exit(ExitCode.BAD_INPUT)
    except Exception as err:  # a bug of the advisor, not of the input: its own exit code
        if State.debug:
            raise
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        click.echo(f"advisor: internal error ({detail}) while reading {_inputs()}; rerun with --debug for the "
                   "traceback and report it", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


EXIT_INTERNAL = ExitCode.INTERNAL  # documented in the module docstring and README.md


def run() -> NoReturn:
    """The program's entry point (the ``advisor`` script, ``python -m advisor``): :func:`main`, then exit without
    the interpreter's teardown when nothing is left to clean up.

    Freeing every object of the ~240 modules ``advisor check`` loads took ~25 ms on the 2-core development machine
    (2026-12-06: a process importing what check imports took 0.135 s ended by ``os._exit``, 0.162 s by a normal
    exit; medians of 15) and does nothing a finished command needs, so when no thread is still running and no exit
    handler is registered (no logging, Optuna, Ray or coverage in the process), the output is flushed and the
    process ends with ``os._exit``. Otherwise, and whenever flushing fails (a closed pipe), Python exits as usual.
    In-process callers (tests, the MCP server) call :func:`main`.

    The cyclic garbage collector is off from the start: the objects start-up makes live to the end, and walking
    them again and again cost ~7 ms of ``advisor check`` (paired median of 60 runs, 2026-12-06). It stays off only
    for the commands of ``SMALL_INPUT``; resolving any other command turns it back on.
    """
    import gc

    gc.disable()
    try:
        main()
    except SystemExit as done:
        _exit_now(done)
    raise AssertionError("main() always exits")  # pragma: no cover


def _exit_now(done: SystemExit) -> NoReturn:
    import atexit
    import os

    threads = sys.modules.get("threading")
    registered = getattr(atexit, "_ncallbacks", None)  # CPython's count of exit handlers
    if registered is None or registered() or (threads is not None and threads.active_count() > 1):
        raise done
    code = done.code
    if code is not None and not isinstance(code, int):  # sys.exit("message"): Python prints it, exit 1
        raise done
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the descriptor was closed before Python started
                stream.flush()
    except BrokenPipeError:
        from ._output import output_failed

        try:
            output_failed(None if sys.stdout is None else BrokenPipeError())
        except SystemExit as broken:
            raise broken from None
    except (OSError, ValueError):
        raise done from None
    os._exit(code or 0)


def _inputs() -> str:
    """The files the command was given (from argv), to name them in a last-resort message."""
    paths = [arg for arg in sys.argv[1:] if not arg.startswith("-") and "=" not in arg and _exists(arg)]
    return ", ".join(paths[:3]) or "the input"


def _exists(arg: str) -> bool:
    try:
        return len(arg) < 4096 and Path(arg).exists()
    except (OSError, ValueError):
        return False


