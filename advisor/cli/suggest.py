"""``advisor suggest``: which one or two config keys to change, from a run's CONFIG and METRICS."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from advisor.errors import AdvisorError

from ._app import (
    CHANGE_FORMATS,
    GIB,
    DataHelpOption,
    app,
    edit_of,
    fail,
    gpus_help,
    make_console,
    playbook_rules,
    print_changes,
    print_job,
    run_inputs,
    verl_version_option,
    width_option,
    write_and_recheck,
)


@app.command()
@width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path), required=False)
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@verl_version_option
@click.option("--window", type=click.IntRange(min=1), default=None,
              help="Steps in the recent window (default: the larger of 20 and 25% of the run).")
@click.option("--gpu", default=None, metavar="NAME",
              cls=DataHelpOption, help_from=gpus_help("GPU model, to judge perf/max_memory_* against its memory"))
@click.option("--gpu-memory-gib", type=GIB, default=None, help="GPU memory, instead of --gpu.")
@click.option("--skip-tree", "skip_trees", multiple=True, metavar="TREE",
              help="Leave out one debug tree's rules (e.g. memory, throughput for a CPU sandbox's timings).")
@click.option("--samples", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="trainer.rollout_data_dir (or one <step>.jsonl): show samples and count answers that lack "
                   "their format's marker, were cut at the length limit or were scored against a bad ground truth.")
@click.option("--format", "-f", "fmt", type=click.Choice(CHANGE_FORMATS), default="text", show_default=True,
              help="text; json; overrides (the Hydra override lines); yaml (the edited YAML config, or the whole "
                   "patched config); diff (the edit of CONFIG as a unified diff).")
@click.option("--write", is_flag=True, help="Apply the change to CONFIG (a YAML or launch script), keeping CONFIG.bak.")
def suggest(config: Path, metrics: Path | None, overrides: tuple[str, ...], verl_version: str | None,
            window: int | None, gpu: str | None, gpu_memory_gib: float | None, skip_trees: tuple[str, ...],
            samples: Path | None, fmt: str, write: bool) -> None:
    """Which one or two config keys to change, from a run's CONFIG and METRICS.

    METRICS: verl's file-logger JSONL, a console log, a TensorBoard run directory or a W&B export. With one file,
    a verl console log (`advisor suggest LOG`), the config is the one verl printed at start-up (or its launch command).
    Exit 0 with a diagnosis or "no change"; 2 when an input cannot be read.
    """
    from advisor.load import load_config
    from advisor.playbook import suggest_run

    from ._render import render_suggest

    config_path, metrics, overrides = run_inputs(config, metrics, overrides)
    config = config_path or metrics
    if fmt == "json" and not write:
        print_job("suggest", str(config), str(metrics), overrides, verl_version=verl_version, window=window, gpu=gpu,
                   gpu_memory_gib=gpu_memory_gib, skip_trees=skip_trees,
                   samples=str(samples) if samples is not None else None)
    try:
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        if gpu and gpu_memory_gib is None:
            from advisor.memory import resolve_gpu

            gpu_memory_gib = resolve_gpu(gpu).memory_gib
        result = suggest_run(cfg, metrics, window=window, gpu_memory_gib=gpu_memory_gib,
                             rules=playbook_rules(skip_trees))
        sample_report = _read_samples(samples, cfg) if samples is not None else None
        edit = edit_of(cfg, result.changes)
    except AdvisorError as err:
        fail(err)
    if fmt == "json":
        from ._jobs import edit_document
        from ._render import print_json

        print_json({**result.to_dict(), **edit_document(edit),
                    **({"samples": sample_report.to_dict()} if sample_report else {})})
    elif fmt != "text":
        print_changes(fmt, cfg, result.changes, edit)
    else:
        console = make_console()
        render_suggest(result, console, metrics_path=str(metrics), edit=edit)
        if sample_report is not None:
            from advisor.metrics import render_samples

            console.print()
            render_samples(sample_report, console)
    if write:
        write_and_recheck(cfg, edit, result.changes, list(overrides), verl_version, fmt)  # suggest exits 0
    sys.exit(0)


def _read_samples(path: Path, cfg: Any) -> Any:
    from advisor.metrics import load_samples

    limit = cfg.get("data.max_response_length")
    return load_samples(path, max_response_length=limit if isinstance(limit, int) else None)

