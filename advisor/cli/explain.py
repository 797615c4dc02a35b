"""``advisor explain``: where METRIC comes from in verl, what it computes, its healthy range and the ..."""

from __future__ import annotations

import click

from advisor.errors import AdvisorError

from ._app import app, fail, make_console, print_job, width_option


@app.command()
@width_option
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
        print_job("explain", metric)
    try:
        explanation = explain_metric(metric)
    except AdvisorError as err:
        fail(err)
    render_explanation(explanation, make_console())

