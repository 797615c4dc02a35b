"""``advisor check``: pre-launch sanity check of a verl CONFIG (YAML, Hydra run dir or launch .sh)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from advisor.errors import AdvisorError, ConfigError

from ._app import (
    CHANGE_FORMATS,
    GIB,
    DataHelpOption,
    app,
    config_args,
    edit_of,
    fail,
    gpus_help,
    make_console,
    print_changes,
    print_job,
    width_option,
    write_and_recheck,
)


def _gpu_or_list(ctx: click.Context, value: str | None) -> str | None:
    """``--gpu list``: print the hardware catalog and stop (before CONFIG is asked for)."""
    if value is None or value.strip().lower() != "list":
        return value
    from advisor.memory import gpu_catalog

    from ._render import render_gpus

    render_gpus(gpu_catalog(), make_console())
    ctx.exit(0)


@app.command()
@width_option
@config_args
@click.option("--gpu", default=None, metavar="NAME", is_eager=True, callback=lambda ctx, _p, v: _gpu_or_list(ctx, v),
              cls=DataHelpOption, help_from=gpus_help("GPU type for the memory check"))
@click.option("--gpu-memory-gib", type=GIB, default=None, help="GPU memory, instead of --gpu.")
@click.option("--host-memory-gib", type=click.FloatRange(min=1), default=None, help="Host RAM per node.")
@click.option("--model-config", type=click.Path(path_type=Path), default=None,
              help="The model's HF config.json (when the model path does not name a known model).")
@click.option("--format", "-f", "fmt", type=click.Choice(CHANGE_FORMATS), default="text", show_default=True,
              help="text; json; overrides (the Hydra override lines); yaml (the edited YAML config, or the whole "
                   "patched config); diff (the edit of CONFIG as a unified diff).")
@click.option("--write", is_flag=True, help="Apply the proposed changes to CONFIG (a YAML or launch script), keeping "
                                            "CONFIG.bak, and re-check it.")
@click.option("--max", "largest", is_flag=True,
              help="With --gpu: the largest micro batch / token budget / gpu_memory_utilization that fits, per phase.")
@click.option("--sequence-tokens", type=click.FloatRange(min=1), default=None,
              help="Real prompt + response tokens of a typical sequence of your data (memory; default: the "
                   "dataset table, else max lengths).")
@click.option("--image-tokens", type=click.IntRange(min=0), default=None,
              help="Image tokens per prompt of a vision-language model (added to the dataset's typical prompt).")
def check(config: Path, overrides: tuple[str, ...], verl_version: str | None, gpu: str | None,
          gpu_memory_gib: float | None, host_memory_gib: float | None, model_config: Path | None, fmt: str,
          write: bool, largest: bool, sequence_tokens: float | None, image_tokens: int | None) -> None:
    """Pre-launch sanity check of a verl CONFIG (YAML, Hydra run dir or launch .sh).

    Reports what verl would reject, what is legal but wrong, explains the four batch-size layers
    and, with --gpu, predicts memory per phase. Exit 0: no errors; 1: errors found (or an
    out-of-memory verdict); 2: the input could not be read.
    """
    from advisor.checks import check as run_check
    from advisor.load import load_config

    from ._render import print_json, render_check

    if largest and not (gpu or gpu_memory_gib):
        fail(ConfigError("--max needs --gpu NAME or --gpu-memory-gib"))
    if fmt == "json" and not write:
        print_job("check", str(config), overrides, verl_version=verl_version, gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                   host_memory_gib=host_memory_gib, model_config=str(model_config) if model_config else None,
                   largest=largest, sequence_tokens=sequence_tokens, image_tokens=image_tokens)
    try:
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        report = run_check(cfg, model_config=str(model_config) if model_config else None, gpu=gpu,
                           gpu_memory_gib=gpu_memory_gib, host_memory_gib=host_memory_gib, largest=largest,
                           sequence_tokens=sequence_tokens, image_tokens=image_tokens)
        edit = edit_of(cfg, report.changes)
    except AdvisorError as err:
        fail(err)
    if fmt == "json":
        from ._jobs import edit_document

        print_json({**report.to_dict(), **edit_document(edit)})
    elif fmt == "text":
        render_check(report, make_console(), edit)
    else:
        print_changes(fmt, cfg, report.changes, edit)
    if write:
        sys.exit(write_and_recheck(cfg, edit, report.changes, list(overrides), verl_version, fmt))
    sys.exit(report.exit_code)

