"""``advisor report``: one self-contained HTML page of a run: charts, diagnoses and the diff, from ..."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ._app import app
from ._options import (
    format_option,
    gpu_memory_option,
    gpu_option,
    model_config_option,
    run_args,
    run_inputs,
    verl_version_option,
    window_option,
)
from ._show import show


@app.command()
@run_args
@click.option("--out", "-o", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True,
              help="The HTML file to write.")
@click.option("--png", "png_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Also write each panel as DIR/<panel>.png.")
@verl_version_option
@window_option("Steps in the recent window (default: the larger of 20 and 25% of the run).")
@gpu_option("GPU type: the capacity line on peak memory and the memory table")
@gpu_memory_option
@model_config_option
@format_option(help="json: what was written (the page, its panels, the diagnoses shown) as one document.")
def report(config: Path, metrics: Path | None, overrides: tuple[str, ...], fmt: str, **options: Any) -> None:
    """One self-contained HTML page of a run: charts, diagnoses and the diff, from CONFIG and METRICS.

    Panels: training progress, policy update, critic quality (with a critic), performance, lengths;
    each chart shades its healthy band and the diagnosis window. Opens offline (plotly.js is inlined).
    Needs the 'report' extra (plotly; matplotlib for --png). Exit 0: written; 2: an input could not be
    read, the output would overwrite an input, or the extra is not installed.
    """
    from ._jobs import report_job

    config_path, log, overrides = run_inputs(config, metrics, overrides)
    result = report_job(config_path or log, log, overrides, **options)  # one file: its printed config
    show(result, fmt, lambda: click.echo("\n".join(result.lines())))
    sys.exit(result.exit_code)
