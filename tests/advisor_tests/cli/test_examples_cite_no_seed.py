"""No user-facing output cites the seeds: users have verl's code and docs, papers and published runs, not them.

Every bundled example is rendered as `advisor suggest` text and JSON and as `advisor report` HTML (and
`advisor explain` for every metric a rule reads); none may mention "seed" as a source.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app
from advisor.playbook._rule_loader import load_playbook
from advisor.report import build_report
from advisor.report.html import render_html

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUNS = sorted(p.parent.name for p in EXAMPLES.glob("*/metrics.jsonl"))
# "seed" as a citation: "seed 000", "seed 001 §1.2", "the seeds'" (not a random seed: "+sandbox.seed=3")
SEED_CITATION = re.compile(r"\bseeds?\b(?!\s*=)(?!_)", re.IGNORECASE)


def _cites_seed(text: str) -> list[str]:
    return [text[max(0, m.start() - 40): m.end() + 40] for m in SEED_CITATION.finditer(text)]


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_suggest_output_cites_no_seed(name: str, fmt: str) -> None:
    folder = EXAMPLES / name
    result = CliRunner().invoke(app, ["suggest", str(folder / "run.sh"), str(folder / "metrics.jsonl"), "--gpu", "H100",
                                      "-f", fmt])
    assert result.exit_code == 0, result.output
    assert not _cites_seed(result.output)


@pytest.mark.parametrize("name", RUNS)
def test_report_html_cites_no_seed(name: str) -> None:
    html = render_html(build_report(load_config(EXAMPLES / name / "run.sh"), EXAMPLES / name / "metrics.jsonl",
                                    gpu="H100"))
    assert not _cites_seed(html)


def test_every_rule_text_cites_no_seed() -> None:
    for rule in load_playbook():
        for text in (rule.summary, rule.message, rule.rationale, *rule.sources, *rule.checks,
                     *(b.get("source", "") for b in rule.healthy.values()), rule.harm.text if rule.harm else "",
                     rule.fix_order, *(f.reason for f in rule.fixes)):
            assert not _cites_seed(text), (rule.id, text)


def test_explain_cites_no_seed() -> None:
    metrics = sorted({m for r in load_playbook() for m in r.metrics if "*" not in m})
    for metric in metrics:
        result = CliRunner().invoke(app, ["explain", metric, "-f", "json"])
        assert not _cites_seed(result.output), (metric, _cites_seed(result.output))
