"""``advisor check``: pre-launch sanity check of a verl CONFIG (YAML, Hydra run dir or launch .sh)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor.errors import ConfigError, ExitCode

from ._app import State, app
from ._options import (
    CHANGE_FORMAT_HELP,
    config_args,
    format_option,
    gpu_memory_option,
    gpu_option,
    model_config_option,
    verbose_option,
    width_option,
)
from ._show import CHANGE_FORMATS, make_console, show, write_and_recheck


def _gpu_or_list(ctx: click.Context, value: str | None) -> str | None:
    """``--gpu list``: print the hardware catalog and stop (before CONFIG is asked for)."""
    if value is None or value.strip().lower() != "list":
        return value
    from advisor.memory import gpu_catalog

    from ._render import render_gpus

    render_gpus(gpu_catalog(), make_console())
    ctx.exit(ExitCode.OK)


@app.command()
@width_option
@verbose_option
@config_args
@gpu_option("GPU type for the memory check", is_eager=True, callback=lambda ctx, _p, v: _gpu_or_list(ctx, v))
@gpu_memory_option
@click.option("--host-memory-gib", type=click.FloatRange(min=1), default=None, help="Host RAM per node.")
@model_config_option
@format_option(CHANGE_FORMATS, CHANGE_FORMAT_HELP)
@click.option("--set-var", "set_vars", multiple=True, metavar="NAME=VALUE",
              help="A variable of the launch script's environment (as in `NAME=VALUE bash run.sh`): the script's "
                   "`${NAME:-default}` and its `case`/`if` on NAME follow it. Repeatable. The advisor never reads "
                   "its own environment into a script.")
@click.option("--write", is_flag=True, help="Apply the proposed changes to CONFIG (a YAML or launch script), keeping "
                                            "CONFIG.bak, and re-check it.")
@click.option("--max", "largest", is_flag=True,
              help="With --gpu: the largest micro batch / token budget / gpu_memory_utilization that fits, per phase.")
@click.option("--sequence-tokens", type=click.FloatRange(min=1), default=None,
              help="Real prompt + response tokens of a typical sequence of your data (memory; default: the "
                   "dataset table, else max lengths).")
@click.option("--image-tokens", type=click.IntRange(min=0), default=None,
              help="Image tokens per prompt of a vision-language model (added to the dataset's typical prompt).")
def check(config: Path, overrides: tuple[str, ...], fmt: str, write: bool, **options: Any) -> None:
    """Pre-launch sanity check of a verl CONFIG (YAML, Hydra run dir or launch .sh).

    Reports what verl would reject, what is legal but wrong, explains the four batch-size layers
    and, with --gpu, predicts memory per phase. Exit 0: no errors; 1: errors found (or an
    out-of-memory verdict); 2: the input could not be read.
    """
    from ._jobs import check_job
    from ._render import render_check

    if options["largest"] and not (options["gpu"] or options["gpu_memory_gib"]):
        raise ConfigError("--max needs --gpu NAME or --gpu-memory-gib")
    result = check_job(config, overrides, **options)
    show(result, fmt, lambda: render_check(result.report, make_console(), result.edit, verbose=State.verbose))
    if write:
        sys.exit(write_and_recheck(result, list(overrides), options["verl_version"], fmt))
    sys.exit(result.exit_code)
