"""Rollout sample dumps (trainer.rollout_data_dir): counts on hand-written fixtures, the sandbox's real dump,
and one-line errors on bad input.

Expected counts were worked out by hand from the fixture lines (tests/fixtures/samples/*) and verl's
scorers: gsm8k strict = '#### <number>' within the last 300 characters (verl/utils/reward_score/gsm8k.py:
26-36); MATH = last '\\boxed{...}' with balanced braces, '\\boxed ' or '\\fbox' (math_reward.py:63-87);
math_dapo = 'Answer: ...' within the last 300 characters (math_dapo.py:165-190,260).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.cli._render import get_console
from advisor.errors import MetricsError
from advisor.metrics._samples import load_samples, render_samples

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "samples"


def test_gsm8k_dump_latest_step_counts() -> None:
    report = load_samples(FIXTURES / "gsm8k", max_response_length=256)
    assert report.steps == (2,) and report.samples == 10  # 2.jsonl is the latest step
    assert report.answer_format == "gsm8k"
    assert report.marker_counts == {"gsm8k": 6, "boxed": 0, "answer_line": 0}
    # lines 2 (no marker), 3 (cut mid-sentence), 4 ('#### 5' more than 300 characters from the end), 5 (cut)
    assert report.missing_marker == 4
    # lines 3 and 5 end without marker or sentence end; line 5 has 1070 characters >= 0.9 x 256 x 4
    assert (report.cut, report.cut_by_ending, report.cut_by_length) == (2, 2, 1)
    assert report.length_basis == "estimate: characters/4"
    # line 6 gts "", line 8 gts null, line 7 gts "1,234", line 9 gts the JSON number 42
    assert report.bad_ground_truth == 4
    assert report.bad_ground_truth_reasons == {"empty": 2, "not_a_number": 1, "not_text": 1}
    assert report.scores.histogram == {"0": 8, "1": 2}
    assert report.scores.mean == pytest.approx(0.2) and not report.scores.all_equal
    assert report.empty_outputs == 0


def test_gsm8k_dump_all_steps() -> None:
    report = load_samples(FIXTURES / "gsm8k", all_steps=True)
    assert report.steps == (1, 2) and report.samples == 12
    assert report.scores.histogram == {"0": 8, "1": 4}
    # without data.max_response_length nothing is judged by length
    assert report.length_basis is None and report.cut_by_length == 0 and report.cut == 2


def test_one_step_file_can_be_passed_directly() -> None:
    report = load_samples(FIXTURES / "gsm8k" / "1.jsonl")
    assert report.steps == (1,) and report.samples == 2 and report.missing_marker == 0


def test_math_dump_uses_the_boxed_format_of_its_data_source() -> None:
    report = load_samples(FIXTURES / "math", max_response_length=256)
    assert report.answer_format == "boxed" and "lighteval/MATH" in report.format_basis
    assert report.marker_counts["boxed"] == 5  # nested braces, \fbox and the '\boxed 9' form all count
    assert report.missing_marker == 2  # '\boxed{3' never closes; 'The answer is 5.'
    assert (report.cut, report.cut_by_ending, report.cut_by_length) == (1, 1, 0)  # only '\boxed{3'
    assert report.bad_ground_truth == 1 and report.bad_ground_truth_reasons == {"empty": 1}  # latex gts are fine


def test_math_dapo_expects_answer_lines_not_boxes() -> None:
    report = load_samples(FIXTURES / "dapo")
    assert report.answer_format == "answer_line" and "math_dapo" in report.format_basis
    # '\boxed{42}' is not what math_dapo reads, but the answer is finished: missing, not cut
    assert report.missing_marker == 2 and report.cut == 1
    assert report.scores.histogram == {"-1": 2, "1": 2}


def test_a_response_length_field_beats_the_character_estimate() -> None:
    report = load_samples(FIXTURES / "lengths", max_response_length=512)
    assert report.length_basis == "response_length field"
    # lines 1-2 have response_length 512; line 4 has 3000 characters but 30 tokens
    assert (report.cut_by_length, report.cut_by_ending, report.cut) == (2, 1, 2)


def test_format_from_numeric_ground_truths_when_no_output_has_a_marker(tmp_path: Path) -> None:
    (tmp_path / "3.jsonl").write_text(
        '{"input": "1+1", "output": "I do not know.", "gts": "2", "score": 0.0, "step": 3}\n'
        '{"input": "2+2", "output": "It is four", "gts": "4", "score": 0.0, "step": 3}\n', encoding="utf-8")
    report = load_samples(tmp_path)
    assert report.answer_format == "gsm8k" and "plain numbers" in report.format_basis
    assert report.missing_marker == 2 and report.cut == 1  # 'It is four' has no sentence end
    assert report.scores.all_equal


def test_unknown_format_counts_outputs_without_any_marker(tmp_path: Path) -> None:
    (tmp_path / "1.jsonl").write_text(
        '{"input": "a", "output": "x + 1.", "gts": "x+1", "score": 0, "step": 1}\n'
        '{"input": "b", "output": "", "gts": "\\\\pi", "score": null, "step": 1}\n', encoding="utf-8")
    report = load_samples(tmp_path)
    assert report.answer_format == "unknown"
    assert report.missing_marker == 2 and report.empty_outputs == 1 and report.cut == 0
    assert report.scores.count == 1 and report.scores.missing == 1


def test_many_distinct_scores_give_quantiles_not_a_histogram(tmp_path: Path) -> None:
    lines = [json.dumps({"input": "q", "output": "#### 1", "gts": "1", "score": float(v), "step": 1})
             for v in range(1, 13)]
    (tmp_path / "1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    scores = load_samples(tmp_path).scores
    assert scores.histogram == {}
    # numpy's linear percentiles of 1..12: 1 + q x 11
    assert scores.quantiles == pytest.approx({"p10": 2.1, "p50": 6.5, "p90": 10.9})
    assert (scores.min, scores.max, scores.mean) == (1.0, 12.0, 6.5)


def test_examples_are_the_shortest_of_each_kind_and_each_sample_once() -> None:
    report = load_samples(FIXTURES / "gsm8k", max_response_length=256)
    kinds = [e.kind for e in report.examples]
    assert kinds.count("missing_marker") == 3 and "bad_ground_truth" in kinds
    first = report.examples[0]
    # shortest by input + output: Weng (115 + 77 characters) before Natalia (223 + 45) and the '#### 5' line (14 + 393)
    assert first.kind == "missing_marker" and first.output.startswith("Weng earns")
    long_one = next(e for e in report.examples if e.output.startswith("Betty"))
    assert " … " in long_one.output and long_one.output.endswith("twice as much as her par")
    assert len({(e.input, e.output) for e in report.examples}) == len(report.examples)


def test_to_dict_is_json_and_holds_every_count() -> None:
    data = json.loads(json.dumps(load_samples(FIXTURES / "gsm8k", max_response_length=256).to_dict()))
    assert data["missing_marker"] == 4 and data["cut"]["count"] == 2 and data["bad_ground_truth"]["count"] == 4
    assert data["answer_format"]["name"] == "gsm8k" and "gsm8k.py" in data["answer_format"]["scorer"]
    assert data["scores"]["histogram"] == {"0": 8, "1": 2}


def test_text_renderer_states_counts_and_that_lengths_are_estimated() -> None:
    console = get_console()
    with console.capture() as capture:
        render_samples(load_samples(FIXTURES / "gsm8k", max_response_length=256), console)
    text = " ".join(capture.get().split())
    for part in ("10 samples, step 2", "missing the final-answer marker: 4 of 10 (40.0%)",
                 "likely cut at the length limit: 2 of 10", "estimate: characters/4",
                 "unparseable ground truth: 4 of 10"):
        assert part in text, part


def test_the_sandbox_trainers_dump(tmp_path: Path) -> None:
    from sweeps.sandbox import run

    run(["trainer.total_training_steps=2", f"trainer.rollout_data_dir={tmp_path}", "trainer.test_freq=-1",
         "data.train_batch_size=64", "actor_rollout_ref.actor.ppo_mini_batch_size=16"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.jsonl", "2.jsonl"]
    report = load_samples(tmp_path, max_response_length=512)
    assert report.steps == (2,) and report.samples == 64  # train_batch_size x rollout.n (1)
    assert report.answer_format == "gsm8k" and report.bad_ground_truth == 0
    # the sandbox scores 1 only with a correct '#### <n>' (sweeps/sandbox/task.py compute_score)
    assert report.scores.histogram.get("1", 0) <= report.samples - report.missing_marker
    assert {e.kind for e in report.examples} <= {"missing_marker", "cut", "sample"}


@pytest.mark.parametrize("name, content, message", [
    ("4.jsonl", b'{"input": "a", "output": "b"}\n{"input": "a", "outp', r"4\.jsonl:2: not valid JSON"),
    ("4.jsonl", b'{"input": "a"}\n', r"4\.jsonl:1: field 'output' is missing"),
    ("4.jsonl", b'[1, 2]\n', r"4\.jsonl:1: a line must be a JSON object"),
    ("4.jsonl", b"\n\n", r"4\.jsonl: holds no samples"),
    ("4.jsonl", b"\xff\xfe\x00", r"4\.jsonl: not UTF-8 text"),
])
def test_bad_dump_is_one_line_metrics_error_naming_the_file(tmp_path: Path, name: str, content: bytes,
                                                            message: str) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(MetricsError, match=message) as info:
        load_samples(tmp_path)
    assert "\n" not in str(info.value)


def test_directory_without_step_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(MetricsError, match=re.escape("no <step>.jsonl files")):
        load_samples(tmp_path)
    with pytest.raises(MetricsError, match="no such file or directory"):
        load_samples(tmp_path / "missing")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=400))
def test_arbitrary_bytes_raise_nothing_but_metrics_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "9.jsonl").write_bytes(content)
    try:
        report = load_samples(tmp_path, max_response_length=64)
    except MetricsError as err:
        assert "\n" not in str(err)
    else:
        assert report.samples >= 1
