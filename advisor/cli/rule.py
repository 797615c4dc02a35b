"""``advisor rule``: what finding ID checks: name, severity, its verl source and the file:line that ..."""

from __future__ import annotations

import click

from advisor.errors import ConfigError

from ._app import app


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
    from ._rule_text import describe, listing, rule_document

    if list_all == (rule_id is not None):
        raise ConfigError("give one finding ID or --list")
    if fmt == "json":
        print_json(rule_document(None if list_all else rule_id))
        return
    from ._code_table import lookup

    click.echo(listing() if list_all else describe(lookup(str(rule_id))))

