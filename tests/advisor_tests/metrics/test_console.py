"""verl's console logger lines in a driver's stdout (advisor/metrics/_console.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from verl_logs import assert_frame_matches, console_line, expected_value, expected_values, run_records, write_lines

from advisor.metrics import load_metrics

RAY = "\x1b[36m(TaskRunner pid=2793)\x1b[0m "


def test_ray_driver_log_with_ansi_numpy_reprs_and_interleaved_output(fixtures):
    frame = load_metrics(fixtures / "console_v070_ray.log")

    assert frame.format == "console"
    assert_frame_matches(frame.data, expected_values("console_v070_ray.log"))
    assert frame.records == 7 and frame.lines_skipped == 0
    assert frame.other_lines == 30  # Ray banner, config dump, vLLM, tqdm, the worker's `global_step:2`
    assert "console_full_repr: >=0.5.0" in frame.version_hint.evidence


def test_output_glued_onto_a_step_line_is_ignored_and_reported(fixtures):
    frame = load_metrics(fixtures / "console_v070_ray.log")

    # step 3 has tqdm glued in front and a worker's line glued after its last value
    assert frame["perf/throughput"][3] == expected_values("console_v070_ray.log")[3]["perf/throughput"]
    assert frame.warnings == (
        "1 line with other output glued onto a step line (the rest of that line was ignored); first at line 25",
    )


def test_v0_1_log_three_decimals_old_names_and_scaled_lr(fixtures):
    """Seed 001 §11.4 example 1, as verl 0.1 prints it: `.3f`, timing/, entropy_loss, critic/kl, lr(1e-4)."""
    frame = load_metrics(fixtures / "console_v01_main_task.log")

    step0 = frame.data.loc[0]
    assert step0["timing_s/gen"] == 21.47
    assert step0["timing_s/update_actor"] == 20.314
    assert step0["actor/entropy"] == 0.433
    assert step0["actor/reward_kl_penalty"] == 0.0
    assert step0["actor/reward_kl_penalty_coeff"] == 0.001
    assert step0["critic/lr"] == pytest.approx(1e-5)  # logged as critic/lr(1e-4):0.100
    assert step0["actor/lr"] == pytest.approx(1e-6)  # logged as actor/lr(1e-4):0.010
    assert step0["critic/grad_norm"] == 1023.278
    assert frame["val-core/openai/gsm8k/reward/mean@1"][2] == 0.023
    assert frame.data.index.tolist() == [0, 1, 2]  # verl 0.1 counted training steps from 0
    assert frame.aliases["timing/gen"] == "timing_s/gen"
    assert frame.aliases["critic/lr(1e-4)"] == "critic/lr"
    assert frame.scaled == {"critic/lr": 1e-4, "actor/lr": 1e-4}
    assert frame.version_hint.spec == "<0.2"
    assert "console_three_decimals: <0.5.0" in frame.version_hint.evidence


def test_v0_3_log_is_dated_by_its_names(fixtures):
    frame = load_metrics(fixtures / "console_v03.log")

    assert frame["actor/entropy"].tolist() == [0.612, 0.598]
    assert frame["perf/throughput"].tolist() == [840.104, 846.642]
    assert frame["val-core/openai/gsm8k/reward/mean@1"][2] == 0.561
    assert math.isnan(frame["val-core/openai/gsm8k/reward/mean@1"][1])
    assert frame.version_hint.spec == ">=0.3.0.rc0,<0.4.0"


@pytest.mark.parametrize("three_decimals", [False, True], ids=["pformat", "three-decimals"])
def test_every_value_of_a_rendered_run_comes_back(tmp_path, three_decimals):
    records = run_records(12, seed=9)
    path = tmp_path / "stdout.log"
    write_lines(path, [RAY + console_line(s, d, three_decimals=three_decimals) for s, d in records])

    frame = load_metrics(path)

    expected = {s: {k: expected_value(v, three_decimals=three_decimals) for k, v in d.items()} for s, d in records}
    assert_frame_matches(frame.data, expected)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("np.float64(0.0123)", 0.0123, id="np.float64"),
        pytest.param("np.float32(1e-06)", 1e-06, id="np.float32-exponent"),
        pytest.param("np.int64(3)", 3.0, id="np.int64"),
        pytest.param("np.float64(nan)", math.nan, id="np-nan"),
        pytest.param("np.float64(-inf)", -math.inf, id="np-minus-inf"),
        pytest.param("1e-06", 1e-06, id="python-exponent"),
        pytest.param("-0.005", -0.005, id="negative"),
        pytest.param("nan", math.nan, id="python-nan"),
        pytest.param("inf", math.inf, id="python-inf"),
        pytest.param("True", 1.0, id="bool-true"),
        pytest.param("False", 0.0, id="bool-false"),
        pytest.param("512", 512.0, id="int"),
    ],
)
def test_value_formats(tmp_path, text, value):
    path = tmp_path / "stdout.log"
    write_lines(path, [f"step:1 - a/b:{text} - c:1.0"])

    got = load_metrics(path)["a/b"][1]

    assert (math.isnan(got) and math.isnan(value)) or got == value


def test_key_holding_a_colon_keeps_all_but_the_last_one(tmp_path):
    path = tmp_path / "stdout.log"
    write_lines(path, ["step:1 - val-core/hf:gsm8k/reward/mean@1:0.5 - x:1"])

    assert load_metrics(path)["val-core/hf:gsm8k/reward/mean@1"][1] == 0.5


def test_lines_that_only_mention_a_step_are_not_records(tmp_path):
    path = tmp_path / "stdout.log"
    write_lines(path, [
        "(WorkerDict pid=3) global_step:7 saved to checkpoints/global_step_7",
        "(TaskRunner pid=2) timing_s/step:12.5 - foo:1",
        "(TaskRunner pid=2) step:5",
        "(TaskRunner pid=2) step:5 of 100",
        RAY + "step:1 - actor/pg_loss:np.float64(-0.01)",
    ])

    frame = load_metrics(path)

    assert frame.data.index.tolist() == [1]
    assert frame.other_lines == 4


def test_cut_last_line_is_dropped(tmp_path):
    path = tmp_path / "stdout.log"
    lines = [RAY + console_line(s, d) for s, d in run_records(3, seed=4)]
    path.write_text("\n".join(lines)[:-7])  # still being written: no newline, last value cut

    frame = load_metrics(path)

    assert frame.data.index.tolist() == [0, 1, 2]
    assert frame.skipped_examples == ((4, "cut last line (no newline at the end; file still being written?)"),)


def test_restarted_console_log_keeps_the_later_segment(tmp_path):
    first = run_records(6, seed=1, val_before_train=False)
    second = run_records(8, seed=2, val_before_train=False)[3:]  # resumed from global_step_3: steps 4..8
    path = tmp_path / "stdout.log"
    write_lines(path, [RAY + console_line(s, d) for s, d in first + second])

    frame = load_metrics(path)

    assert frame.data.index.tolist() == list(range(1, 9))
    assert frame["actor/grad_norm"][3] == float(first[2][1]["actor/grad_norm"])
    assert frame["actor/grad_norm"][5] == float(second[1][1]["actor/grad_norm"])
    assert frame["actor/grad_norm"][4] == float(second[0][1]["actor/grad_norm"])  # same step: later wins
    # steps 5 and 6 were re-run and replaced; step 4 is merged (the later values win)
    assert [(r.line, r.from_step, r.to_step, r.rows_replaced) for r in frame.restarts] == [(7, 6, 4, 2)]


def test_seed_examples_with_wrapped_continuation_lines(fixtures):
    """Seed 001 §11.4's three worked examples, copied as the seed shows them (wrapped onto `- ` lines)."""
    frame = load_metrics(fixtures / "seed_001_examples.log")

    assert frame.data.index.tolist() == [0, 5, 50]
    assert frame.data.loc[0].notna().sum() == 24
    assert frame["timing_s/update_actor"][0] == 20.314
    assert frame["actor/entropy"][0] == 0.433
    assert frame["critic/lr"][0] == pytest.approx(1e-5)
    assert frame["actor/lr"][0] == pytest.approx(1e-8)  # the seed's `lr(1e-6)` scales like verl 0.1's lr(1e-4)
    assert frame["actor/pg_clipfrac"][5] == 0.85 and frame["actor/ppo_kl"][5] == 0.125
    assert frame["critic/vf_explained_var"][50] == -0.234 and frame["critic/returns/mean"][50] == 5.678
    assert frame.data.loc[5].notna().sum() == 5 and frame.data.loc[50].notna().sum() == 6


def test_a_hundred_thousand_numpy_values_parse_identically(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(100_000) * 10.0 ** rng.integers(-8, 4, 100_000)
    path = tmp_path / "stdout.log"
    write_lines(path, [RAY + f"step:{i + 1} - x:{np.float64(v)!r}" for i, v in enumerate(values)])

    assert np.array_equal(load_metrics(path)["x"].to_numpy(), values)
