"""The options and arguments several commands take, each declared once (a command hands them to its job as they
are): the run's inputs, the verl version, the GPU, the window, the output format, --width and -v."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ._app import State

F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloat(click.FloatRange):
    """A float option that refuses ``inf`` and ``nan`` (Python's float() reads both; no GPU has either)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number: float = super().convert(value, param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


GIB = FiniteFloat(min=1)  # --gpu-memory-gib


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
