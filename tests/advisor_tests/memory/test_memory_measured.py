"""The committed harness measurements (knowledge/memory_measured.yaml) and the estimator's constants.

Runs without torch (CI): the file's entries must be self-consistent, each must name the command that
measures it again, and every harness-sourced constant of knowledge/memory.yaml must equal what the file
measured. test_calibrate_harness.py re-runs the harness on tiny shapes where torch is installed.
"""

from __future__ import annotations

import shlex

import pytest

from advisor.datafiles import knowledge_dir, load_knowledge
from advisor.memory import resolve_model
from advisor.memory._constants import constants

MEASURED = load_knowledge("memory_measured.yaml")
ENTRIES = {e["id"]: e for e in MEASURED["entries"]}


def value(ident: str) -> float:
    result = ENTRIES[ident]["result"]
    return next(result[k] for k in ("bytes_per_token_layer", "bytes_per_logit", "bytes_per_token") if k in result)


def test_header_names_versions_and_date():
    head = MEASURED["measured"]
    for key in ("date", "torch", "transformers", "peft", "how"):
        assert head.get(key), key
    assert len(ENTRIES) == len(MEASURED["entries"])  # ids are unique


@pytest.mark.parametrize("ident", sorted(ENTRIES))
def test_entry_names_a_command_that_matches_its_shape_and_switches(ident):
    entry = ENTRIES[ident]
    args = shlex.split(entry["command"])
    assert args[:2] == ["advisor", "calibrate"]
    flags = {a: args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
             for i, a in enumerate(args) if a.startswith("--")}
    sw, shape = entry["switches"], entry["shape"]
    assert int(flags["--tokens"]) == shape["tokens"]
    assert flags["--phase"] == entry["phase"] == entry["result"]["phase"]
    assert flags["--verl-version"] == sw["verl_version"] and flags["--entropy"] == sw["entropy"]
    assert int(flags.get("--lora-rank", 0)) == sw["lora_rank"]
    assert ("--gradient-checkpointing" in flags) == sw["gradient_checkpointing"]
    assert float(flags.get("--temperature", 1.0)) == sw["temperature"]
    assert int(flags.get("--ulysses-sp", 1)) == sw["ulysses_sp"]
    assert ("--no-remove-padding" in flags) == (not sw["remove_padding"])
    assert shape["tokens_per_rank"] == -(-shape["tokens"] // sw["ulysses_sp"])
    if "--layers" in flags:
        assert [int(v) for v in flags["--layers"].split(",")] == (shape["layers"] if isinstance(shape["layers"], list)
                                                                 else [shape["layers"]])


@pytest.mark.parametrize("ident", sorted(ENTRIES))
def test_slope_is_the_difference_of_its_recorded_peaks(ident):
    result = ENTRIES[ident]["result"]
    (a, pa), (b, pb) = ((p["at"], p["peak_bytes"]) for p in result["peaks"])
    if "bytes_per_token_layer" in result or "bytes_per_logit" in result:
        expected = (pb - pa) / ((b - a) * result["tokens_per_rank"])
    else:
        expected = (pb - pa) / (b - a)
    assert value(ident) == pytest.approx(expected, abs=1e-3)


def test_activation_constants_reproduce_every_measured_model():
    c = constants()
    for ident, entry in ENTRIES.items():
        if not ident.startswith("act.full"):
            continue
        spec = resolve_model(model=entry["shape"]["model"])
        formula = c.act_hidden_coeff * spec.hidden + c.act_kv_coeff * spec.kv_heads * spec.head_dim \
            + c.act_mlp_coeff * spec.intermediate
        # left out of the formula: fp32 softmax_lse (4 B per head) and two rsqrt values (8 B)
        assert value(ident) == formula + 4 * spec.heads + 8, ident
    assert value("act.critic") == value("act.full")


def test_lora_constants_reproduce_the_lora_measurements():
    c = constants()
    h = ENTRIES["act.full"]["shape"]["hidden"]
    for rank in (16, 32):
        extra = c.act_lora_hidden_coeff * h + c.act_lora_rank_coeff * rank
        assert value(f"act.lora{rank}") - value("act.full") == extra


def test_checkpoint_constant_is_the_measured_bytes_per_hidden():
    h = ENTRIES["act.gc"]["shape"]["hidden"]
    assert value("act.gc") == value("act.gc_lora32") == constants().checkpoint_bytes_per_hidden * h


def test_logit_constants_equal_the_measured_bytes_per_logit():
    c = constants()
    assert value("logits.update.0.9.1.off") == value("logits.log_prob.0.9.1") == c.logit_bytes
    for version in ("0.9.0", "0.9.1"):
        assert value(f"logits.update.{version}.on") == c.logit_bytes + 2 * c.logit_grad_bytes
        assert value(f"logits.update.{version}.eager") - value(f"logits.update.{version}.on") \
            == c.eager_entropy_extra_bytes
        assert value(f"logits.update.{version}.chunked") - value(f"logits.update.{version}.on") \
            == c.chunked_entropy_update_extra_bytes
    # the in-place temperature divide on a view: 8 B per logit below 0.9.0, entropy on or off
    for version in ("0.3.0", "0.7.1", "0.8.0"):
        for entropy in ("on", "off"):
            assert value(f"logits.update.{version}.{entropy}") == c.legacy_entropy_backward_bytes
    # the out-of-place divide's copy (0.9.0 at any temperature, 0.9.1 away from 1)
    for ident in ("logits.update.0.9.0.off", "logits.update.0.9.1.off.t07", "logits.log_prob.0.9.0",
                  "logits.log_prob.0.9.1.t07"):
        assert value(ident) == c.logit_bytes + c.temperature_copy_bytes, ident
    assert value("logits.update.0.9.1.on.t07") == value("logits.update.0.9.1.on")
    assert value("logits.log_prob.0.9.1.eager") == c.logit_bytes + c.eager_entropy_forward_extra_bytes
    # tokens (1024) fit in one 2048-row chunk: the chunk's extra covers every logit
    assert ENTRIES["logits.log_prob.0.9.1.chunked"]["shape"]["tokens"] <= c.entropy_chunk_rows
    assert value("logits.log_prob.0.9.1.chunked") == c.logit_bytes + c.chunked_entropy_forward_extra_bytes


def test_memory_yaml_cites_the_measurements():
    memory = load_knowledge("memory.yaml")
    for section in ("activations", "logits"):
        assert "knowledge/memory_measured.yaml" in memory[section]["source"]
    text = (knowledge_dir() / "memory.yaml").read_text(encoding="utf-8")  # the comments name the entry ids
    cited = {ident for ident in ENTRIES if ident in text}
    for ident in ("act.full", "act.lora16", "act.gc", "logits.update.0.7.1.on", "logits.update.0.9.1.eager",
                  "logits.update.0.9.0.off", "logits.log_prob.0.9.1.chunked"):
        assert ident in cited, ident


def test_calibrate_without_torch_says_what_to_install(monkeypatch):
    from click.testing import CliRunner

    import advisor.calibrate
    from advisor.cli import app

    monkeypatch.setattr(advisor.calibrate, "missing", lambda: ["torch", "peft"])
    result = CliRunner().invoke(app, ["calibrate", "Qwen2.5-0.5B"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "advisor: advisor calibrate needs torch, peft; pip install -e '.[calibrate]' (from the verl-advisor checkout)"]
