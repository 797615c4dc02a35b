"""``advisor verify``: test suggest's diff (or the change --propose names) before a long run, on your ..."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ._app import (
    DataHelpOption,
    State,
    app,
    every_seed_option,
    gpus_help,
    launcher_for,
    make_console,
    playbook_rules,
    print_job,
    study_errors,
    trial_options,
    verl_version_option,
    width_option,
)


@app.command()
@width_option
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
              cls=DataHelpOption, help_from=gpus_help("GPU model: every swept value must then fit by the memory model"))
@trial_options
@every_seed_option(hidden=True)
@click.option("--dry-run", is_flag=True, help="Print the diff and the sweep that would test it; run nothing.")
@verl_version_option
@click.option("--format", "-f", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(config: Path, metrics: Path, overrides: tuple[str, ...], dry_run: bool, fmt: str,
           **options: Any) -> None:
    """Test suggest's diff (or the change --propose names) before a long run, on your own setup.

    Runs `advisor suggest` on CONFIG and METRICS, then sweeps the key it would change over the baseline, the
    proposed value and a third value inside the key's customary range, on --seeds seeds. Trials are judged on
    held-out validation (val-core/*) when the key changes how training samples are drawn or scored, or when
    the run logged validation; otherwise on the diagnosed tree's objective (knowledge/verify.yaml). Exit 0:
    fix confirmed or a different value is better; 1: keep baseline or insufficient evidence; 2: nothing to
    verify or the sweep could not run (every trial failed: the first one's error). The plan is printed before
    any trial starts, and a line on stderr as each trial starts and ends.
    """
    from advisor.load import load_config

    from ._render import get_console, print_json

    if fmt == "json" and dry_run:
        print_job("verify", str(config), str(metrics), overrides, dry_run=True, **_verify_job_options(options))
    with study_errors("verify"):
        from advisor.playbook import suggest_run
        from sweeps.verify import plan_verify, render_plan, render_verdict, run_plan

        cfg = load_config(config, list(overrides), verl_version=options["verl_version"])
        settings = _verify_settings(cfg, overrides, options)
        suggestion = suggest_run(cfg, metrics, window=settings.window, rules=settings.rules)
        plan = plan_verify(suggestion, settings)
        if dry_run:
            render_plan(plan, make_console())
            sys.exit(0)
        from sweeps import LineProgress, RichProgress, render_sweep

        # the plan before any trial starts: on stdout, or as text on stderr when stdout is one JSON document
        render_plan(plan, get_console(stderr=True, width=State.width) if fmt == "json" else make_console())
        sys.stdout.flush()
        # a line as each trial starts and ends (above a bar on a terminal), flushed: `2>&1 | cat` follows it
        roles = {role: point for role in plan.roles if (point := plan.point(role)) is not None}
        progress = RichProgress(roles) if sys.stderr.isatty() else LineProgress(roles=roles)
        result = run_plan(cfg, plan, settings.with_run(progress=progress))
    if fmt == "json":
        print_json(result.to_dict())
    elif result.failure is None:
        console = make_console()
        console.print()
        render_sweep(result.sweep, console, verdict=result.verdict is None)
        console.print()
        render_verdict(result, console)
    if result.failure is not None:
        click.echo(f"advisor: verify: {result.failure}", err=True)
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
                      launcher=launcher_for(cfg, o["launcher"], o["address"], o["gpus_per_trial"]),
                      storage=o["storage"], study_name=o["study_name"], parallel=o["parallel"], out=o["out"],
                      verl_version=o["verl_version"], stall_timeout_s=o["stall_timeout"] or None)
    return VerifySettings(steps=o["steps"], seeds=o["seeds"], window=o["window"], rules=playbook_rules(o["skip_trees"]),
                          propose=o["propose"], prune=o["prune"], race=o["race"], gpu_memory_gib=gpu_memory_gib,
                          run=run)


def _verify_job_options(o: dict[str, Any]) -> dict[str, Any]:
    return {k: o[k] for k in ("steps", "window", "skip_trees", "propose", "verl_version")}

