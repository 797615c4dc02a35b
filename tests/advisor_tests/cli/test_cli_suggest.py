"""`advisor suggest` on the command line: output formats, --samples, --gpu, and bad input.

Expected values come from the example's own files (its run.sh, metrics.jsonl and rollout dump), read
independently here, not from the advisor's output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
LR = EXAMPLES / "lr_too_high"
ZERO = EXAMPLES / "reward_all_zero"


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", *map(str, args)], capture_output=True, text=True)


def test_overrides_format_is_pasteable_into_a_launch_script() -> None:
    result = run("suggest", LR / "run.sh", LR / "metrics.jsonl", "-f", "overrides")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("    ") and line.endswith(" \\") for line in lines)
    overrides = [line.strip().removesuffix("\\").strip() for line in lines]
    # applied to the example, the overrides set the learning rate below the example's own
    before = load_config(LR / "run.sh").get("actor_rollout_ref.actor.optim.lr")
    after = load_config(LR / "run.sh", overrides).get("actor_rollout_ref.actor.optim.lr")
    assert float(after) < float(before)


def test_yaml_format_is_the_patched_config() -> None:
    data = json.loads(run("suggest", LR / "run.sh", LR / "metrics.jsonl", "-f", "json").stdout)
    patched = yaml.safe_load(run("suggest", LR / "run.sh", LR / "metrics.jsonl", "-f", "yaml").stdout)
    for change in data["changes"]:
        node = patched
        for part in change["key"].split("."):
            node = node[part]
        assert float(node) == float(change["to"])
    # everything else is the example's config
    assert patched["data"]["train_batch_size"] == load_config(LR / "run.sh").get("data.train_batch_size")


def test_samples_are_counted_for_the_reward_tree() -> None:
    dump = next((ZERO / "rollout").glob("*.jsonl"))
    records = [json.loads(line) for line in dump.read_text().splitlines()]
    lacking = sum("####" not in r["output"] for r in records)
    result = run("suggest", ZERO / "run.sh", ZERO / "metrics.jsonl", "--samples", ZERO / "rollout", "-f", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["diagnoses"][0]["id"] == "RW001"
    assert data["samples"]["samples"] == len(records)
    assert data["samples"]["missing_marker"] == lacking
    assert data["samples"]["scores"]["all_equal"] is True
    text = run("suggest", ZERO / "run.sh", ZERO / "metrics.jsonl", "--samples", ZERO / "rollout").stdout
    assert f"missing the final-answer marker: {lacking} of {len(records)}" in text


def test_missing_samples_dir_is_one_line(tmp_path: Path) -> None:
    proc = cli("suggest", ZERO / "run.sh", ZERO / "metrics.jsonl", "--samples", tmp_path / "nope")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_gpu_name_sets_the_memory_to_judge_against() -> None:
    # a GPU smaller than the example's peak memory makes the memory tree speak; a large one keeps it quiet
    metrics = [json.loads(line)["data"] for line in (LR / "metrics.jsonl").read_text().splitlines()]
    peak = max(m["perf/max_memory_allocated_gb"] for m in metrics if m.get("perf/max_memory_allocated_gb"))
    small = run("suggest", LR / "run.sh", LR / "metrics.jsonl", "--gpu-memory-gib", f"{peak * 1.01:.2f}", "-f", "json")
    named = run("suggest", LR / "run.sh", LR / "metrics.jsonl", "--gpu", "H200", "-f", "json")
    assert small.exit_code == 0 and named.exit_code == 0
    assert "ME001" in {d["id"] for d in json.loads(small.stdout)["performance"]}
    assert "ME001" not in {d["id"] for d in json.loads(named.stdout)["performance"]}
    assert cli("suggest", LR / "run.sh", LR / "metrics.jsonl", "--gpu", "NoSuchGPU").returncode == 2


@pytest.mark.parametrize("name, content, words", [
    ("garbage.jsonl", b"hello\nworld\n\x00\x01\n", "garbage.jsonl"),
    ("allnan.jsonl", b'{"step": 1, "data": {"critic/score/mean": null}}\n'
                     b'{"step": 2, "data": {"critic/score/mean": null}}\n', "allnan.jsonl"),
    ("empty.jsonl", b"", "empty.jsonl"),
])
def test_bad_metrics_exit_2_with_one_line(tmp_path: Path, name: str, content: bytes, words: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    before = path.read_bytes()
    proc = cli("suggest", LR / "run.sh", path)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr
    assert path.read_bytes() == before


def test_config_passed_as_metrics_is_named(tmp_path: Path) -> None:
    proc = cli("suggest", LR / "run.sh", LR / "run.sh")
    assert proc.returncode == 2
    assert "run.sh" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_metrics_passed_as_config_is_named() -> None:
    proc = cli("suggest", LR / "metrics.jsonl", LR / "metrics.jsonl")
    assert proc.returncode == 2
    assert "metrics.jsonl" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_suggest_imports_no_heavy_library() -> None:
    # optuna, ray and the plotting libraries are for sweep/verify/report; pandas is built only on demand
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "advisor", "suggest", LR / "run.sh",
                           LR / "metrics.jsonl", "-f", "json"], capture_output=True, text=True)
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "advisor" in imported  # the probe sees our own imports
    assert imported.isdisjoint({"optuna", "ray", "matplotlib", "plotly", "pandas", "torch"})
