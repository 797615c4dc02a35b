"""Output without noise (issue #30): each note is shown once, and only where it can change what the user does."""

from __future__ import annotations

import re
from pathlib import Path

from advisor.checks import check
from advisor.load import load_config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
VERL_MAIN = ROOT / "tests" / "fixtures" / "verl_main" / "examples"


def _ids(findings: list) -> list[str]:
    return [f.id for f in findings]


# --- 1. an undefined shell variable is noted once, and only when a key the checks read depends on it ----------


def test_home_in_data_paths_only_is_not_noted() -> None:
    # the bundled example reads $HOME only in data.train_files / data.val_files, which no check reads
    cfg = load_config(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh")
    assert any(f.id == "L009" and f.details["variable"] == "HOME" for f in cfg.findings)  # the loader knows
    assert "L009" not in _ids(check(cfg).findings)


def test_home_in_the_model_path_is_noted() -> None:
    # verl's script builds actor_rollout_ref.model.path from $HOME: the model (heads, memory) cannot be known
    cfg = load_config(VERL_MAIN / "grpo_trainer" / "run_qwen3_5_27b_fsdp.sh")
    notes = [f for f in check(cfg).findings if f.id == "L009"]
    assert [f.details["variable"] for f in notes] == ["HOME"]
    # only the key a check reads is named (the data files built from $HOME matter to no check)
    assert notes[0].keys == ("actor_rollout_ref.model.path",)
    assert notes[0].message == ("variable 'HOME' is not defined in the script; actor_rollout_ref.model.path keeps "
                                "the literal text")


def test_variable_in_a_number_is_said_once(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.nnodes=$NNODES trainer.experiment_name=$NAME\n")
    found = check(load_config(script)).findings
    assert [(f.id, f.keys) for f in found if f.id in ("L008", "L009")] == [("L008", ("trainer.nnodes",))]


# --- 2. the loss-scale footer is printed only when it changes a verdict ----------------------------------------


def _suggest(example: str, *extra: str) -> str:
    from click.testing import CliRunner

    from advisor.cli import app

    run = EXAMPLES / example
    result = CliRunner().invoke(app, ["suggest", str(run / "run.sh"), str(run / "metrics.jsonl"), *extra])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def test_losses_left_as_logged_print_no_footer() -> None:
    # verl 0.9.1's engine workers log the mean mini-batch loss: nothing is rescaled, nothing to say
    assert "loss sums" not in _suggest("lr_too_high")
    import json

    notes = json.loads(_suggest("lr_too_high", "--format", "json"))["notes"]
    assert any(n.startswith("loss sums: ") and "left as logged" in n for n in notes)  # still in the JSON


def test_rescaled_losses_that_change_the_verdict_are_footed() -> None:
    # read as verl 0.7.0 wrote it, actor/kl_loss is a sum over K = train_batch_size / ppo_mini_batch_size
    # = 512 / 128 = 4 optimizer steps (run.sh); divided by 4 it no longer spikes, and the footer says why
    text = _suggest("kl_spike_loss", "--verl-version", "0.7.0")
    assert "KL001" not in text
    assert "note: loss sums: actor/pg_loss x 0.25; actor/kl_loss x 0.25" in text


def test_rescaled_losses_that_change_nothing_print_no_footer() -> None:
    # verl 0.6.1 divides the loss by the grad-accumulation count; lr_too_high's diagnoses read no loss, so the
    # rescale changes none of them
    text = _suggest("lr_too_high", "--verl-version", "0.6.1")
    assert "CF001" in text
    assert "loss sums" not in text


def test_a_rescale_that_changes_a_verdict_is_said() -> None:
    # kl_spike_loss's actor/kl_loss is 0.249 as logged; x5 (0.6.1's grad accumulation) it is 12x the 0.1 ceiling,
    # which makes KL001 an error instead of a warning: the footer says why
    assert "warning KL001" in _suggest("kl_spike_loss")
    text = _suggest("kl_spike_loss", "--verl-version", "0.6.1")
    assert "error   KL001" in text and "loss sums: actor/pg_loss x 5; actor/kl_loss x 5" in text


# --- 3. counts agree with their nouns: one rule (advisor.plural) for every message ------------------------------


def test_plural_rule() -> None:
    from advisor.plural import counted

    assert [counted(1, "GPU"), counted(8, "GPU"), counted(None, "GPU")] == ["1 GPU", "8 GPUs", "? GPUs"]
    assert [counted(1, "micro-batch"), counted(0, "micro-batch")] == ["1 micro-batch", "0 micro-batches"]
    assert [counted(1, "forward pass"), counted(1024, "prompt"), counted(2.5, "response")] == \
        ["1 forward pass", "1,024 prompts", "2.5 responses"]


def test_one_gpu_run_reads_in_the_singular() -> None:
    # the bundled GRPO script shrunk to 1 GPU, 1 prompt, n = 1, rollout TP 1: every layer holds one of each
    cfg = load_config(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh",
                      ["trainer.n_gpus_per_node=1", "data.train_batch_size=1", "actor_rollout_ref.rollout.n=1",
                       "actor_rollout_ref.actor.ppo_mini_batch_size=1",
                       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                       "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                       "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                       "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1"])
    words = " ".join(check(cfg).batch.words)
    assert "1 prompt × n=1 = 1 response " in words and "on 1 GPU." in words
    assert "Generation runs on 1 inference replica, about 1 response each." in words
    assert "The actor makes 1 optimizer step per training step, each on 1 response (1 prompt × n)" in words
    assert "the one data-parallel GPU accumulates 1 micro-batch of 1 response" in words
    assert "1 forward pass per GPU of 1 response." in words
    for wrong in ("1 GPUs", "1 prompts", "1 responses", "1 inference replicas", "1 forward passes",
                  "1 micro-batches", "each of the 1 "):
        assert wrong not in words


def test_check_summary_line_counts_in_words() -> None:
    from click.testing import CliRunner

    from advisor.cli import app

    out = CliRunner().invoke(app, ["check", str(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh")]).stdout
    # W004 (KL counted twice), W006 (no prompt filter) and R104 (verl 0.9's max_num_seqs default of 256 under 640
    # responses per inference replica, a default the script does not set)
    assert "\n0 errors, 3 warnings: no errors." in out
    assert "(s)" not in out


# --- 4. a micro batch larger than the mini-batch says so, and never "0 micro-batches" ---------------------------


def test_micro_batch_larger_than_mini_batch() -> None:
    # the bundled script: ppo_mini_batch_size 128 prompts × n 5 = 640 responses over 8 GPUs = 80 per GPU;
    # a per-GPU micro batch of 128 is larger. verl 0.7.1 asserts "normalized ppo_mini_batch_size ... should be
    # larger than ppo_micro_batch_size_per_gpu" (verl/workers/fsdp_workers.py:267-270); from 0.8 the engine
    # workers' "data size must be divisible by ... micro_batch_size_per_gpu" (verl/workers/engine/utils.py:125-127
    # at 0.9.0) fails on it, as 80 % 128 = 80.
    cfg = load_config(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh",
                      ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=128"])
    report = check(cfg)
    b006 = next(f for f in report.findings if f.id == "B006")
    assert "ppo_micro_batch_size_per_gpu (128) is larger than the per-GPU mini-batch (640 responses / 8 ranks = 80)" \
        in b006.message
    assert "does not divide" not in b006.message
    assert [(c.key, c.new) for c in b006.fix] == [("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 80)]
    assert report.batch.actor.grad_accum_steps is None  # not 80 // 128 = 0
    words = " ".join(report.batch.words)
    assert "gets 80 of them, fewer than its micro batch of 128 responses (a micro batch larger than the " \
           "mini-batch; verl refuses it)" in words
    assert "0 micro-batches" not in words


def test_micro_batch_larger_than_mini_batch_in_the_table() -> None:
    from click.testing import CliRunner

    from advisor.cli import app

    out = CliRunner().invoke(app, ["check", str(EXAMPLES / "check" / "grpo_qwen2.5-7b_gsm8k.sh"),
                                   "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=128"]).stdout
    actor_row = next(line for line in out.splitlines() if line.startswith("│ actor "))
    cells = [c.strip() for c in actor_row.strip("│").split("│")]
    assert cells[:6] == ["actor", "640", "80", "4", "128", "-"]  # grad acc: none, not 0


# --- 5. did-you-mean: ranked by edit distance, with CPython's cut-off ---------------------------------------------


def test_edit_distance_and_cut_off() -> None:
    from advisor.spelling import close_enough, closest, edit_distance

    assert edit_distance("temprature", "temperature") == 1  # one inserted 'e'
    assert edit_distance("kl_los_coef", "kl_loss_coef") == 1
    assert edit_distance("adv_estimater", "adv_estimator") == 1
    assert edit_distance("form", "from") == 1  # a swap of neighbours is one edit
    assert edit_distance("kitten", "sitting") == 3  # the textbook example
    # CPython's rule: at most (10 + 3 + 3) / 6 = 2.67 edits between 'temprature' and 'qat'; they are 8 apart
    assert not close_enough("temprature", "qat")
    assert closest("temprature", ["qat", "mtp", "temperature", "top_p"]) == ["temperature"]


def test_temprature_suggests_temperature_only(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.temprature=0.7\n")
    finding = next(f for f in load_config(script).findings if f.id == "L001")
    assert finding.details["did_you_mean"] == ["actor_rollout_ref.rollout.temperature"]
    assert finding.message.endswith("did you mean 'actor_rollout_ref.rollout.temperature'?")


def test_bundled_typo_suggests_the_key_only() -> None:
    # examples/check/ppo_broken.yaml misspells kl_loss_coef as kl_los_coef: one edit; kl_loss_type is 5 away
    cfg = load_config(EXAMPLES / "check" / "ppo_broken.yaml")
    finding = next(f for f in cfg.findings if f.id == "L001")
    assert finding.details["did_you_mean"] == ["actor_rollout_ref.actor.kl_loss_coef"]


def test_a_key_under_the_wrong_section_still_finds_its_home(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo trainer.ppo_epochs=2\n")  # no such trainer key
    finding = next(f for f in load_config(script).findings if f.id == "L001")
    assert set(finding.details["did_you_mean"]) == {"actor_rollout_ref.actor.ppo_epochs", "critic.ppo_epochs"}


# --- 6. YAML findings carry the line of the key, as script findings do ------------------------------------------


def _line_of(path: Path, key: str) -> int:
    """The line that sets a dotted key in a block-style YAML file, found by indentation (not by the loader)."""
    parts, depth = key.split("."), 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("#") or not line.strip():
            continue
        indent = (len(line) - len(line.lstrip())) // 2
        if indent == depth and line.strip().split(":", 1)[0] == parts[depth]:
            if depth == len(parts) - 1:
                return number
            depth += 1
    raise AssertionError(f"{key} not in {path}")


def test_yaml_findings_name_the_line() -> None:
    path = EXAMPLES / "check" / "ppo_broken.yaml"
    found = {f.id: f for f in check(load_config(path)).findings}
    assert found["L001"].where == f"{path}:{_line_of(path, 'actor_rollout_ref.actor.kl_los_coef')}"
    assert found["B006"].where == f"{path}:{_line_of(path, 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu')}"
    assert found["B001"].where == f"{path}:{_line_of(path, 'data.train_batch_size')}"


def test_a_launch_scripts_config_file_names_its_lines(tmp_path: Path) -> None:
    (tmp_path / "my.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  train_batch_size: 300\n")
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo --config-path=. --config-name=my trainer.n_gpus_per_node=8\n")
    cfg = load_config(script)
    assert cfg.where("data.train_batch_size") == f"{tmp_path / 'my.yaml'}:5"


# --- 7. every key a fix sets or adds has its reason line --------------------------------------------------------


def test_every_change_of_the_combined_fix_has_a_reason() -> None:
    path = EXAMPLES / "check" / "ppo_broken.yaml"
    report = check(load_config(path))
    reasons = {c.key: c.reason for c in report.changes}
    assert all(reasons.values()), reasons
    # the renamed kl_loss_coef needs use_kl_loss (W010), which needs a ref micro batch (B003): each names its cause
    assert reasons["actor_rollout_ref.actor.use_kl_loss"].startswith("actor_rollout_ref.actor.kl_loss_coef needs it "
                                                                     "(W010")
    assert reasons["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"].startswith(
        "actor_rollout_ref.actor.use_kl_loss needs it (B003")

    from click.testing import CliRunner

    from advisor.cli import app
    from advisor.verl import render_value

    out = CliRunner().invoke(app, ["check", str(path)]).stdout
    for change in report.changes:  # values as the YAML writes them (false, null), not Python's False, None
        assert f"# {change.key}: {render_value(change.old)} -> {render_value(change.new)}: {change.reason}" in out
    assert "None ->" not in out and "False ->" not in out


def test_verl_scripts_fixes_have_reasons() -> None:
    # verl's own scripts whose check proposes a change (W006 among them: a check without its own reason line
    # gives the rule it mirrors)
    from advisor.checks import CHECKS

    w006 = next(c for c in CHECKS if c.id == "W006")
    for name in ("run_deepseek_v4_veomni.sh", "run_qwen3_235b_a22b_megatron.sh"):
        report = check(load_config(VERL_MAIN / "grpo_trainer" / name))
        assert len(report.changes) >= 2, name
        assert all(c.reason for c in report.changes), [(c.key, c.reason) for c in report.changes]
        added = next(c for c in report.changes if c.key == "data.filter_overlong_prompts")
        assert added.reason == w006.summary


# --- 8. help texts list what the code reads (versions, GPUs); install hints that work from the checkout ----------


def _help(command: str) -> str:
    from click.testing import CliRunner

    from advisor.cli import app

    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # one line, whatever the wrapping


def test_verl_version_help_lists_every_supported_version() -> None:
    import yaml

    listed = yaml.safe_load((ROOT / "knowledge" / "verl_defaults" / "versions.yaml").read_text())["versions"]
    releases = [str(v["version"]) for v in listed if v["tag"] != "main"]
    main = next(str(v["version"]) for v in listed if v["tag"] == "main")
    assert {"0.2.0.post2", "0.3.0.post1", "0.7.1", "0.8.0", "0.9.0", "0.9.1"} <= set(releases)
    for command in ("check", "sweep", "suggest", "report", "verify", "watch"):
        text = _help(command)
        assert f"verl version: {', '.join(releases)}, main ({main});" in text, command


def test_gpu_help_lists_the_catalog() -> None:
    import yaml

    names = [g["name"] for g in yaml.safe_load((ROOT / "knowledge" / "gpus.yaml").read_text())["gpus"]]
    for command in ("check", "suggest", "report", "verify", "watch"):
        assert ", ".join(names) in _help(command), command


def test_install_hints_work_from_the_checkout() -> None:
    from advisor.errors import install_hint
    from advisor.report import INSTALL_HINT

    assert INSTALL_HINT == install_hint("report") == "pip install -e '.[report]' (from the verl-advisor checkout)"
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for path in (ROOT / "advisor").rglob("*.py"):  # every hint names an extra the checkout defines
        text = path.read_text()
        assert "verl-advisor[" not in text, path
        for extra in re.findall(r'install_hint\("(\w+)"\)', text):
            assert extra in extras, (path, extra)


def test_one_metric_log_is_singular(tmp_path: Path) -> None:
    from advisor.errors import MetricsError
    from advisor.playbook import suggest_run

    log = tmp_path / "m.jsonl"
    log.write_text('{"step": 1, "my/metric": 1.0}\n{"step": 2, "my/metric": 2.0}\n')
    cfg = load_config(EXAMPLES / "lr_too_high" / "run.sh")
    try:
        suggest_run(cfg, log)
    except MetricsError as err:
        assert "none of its 1 metric is one the playbook reads" in str(err)
    else:
        raise AssertionError("a log of no playbook metric was read")


def test_an_earlier_verbose_run_in_the_same_process_does_not_carry_over() -> None:
    # an in-process caller (a test, an agent) runs `-v` and then a plain run: the plain one keeps its quiet text
    quiet = _suggest("lr_too_high")
    assert "loss sums" in _suggest("lr_too_high", "-v")
    assert _suggest("lr_too_high") == quiet
