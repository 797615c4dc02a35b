"""Read a verl run's metrics, whatever wrote them, into one frame indexed by step.

Public API (everything in the private modules may change):

    load_metrics(path, *, fmt=None) -> MetricFrame       JSONL, console log, TensorBoard, W&B
    detect_format(path) -> (format, file or run dir)     what load_metrics would read, by content
    normalize_loss_sums(frame, *, verl_version, optimizer_steps_per_step, strategy, ...) -> MetricFrame
    canonical_metric_name(name) -> str                   an old verl metric name -> the current one
    parse_metrics_line(line, fmt) -> (step, values)|None one JSONL or console line (a follower's reader)
    event_scalars(record) -> (step, values)|None         one TensorBoard event record
    frame_from_rows(steps, names, values, *, fmt, path)  a MetricFrame from rows a follower kept
    MetricFrame, Restart, VersionHint, FORMATS

pandas, pyarrow and tensorboard are imported inside the functions that read, never at import.
"""

from __future__ import annotations

from ._aliases import canonical_metric_name
from ._frame import FORMATS, MetricFrame, MetricsFormat, Restart, VersionHint
from ._live import LINE_FORMATS, event_scalars, frame_from_rows, parse_metrics_line
from ._load import load_metrics
from ._loss_sums import normalize_loss_sums
from ._sniff import detect_format

__all__ = [
    "FORMATS",
    "LINE_FORMATS",
    "MetricFrame",
    "MetricsFormat",
    "Restart",
    "VersionHint",
    "canonical_metric_name",
    "detect_format",
    "event_scalars",
    "frame_from_rows",
    "load_metrics",
    "normalize_loss_sums",
    "parse_metrics_line",
]
