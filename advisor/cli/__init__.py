"""The ``advisor`` command line: parse arguments, call the API, render. No diagnosis logic here.

Exit codes (as ruff): 0 ran and found no error; 1 ran and found errors (or an out-of-memory
verdict); 2 could not run (unreadable input, bad arguments, input past a size or depth limit); 3 an
internal error of the advisor (a bug: one line naming it and the inputs, and a hint to rerun with
``--debug`` for the traceback); 4 ``advisor watch --exit-on``: an alert at that level. Errors are one line on
stderr; a traceback only with ``--debug``.

Built on Click rather than Typer: Typer 0.29 builds pydantic adapters for every parameter, which
alone costs ~0.1 s of the 0.4 s start-up budget of ``advisor check`` (bench/bench_check_startup.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from advisor.errors import AdvisorError, ConfigError

F = TypeVar("F", bound=Callable[..., Any])
_CHANGE_FORMATS = ["text", "json", "overrides", "yaml", "diff"]


class _State:
    debug = False
    width: int | None = None  # --width: wrap text output at this many columns


def _set_width(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None:
        _State.width = value
    return value


def _width_option(fn: F) -> F:
    return click.option("--width", type=click.IntRange(min=20), default=None, expose_value=False,
                        callback=_set_width, is_eager=True, metavar="N",
                        help="Wrap text output at N columns (default: the terminal's width; no wrapping when "
                             "piped).")(fn)


def _console() -> Any:
    from ._render import get_console

    return get_console(width=_State.width)


def _fail(err: BaseException) -> NoReturn:
    if _State.debug:
        raise err
    click.echo(f"advisor: {err}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for unreadable input.")
@click.version_option(package_name="verl-advisor", prog_name="advisor")
def app(debug: bool) -> None:
    """Config advisor and auto-tuner for verl RL post-training runs."""
    _State.debug = debug
    _State.width = None  # each command's --width sets it again


def _config_args(fn: F) -> F:
    fn = click.option("--verl-version", default=None, metavar="VERSION",
                      help="verl version (0.4.1, 0.5.0, 0.6.1, 0.7.0, main); detected when omitted.")(fn)
    fn = click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")(fn)
    fn = click.argument("config", type=click.Path(path_type=Path))(fn)
    return fn


@app.command()
@_width_option
@_config_args
@click.option("--gpu", default=None, metavar="NAME",
              help="GPU type for the memory check (H100-80GB, H20, A100-40GB, ...).")
@click.option("--gpu-memory-gib", type=click.FloatRange(min=1), default=None, help="GPU memory, instead of --gpu.")
@click.option("--host-memory-gib", type=click.FloatRange(min=1), default=None, help="Host RAM per node.")
@click.option("--model-config", type=click.Path(path_type=Path), default=None,
              help="The model's HF config.json (when the model path does not name a known model).")
@click.option("--format", "-f", "fmt", type=click.Choice(_CHANGE_FORMATS), default="text", show_default=True,
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
        _fail(ConfigError("--max needs --gpu NAME or --gpu-memory-gib"))
    if fmt == "json" and not write:
        _print_job("check", str(config), overrides, verl_version=verl_version, gpu=gpu, gpu_memory_gib=gpu_memory_gib,
                   host_memory_gib=host_memory_gib, model_config=str(model_config) if model_config else None,
                   largest=largest, sequence_tokens=sequence_tokens, image_tokens=image_tokens)
    try:
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        report = run_check(cfg, model_config=str(model_config) if model_config else None, gpu=gpu,
                           gpu_memory_gib=gpu_memory_gib, host_memory_gib=host_memory_gib, largest=largest,
                           sequence_tokens=sequence_tokens, image_tokens=image_tokens)
        edit = _edit(cfg, report.changes)
    except AdvisorError as err:
        _fail(err)
    if fmt == "json":
        from ._jobs import edit_document

        print_json({**report.to_dict(), **edit_document(edit)})
    elif fmt == "text":
        render_check(report, _console(), edit)
    else:
        _print_changes(fmt, cfg, report.changes, edit)
    if write:
        sys.exit(_write_and_recheck(cfg, edit, report.changes, list(overrides), verl_version, fmt))
    sys.exit(report.exit_code)


def _edit(cfg: Any, changes: list[Any]) -> Any:
    from advisor.diff import edit_for

    return edit_for(cfg, changes)


def _print_job(name: str, *args: Any, **kwargs: Any) -> NoReturn:
    """--format json: the command's document from advisor.cli._jobs (what the MCP tool of the same name returns)."""
    from . import _jobs
    from ._render import print_json

    try:
        document, code = getattr(_jobs, f"{name}_job")(*args, **kwargs)
    except AdvisorError as err:
        _fail(err)
    print_json(document)
    sys.exit(code)


def _print_changes(fmt: str, cfg: Any, changes: list[Any], edit: Any) -> None:
    """--format overrides / yaml / diff: the changes alone, ready for a script, a file or `patch`."""
    rest = changes if edit is None else edit.overrides
    if fmt == "overrides":
        click.echo("\n".join(f"    {c.override()} \\" for c in changes))
    elif fmt == "yaml":
        if edit is not None and cfg.kind == "yaml" and not edit.overrides:
            click.echo(edit.after, nl=False)
        else:
            click.echo(cfg.with_changes(changes).to_yaml(), nl=False)
    else:
        if edit is not None and edit.changed:
            click.echo(edit.diff(), nl=False)
        if rest:
            click.echo("advisor: not in the file; pass as overrides: " + " ".join(c.override() for c in rest),
                       err=True)


def _write_and_recheck(cfg: Any, edit: Any, changes: list[Any], overrides: list[str], verl_version: str | None,
                       fmt: str) -> int:
    """--write: edit CONFIG in place (CONFIG.bak keeps the original), then check the written file again."""
    from advisor.checks import check as run_check
    from advisor.load import load_config

    say = (lambda text: click.echo(text)) if fmt == "text" else (lambda text: click.echo(text, err=True))
    if not changes:
        say("nothing to write: no change proposed")
        return 0
    try:
        if edit is None:
            raise AdvisorError(f"--write edits a YAML config or a launch script, not a {cfg.kind} config",
                               path=cfg.path, suggestion="pass the proposed overrides instead")
        backup = edit.write()
        after = run_check(load_config(edit.path, overrides, verl_version=verl_version))
    except AdvisorError as err:
        _fail(err)
    say(f"wrote {edit.path} ({len(edit.in_file)} change(s); the original is {backup}); re-checked: "
        f"{len(after.errors)} error(s), {len(after.warnings)} warning(s)")
    if edit.overrides:
        say("not in the file; pass as overrides: " + " ".join(c.override() for c in edit.overrides))
    return after.exit_code


@app.command()
@_width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--verl-version", default=None, metavar="VERSION", help="verl version; detected when omitted.")
@click.option("--window", type=click.IntRange(min=1), default=None,
              help="Steps in the recent window (default: the larger of 20 and 25% of the run).")
@click.option("--gpu", default=None, metavar="NAME",
              help="GPU model (H100-80GB, A100-40GB, ...), to judge perf/max_memory_* against its memory.")
@click.option("--gpu-memory-gib", type=click.FloatRange(min=1), default=None, help="GPU memory, instead of --gpu.")
@click.option("--skip-tree", "skip_trees", multiple=True, metavar="TREE",
              help="Leave out one debug tree's rules (e.g. memory, throughput for a CPU sandbox's timings).")
@click.option("--samples", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="trainer.rollout_data_dir (or one <step>.jsonl): show samples and count answers that lack "
                   "their format's marker, were cut at the length limit or were scored against a bad ground truth.")
@click.option("--format", "-f", "fmt", type=click.Choice(_CHANGE_FORMATS), default="text", show_default=True,
              help="text; json; overrides (the Hydra override lines); yaml (the edited YAML config, or the whole "
                   "patched config); diff (the edit of CONFIG as a unified diff).")
@click.option("--write", is_flag=True, help="Apply the change to CONFIG (a YAML or launch script), keeping CONFIG.bak.")
def suggest(config: Path, metrics: Path, overrides: tuple[str, ...], verl_version: str | None,
            window: int | None, gpu: str | None, gpu_memory_gib: float | None, skip_trees: tuple[str, ...],
            samples: Path | None, fmt: str, write: bool) -> None:
    """Which one or two config keys to change, from a run's CONFIG and METRICS.

    METRICS: verl's file-logger JSONL, a console log, a TensorBoard run directory or a W&B export.
    Exit 0 with a diagnosis or "no change"; 2 when an input cannot be read.
    """
    from advisor.load import load_config
    from advisor.playbook import suggest_run

    from ._render import render_suggest

    if fmt == "json" and not write:
        _print_job("suggest", str(config), str(metrics), overrides, verl_version=verl_version, window=window, gpu=gpu,
                   gpu_memory_gib=gpu_memory_gib, skip_trees=skip_trees,
                   samples=str(samples) if samples is not None else None)
    try:
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        if gpu and gpu_memory_gib is None:
            from advisor.memory import resolve_gpu

            gpu_memory_gib = resolve_gpu(gpu).memory_gib
        result = suggest_run(cfg, metrics, window=window, gpu_memory_gib=gpu_memory_gib,
                             rules=_rules(skip_trees))
        sample_report = _read_samples(samples, cfg) if samples is not None else None
        edit = _edit(cfg, result.changes)
    except AdvisorError as err:
        _fail(err)
    if fmt == "json":
        from ._jobs import edit_document
        from ._render import print_json

        print_json({**result.to_dict(), **edit_document(edit),
                    **({"samples": sample_report.to_dict()} if sample_report else {})})
    elif fmt != "text":
        _print_changes(fmt, cfg, result.changes, edit)
    else:
        console = _console()
        render_suggest(result, console, metrics_path=str(metrics), edit=edit)
        if sample_report is not None:
            from advisor.metrics import render_samples

            console.print()
            render_samples(sample_report, console)
    if write:
        _write_and_recheck(cfg, edit, result.changes, list(overrides), verl_version, fmt)  # suggest exits 0
    sys.exit(0)


@app.command()
@_width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("source", metavar="SOURCE")
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--verl-version", default=None, metavar="VERSION", help="verl version; detected when omitted.")
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
@click.option("--window", type=click.IntRange(min=3), default=20, show_default=True,
              help="Steps in the recent window that suggest judges at each step.")
@click.option("--gpu", default=None, metavar="NAME", help="GPU model, to judge perf/max_memory_* against it.")
@click.option("--skip-tree", "skip_trees", multiple=True, metavar="TREE", help="Leave out one debug tree's rules.")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: one JSON object per alert, one a line.")
def watch(config: Path, source: str, overrides: tuple[str, ...], verl_version: str | None, address: str | None,
          alert_level: str, exit_on: str | None, on_alert: tuple[str, ...], idle_stop: float | None, confirm: int,
          window: int, gpu: str | None, skip_trees: tuple[str, ...], fmt: str) -> None:
    """Follow a running job's metrics and alert at the step a diagnosis fires.

    SOURCE: verl's file-logger JSONL or a console log being written (it may not exist yet), a TensorBoard
    run directory, or ray://JOB_ID. Exit 0 when the source ends or idles; 4 on an --exit-on alert; 2 when an
    input cannot be read.
    """
    import shlex

    from advisor.load import load_config
    from advisor.watch import WatchOptions
    from advisor.watch import watch as follow

    try:
        commands = [shlex.split(c) for c in on_alert]
    except ValueError as err:  # an unclosed quote
        _fail(ConfigError(f"--on-alert: {err}"))
    try:
        if any(not c for c in commands):
            raise ConfigError("--on-alert needs a command")
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        gpu_memory_gib = None
        if gpu:
            from advisor.memory import resolve_gpu

            gpu_memory_gib = resolve_gpu(gpu).memory_gib
        options = WatchOptions(alert=alert_level, exit_on=exit_on, on_alert=commands, idle_stop_minutes=idle_stop,
                               fmt=fmt, confirm=confirm, window=window, gpu_memory_gib=gpu_memory_gib,
                               rules=_rules(skip_trees), address=address)
        result = follow(cfg, source, options)
    except AdvisorError as err:
        _fail(err)
    click.echo(f"advisor watch: stopped after {result.steps} step(s): {result.reason}", err=True)
    sys.exit(result.exit_code)


def _rules(skip_trees: tuple[str, ...]) -> Any:
    from ._jobs import rules_without

    return rules_without(skip_trees)


def _read_samples(path: Path, cfg: Any) -> Any:
    from advisor.metrics import load_samples

    limit = cfg.get("data.max_response_length")
    return load_samples(path, max_response_length=limit if isinstance(limit, int) else None)


@app.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--out", "-o", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True,
              help="The HTML file to write.")
@click.option("--png", "png_dir", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Also write each panel as DIR/<panel>.png.")
@click.option("--verl-version", default=None, metavar="VERSION", help="verl version; detected when omitted.")
@click.option("--window", type=click.IntRange(min=1), default=None,
              help="Steps in the recent window (default: the larger of 20 and 25% of the run).")
@click.option("--gpu", default=None, metavar="NAME",
              help="GPU type: the capacity line on peak memory and the memory table (H100-80GB, H20, ...).")
@click.option("--gpu-memory-gib", type=click.FloatRange(min=1), default=None, help="GPU memory, instead of --gpu.")
@click.option("--model-config", type=click.Path(path_type=Path), default=None,
              help="The model's HF config.json (when the model path does not name a known model).")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: what was written (the page, its panels, the diagnoses shown) as one document.")
def report(config: Path, metrics: Path, overrides: tuple[str, ...], out: Path, png_dir: Path | None,
           verl_version: str | None, window: int | None, gpu: str | None, gpu_memory_gib: float | None,
           model_config: Path | None, fmt: str) -> None:
    """One self-contained HTML page of a run: charts, diagnoses and the diff, from CONFIG and METRICS.

    Panels: training progress, policy update, critic quality (with a critic), performance, lengths;
    each chart shades its healthy band and the diagnosis window. Opens offline (plotly.js is inlined).
    Needs the 'report' extra (plotly; matplotlib for --png). Exit 0: written; 2: an input could not be
    read, the output would overwrite an input, or the extra is not installed.
    """
    from advisor.report import INSTALL_HINT, missing_plotting

    if fmt == "json":
        _print_job("report", str(config), str(metrics), overrides, out=str(out),
                   png_dir=str(png_dir) if png_dir is not None else None, verl_version=verl_version, window=window,
                   gpu=gpu, gpu_memory_gib=gpu_memory_gib, model_config=str(model_config) if model_config else None)
    try:
        lacking = missing_plotting(png=png_dir is not None)
        if lacking:
            raise AdvisorError(f"advisor report needs {lacking}, which is not installed", suggestion=INSTALL_HINT)
        from ._jobs import report_targets

        report_targets(out, png_dir, [config, metrics, *([model_config] if model_config else [])])
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
        _fail(err)
    ids = ", ".join(c.id for c in built.cards) or "none"
    click.echo(f"wrote {out} ({len(built.shown_panels)} panels, {len(built.charts)} charts; diagnoses: {ids})")
    for path in pngs:
        click.echo(f"wrote {path}")
    sys.exit(0)


@app.command()
@_width_option
@click.argument("metric")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def explain(metric: str, fmt: str) -> None:
    """Where METRIC comes from in verl, what it computes, its healthy range and the rules that read it.

    Accepts current names (actor/ppo_kl), members of a family (val-core/openai/gsm8k/reward/mean@1)
    and, where the alias table is installed, older names (timing/gen). Exit 0: explained; 2: unknown
    metric (with the closest names) or an unreadable knowledge file.
    """
    from advisor.playbook import explain_metric, render_explanation

    if fmt == "json":
        _print_job("explain", metric)
    try:
        explanation = explain_metric(metric)
    except AdvisorError as err:
        _fail(err)
    render_explanation(explanation, _console())


@app.command()
@click.argument("model", required=False)
@click.option("--model-config", type=click.Path(exists=True, dir_okay=True), default=None,
              help="A Hugging Face config.json (or its folder) instead of a catalog MODEL.")
@click.option("--tokens", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Tokens of the micro batch (packed rows; all ranks of the Ulysses group together).")
@click.option("--phase", type=click.Choice(["update", "log_prob", "ref", "critic_update", "critic_values"]),
              default=None, help="One phase (default: every phase's peak; the update for --layers/--vocab slopes).")
@click.option("--layers", default=None, metavar="N[,M]", help="Decoder layers built; two: bytes per token per layer.")
@click.option("--vocab", default=None, metavar="V[,W]", help="Vocab built; two: bytes per logit.")
@click.option("--token-pair", default=None, metavar="T", help="A second token count: bytes per token.")
@click.option("--gradient-checkpointing", is_flag=True, help="HF gradient checkpointing (use_reentrant=False).")
@click.option("--lora-rank", type=click.IntRange(min=0), default=0, show_default=True, help="PEFT LoRA, all-linear.")
@click.option("--entropy", type=click.Choice(["on", "off", "eager", "chunked"]), default="on", show_default=True,
              help="Entropy in the update: on (torch.compile'd, verl's default), off, eager, chunked.")
@click.option("--temperature", type=click.FloatRange(min=1e-3), default=1.0, show_default=True)
@click.option("--ulysses-sp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Ulysses sequence parallel size: each rank holds tokens / SP.")
@click.option("--verl-version", default="0.9.1", show_default=True, help="verl release whose log-prob path is run.")
@click.option("--remove-padding/--no-remove-padding", default=True, show_default=True,
              help="Packed rows (use_remove_padding) or one padded row with a response slice.")
@click.option("--response-tokens", type=click.IntRange(min=1), default=None,
              help="Without remove padding: the response length (default: half the tokens).")
@click.option("--hidden", type=click.IntRange(min=1), default=None, help="Override the model's hidden size.")
@click.option("--intermediate", type=click.IntRange(min=1), default=None, help="Override the MLP width.")
@click.option("--heads", type=click.IntRange(min=1), default=None, help="Override the attention heads.")
@click.option("--kv-heads", type=click.IntRange(min=1), default=None, help="Override the KV heads.")
@click.option("--head-dim", type=click.IntRange(min=1), default=None, help="Override the head dimension.")
@click.option("--all", "measure_all", is_flag=True, help="Measure every coefficient of knowledge/memory_measured.yaml.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="With --all: the YAML file to write.")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def calibrate(model: str | None, model_config: str | None, tokens: int, phase: str | None, layers: str | None,
              vocab: str | None, token_pair: str | None, gradient_checkpointing: bool, lora_rank: int, entropy: str,
              temperature: float, ulysses_sp: int, verl_version: str, remove_padding: bool,
              response_tokens: int | None, hidden: int | None, intermediate: int | None,
              heads: int | None, kv_heads: int | None, head_dim: int | None, measure_all: bool, out: Path | None,
              fmt: str) -> None:
    """Measure activation and logit memory of verl's phases on a fake-tensor model (no GPU, no weights).

    Needs the [calibrate] extra (torch, transformers, peft). Exit 0: measured; 2: a missing package,
    an unknown model or bad options.
    """
    from advisor import calibrate as harness

    if harness.missing():
        _fail(ConfigError(f"advisor calibrate needs {', '.join(harness.missing())}",
                          suggestion="pip install 'verl-advisor[calibrate]'"))
    if measure_all:
        harness.write_all(out or Path("knowledge/memory_measured.yaml"))
        return
    try:
        request = harness.build_request(
            model, model_config, tokens=tokens, phase=phase, layers=layers, vocab=vocab, token_pair=token_pair,
            shape=dict(hidden=hidden, intermediate=intermediate, heads=heads, kv_heads=kv_heads, head_dim=head_dim),
            switches=dict(gradient_checkpointing=gradient_checkpointing, lora_rank=lora_rank, entropy=entropy,
                          temperature=temperature, ulysses_sp=ulysses_sp, verl_version=verl_version,
                          remove_padding=remove_padding, response_tokens=response_tokens))
    except AdvisorError as err:
        _fail(err)
    slope = bool(layers and "," in layers) or bool(vocab and "," in vocab) or bool(token_pair)
    try:
        harness.run_command(request, all_phases=phase is None and not slope, fmt=fmt)
    except AdvisorError as err:
        _fail(err)


@app.command()
@click.argument("rule_id", metavar="ID", required=False)
@click.option("--list", "list_all", is_flag=True, help="Every finding id, one line each.")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule(rule_id: str | None, list_all: bool, fmt: str) -> None:
    """What finding ID checks: name, severity, its verl source and the file:line that implements it.

    Any id the advisor reports: a config-reading finding (L001), a check (B003, W005), a memory verdict
    (M001) or a playbook rule (KL001), as ``ruff rule``. Exit 0: described; 2: unknown id (with the closest).
    """
    from ._render import print_json
    from ._rule import describe, listing, rule_document

    if list_all == (rule_id is not None):
        _fail(ConfigError("give one finding ID or --list"))
    try:
        if fmt == "json":
            print_json(rule_document(None if list_all else rule_id))
            return
        from ._code_table import lookup

        click.echo(listing() if list_all else describe(lookup(str(rule_id))))
    except AdvisorError as err:
        _fail(err)


def _trial_options(fn: F) -> F:
    """Where and how trials run: the options `sweep` and `verify` share."""
    options = [
        click.option("--launcher", type=click.Choice(["local", "ray"]), default="local", show_default=True),
        click.option("--address", default=None, metavar="ADDR", help="Ray job server (default $RAY_ADDRESS or :8265)."),
        click.option("--gpus-per-trial", type=float, default=None,
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
        click.option("--every-seed", is_flag=True,
                     help="Grid: run every value on every seed (default: every value on the first seed, then "
                          "its best values in turn on the others until one is confirmed)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


class _SweepCommand(click.Command):
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


def _paired_params(order: list[tuple[str, str]]) -> list[Any]:
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


@app.command(cls=_SweepCommand)
@_width_option
@_config_args
@click.option("--param", "param_keys", multiple=True, required=True, metavar="KEY",
              help="Config key to sweep; follow it with --values or --range. Repeatable.")
@click.option("--values", "values_", multiple=True, metavar="V1,V2,...", help="Listed values of the --param before.")
@click.option("--range", "ranges", multiple=True, metavar="LOW:HIGH[:log]", help="Range of the --param before.")
@click.option("--steps", type=int, required=True, help="trainer.total_training_steps of each trial.")
@click.option("--objective", required=True, metavar="METRIC[:max|min]", help="Metric to optimise (default max).")
@click.option("--constraint", "constraints", multiple=True, metavar="'METRIC<X'",
              help="Bound a trial must keep (<, <=, >, >=). Repeatable.")
@click.option("--seeds", type=int, default=3, show_default=True, help="Seeds per compared value.")
@click.option("--seed-key", "seed_keys", multiple=True, metavar="KEY",
              help="Key that receives a trial's seed (default: actor data_loader_seed and data.seed). Repeatable.")
@click.option("--trials", type=int, default=None, help="Ranges / several keys: values TPE explores (default 10).")
@click.option("--command", default=None, metavar="CMD",
              help="Training command (split like a shell would; default: the launch script's verl command).")
@_trial_options
@click.option("--warmup-steps", type=int, default=None,
              help="No pruning before this step (default: 10% of steps, at least 3).")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def sweep(config: Path, overrides: tuple[str, ...], verl_version: str | None, param_keys: tuple[str, ...],
          values_: tuple[str, ...], ranges: tuple[str, ...], steps: int, objective: str,
          constraints: tuple[str, ...], seeds: int, seed_keys: tuple[str, ...], trials: int | None,
          command: str | None, launcher: str, address: str | None, gpus_per_trial: float | None,
          storage: str | None, study_name: str | None, parallel: int, out: Path | None, prune: bool,
          race: bool, every_seed: bool, warmup_steps: int | None, fmt: str) -> None:
    """Run the training command on each value of a config key and decide whether a fix helps.

    Each trial runs CONFIG's training command with the trial's value(s) and seed for --steps steps;
    trials that fall behind are stopped early. The verdict compares each value with the config's
    current one, paired by seed: 'fix confirmed', 'keep baseline' or 'insufficient evidence'.
    Rerunning the same command resumes the sweep. Exit 0: fix confirmed; 1: keep baseline or
    insufficient evidence; 2: the sweep could not run.
    """

    from advisor.load import load_config

    from ._render import print_json

    try:
        from sweeps import (
            RichProgress,
            SweepSpec,
            parse_constraint,
            parse_objective,
            render_sweep,
            run_sweep,
        )

        params = _paired_params(click.get_current_context().meta.get("sweep.param_order", []))
        spec = SweepSpec(params=params, objective=parse_objective(objective), steps=steps,
                         constraints=[parse_constraint(c) for c in constraints], seeds=seeds,
                         seed_keys=list(seed_keys) or None, trials=trials, prune=prune, race=race,
                         every_seed=every_seed, warmup_steps=warmup_steps)
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        runner_launcher = _launcher(cfg, launcher, address, gpus_per_trial)
        progress = RichProgress() if sys.stderr.isatty() else None
        result = run_sweep(cfg, spec, command=command, overrides=list(overrides), launcher=runner_launcher,
                           storage=storage, study_name=study_name, parallel=parallel, out=out, progress=progress)
    except AdvisorError as err:
        _fail(err)
    except KeyboardInterrupt:
        click.echo("advisor: sweep interrupted; its running trials were stopped and re-queued; "
                   "rerun the same command to resume", err=True)
        sys.exit(130)
    if fmt == "json":
        print_json(result.to_dict())
    else:
        render_sweep(result, _console())
    sys.exit(result.exit_code)


@app.command()
@_width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="trainer.total_training_steps of each trial (default: the run's own last step, at least 10).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds per compared value.")
@click.option("--window", type=click.IntRange(min=1), default=None, help="suggest's recent window, in steps.")
@click.option("--skip-tree", "skip_trees", multiple=True, metavar="TREE",
              help="Leave out one debug tree's rules when suggesting (as for advisor suggest).")
@click.option("--command", default=None, metavar="CMD",
              help="Training command (default: the launch script's verl command); e.g. 'python -m sweeps.sandbox'.")
@click.option("--propose", multiple=True, metavar="KEY=VALUE",
              help="Verify this change instead of suggest's (e.g. to refute one). Repeatable.")
@click.option("--gpu", default=None, metavar="NAME",
              help="GPU model: every swept value must then fit by the memory model.")
@_trial_options
@click.option("--dry-run", is_flag=True, help="Print the diff and the sweep that would test it; run nothing.")
@click.option("--verl-version", default=None, metavar="VERSION", help="verl version; detected when omitted.")
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(config: Path, metrics: Path, overrides: tuple[str, ...], dry_run: bool, fmt: str,
           **options: Any) -> None:
    """Test suggest's diff (or the change --propose names) before a long run, on your own setup.

    Runs `advisor suggest` on CONFIG and METRICS, then sweeps the key it would change over the baseline, the
    proposed value and a third value inside the key's customary range, on --seeds seeds. Trials are judged on
    held-out validation (val-core/*) when the key changes how training samples are drawn or scored, or when
    the run logged validation; otherwise on the diagnosed tree's objective (knowledge/verify.yaml). Exit 0:
    fix confirmed or a different value is better; 1: keep baseline or insufficient evidence; 2: nothing to
    verify or the sweep could not run.
    """
    from advisor.load import load_config

    from ._render import print_json

    if fmt == "json" and dry_run:
        _print_job("verify", str(config), str(metrics), overrides, dry_run=True, **_verify_job_options(options))
    try:
        from sweeps.verify import plan_verify, render_plan, render_verdict
        from sweeps.verify import verify as run_verify

        cfg = load_config(config, list(overrides), verl_version=options["verl_version"])
        settings = _verify_settings(cfg, overrides, options)
        if dry_run:
            from advisor.playbook import suggest_run

            suggestion = suggest_run(cfg, metrics, window=settings.window, rules=settings.rules)
            render_plan(plan_verify(suggestion, settings), _console())
            sys.exit(0)
        from sweeps import RichProgress, render_sweep

        progress = RichProgress() if sys.stderr.isatty() else None
        result = run_verify(cfg, metrics, settings.with_run(progress=progress))
    except AdvisorError as err:
        _fail(err)
    except KeyboardInterrupt:
        click.echo("advisor: verify interrupted; its running trials were stopped and re-queued; "
                   "rerun the same command to resume", err=True)
        sys.exit(130)
    if fmt == "json":
        print_json(result.to_dict())
    else:
        console = _console()
        render_plan(result.plan, console)
        console.print()
        render_sweep(result.sweep, console, verdict=result.verdict is None)
        console.print()
        render_verdict(result, console)
    sys.exit(result.exit_code)


def _verify_settings(cfg: Any, overrides: tuple[str, ...], o: dict[str, Any]) -> Any:
    """The CLI's verify options as one :class:`sweeps.verify.VerifySettings`."""
    from sweeps import RunSettings
    from sweeps.verify import VerifySettings

    gpu_memory_gib = None
    if o["gpu"]:
        from advisor.memory import resolve_gpu

        gpu_memory_gib = resolve_gpu(o["gpu"]).memory_gib
    run = RunSettings(command=o["command"], overrides=overrides,
                      launcher=_launcher(cfg, o["launcher"], o["address"], o["gpus_per_trial"]),
                      storage=o["storage"], study_name=o["study_name"], parallel=o["parallel"], out=o["out"],
                      verl_version=o["verl_version"])
    return VerifySettings(steps=o["steps"], seeds=o["seeds"], window=o["window"], rules=_rules(o["skip_trees"]),
                          propose=o["propose"], prune=o["prune"], race=o["race"], gpu_memory_gib=gpu_memory_gib,
                          run=run)


def _verify_job_options(o: dict[str, Any]) -> dict[str, Any]:
    return {k: o[k] for k in ("steps", "window", "skip_trees", "propose", "verl_version")}


@app.command()
def mcp() -> None:
    """Serve check, suggest, explain, report and verify as Model Context Protocol tools over stdio.

    For coding agents: each tool takes the JSON inputs of advisor/schemas/<tool>.input.json and returns
    what `advisor <tool> --format json` prints (advisor/schemas/<tool>.output.json). Needs the 'mcp'
    extra: pip install 'verl-advisor[mcp]'. Exit 2 when it is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None or importlib.util.find_spec("jsonschema") is None:
        _fail(AdvisorError("advisor mcp needs the 'mcp' package, which is not installed",
                           suggestion="pip install 'verl-advisor[mcp]'"))
    from ._mcp import serve

    serve()


def _launcher(cfg: Any, launcher: str, address: str | None, gpus_per_trial: float | None) -> Any:
    import os

    from sweeps import LocalLauncher, RayJobLauncher

    if launcher != "ray":
        return LocalLauncher()
    if gpus_per_trial is None:
        gpus_per_trial = float((cfg.get("trainer.n_gpus_per_node") or 0) * (cfg.get("trainer.nnodes") or 1))
    return RayJobLauncher(address or os.environ.get("RAY_ADDRESS") or "http://127.0.0.1:8265",
                          gpus_per_trial=gpus_per_trial)


_NO_ARGS: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", type("_Never", (Exception,), {}))


def main() -> None:
    try:
        code = app.main(prog_name="advisor", standalone_mode=False)
    except _NO_ARGS as err:  # `advisor` alone: the help
        click.echo(err.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as err:  # one line, as for bad input, instead of Click's usage block
        where = err.ctx.command_path if err.ctx else "advisor"
        click.echo(f"{where}: {err.format_message()} (see '{where} --help')", err=True)
        sys.exit(2)
    except click.ClickException as err:
        click.echo(f"advisor: {err.format_message()}", err=True)
        sys.exit(err.exit_code)
    except click.Abort:
        click.echo("advisor: aborted", err=True)
        sys.exit(130)
    except AdvisorError as err:  # raised outside a command's own handler
        if _State.debug:
            raise
        click.echo(f"advisor: {err}", err=True)
        sys.exit(2)
    except OSError as err:  # a path the OS refuses (a name over 255 bytes, a permission) is the input's problem
        if _State.debug:
            raise
        name = str(err.filename) if err.filename is not None else _inputs()
        name = name if len(name) <= 80 else f"{name[:60]}... ({len(name):,} characters)"
        click.echo(f"advisor: {name}: cannot read ({err.strerror or type(err).__name__})", err=True)
        sys.exit(2)
    except (RecursionError, MemoryError) as err:  # input past a limit no reader caught: still the input's problem
        if _State.debug:
            raise
        what = "nested too deeply" if isinstance(err, RecursionError) else "too large to hold in memory"
        click.echo(f"advisor: {_inputs()}: input {what} to read", err=True)
        sys.exit(2)
    except Exception as err:  # a bug of the advisor, not of the input: its own exit code
        if _State.debug:
            raise
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        click.echo(f"advisor: internal error ({detail}) while reading {_inputs()}; rerun with --debug for the "
                   "traceback and report it", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else 0)


EXIT_INTERNAL = 3  # documented in the module docstring and README.md


def _inputs() -> str:
    """The files the command was given (from argv), to name them in a last-resort message."""
    paths = [arg for arg in sys.argv[1:] if not arg.startswith("-") and "=" not in arg and _exists(arg)]
    return ", ".join(paths[:3]) or "the input"


def _exists(arg: str) -> bool:
    try:
        return len(arg) < 4096 and Path(arg).exists()
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    main()
