"""Rule files are validated at load: every field, every test argument, every closed set of values.

A misspelt argument, a missing one or a value outside its set is one line naming the file, the rule and
the field, with "did you mean" (difflib's closest spelling), never a silent default or a KeyError later.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from advisor.checks import CHECKS
from advisor.datafiles import knowledge_dir
from advisor.errors import AdvisorError, PlaybookError
from advisor.findings import Severity
from advisor.playbook._conditions import TESTS
from advisor.playbook._rule_loader import load_playbook, parse_rule
from advisor.playbook._rule_schema import Fact, Safety, Tree
from advisor.playbook._signals import RunFacts

CHECK_FILES = sorted((Path(__file__).resolve().parents[2] / "advisor" / "checks").glob("*.py"))
RULE_FILES = sorted((knowledge_dir() / "rules").glob("*/*.yaml"))
BASE_RULE = {"id": "XX001", "name": "test", "tree": "kl", "severity": "warning", "summary": "s",
             "conditions": [{"metric": "actor/ppo_kl", "test": "above", "value": 0.1}], "message": "m",
             "rationale": "r", "sources": ["s"]}


def test_every_rule_file_loads_and_every_check_is_registered() -> None:
    loaded = {r.id: r for r in load_playbook()}
    on_disk = {p.name.split("-", 1)[0] for p in RULE_FILES}
    removed = {p.name.split("-", 1)[0] for p in RULE_FILES if yaml.safe_load(p.read_text()).get("status") == "removed"}
    assert len(RULE_FILES) >= 40
    assert set(loaded) == on_disk - removed
    for rule in loaded.values():
        assert isinstance(rule.tree, Tree) and isinstance(rule.severity, Severity)
        assert all(isinstance(f.safety, Safety) for f in rule.fixes)
        for cond in rule.conditions:
            assert cond.test == "any" or isinstance(cond.params, TESTS[cond.test])
    ids = [c.id for c in CHECKS]
    declared = {m for f in CHECK_FILES for m in re.findall(r'^@check\("([A-Z]+\d+)"', f.read_text(), re.M)}
    assert len(ids) == len(set(ids)) and set(ids) == declared and len(declared) > 50
    assert all(c.summary and c.source and c.severity in ("error", "warning", "info") for c in CHECKS)


def test_every_fact_a_rule_may_name_is_a_field_of_the_run_facts() -> None:
    """applies_to.facts and a fix's when_facts are read off RunFacts by name (playbook._diagnose.facts_hold)."""
    assert {str(f) for f in Fact} <= {f.name for f in dataclasses.fields(RunFacts)}


def test_every_declared_test_is_one_record_with_its_arguments_and_its_test() -> None:
    """A test is declared once: its record states the arguments (fields) and what it tests (``holds``)."""
    assert len(set(TESTS.values())) == len(TESTS)
    for name, record in TESTS.items():
        assert "holds" in vars(record), f"{name}: {record.__name__} declares no holds()"
        assert issubclass(record, tuple) and hasattr(record, "_fields"), f"{name}: not a NamedTuple record"


def _error(tmp_path: Path, patch: dict) -> str:
    data = {**BASE_RULE, **patch}
    path = tmp_path / str(data["tree"]) / "XX001-test.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlaybookError) as info:
        parse_rule(yaml.safe_load(path.read_text()), path)
    text = str(info.value)
    assert isinstance(info.value, AdvisorError)  # the CLI's one line and exit 2
    assert "\n" not in text and text.startswith(f"{path}: rule XX001: "), text
    return text


@pytest.mark.parametrize("patch, field, hint", [
    # an unknown argument: the rule used to load and silently take the default factor
    ({"conditions": [{"metric": "actor/kl_loss", "test": "rises", "facter": 30}]},
     "conditions[0].facter", "did you mean 'factor'?"),
    ({"harm": {"text": "t", "any": [[{"metric": "actor/ppo_kl", "test": "above", "valeu": 1}]]},
      "conditions": [{"metric": "actor/ppo_kl", "test": "vs_metric", "other": "actor/kl_loss", "offest": 1}]},
     "conditions[0].offest", "did you mean 'offset'?"),
    ({"conditions": [{"metric": "actor/ppo_kl", "test": "flat"}],
      "harm": {"text": "t", "any": [[{"metric": "actor/ppo_kl", "test": "above", "valeu": 1}]]}},
     "harm.any[0].valeu", "did you mean 'value'?"),
    # an unknown value of a closed set
    ({"severity": "warnign"}, "severity", "did you mean 'warning'?"),
    ({"fixes": [{"set": {"actor_rollout_ref.actor.optim.lr": 1e-6}, "safety": "needs_sweep"}],
      "harm": {"text": "t"}}, "fixes[0].safety", "did you mean 'needs-sweep'?"),
    ({"applies_to": {"mode": ["grpoo"]}}, "applies_to.mode[0]", "did you mean 'grpo'?"),
    ({"applies_to": {"kl": ["los"]}}, "applies_to.kl[0]", "did you mean 'loss'?"),
    ({"status": "stabel"}, "status", "did you mean 'stable'?"),
    ({"applies_to": {"config": [{"key": "algorithm.adv_estimator", "op": "neq", "value": "gae"}]}},
     "applies_to.config[0].op", "did you mean 'ne'?"),
    ({"conditions": [{"metric": "actor/ppo_kl", "test": "vs_metric", "other": "actor/kl_loss", "op": "ltt"}]},
     "conditions[0].op", "did you mean 'lt'?"),
    # unknown fields of the file itself
    ({"fix_ordr": "docs"}, "fix_ordr", "did you mean 'fix_order'?"),
    ({"applies_to": {"facts": {"onpolicy": True}}}, "applies_to.facts", "did you mean 'on_policy'?"),
    ({"fixes": [{"set": {"actor_rollout_ref.actor.optim.lr": 1e-6}, "when_facts": {"cliphigher": False}}],
      "harm": {"text": "t"}}, "fixes[0].when_facts", "did you mean 'clip_higher'?"),
    ({"conditions": [{"metric": "actor/ppo_kl", "test": "abov", "value": 1}]}, "conditions[0].test",
     "did you mean 'above'?"),
])
def test_a_misspelt_field_fails_with_file_rule_field_and_did_you_mean(tmp_path: Path, patch: dict, field: str,
                                                                      hint: str) -> None:
    text = _error(tmp_path, patch)
    assert f"{field}: " in text and text.endswith(hint), text


def test_the_safety_typo_safety_maybe_is_rejected(tmp_path: Path) -> None:
    text = _error(tmp_path, {"fixes": [{"set": {"actor_rollout_ref.actor.optim.lr": 1e-6}, "safety": "maybe"}],
                             "harm": {"text": "t"}})
    assert "fixes[0].safety: 'maybe' is not one of safe, needs-sweep" in text


@pytest.mark.parametrize("condition, field, message", [
    # a missing argument: the rule used to load and raise a bare KeyError during a diagnosis
    ({"metric": "actor/ppo_kl", "test": "above"}, "conditions[0].value", "test 'above' needs 'value'"),
    ({"metric": "actor/ppo_kl", "test": "ratio_above", "value": 2}, "conditions[0].other",
     "test 'ratio_above' needs 'other'"),
    ({"test": "above", "value": 1}, "conditions[0].metric", "needs the name of the metric"),
    # a mistyped one
    ({"metric": "actor/ppo_kl", "test": "above", "value": "high"}, "conditions[0].value", "must be a number"),
    ({"metric": "actor/ppo_kl", "test": "spikes", "count": 1.5}, "conditions[0].count", "must be an integer"),
    ({"metric": "actor/ppo_kl", "test": "rises", "factor": True}, "conditions[0].factor", "must be a number"),
    ({"metric": "actor/ppo_kl", "test": "nonfinite", "value": 1}, "conditions[0].value",
     "unknown argument for test 'nonfinite' (its arguments: none)"),
])
def test_a_missing_or_mistyped_argument_fails_at_load(tmp_path: Path, condition: dict, field: str,
                                                      message: str) -> None:
    text = _error(tmp_path, {"conditions": [condition]})
    assert f"{field}: {message}" in text, text


def test_defaults_are_stated_once_in_the_declaration() -> None:
    """A test's optional argument takes the default of its dataclass field (rises: factor 2, per the README)."""
    rule = parse_rule({**BASE_RULE, "conditions": [{"metric": "actor/kl_loss", "test": "rises"}]},
                      Path("knowledge/rules/kl/XX001-test.yaml"))
    params = rule.conditions[0].params
    assert (params.factor, params.min_level) == (2.0, 0.0)
    assert TESTS["above"]._fields == ("value", "fraction")
    assert TESTS["above"]._field_defaults == {"fraction": None}  # value is required


def test_a_broken_rule_file_stops_suggest_with_one_line_and_exit_2(tmp_path: Path, monkeypatch) -> None:
    """PlaybookError goes through the CLI's boundary for unreadable input: one line on stderr, exit 2."""
    from click.testing import CliRunner

    from advisor.cli import app
    from advisor.playbook import _rule_loader as _playbook

    examples = Path(__file__).resolve().parents[2] / "examples" / "kl_spike_loss"
    broken = tmp_path / "rules" / "kl" / "XX001-test.yaml"
    broken.parent.mkdir(parents=True)
    broken.write_text(yaml.safe_dump({**BASE_RULE, "conditions": [{"metric": "actor/kl_loss", "test": "rises",
                                                                    "facter": 30}]}))
    monkeypatch.setattr(_playbook, "knowledge_dir", lambda: tmp_path)
    monkeypatch.setattr(_playbook, "load_knowledge", lambda relative: yaml.safe_load((tmp_path / relative).read_text()))
    load_playbook.cache_clear()
    try:
        result = CliRunner().invoke(app, ["suggest", str(examples / "run.sh"), str(examples / "metrics.jsonl")])
    finally:
        load_playbook.cache_clear()
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"advisor: {broken}: rule XX001: conditions[0].facter: unknown argument for test 'rises' "
                             "(its arguments: factor, min_level); did you mean 'factor'?\n")


# -- fix expressions and message placeholders are checked at load (issue 28): before, a bad one loaded and the
# -- message printed '?' (or the raw template) when the rule fired, and a bad fix factor raised during a diagnosis

_FIX_KEY = "actor_rollout_ref.actor.optim.lr"


@pytest.mark.parametrize("value, shown", [
    ("{current} * k", "'{current} * k'"),  # the README's placeholder k copied as is
    ("{current} / 0", "'{current} / 0'"),  # would divide by zero when the rule fires
    ("{current} * -2", "'{current} * -2'"),
    ("{current} * 1.2.3", "'{current} * 1.2.3'"),  # the old pattern [0-9.eE+-]+ took it, float() did not
    ("{curent} * 2", "'{curent} * 2'"),  # a typo used to be applied as the literal string '{curent} * 2'
    ("{current} + 1", "'{current} + 1'"),
])
def test_a_bad_fix_expression_fails_at_load_with_file_rule_and_field(tmp_path: Path, value: str, shown: str) -> None:
    text = _error(tmp_path, {"fixes": [{"set": {_FIX_KEY: value}}], "harm": {"text": "t"}})
    assert f"rule XX001: fixes[0].set.{_FIX_KEY}: {shown}: only a literal, '{{current}} * k' or '{{current}} / k'" \
        in text, text


@pytest.mark.parametrize("message, expected", [
    ("kl at {levl:.3g}", "message: unknown placeholder '{levl}' (the fields: metric, value, level, last, early, "
                         "max, min, change, first, last_step); did you mean 'level'?"),
    ("kl at {}", "message: a positional placeholder '{}'"),
    ("kl at {0}", "message: a positional placeholder '{0}'"),
    ("kl at {level:d}", "message: '{level:d}': Unknown format code 'd'"),
    ("kl on {metric:.2f}", "message: '{metric:.2f}': Unknown format code 'f'"),
    ("kl at {level.value}", "message: '{level.value}': level is a value, not a metric"),
    ("kl at {level", "message: expected '}' before end of string"),
    ("vf at {critic/vf_explained_var.level:.3g}",
     "message: '{critic/vf_explained_var.level}' names critic/vf_explained_var, which the rule does not read"),
    ("kl at {actor/ppo_kl:.3g}", "message: '{actor/ppo_kl}' needs one of actor/ppo_kl's numbers"),
    ("kl at {actor/ppo_kl.levl:.3g}", "did you mean 'level'?"),
])
def test_a_bad_message_placeholder_fails_at_load_with_file_rule_and_field(tmp_path: Path, message: str,
                                                                          expected: str) -> None:
    text = _error(tmp_path, {"message": message})
    assert expected in text, text


def test_every_field_and_metric_number_a_message_may_name_renders_on_a_run(tmp_path: Path) -> None:
    """What the loader accepts is what renders: every field, and a metric's numbers, on a run's signals."""
    import pandas as pd

    from advisor.playbook._message import FIELDS, SIGNAL_NUMBERS, render_message
    from advisor.playbook._signals import Signals

    fields = " ".join(f"{{{name}}}" for name in FIELDS)
    numbers = " ".join(f"{{actor/kl_loss.{n}}}" for n in SIGNAL_NUMBERS)
    rule = parse_rule({**BASE_RULE, "message": f"{fields} {numbers}", "evidence": ["actor/kl_loss"]},
                      Path("knowledge/rules/kl/XX001-test.yaml"))
    steps = range(1, 21)
    signals = Signals(pd.DataFrame({"actor/ppo_kl": [0.5] * 20, "actor/kl_loss": [0.25] * 20},
                                   index=pd.Index(steps, name="step")))
    text = render_message(rule.message, signals["actor/ppo_kl"], signals)
    assert text.startswith("actor/ppo_kl 0.5 0.5 0.5 0.5 0.5 0.5 0.0 ") and "?" not in text, text
    assert text.split()[len(FIELDS):len(FIELDS) + 5] == ["0.25"] * 5  # level, mean, last, max, min


def test_a_message_naming_a_metric_the_run_did_not_log_renders_nan(tmp_path: Path) -> None:
    """A metric the rule reads (its evidence) may be missing from a run: its number prints as nan, never '?'."""
    import pandas as pd

    from advisor.playbook._message import render_message
    from advisor.playbook._signals import Signals

    rule = parse_rule({**BASE_RULE, "message": "grad {actor/grad_norm.level:.3g}", "evidence": ["actor/grad_norm"]},
                      Path("knowledge/rules/kl/XX001-test.yaml"))
    signals = Signals(pd.DataFrame({"actor/ppo_kl": [0.5] * 5}, index=pd.Index(range(1, 6), name="step")))
    assert render_message(rule.message, signals["actor/ppo_kl"], signals) == "grad nan"


def test_every_shipped_rule_loads_with_its_fix_expressions_and_message() -> None:
    """Every rule file on disk passes the load-time checks, fixes and messages included (none is skipped)."""
    from advisor.playbook._rule_loader import fix_expression

    rules = load_playbook()
    assert len(rules) >= 40
    for rule in rules:
        for fix in rule.fixes:
            for value in fix.set.values():
                if isinstance(value, str) and "{" in value:
                    assert fix_expression(value) is not None, (rule.id, value)


def test_a_bad_message_stops_suggest_with_one_line_and_exit_2(tmp_path: Path, monkeypatch) -> None:
    """A placeholder that names no field is the install's problem, found at load: one line, exit 2 (it used to
    print '?' in the diagnosis)."""
    from click.testing import CliRunner

    from advisor.cli import app
    from advisor.playbook import _rule_loader

    examples = Path(__file__).resolve().parents[2] / "examples" / "kl_spike_loss"
    broken = tmp_path / "rules" / "kl" / "XX001-test.yaml"
    broken.parent.mkdir(parents=True)
    broken.write_text(yaml.safe_dump({**BASE_RULE, "message": "ppo_kl at {levl:.3g}"}))
    monkeypatch.setattr(_rule_loader, "knowledge_dir", lambda: tmp_path)
    monkeypatch.setattr(_rule_loader, "load_knowledge",
                        lambda relative: yaml.safe_load((tmp_path / relative).read_text()))
    load_playbook.cache_clear()
    try:
        result = CliRunner().invoke(app, ["suggest", str(examples / "run.sh"), str(examples / "metrics.jsonl")])
    finally:
        load_playbook.cache_clear()
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"advisor: {broken}: rule XX001: message: unknown placeholder '{{levl}}' (the fields: "
                             "metric, value, level, last, early, max, min, change, first, last_step); "
                             "did you mean 'level'?\n")
