"""load_metrics as a whole: errors, flags, metadata, laziness (advisor/metrics/_load.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl_logs import jsonl_line, write_lines

from advisor.errors import MetricsError
from advisor.metrics import load_metrics

REPO = Path(__file__).resolve().parents[3]


def test_verl_config_passed_as_metrics(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text((REPO / "knowledge" / "verl_defaults" / "0.7.0" / "ppo_trainer.yaml").read_text())

    with pytest.raises(MetricsError, match=r"run\.jsonl: looks like a verl config, not metrics; pass the run's"):
        load_metrics(path)


def test_partial_yaml_config_passed_as_metrics(tmp_path):
    path = tmp_path / "overrides.yaml"
    path.write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1.0e-06\n    kl_loss_coef: 0.001\n")

    with pytest.raises(MetricsError, match="looks like a verl config, not metrics"):
        load_metrics(path)


def test_launch_script_passed_as_metrics():
    script = REPO / "tests" / "fixtures" / "verl_scripts" / "examples" / "grpo_trainer" / "run_qwen2-7b.sh"

    with pytest.raises(MetricsError, match="looks like a verl launch script, not metrics"):
        load_metrics(script)


def test_text_without_step_lines(tmp_path):
    path = tmp_path / "stdout.log"
    path.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: CUDA out of memory\n")

    with pytest.raises(MetricsError, match=r"stdout\.log: no 'step:N - key:value' lines found; is this the stdout"):
        load_metrics(path)


def test_jsonl_whose_every_line_is_bad(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, ['{"step": 1, "data": 5}', '{"step": 2, "data": "x"}'])

    with pytest.raises(MetricsError, match=r"2 lines skipped \(first: line 1: no 'data' object\)"):
        load_metrics(path)


def test_records_without_any_number(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [json.dumps({"step": 1, "data": {"note": "x"}})])

    with pytest.raises(MetricsError, match="1 step record but no numeric metric in them"):
        load_metrics(path)


def test_all_nan_metrics_are_returned_but_flagged(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [jsonl_line(s, {"actor/pg_loss": math.nan, "actor/kl_loss": None}, writer="orjson")
                       for s in (1, 2, 3)])

    frame = load_metrics(path)

    assert frame.all_nan
    assert frame.all_nan_columns == ("actor/pg_loss", "actor/kl_loss")
    assert "no metric has a single finite value (all NaN, null or inf)" in frame.warnings


def test_one_all_nan_metric_is_listed_but_the_frame_is_not_all_nan(fixtures, tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [json.dumps({"step": s, "data": {"a": s, "b": None}}) for s in (1, 2)])

    frame = load_metrics(path)

    assert not frame.all_nan and frame.all_nan_columns == ("b",)


def test_metadata_is_plain_json(fixtures):
    frame = load_metrics(fixtures / "console_v01_main_task.log")

    meta = json.loads(json.dumps(frame.to_dict()))

    assert meta["format"] == "console"
    assert (meta["first_step"], meta["last_step"], meta["steps"]) == (0, 2, 3)
    assert meta["aliases"]["actor/entropy_loss"] == "actor/entropy"
    assert meta["version_hint"]["spec"] == "<0.2"


def test_old_and_current_spelling_of_one_metric_merge(tmp_path):
    path = tmp_path / "run.jsonl"
    write_lines(path, [
        json.dumps({"step": 1, "data": {"timing_s/gen": 5.0, "timing/gen": 9.0}}),
        json.dumps({"step": 2, "data": {"timing/gen": 4.0}}),
    ])

    frame = load_metrics(path)

    assert frame.metrics == ["timing_s/gen"]
    assert frame["timing_s/gen"].tolist() == [5.0, 4.0]  # the current name wins, the old one fills gaps


def test_entropy_loss_next_to_entropy_is_kept_as_its_own_metric(tmp_path):
    # verl >= 0.8.0 logs actor/entropy (old-log-prob pass) and actor/entropy_loss (update time) side by
    # side (0.9.1:verl/trainer/ppo/v1/trainer_base.py:1684, verl/workers/utils/losses.py:129); only a
    # log without actor/entropy is from verl <= 0.4.0, where actor/entropy_loss was the entropy
    path = tmp_path / "run.jsonl"
    write_lines(path, [json.dumps({"step": 1, "data": {"actor/entropy": 0.5, "actor/entropy_loss": 0.9}})])

    frame = load_metrics(path)

    assert sorted(frame.metrics) == ["actor/entropy", "actor/entropy_loss"]
    assert frame.aliases == {}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_raise_nothing_but_metrics_error(content):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "metrics"
        path.write_bytes(content)
        try:
            frame = load_metrics(path)
        except MetricsError as err:
            assert "\n" not in str(err)
        else:
            assert frame.data.index.is_unique and frame.data.index.is_monotonic_increasing


_LINE = st.one_of(
    st.text(max_size=80),
    st.builds(lambda s, k, v: f"step:{s} - {k}:{v}", st.integers(-5, 2**70), st.text(max_size=20),
              st.text(max_size=20)),
    st.builds(lambda s, d: json.dumps({"step": s, "data": d}),
              st.one_of(st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=5), st.none()),
              st.dictionaries(st.text(max_size=10), st.one_of(st.floats(), st.integers(), st.text(max_size=5),
                                                               st.none(), st.booleans()), max_size=5)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=30),
       st.sampled_from([None, "jsonl", "console", "wandb-csv", "wandb-jsonl", "flat-jsonl"]))
def test_near_miss_logs_raise_nothing_but_metrics_error(lines, fmt):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "metrics"
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
        try:
            frame = load_metrics(path, fmt=fmt)
        except MetricsError as err:
            assert "\n" not in str(err)
        else:
            assert frame.data.index.is_unique and frame.data.index.is_monotonic_increasing
            assert all(str(t) == "float64" for t in frame.data.dtypes)


def test_importing_advisor_and_the_metrics_package_loads_no_heavy_library():
    code = (
        "import sys, advisor, advisor.metrics, advisor.metrics._load;"
        "heavy = [m for m in ('pandas', 'pyarrow', 'tensorboard', 'numpy') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)

    assert result.stdout.strip() == ""


def test_tensorboard_files_without_tensorboard_installed(tmp_path, monkeypatch):
    # an event file's first record: length, CRC, then an Event with wall_time and file_version
    path = tmp_path / "events.out.tfevents.1736500000.node-1.2793.0"
    path.write_bytes(b"\x18" + bytes(11) + b"\t" + bytes(8) + b"\x1a\rbrain.Event:2" + bytes(4))
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto", None)

    with pytest.raises(MetricsError) as info:
        load_metrics(tmp_path)

    assert str(info.value) == (
        f"{tmp_path}: reading TensorBoard event files needs the tensorboard package; "
        "pip install -e '.[tensorboard]' (from the verl-advisor checkout)"
    )
