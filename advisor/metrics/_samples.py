"""Rollout samples dumped by ``trainer.rollout_data_dir``: what the reward tree needs to see.

verl writes ``{dir}/{global_step}.jsonl``, one JSON object per sample with ``input``, ``output`` (decoded,
special tokens skipped), ``gts`` (the ground truth, may be null), ``score`` (the summed token scores),
``step`` and every ``reward_extra_info`` key of matching length (verl/trainer/ppo/ray_trainer.py:396-454,
``_dump_generations`` and ``_log_rollout_data``). ``trainer.validation_data_dir`` holds the same format.

:func:`load_samples` reads the latest step (or all steps) and counts what makes a rule reward read zero:
answers missing the final-answer marker verl's scorer looks for, answers likely cut at the length limit,
and answers scored against a ground truth the scorer cannot match. The scorers' markers are data,
``knowledge/answer_formats.yaml``.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.datafiles import load_knowledge
from advisor.errors import MetricsError
from advisor.inputfile import require_regular

if TYPE_CHECKING:
    from rich.console import Console

_STEP_FILE = re.compile(r"^(\d+)\.jsonl$")
_PLAIN_NUMBER = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_EXAMPLES_PER_KIND = 3
_INPUT_EXCERPT_CHARS = 200
_OUTPUT_HEAD_CHARS = 80
_OUTPUT_TAIL_CHARS = 200
_MAX_DISTINCT_SCORES = 10  # a histogram of exact values up to this many; quantiles beyond


@dataclass(frozen=True)
class AnswerFormat:
    """One of verl's built-in scorers, as far as finding the final answer goes."""

    name: str
    label: str
    marker: str  # a regular expression, or "boxed" for the balanced-brace search
    tail_chars: int | None
    ground_truth: str  # "number" or "text"
    scorer: str
    data_sources: tuple[str, ...]
    data_source_prefixes: tuple[str, ...] = ()

    def has_marker(self, text: str) -> bool:
        if self.tail_chars is not None:
            text = text[-self.tail_chars:]
        if self.marker == "boxed":
            return _last_boxed(text)
        return re.search(self.marker, text) is not None

    def routes(self, data_source: str) -> bool:
        return data_source in self.data_sources or data_source.startswith(self.data_source_prefixes)


def _last_boxed(text: str) -> bool:
    """Whether math_reward's search would find a boxed answer: '\\boxed ', or '\\boxed'/'\\fbox' + balanced {...}."""
    if "\\boxed " in text:
        return True
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return False
    depth = 0
    for ch in text[start:]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return True
    return False


@dataclass(frozen=True)
class _Rules:
    formats: dict[str, AnswerFormat]
    chars_per_token: float
    estimate_fraction: float
    sentence_end: str
    closers: str
    numeric_share: float


@cache
def _rules() -> _Rules:
    data = load_knowledge("answer_formats.yaml")
    formats = {
        name: AnswerFormat(
            name=name, label=str(raw["label"]), marker=str(raw["marker"]), tail_chars=raw.get("tail_chars"),
            ground_truth=str(raw["ground_truth"]), scorer=str(raw["scorer"]),
            data_sources=tuple(raw.get("data_sources") or ()),
            data_source_prefixes=tuple(raw.get("data_source_prefixes") or ()),
        )
        for name, raw in data["formats"].items()
    }
    trunc = data["truncation"]
    return _Rules(formats, float(trunc["chars_per_token"]), float(trunc["estimate_fraction"]),
                  str(trunc["sentence_end"]), str(trunc["closers"]), float(data["numeric_ground_truth_share"]))


@dataclass(frozen=True)
class Sample:
    """One dumped sample, as read."""

    file: str
    line: int
    step: int | None
    input: str
    output: str
    gts: Any
    score: float | None
    data_source: str | None
    response_length_tokens: int | None


@dataclass(frozen=True)
class SampleExample:
    """A short excerpt of one sample, kept for display."""

    kind: str  # missing_marker | cut | bad_ground_truth | sample
    step: int | None
    input: str
    output: str
    gts: str | None
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "input": self.input, "output": self.output,
                "gts": self.gts, "score": self.score}


@dataclass(frozen=True)
class ScoreSummary:
    count: int  # samples with a numeric score
    missing: int  # samples whose score is absent or not a number
    mean: float | None
    min: float | None
    max: float | None
    histogram: dict[str, int]  # exact value -> samples, when there are few distinct values
    quantiles: dict[str, float]  # p10/p50/p90, when there are many

    @property
    def all_equal(self) -> bool:
        return self.count > 0 and self.min == self.max

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "missing": self.missing, "mean": self.mean, "min": self.min, "max": self.max,
                "all_equal": self.all_equal, "histogram": self.histogram, "quantiles": self.quantiles}


@dataclass(frozen=True)
class SampleReport:
    """What the samples of one step (or of all steps) say about the reward."""

    path: str
    files: tuple[str, ...]
    steps: tuple[int, ...]
    samples: int
    answer_format: str  # a key of knowledge/answer_formats.yaml, or "unknown"
    format_label: str
    format_basis: str  # how the format was chosen
    scorer: str | None
    scores: ScoreSummary
    marker_counts: dict[str, int]  # format -> samples whose output carries that format's marker
    missing_marker: int  # samples without the chosen format's marker (without any marker when unknown)
    empty_outputs: int
    cut: int  # likely cut at the length limit (by length or by ending)
    cut_by_length: int
    cut_by_ending: int  # no marker of any format and no sentence end
    length_basis: str | None  # "response_length field" | "estimate: characters/4" | None (no limit known)
    max_response_length: int | None
    bad_ground_truth: int
    bad_ground_truth_reasons: dict[str, int]
    examples: tuple[SampleExample, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "files": list(self.files), "steps": list(self.steps), "samples": self.samples,
            "answer_format": {"name": self.answer_format, "label": self.format_label, "basis": self.format_basis,
                              "scorer": self.scorer},
            "scores": self.scores.to_dict(),
            "marker_counts": self.marker_counts,
            "missing_marker": self.missing_marker,
            "empty_outputs": self.empty_outputs,
            "cut": {"count": self.cut, "by_length": self.cut_by_length, "by_ending": self.cut_by_ending,
                    "length_basis": self.length_basis, "max_response_length": self.max_response_length},
            "bad_ground_truth": {"count": self.bad_ground_truth, "reasons": self.bad_ground_truth_reasons},
            "examples": [e.to_dict() for e in self.examples],
        }


# --- reading --------------------------------------------------------------------------------------------


def _step_files(path: Path, all_steps: bool) -> list[tuple[int | None, Path]]:
    if path.is_file():
        match = _STEP_FILE.match(path.name)
        return [(int(match.group(1)) if match else None, path)]
    if not path.is_dir():
        raise MetricsError("no such file or directory", path=str(path),
                           suggestion="pass trainer.rollout_data_dir or one of its <step>.jsonl files")
    files = sorted((int(m.group(1)), p) for p in path.iterdir() if (m := _STEP_FILE.match(p.name)) and p.is_file())
    if not files:
        raise MetricsError("no <step>.jsonl files", path=str(path),
                           suggestion="expected the directory verl's trainer.rollout_data_dir writes")
    return list(files) if all_steps else [files[-1]]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _read_file(path: Path, file_step: int | None) -> list[Sample]:
    require_regular(path, MetricsError)  # a FIFO named like a dump would block
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise MetricsError(f"cannot read ({err.strerror})", path=str(path)) from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MetricsError(f"not UTF-8 text (byte {err.start})", path=str(path),
                           suggestion="expected verl's rollout dump, one JSON object per line") from err
    samples = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            reason = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deeply"
            raise MetricsError(f"not valid JSON ({reason})", path=str(path), where=lineno,
                               suggestion="expected verl's rollout dump, one JSON object per line") from err
        if not isinstance(record, dict):
            raise MetricsError("a line must be a JSON object", path=str(path), where=lineno)
        if "output" not in record:
            raise MetricsError("field 'output' is missing", path=str(path), where=lineno,
                               suggestion="each line of a rollout dump has input, output, gts, score, step")
        step = record.get("step")
        length = _number(record.get("response_length"))
        samples.append(Sample(
            file=str(path), line=lineno,
            step=step if isinstance(step, int) and not isinstance(step, bool) else file_step,
            input=_text(record.get("input")), output=_text(record.get("output")), gts=record.get("gts"),
            score=_number(record.get("score")),
            data_source=record["data_source"] if isinstance(record.get("data_source"), str) else None,
            response_length_tokens=None if length is None else int(length),
        ))
    if not samples:
        raise MetricsError("holds no samples", path=str(path))
    return samples


# --- judging --------------------------------------------------------------------------------------------


def _choose_format(samples: list[Sample], markers: dict[str, list[bool]], rules: _Rules) -> tuple[str, str]:
    sources = Counter(s.data_source for s in samples if s.data_source)
    if sources:
        source, _ = sources.most_common(1)[0]
        for name, fmt in rules.formats.items():
            if fmt.routes(source):
                return name, f"data_source '{source}' (verl/utils/reward_score/__init__.py:44-62)"
    counts = {name: sum(flags) for name, flags in markers.items()}
    best = max(counts, key=lambda n: counts[n])  # dict order breaks ties: gsm8k, boxed, answer_line
    if counts[best] > 0:
        return best, f"markers found in {counts[best]} of {len(samples)} outputs"
    truths = [_text(s.gts).strip() for s in samples if _text(s.gts).strip()]
    numeric = sum(bool(_PLAIN_NUMBER.match(t.replace(",", ""))) for t in truths)
    if truths and numeric >= rules.numeric_share * len(truths):
        return "gsm8k", "no answer markers in any output; ground truths are plain numbers (gsm8k-like)"
    return "unknown", "no data_source, no answer markers and non-numeric ground truths"


def _bad_ground_truth(gts: Any, fmt: AnswerFormat | None) -> str | None:
    text = _text(gts).strip()
    if not text or text in ("[]", "{}", '""'):
        return "empty"
    if fmt is not None and fmt.ground_truth == "number":
        if not isinstance(gts, str):
            return "not_text"  # gsm8k's compute_score compares strings: a JSON number never equals the extraction
        if not _PLAIN_NUMBER.match(text):
            return "not_a_number"
    return None


def _ends_sentence(text: str, rules: _Rules) -> bool:
    stripped = text.rstrip().rstrip(rules.closers).rstrip()
    return bool(stripped) and stripped[-1] in rules.sentence_end


def _excerpt(sample: Sample, kind: str) -> SampleExample:
    inp = sample.input.strip()
    if len(inp) > _INPUT_EXCERPT_CHARS:  # the question sits at the end of a chat-templated prompt
        inp = "…" + inp[-_INPUT_EXCERPT_CHARS:]
    out = sample.output
    if len(out) > _OUTPUT_HEAD_CHARS + _OUTPUT_TAIL_CHARS:  # keep the end, where the final answer belongs
        out = out[:_OUTPUT_HEAD_CHARS] + " … " + out[-_OUTPUT_TAIL_CHARS:]
    gts = None if sample.gts is None else _text(sample.gts)
    return SampleExample(kind, sample.step, inp, out, gts, sample.score)


def _score_summary(samples: list[Sample]) -> ScoreSummary:
    import numpy as np

    values = np.array([s.score for s in samples if s.score is not None], dtype=float)
    missing = len(samples) - values.size
    if not values.size:
        return ScoreSummary(0, missing, None, None, None, {}, {})
    distinct = np.unique(values)
    histogram: dict[str, int] = {}
    quantiles: dict[str, float] = {}
    if distinct.size <= _MAX_DISTINCT_SCORES:
        histogram = {f"{v:g}": int((values == v).sum()) for v in distinct}
    else:
        quantiles = {f"p{q}": float(np.percentile(values, q)) for q in (10, 50, 90)}
    return ScoreSummary(int(values.size), missing, float(values.mean()), float(values.min()), float(values.max()),
                        histogram, quantiles)


def summarize_samples(samples: list[Sample], *, path: str = "", files: tuple[str, ...] = (),
                      max_response_length: int | None = None) -> SampleReport:
    """Judge already-read samples (see :func:`load_samples`)."""
    rules = _rules()
    markers = {name: [fmt.has_marker(s.output) for s in samples] for name, fmt in rules.formats.items()}
    fmt_name, basis = _choose_format(samples, markers, rules)
    fmt = rules.formats.get(fmt_name)
    any_marker = [any(flags[i] for flags in markers.values()) for i in range(len(samples))]
    has_marker = markers[fmt_name] if fmt is not None else any_marker

    has_length_field = any(s.response_length_tokens is not None for s in samples)
    length_basis = None
    if max_response_length is not None:
        length_basis = "response_length field" if has_length_field else \
            f"estimate: characters/{rules.chars_per_token:g}"

    kinds: dict[str, list[Sample]] = {"missing_marker": [], "cut": [], "bad_ground_truth": []}
    reasons: Counter[str] = Counter()
    by_length = by_ending = empty = 0
    for sample, marked, finished in zip(samples, has_marker, any_marker, strict=True):
        output = sample.output
        if not output.strip():
            empty += 1
        if not marked:
            kinds["missing_marker"].append(sample)
        long = False
        if max_response_length is not None:
            if has_length_field:
                tokens = sample.response_length_tokens
                long = tokens is not None and tokens >= max_response_length
            else:
                long = len(output) / rules.chars_per_token >= rules.estimate_fraction * max_response_length
        # an answer in another scorer's format is finished, just unreadable: not "cut"
        unfinished = bool(output.strip()) and not finished and not _ends_sentence(output, rules)
        by_length += long
        by_ending += unfinished
        if long or unfinished:
            kinds["cut"].append(sample)
        reason = _bad_ground_truth(sample.gts, fmt)
        if reason is not None:
            reasons[reason] += 1
            kinds["bad_ground_truth"].append(sample)

    examples: list[SampleExample] = []
    shown: set[tuple[str, int]] = set()
    for kind, hits in kinds.items():  # the shortest few of each kind, each sample shown once
        fresh = [s for s in sorted(hits, key=lambda s: len(s.input) + len(s.output)) if (s.file, s.line) not in shown]
        for sample in fresh[:_EXAMPLES_PER_KIND]:
            shown.add((sample.file, sample.line))
            examples.append(_excerpt(sample, kind))
    if not examples:
        for sample in sorted(samples, key=lambda s: len(s.input) + len(s.output))[:_EXAMPLES_PER_KIND]:
            examples.append(_excerpt(sample, "sample"))

    steps = tuple(sorted({s.step for s in samples if s.step is not None}))
    return SampleReport(
        path=path, files=files, steps=steps, samples=len(samples), answer_format=fmt_name,
        format_label=fmt.label if fmt else "no known marker", format_basis=basis,
        scorer=fmt.scorer if fmt else None, scores=_score_summary(samples),
        marker_counts={name: sum(flags) for name, flags in markers.items()},
        missing_marker=len(kinds["missing_marker"]), empty_outputs=empty, cut=len(kinds["cut"]),
        cut_by_length=by_length, cut_by_ending=by_ending, length_basis=length_basis,
        max_response_length=max_response_length, bad_ground_truth=len(kinds["bad_ground_truth"]),
        bad_ground_truth_reasons=dict(sorted(reasons.items())), examples=tuple(examples),
    )


def load_samples(path: Path, *, max_response_length: int | None = None, all_steps: bool = False) -> SampleReport:
    """Read verl's rollout dump and summarise what it says about the reward.

    Args:
        path: ``trainer.rollout_data_dir`` (the latest ``<step>.jsonl`` is read) or one such file.
        max_response_length: ``data.max_response_length``; without it no sample is judged cut by its length.
            Token lengths come from a ``response_length`` field when the dump has one, else are estimated
            from characters (the report says which).
        all_steps: read every ``<step>.jsonl`` of the directory instead of the latest.

    Raises:
        MetricsError: the path holds no dump, or a line is not a JSON object with an ``output`` (one line,
            naming the file and line).
    """
    path = Path(path)
    if max_response_length is not None and max_response_length < 1:
        raise MetricsError(f"max_response_length must be at least 1 but got {max_response_length}")
    samples: list[Sample] = []
    files = _step_files(path, all_steps)
    for step, file in files:
        samples.extend(_read_file(file, step))
    return summarize_samples(samples, path=str(path), files=tuple(str(f) for _, f in files),
                             max_response_length=max_response_length)


# --- rendering ------------------------------------------------------------------------------------------


_REASONS = {"empty": "empty", "not_a_number": "not a plain number",
            "not_text": "a JSON number, which gsm8k's string comparison never matches"}


def _share(count: int, total: int) -> str:
    return f"{count} of {total} ({100.0 * count / total:.1f}%)" if total else str(count)


def render_samples(report: SampleReport, console: Console) -> None:
    """The report as text for people (rich markup); ``advisor suggest --samples DIR`` prints this."""
    from rich.markup import escape

    steps = report.steps
    where = (f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}") if steps else "no step"
    console.print(f"[bold]Rollout samples[/bold] {escape(report.path)}: {report.samples} samples, {where}")
    console.print(f"  answer format: {escape(report.format_label)} ({escape(report.format_basis)})")
    s = report.scores
    if s.count:
        dist = ", ".join(f"{k}: {v}" for k, v in s.histogram.items()) or \
            ", ".join(f"{k} {v:.3g}" for k, v in s.quantiles.items())
        same = "  [yellow]all samples scored the same[/]" if s.all_equal else ""
        console.print(f"  scores: mean {s.mean:.3g}, min {s.min:g}, max {s.max:g} ({escape(dist)}){same}")
    else:
        console.print("  scores: [yellow]none of the samples has a numeric score[/]")
    if s.missing and s.count:
        console.print(f"  samples without a numeric score: {s.missing}")
    n = report.samples
    console.print(f"  missing the final-answer marker: {_share(report.missing_marker, n)}")
    if report.length_basis is None:
        length = "length not judged: pass data.max_response_length"
    else:
        length = f"{report.cut_by_length} at the length limit {report.max_response_length} ({report.length_basis})"
    console.print(f"  likely cut at the length limit: {_share(report.cut, n)}: {length}; "
                  f"{report.cut_by_ending} with no marker and no sentence end")
    if report.empty_outputs:
        console.print(f"  empty outputs: {_share(report.empty_outputs, n)}")
    reasons = ", ".join(f"{_REASONS.get(k, k)}: {v}" for k, v in report.bad_ground_truth_reasons.items())
    console.print(f"  unparseable ground truth: {_share(report.bad_ground_truth, n)}"
                  + (f" ({reasons})" if reasons else ""))
    if report.examples:
        console.print("  examples (shortest):")
    for ex in report.examples:
        score = "-" if ex.score is None else f"{ex.score:g}"
        console.print(f"    [dim]{ex.kind.replace('_', ' ')}[/] step {ex.step if ex.step is not None else '?'}, "
                      f"score {score}, gts {escape(repr(ex.gts))}")
        console.print(f"      input:  {escape(ex.input)!s}", soft_wrap=True)
        console.print(f"      output: {escape(ex.output)!s}", soft_wrap=True)
