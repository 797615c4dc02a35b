"""Weights & Biases exports of a verl run (verl's ``wandb`` backend calls ``wandb.log(data, step=step)``).

- CSV from the API (``run.history().to_csv()``): a ``_step`` column, W&B's own ``_runtime``,
  ``_timestamp``... columns, one column per metric;
- CSV from a chart's "Export CSV": a ``Step`` column and ``<run name> - <metric>`` columns, with
  ``__MIN``/``__MAX`` companions when the chart was smoothed or sampled;
- ``wandb-history.jsonl`` from a local run directory (``wandb/run-*/files/``): one flat JSON object per
  step with ``_step``; read by the JSON-lines reader (``_jsonl``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from advisor.errors import MetricsError

from ._frame import ReadLog
from ._nan import LOGGED_NAN
from ._records import INT64_MAX, INT64_MIN, Records

STEP_COLUMNS = ("_step", "Step", "step")
_RUN_SEPARATOR = " - "  # "<run name> - <metric>" in chart exports; verl metric names have no spaces


def read_wandb_csv(path: Path, *, log: ReadLog) -> Records:
    """Read a W&B CSV export (one run) as step records."""
    import numpy as np
    import pandas as pd

    try:
        # only an empty cell is "not logged"; a "NaN"/"nan"/"inf" cell is a value the run logged (``_nan``)
        table = pd.read_csv(path, low_memory=False, on_bad_lines="skip", encoding_errors="replace",
                            dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, csv.Error) as err:
        raise MetricsError(f"not a readable CSV ({_first_line(err)})", path=str(path)) from err
    step_column = next((c for c in STEP_COLUMNS if c in table.columns), None)
    if step_column is None:
        raise MetricsError(
            "CSV without a step column", path=str(path), suggestion=f"W&B exports have one of {', '.join(STEP_COLUMNS)}"
        )
    data_lines = sum(1 for line in path.read_bytes().split(b"\n")[1:] if line.strip())
    log.lines_read = max(data_lines, len(table))
    if data_lines > len(table):
        # pandas drops them without saying where
        log.skip(None, "malformed CSV row (wrong number of fields)", count=data_lines - len(table))
    steps_raw = pd.to_numeric(table[step_column], errors="coerce").to_numpy(dtype=np.float64)
    good = np.isfinite(steps_raw) & (np.floor(steps_raw) == steps_raw)
    good &= (steps_raw >= INT64_MIN) & (steps_raw <= INT64_MAX)
    for row in np.flatnonzero(~good):
        log.skip(int(row) + 2, f"no integer '{step_column}'")  # +2: 1-based, after the header line
    table = table[good]
    log.records = len(table)

    names: list[str] = []
    columns = []
    runs: set[str] = set()
    for column in table.columns:
        name = str(column)
        if column == step_column or name.startswith(("_", "Unnamed:")):
            continue
        if name.endswith(("__MIN", "__MAX")):  # the band around a smoothed or sampled chart line
            continue
        if step_column == "Step" and _RUN_SEPARATOR in name:
            run, _, name = name.rpartition(_RUN_SEPARATOR)
            runs.add(run)
        text = table[column].str.strip()
        lower = text.str.lower()
        given = text != ""
        if given.any() and lower[given].isin(("true", "false")).all():
            numbers = (lower == "true").astype(np.float64).where(given)
        else:
            numbers = pd.to_numeric(text.where(given), errors="coerce").astype(np.float64)
        nan_texts = lower.isin(("nan", "-nan", "+nan"))  # the NaN spellings of nonfinite_text; pandas reads inf
        if numbers.isna().all() and given.any() and not nan_texts.any():
            log.dropped_columns.add(name)  # text, media or table references
            continue
        column = numbers.to_numpy().copy()
        column[nan_texts.to_numpy()] = LOGGED_NAN
        names.append(name)
        columns.append(column)
    if len(runs) > 1:
        shown = ", ".join(sorted(runs)[:3])
        raise MetricsError(
            f"CSV holds {len(runs)} runs ({shown}{', ...' if len(runs) > 3 else ''})",
            path=str(path),
            suggestion="export one run, or filter the chart to one run before exporting",
        )
    steps = table[step_column].astype(np.float64).to_numpy().astype(np.int64)
    values = np.column_stack(columns) if columns else np.empty((len(steps), 0))
    rows = np.flatnonzero(good)
    return Records(steps, names, np.asfortranarray(values, dtype=np.float64), line_of=lambda idx: rows[idx] + 2)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def looks_like_wandb_csv(head: str) -> bool:
    """Whether the first line of ``head`` is a CSV header with a W&B step column."""
    first = head.split("\n", 1)[0].strip().lstrip("\ufeff")
    if "," not in first:
        return False
    try:
        header = next(csv.reader(io.StringIO(first)))
    except (csv.Error, StopIteration):
        return False
    return any(h.strip() in STEP_COLUMNS for h in header)
