"""Read a verl run's metrics, whatever wrote them, into one frame indexed by step.

Public API (everything in the private modules may change):

    load_metrics(path, *, fmt=None) -> MetricFrame       JSONL, console log, TensorBoard, W&B
    detect_format(path) -> (format, file or run dir)     what load_metrics would read, by content
    normalize_loss_sums(frame, *, verl_version, optimizer_steps_per_step, strategy, ...) -> MetricFrame
    canonical_metric_name(name) -> str                   an old verl metric name -> the current one
    rename(name) -> Renamed | None                       a renamed metric: its current name and since when
    load_catalog() -> Catalog                            where each verl metric comes from, its healthy range
    load_samples(dir, cfg) / render_samples(...)         rollout samples dumped by trainer.rollout_data_dir
    as_table(frame)                                      a frame's columns as plain arrays
    parse_metrics_line(line, fmt) -> (step, values)|None one JSONL or console line (a follower's reader)
    event_scalars(record) -> (step, values)|None         one TensorBoard event record
    frame_from_rows(steps, names, values, *, fmt, path)  a MetricFrame from rows a follower kept
    LOGGED_NAN, is_logged_nan(values), is_missing(values)   a logged NaN/null vs a metric a row did not log
    MetricFrame, Restart, VersionHint, FORMATS, SampleReport, StepTable
    Format, FORMAT_RECORDS                               one record per metrics source: sniff, whole-file read,
                                                         line parse, the "no records" hint (by format name)

pandas, pyarrow and tensorboard are imported inside the functions that read, never at import; so is each format's
reader (``_formats``) and the samples reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._aliases import canonical_metric_name, rename
from ._catalog import Catalog, HealthyRange, MetricInfo, NotLogged, load_catalog
from ._columns import ColumnFilter
from ._formats import FORMAT as FORMAT_RECORDS
from ._formats import Format
from ._frame import FORMATS, MetricFrame, MetricsFormat, Restart, VersionHint
from ._lines import LineSplitter
from ._live import LINE_FORMATS, event_scalars, frame_from_rows, parse_metrics_line
from ._load import load_metrics
from ._loss_sums import ACTOR_LOSSES, CRITIC_LOSSES, normalize_loss_sums
from ._nan import LOGGED_NAN, is_logged_nan, is_missing
from ._sniff import detect_format
from ._table import StepTable, as_table

if TYPE_CHECKING:
    from ._samples import SampleReport, load_samples, render_samples

# only with --samples: off the start-up path
_LAZY = {"load_samples": "._samples", "render_samples": "._samples", "SampleReport": "._samples"}

__all__ = [
    "ACTOR_LOSSES",
    "CRITIC_LOSSES",
    "FORMATS",
    "FORMAT_RECORDS",
    "LINE_FORMATS",
    "LOGGED_NAN",
    "Catalog",
    "ColumnFilter",
    "Format",
    "HealthyRange",
    "LineSplitter",
    "MetricFrame",
    "MetricInfo",
    "MetricsFormat",
    "NotLogged",
    "Restart",
    "SampleReport",
    "StepTable",
    "VersionHint",
    "as_table",
    "canonical_metric_name",
    "detect_format",
    "event_scalars",
    "frame_from_rows",
    "is_logged_nan",
    "is_missing",
    "load_catalog",
    "load_metrics",
    "load_samples",
    "normalize_loss_sums",
    "parse_metrics_line",
    "rename",
    "render_samples",
]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'advisor.metrics' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
