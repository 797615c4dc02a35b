"""``advisor verify``: test suggest's diff (or the change --propose names) before a long run, on your ..."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._app import State, app
from ._options import format_option, gpu_option, skip_tree_option, verl_version_option, width_option, window_option
from ._show import make_console
from ._sweep_options import every_seed_option, study_errors, trial_options

if TYPE_CHECKING:
    from sweeps import Progress
    from sweeps.verify import VerifyPlan


@app.command()
@width_option
@click.argument("config", type=click.Path(path_type=Path))
@click.argument("metrics", type=click.Path(path_type=Path))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="trainer.total_training_steps of each trial (default: the run's own last step, at least 10).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds per compared value.")
@window_option("suggest's recent window, in steps.")
@skip_tree_option("Leave out one debug tree's rules when suggesting (as for advisor suggest).")
@click.option("--command", default=None, metavar="CMD",
              help="Training command (default: the launch script's verl command); e.g. 'python -m sweeps.sandbox'.")
@click.option("--propose", multiple=True, metavar="KEY=VALUE",
              help="Verify this change instead of suggest's (e.g. to refute one). Repeatable.")
@gpu_option("GPU model: every swept value must then fit by the memory model")
@trial_options
@every_seed_option(hidden=True)
@click.option("--own-scale", is_flag=True,
              help="With the CPU sandbox as --command: run it at the config's own batch sizes, response length and "
                   "steps, not the sandbox's scale (knowledge/verify.yaml sandbox_scale).")
@click.option("--dry-run", is_flag=True, help="Print the diff and the sweep that would test it; run nothing.")
@verl_version_option
@format_option()
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
    from sweeps.verify import render_plan

    from ._jobs import verify_job
    from ._render import get_console, print_json

    if dry_run:
        outcome = verify_job(config, metrics, overrides, dry_run=True, **options)
        if fmt == "json":
            print_json(outcome.document())
        else:
            render_plan(outcome.plan, make_console())
        sys.exit(outcome.exit_code)

    def show_plan(plan: VerifyPlan) -> None:
        """The plan before any trial starts: on stdout, or as text on stderr when stdout is one JSON document."""
        render_plan(plan, get_console(stderr=True, width=State.width) if fmt == "json" else make_console())
        sys.stdout.flush()

    def progress_for(plan: VerifyPlan) -> Progress:
        """A line as each trial starts and ends (above a bar on a terminal), flushed: `2>&1 | cat` follows it."""
        from sweeps import LineProgress, RichProgress

        roles = {role: point for role in plan.roles if (point := plan.point(role)) is not None}
        return RichProgress(roles) if sys.stderr.isatty() else LineProgress(roles=roles)

    with study_errors("verify"):
        outcome = verify_job(config, metrics, overrides, show_plan=show_plan, progress_for=progress_for, **options)
    result = outcome.result
    assert result is not None  # not a dry run: the sweep ran (or failed, result.failure)
    if fmt == "json":
        print_json(outcome.document())
    elif result.failure is None:
        from sweeps import render_sweep
        from sweeps.verify import render_verdict

        console = make_console()
        console.print()
        render_sweep(result.sweep, console, verdict=result.verdict is None)
        console.print()
        render_verdict(result, console)
    if result.failure is not None:
        click.echo(f"advisor: verify: {result.failure}", err=True)
    sys.exit(outcome.exit_code)
