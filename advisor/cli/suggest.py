"""``advisor suggest``: which one or two config keys to change, from a run's CONFIG and METRICS."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor.errors import ExitCode

from ._app import State, app
from ._options import (
    CHANGE_FORMAT_HELP,
    format_option,
    gpu_memory_option,
    gpu_option,
    run_args,
    run_inputs,
    skip_tree_option,
    verbose_option,
    verl_version_option,
    width_option,
    window_option,
)
from ._show import CHANGE_FORMATS, make_console, show, write_and_recheck


@app.command()
@width_option
@verbose_option
@run_args
@verl_version_option
@window_option("Steps in the recent window (default: the larger of 20 and 25% of the run).")
@gpu_option("GPU model, to judge perf/max_memory_* against its memory")
@gpu_memory_option
@skip_tree_option("Leave out one debug tree's rules (e.g. memory, throughput for a CPU sandbox's timings).")
@click.option("--samples", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="trainer.rollout_data_dir (or one <step>.jsonl): show samples and count answers that lack "
                   "their format's marker, were cut at the length limit or were scored against a bad ground truth.")
@format_option(CHANGE_FORMATS, CHANGE_FORMAT_HELP)
@click.option("--write", is_flag=True, help="Apply the change to CONFIG (a YAML or launch script), keeping CONFIG.bak.")
def suggest(config: Path, metrics: Path | None, overrides: tuple[str, ...], fmt: str, write: bool,
            **options: Any) -> None:
    """Which one or two config keys to change, from a run's CONFIG and METRICS.

    METRICS: verl's file-logger JSONL, a console log, a TensorBoard run directory or a W&B export. With one file,
    a verl console log (`advisor suggest LOG`), the config is the one verl printed at start-up (or its launch command).
    Exit 0 with a diagnosis or "no change"; 2 when an input cannot be read.
    """
    from ._jobs import suggest_job
    from ._render import render_suggest

    config_path, log, overrides = run_inputs(config, metrics, overrides)
    result = suggest_job(config_path or log, log, overrides, **options)

    def text() -> None:
        console = make_console()
        render_suggest(result.suggestion, console, metrics_path=result.metrics, edit=result.edit,
                       verbose=State.verbose)
        if result.samples is not None:
            from advisor.metrics import render_samples

            console.print()
            render_samples(result.samples, console)

    show(result, fmt, text)
    if write:
        write_and_recheck(result, list(overrides), options["verl_version"], fmt)  # suggest exits 0
    sys.exit(ExitCode.OK)
