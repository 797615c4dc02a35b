"""``advisor explain``: where METRIC comes from in verl, what it computes, its healthy range and the ..."""

from __future__ import annotations

import sys

import click

from ._app import app
from ._options import format_option, width_option
from ._show import make_console, show


@app.command()
@width_option
@click.argument("metric")
@format_option()
def explain(metric: str, fmt: str) -> None:
    """Where METRIC comes from in verl, what it computes, its healthy range and the rules that read it.

    Accepts current names (actor/ppo_kl), members of a family (val-core/openai/gsm8k/reward/mean@1)
    and, where the alias table is installed, older names (timing/gen). Exit 0: explained; 2: unknown
    metric (with the closest names) or an unreadable knowledge file.
    """
    from advisor.playbook import render_explanation

    from ._jobs import explain_job

    result = explain_job(metric)
    show(result, fmt, lambda: render_explanation(result.explanation, make_console()))
    sys.exit(result.exit_code)
