"""``advisor check``'s header: why a version was detected, and what the newest release would reject."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from advisor import load_config
from advisor.checks import check

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# verl's own January ppo_trainer/run_deepseek7b_llm.sh (tests/fixtures/verl_scripts, a 0.7-era script)
JANUARY = FIXTURES / "verl_scripts" / "examples" / "ppo_trainer" / "run_deepseek7b_llm.sh"
# the keys verl 0.8.0 moved or removed (knowledge/deprecated_keys.yaml; verl 0.8.0's ppo_trainer.yaml has
# critic.fsdp.* and no trainer.use_legacy_worker_impl)
MOVED = ("critic.model.fsdp_config.param_offload", "critic.model.fsdp_config.optimizer_offload",
         "trainer.use_legacy_worker_impl")


def test_a_0_7_era_script_says_which_keys_rule_out_newer_versions():
    report = check(load_config(JANUARY))
    note = report.version_note
    assert (report.config.version, note.newer_version) == ("0.7.1", "0.8.0")
    assert set(note.newer_rejects) == set(MOVED)
    assert note.newest == "0.9.1" and set(note.newest_rejects) == set(MOVED)


def test_the_newest_release_rejects_what_the_line_names():
    # read as the newest release, the script has an error on each key the line names, and on no other
    as_newest = check(load_config(JANUARY, verl_version="0.9.1"))
    errors = {f.keys[0] for f in as_newest.errors}
    assert errors == set(MOVED)


def test_the_header_prints_why_and_the_newest_release_line():
    run = subprocess.run([sys.executable, "-m", "advisor", "check", str(JANUARY), "--width", "250"],
                         capture_output=True, text=True)
    head = " ".join(run.stdout.split("\n\n")[0].split())  # the header paragraph, unwrapped
    assert "verl 0.7.1 (detected: verl 0.8.0 and later do not take" in head
    assert "read as script verl 0.9.1, the newest release, would reject 3 keys of this config:" in head
    assert "(--verl-version 0.9.1 checks it as that release)" in head


def test_a_given_version_has_no_detection_note():
    assert check(load_config(JANUARY, verl_version="0.7.1")).version_note is None


def test_a_script_every_version_takes_names_the_tie():
    report = check(load_config(FIXTURES / "verl_main" / "examples" / "ppo_trainer" / "run_qwen3_8b_fsdp.sh"))
    assert report.version_note.newest_line is None
    assert "a tie goes to the newest release" in report.version_note.why
