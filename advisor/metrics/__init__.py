"""Read a verl run's metrics, whatever wrote them, into one frame indexed by step.

Public API (everything in the private modules may change):

    load_metrics(path, *, fmt=None) -> MetricFrame       JSONL, console log, TensorBoard, W&B
    detect_format(path) -> (format, file or run dir)     what load_metrics would read, by content
    normalize_loss_sums(frame, *, verl_version, optimizer_steps_per_step, strategy, ...) -> MetricFrame
    canonical_metric_name(name) -> str                   an old verl metric name -> the current one
    MetricFrame, Restart, VersionHint, FORMATS

pandas, pyarrow and tensorboard are imported inside the functions that read, never at import.
"""

from __future__ import annotations

from ._aliases import canonical_metric_name
from ._frame import FORMATS, MetricFrame, MetricsFormat, Restart, VersionHint
from ._load import load_metrics
from ._loss_sums import normalize_loss_sums
from ._sniff import detect_format

__all__ = [
    "FORMATS",
    "MetricFrame",
    "MetricsFormat",
    "Restart",
    "VersionHint",
    "canonical_metric_name",
    "detect_format",
    "load_metrics",
    "normalize_loss_sums",
]
