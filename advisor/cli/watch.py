"""``advisor watch``: follow a running job's metrics and alert at the step a diagnosis fires."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from advisor.errors import ConfigError
from advisor.plural import counted

from ._app import app
from ._options import format_option, gpu_option, skip_tree_option, verl_version_option, width_option, window_option


@app.command()
@width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("source", metavar="[SOURCE]", required=False)
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@verl_version_option
@click.option("--address", default=None, metavar="ADDR",
              help="Ray job server for ray://JOB_ID (default $RAY_ADDRESS or http://127.0.0.1:8265).")
@click.option("--alert", "alert_level", type=click.Choice(["info", "warning", "error"]), default="warning",
              show_default=True, help="The lowest severity that alerts.")
@click.option("--exit-on", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Exit with code 4 after the first alert at this severity or above (a wrapper stops the job).")
@click.option("--on-alert", "on_alert", multiple=True, metavar="CMD",
              help="Run CMD on each alert (split like a shell would, run without one), the alert as JSON on "
                   "stdin. Repeatable.")
@click.option("--idle-stop", type=click.FloatRange(min=0), default=None, metavar="MINUTES",
              help="Stop (exit 0) when nothing new was written for MINUTES.")
@click.option("--confirm", type=click.IntRange(min=1), default=3, show_default=True, metavar="STEPS",
              help="Steps a diagnosis must hold before it alerts (and be gone before it clears); NaN/inf: at once.")
@window_option("Steps in the recent window (default: suggest's, the larger of 20 and 25% of the run so far).",
               least=3)
@gpu_option("GPU model, to judge perf/max_memory_* against it")
@skip_tree_option("Leave out one debug tree's rules.")
@format_option(help="json: one JSON object per alert, one a line.")
def watch(config: Path, source: str | None, overrides: tuple[str, ...], verl_version: str | None, address: str | None,
          alert_level: str, exit_on: str | None, on_alert: tuple[str, ...], idle_stop: float | None, confirm: int,
          window: int | None, gpu: str | None, skip_trees: tuple[str, ...], fmt: str) -> None:
    """Follow a running job's metrics and alert at the step a diagnosis fires.

    SOURCE: verl's file-logger JSONL or a console log being written (it may not exist yet), a TensorBoard
    run directory, or ray://JOB_ID. With one file, a verl console log (`advisor watch LOG`), the config is the one
    verl printed at start-up (or its launch command), as for `advisor suggest LOG`, waited for while the log grows.
    Exit 0 when the source ends or idles; 4 on an --exit-on alert; 2 when an input cannot be read; 3 on an
    internal error (also an `error` event on stdout and to each --on-alert command).
    """
    import shlex

    from advisor.load import load_config
    from advisor.watch import WatchOptions, config_of_log
    from advisor.watch import watch as follow

    from ._jobs import rules_without

    try:
        commands = [shlex.split(c) for c in on_alert]
    except ValueError as err:  # an unclosed quote
        raise ConfigError(f"--on-alert: {err}") from err
    if any(not c for c in commands):
        raise ConfigError("--on-alert needs a command")
    if source is not None and "=" in source and not Path(source).exists():  # `watch LOG key=value`
        overrides, source = (source, *overrides), None
    if source is None:  # `watch LOG`: the config the log printed at start-up, as `suggest LOG` reads it
        source = str(config)
        cfg = config_of_log(config, overrides, verl_version=verl_version, idle_stop_minutes=idle_stop)
    else:
        cfg = load_config(config, list(overrides), verl_version=verl_version)
    gpu_memory_gib = None
    if gpu:
        from advisor.memory import resolve_gpu

        gpu_memory_gib = resolve_gpu(gpu).memory_gib
    options = WatchOptions(alert=alert_level, exit_on=exit_on, on_alert=commands, idle_stop_minutes=idle_stop,
                           fmt=fmt, confirm=confirm, window=window, gpu_memory_gib=gpu_memory_gib,
                           rules=rules_without(skip_trees), address=address)
    result = follow(cfg, source, options)
    click.echo(f"advisor watch: stopped after {counted(result.steps, 'step')}: {result.reason}", err=True)
    sys.exit(result.exit_code)

