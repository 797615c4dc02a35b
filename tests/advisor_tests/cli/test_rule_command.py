"""`advisor rule ID` / `--list`: every finding id from its four homes, with the file:line that implements it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.checks import CHECKS
from advisor.cli import app
from advisor.codes import CODES
from advisor.playbook._rule_loader import load_playbook

REPO = Path(__file__).resolve().parents[3]


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _line(location: str) -> str:
    path, number = location.rsplit(":", 1)
    return (REPO / path).read_text(encoding="utf-8").splitlines()[int(number) - 1]


def test_list_covers_every_id_of_the_four_former_homes() -> None:
    result = run("rule", "--list", "--format", "json")
    assert result.exit_code == 0, result.output
    listed = {r["id"]: r for r in json.loads(result.stdout)["rules"]}
    checks, rules = {c.id for c in CHECKS}, {r.id for r in load_playbook()}
    # the L and M ids the code emits, read from its source (L001-L013, M001-M003), and the band net XB001
    emitted = {m for p in (REPO / "advisor").rglob("*.py") for m in re.findall(r'"([LM]0\d\d)"', p.read_text())}
    assert {f"L{i:03d}" for i in range(1, 14)} | {"M001", "M002", "M003"} <= set(CODES) | emitted
    assert checks | rules | set(CODES) == set(listed)
    assert {"L005", "M003", "XB001", "B001", "W013", "KL001", "TP001"} <= set(listed)
    for code in listed.values():
        assert code["severity"] in ("error", "warning", "info") and code["name"] and code["summary"], code
        assert code["sources"] and all(code["sources"]), code
        assert _line(code["location"]), code  # the file:line exists
    text = run("rule", "--list")
    assert text.exit_code == 0 and len(text.stdout.splitlines()) == len(listed)


def test_no_bare_id_strings_remain_in_the_code() -> None:
    """L and M findings are built from advisor.codes, and code compares with CODE.id, never a literal."""
    for path in [*(REPO / "advisor").rglob("*.py"), *(REPO / "sweeps").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r'Finding\(\s*"[A-Z]', text), path
        assert not re.search(r'\b(f|finding|d|diagnosis)\.(id|name) (==|in) \(?"', text), path


@pytest.mark.parametrize("code_id, name, where", [
    ("L005", "delete-missing-key", "DELETE_MISSING_KEY.finding("),
    ("l001", "unknown-key", "UNKNOWN_KEY.finding("),
    ("M001", "memory-oom", "MEMORY_OOM"),
    ("XB001", "far-out-of-band", "FAR_OUT_OF_BAND"),
    ("B001", "train-batch-not-divisible", '@check("B001"'),
    ("KL001", "kl-rising-loss-side", "id: KL001"),
])
def test_rule_prints_name_severity_source_and_the_implementing_line(code_id: str, name: str, where: str) -> None:
    result = run("rule", code_id, "--format", "json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)["rule"]
    assert info["id"] == code_id.upper() and info["name"] == name
    assert where in _line(info["location"])
    text = run("rule", code_id)
    assert text.exit_code == 0
    assert text.stdout.startswith(f"{code_id.upper()} {name} ({info['severity']}")
    assert info["location"] in text.stdout and info["sources"][0] in text.stdout


def test_a_rule_shows_its_tree_and_a_check_its_verl_sources_per_version() -> None:
    kl = json.loads(run("rule", "KL001", "-f", "json").stdout)["rule"]
    assert kl["kind"] == "rule" and kl["tree"] == "kl"
    b001 = next(c for c in CHECKS if c.id == "B001")
    listed = json.loads(run("rule", "B001", "-f", "json").stdout)["rule"]["sources"]
    assert listed[0] == b001.source and len(listed) == 1 + len(b001.sources)


@pytest.mark.parametrize("args, message", [
    (("KL01",), "advisor: no finding has the id 'KL01'; did you mean 'KL001'"),
    (("ZZ999",), "advisor: no finding has the id 'ZZ999'; 'advisor rule --list' lists them"),
    ((), "advisor: give one finding ID or --list"),
    (("L001", "--list"), "advisor: give one finding ID or --list"),
])
def test_an_unknown_id_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    result = run("rule", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
