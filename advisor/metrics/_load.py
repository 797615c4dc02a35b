"""``load_metrics``: pick the reader by content, read, resolve restarts, rename old metric names."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from advisor.errors import MetricsError
from advisor.inputfile import require_regular
from advisor.plural import counted

from ._aliases import Renamed, rename_in, version_hint
from ._columns import ColumnFilter, Keep
from ._formats import FORMAT
from ._frame import FORMATS, MetricFrame, MetricsFormat, ReadLog
from ._nan import is_missing
from ._records import Records, assemble, segments_line
from ._sniff import detect_format, not_metrics_reason
from ._table import StepTable


def load_metrics(path: str | os.PathLike[str], *, fmt: MetricsFormat | None = None,
                 columns: Collection[str] | None = None) -> MetricFrame:
    """Read a verl run's metrics into a frame indexed by step, one column per metric.

    Reads verl's ``file`` logger JSONL, a console log, a TensorBoard run directory (or event file), or a
    W&B export (CSV, ``wandb-history.jsonl``, or a run directory holding it). The format is told from
    the content unless ``fmt`` names it (one of ``FORMATS``). Lines that cannot be read are skipped and
    counted; a restarted run keeps its last segment; old verl metric names become current ones.

    ``columns``: keep the values of these metrics only (current or old verl names, or ``*`` globs such as
    ``val-core/*``); every other metric is still listed (``all_metrics``, ``all_nan_columns``, the version
    hint) but its values are not kept, so a JSONL or console log of millions of steps is read in the memory
    of the columns asked for. None: every metric.

    Example:
        >>> frame = load_metrics("logs/gsm8k/qwen-grpo.jsonl")
        >>> frame["actor/ppo_kl"].tail()

    Raises:
        MetricsError: the input is missing, empty, binary, not metrics (a verl config, a launch
            script), or holds no step records. One line, naming the file.
    """
    if fmt is None:
        kind, target = detect_format(path)
    else:
        kind, target = _forced(path, fmt)
    log = ReadLog()
    keep = ColumnFilter(columns) if columns is not None else None
    try:
        records = _read(kind, target, log, keep)
    except OSError as err:
        raise MetricsError(f"cannot read ({err.strerror or err})", path=str(target)) from err
    if len(records) == 0:
        raise MetricsError(_no_records(kind, target, log), path=str(target))
    if not records.all_names:
        raise MetricsError(
            f"{counted(len(records), 'step record')} but no numeric metric in them", path=str(target),
            suggestion=_hint(kind)
        )
    return _frame(records, kind, target, log)


def _forced(path: str | os.PathLike[str], fmt: str) -> tuple[MetricsFormat, Path]:
    if fmt not in FORMATS:
        raise MetricsError(
            f"unknown metrics format '{fmt}'", path=str(path), suggestion=f"use one of {', '.join(FORMATS)}"
        )
    target = Path(path)
    if not target.exists():
        raise MetricsError("no such file or directory", path=str(target))
    if target.is_dir():
        kind, found = detect_format(target)
        if kind != fmt:
            raise MetricsError(f"directory holds {FORMAT[kind].title}, not {FORMAT[fmt].title}", path=str(target))
        return kind, found
    if require_regular(target, MetricsError).st_size == 0:  # a FIFO or a device is refused before it is opened
        raise MetricsError("file is empty", path=str(target), suggestion="was the run started with a metrics logger?")
    return fmt, target


def _read(kind: MetricsFormat, target: Path, log: ReadLog, keep: Keep | None) -> Records:
    return FORMAT[kind].read(target, log, keep)


def _no_records(kind: MetricsFormat, target: Path, log: ReadLog) -> str:
    if kind == "console" and not log.skipped:
        reason = not_metrics_reason(target)
        if reason:
            return f"{reason}; pass the run's metrics (verl JSONL, console log, TensorBoard dir or W&B export)"
    what = FORMAT[kind].none_found
    if log.skipped:
        line, reason = log.examples[0] if log.examples else (None, next(iter(log.skipped)))
        where = f" (first: line {line}: {reason})" if line else f" ({reason})"
        return f"{what}: {counted(log.lines_skipped, 'line')} skipped{where}"
    return f"{what} found; {_hint(kind)}"


def _hint(kind: MetricsFormat) -> str:
    return FORMAT[kind].no_records_hint


def _frame(records: Records, kind: MetricsFormat, target: Path, log: ReadLog) -> MetricFrame:
    import numpy as np

    logged = records.all_names
    table, restarts = assemble(records)
    table, aliases, scaled = _apply_aliases(table, logged)
    finite: dict[str, bool] = dict(zip(table.names, np.isfinite(table.values).any(axis=0).tolist(), strict=True))
    current = {aliases.get(name, name): None for name in logged}  # every metric, first-logged order
    for name, any_finite in records.unread.items():  # listed, values not kept
        new = aliases.get(name, name)
        finite[new] = finite.get(new, False) or any_finite
    all_nan = tuple(name for name in current if not finite[name])
    warnings = list(log.warnings)
    if all_nan and len(all_nan) == len(current):
        warnings.append("no metric has a single finite value (all NaN, null or inf)")
    if restarts:
        warnings.append(segments_line(restarts))
    return MetricFrame(
        table=table,
        format=kind,
        path=str(target),
        lines_read=log.lines_read,
        records=log.records,
        lines_skipped=log.lines_skipped,
        skip_reasons=dict(log.skipped),
        skipped_examples=tuple(log.examples),
        other_lines=log.other_lines,
        restarts=restarts,
        aliases=aliases,
        scaled=scaled,
        version_hint=version_hint(logged, log.features),
        all_nan_columns=all_nan,
        dropped_columns=tuple(sorted(log.dropped_columns - set(logged))),
        warnings=tuple(warnings),
        logged_metrics=tuple(current) if records.unread else (),
    )


def _apply_aliases(table: StepTable, logged: list[str]) -> tuple[StepTable, dict[str, str], dict[str, float]]:
    """Rename verl metric names to the catalog's, scale where the old name was scaled, merge clashes.

    ``logged``: every metric the run logged (the table's columns and those whose values were not kept): the
    aliases name them all, a rule's ``unless_logged`` sees them all.
    """
    import numpy as np

    everything = set(logged)
    renames: dict[str, Renamed] = {}
    for name in logged:
        renamed = rename_in(name, everything)
        if renamed is not None:
            renames[name] = renamed
    if not renames:
        return table, {}, {}
    aliases = {old: r.new for old, r in renames.items()}
    renames = {old: r for old, r in renames.items() if old in table.names}
    if not renames:
        return table, aliases, {}
    scaled = {r.new: r.scale for r in renames.values() if r.scale != 1.0}
    if scaled:
        table = table.scaled({old: r.scale for old, r in renames.items() if r.scale != 1.0})
    new_names = [renames[c].new if c in renames else c for c in table.names]
    if len(set(new_names)) == len(new_names):
        table = StepTable(table.steps, tuple(new_names), table.values)
    else:
        # two logged names for one metric (an old and a current spelling): the current one wins, the
        # old one fills its gaps
        order = list(dict.fromkeys(new_names))
        merged: dict[str, np.ndarray] = {}
        for j in sorted(range(len(new_names)), key=lambda j: table.names[j] in renames):
            name, column = new_names[j], table.values[:, j]
            merged[name] = np.where(is_missing(merged[name]), column, merged[name]) if name in merged else column
        values = np.empty((len(table.steps), len(order)), order="F")
        for k, name in enumerate(order):
            values[:, k] = merged[name]
        table = StepTable(table.steps, tuple(order), values)
    return table, aliases, scaled
