"""The options of ``advisor sweep`` and ``advisor verify``: where and how trials run, and a sweep's ``--param``
with the ``--values``/``--range`` after it; a Ctrl-C that stops a study's trials."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.errors import ExitCode

from ._jobs import LAUNCHERS
from ._options import F, FiniteFloat

if TYPE_CHECKING:
    from sweeps import Param


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


def paired_params(order: list[tuple[str, str]]) -> list[Param]:
    from advisor.errors import SweepError
    from sweeps import parse_param

    params: list[Param] = []
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


@contextmanager
def study_errors(what: str) -> Iterator[None]:
    """Ctrl-C during a sweep or verify stops its trials, re-queued for a rerun: one line, exit 130 (input errors
    are the group's: :meth:`._app.Commands.invoke`)."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"advisor: {what} interrupted; its running trials were stopped and re-queued; "
                   "rerun the same command to resume", err=True)
        sys.exit(ExitCode.INTERRUPTED)
