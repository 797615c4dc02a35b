"""``advisor report``: one self-contained HTML page of a run: charts, diagnoses and the diff, from ..."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from advisor.errors import AdvisorError

from ._app import (
    GIB,
    DataHelpOption,
    app,
    fail,
    gpus_help,
    print_job,
    run_inputs,
    verl_version_option,
)


@app.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path), required=False)
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--out", "-o", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True,
              help="The HTML file to write.")
@click.option("--png", "png_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Also write each panel as DIR/<panel>.png.")
@verl_version_option
@click.option("--window", type=click.IntRange(min=1), default=None,
              help="Steps in the recent window (default: the larger of 20 and 25% of the run).")
@click.option("--gpu", default=None, metavar="NAME",
              cls=DataHelpOption,
              help_from=gpus_help("GPU type: the capacity line on peak memory and the memory table"))
@click.option("--gpu-memory-gib", type=GIB, default=None, help="GPU memory, instead of --gpu.")
@click.option("--model-config", type=click.Path(path_type=Path), default=None,
              help="The model's HF config.json (when the model path does not name a known model).")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: what was written (the page, its panels, the diagnoses shown) as one document.")
def report(config: Path, metrics: Path | None, overrides: tuple[str, ...], out: Path, png_dir: Path | None,
           verl_version: str | None, window: int | None, gpu: str | None, gpu_memory_gib: float | None,
           model_config: Path | None, fmt: str) -> None:
    """One self-contained HTML page of a run: charts, diagnoses and the diff, from CONFIG and METRICS.

    Panels: training progress, policy update, critic quality (with a critic), performance, lengths;
    each chart shades its healthy band and the diagnosis window. Opens offline (plotly.js is inlined).
    Needs the 'report' extra (plotly; matplotlib for --png). Exit 0: written; 2: an input could not be
    read, the output would overwrite an input, or the extra is not installed.
    """
    from advisor.report import INSTALL_HINT, missing_plotting

    config_path, metrics, overrides = run_inputs(config, metrics, overrides)
    config = config_path or metrics  # one file: a console log, its printed config
    if fmt == "json":
        print_job("report", str(config), str(metrics), overrides, out=str(out),
                   png_dir=str(png_dir) if png_dir is not None else None, verl_version=verl_version, window=window,
                   gpu=gpu, gpu_memory_gib=gpu_memory_gib, model_config=str(model_config) if model_config else None)
    try:
        lacking = missing_plotting(png=png_dir is not None)
        if lacking:
            raise AdvisorError(f"advisor report needs {lacking}, which is not installed", suggestion=INSTALL_HINT)
        from ._jobs import report_targets

        report_targets(out, png_dir, [*dict.fromkeys([config, metrics]), *([model_config] if model_config else [])])
        from advisor.load import load_config
        from advisor.report import build_report, write_html, write_pngs

        cfg = load_config(config, list(overrides), verl_version=verl_version)
        if cfg.path:
            report_targets(out, png_dir, [Path(cfg.path)])
        built = build_report(cfg, metrics, window=window, gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                             model_config=str(model_config) if model_config else None)
        try:
            write_html(built, out)
            pngs = write_pngs(built, png_dir) if png_dir is not None else []
        except OSError as err:
            raise AdvisorError(f"cannot write ({err.strerror or err})", path=str(err.filename or out)) from err
    except AdvisorError as err:
        fail(err)
    ids = ", ".join(c.id for c in built.cards) or "none"
    click.echo(f"wrote {out} ({len(built.shown_panels)} panels, {len(built.charts)} charts; diagnoses: {ids})")
    for path in pngs:
        click.echo(f"wrote {path}")
    sys.exit(0)

