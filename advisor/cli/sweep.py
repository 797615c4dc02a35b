"""``advisor sweep``: run the training command on each value of a config key and decide whether a fix ..."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ._app import app
from ._options import config_args, format_option, width_option
from ._show import make_console
from ._sweep_options import SweepCommand, every_seed_option, paired_params, study_errors, trial_options


@app.command(cls=SweepCommand)
@width_option
@config_args
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
@trial_options
@every_seed_option()
@click.option("--warmup-steps", type=int, default=None,
              help="No pruning before this step (default: 10% of steps, at least 3).")
@format_option()
def sweep(config: Path, overrides: tuple[str, ...], verl_version: str | None, param_keys: tuple[str, ...],
          values_: tuple[str, ...], ranges: tuple[str, ...], steps: int, objective: str,
          constraints: tuple[str, ...], seeds: int, seed_keys: tuple[str, ...], trials: int | None,
          command: str | None, launcher: str, address: str | None, gpus_per_trial: float | None,
          storage: str | None, study_name: str | None, parallel: int, out: Path | None, prune: bool,
          race: bool, stall_timeout: int, every_seed: bool, warmup_steps: int | None, fmt: str) -> None:
    """Run the training command on each value of a config key and decide whether a fix helps.

    Each trial runs CONFIG's training command with the trial's value(s) and seed for --steps steps;
    trials that fall behind are stopped early. The verdict compares each value with the config's
    current one, paired by seed: 'fix confirmed', 'keep baseline' or 'insufficient evidence'.
    Rerunning the same command resumes the sweep. Its plan is printed before the first trial starts, and a line
    on stderr as each trial starts and ends. Exit 0: fix confirmed; 1: keep baseline or
    insufficient evidence; 2: the sweep could not run (every trial failed: the first one's error).
    """

    from advisor.load import load_config

    from ._jobs import launcher_for
    from ._render import print_json

    with study_errors("sweep"):
        from sweeps import (
            LineProgress,
            RichProgress,
            SweepSpec,
            parse_constraint,
            parse_objective,
            render_sweep,
            run_sweep,
        )

        params = paired_params(click.get_current_context().meta.get("sweep.param_order", []))
        spec = SweepSpec(params=params, objective=parse_objective(objective), steps=steps,
                         constraints=[parse_constraint(c) for c in constraints], seeds=seeds,
                         seed_keys=list(seed_keys) or None, trials=trials, prune=prune, race=race,
                         every_seed=every_seed, warmup_steps=warmup_steps)
        cfg = load_config(config, list(overrides), verl_version=verl_version)
        runner_launcher = launcher_for(cfg, launcher, address, gpus_per_trial)
        # the plan, then a flushed line as each trial starts and ends, also when piped (`2>&1 | cat` follows it);
        # the plan goes to stderr when stdout is one JSON document
        plan_stream = sys.stderr if fmt == "json" else sys.stdout
        progress = (RichProgress(plan_stream=plan_stream) if sys.stderr.isatty()
                    else LineProgress(plan_stream=plan_stream))
        result = run_sweep(cfg, spec, command=command, overrides=list(overrides), launcher=runner_launcher,
                           storage=storage, study_name=study_name, parallel=parallel, out=out, progress=progress,
                           stall_timeout_s=stall_timeout or None)
    failure = result.failure()
    if fmt == "json":
        print_json(result.to_dict())
    elif failure is None:
        render_sweep(result, make_console())
    if failure is not None:  # the sweep could not run: one line, not a verdict on no evidence
        click.echo(f"advisor: sweep: {failure}", err=True)
    sys.exit(result.exit_code)

