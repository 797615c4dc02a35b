"""The report's panels as PNG files (matplotlib, Agg backend: no display, no browser).

One file per shown panel, ``<DIR>/<panel id>.png``, for terminals and chat. Same data as the page:
healthy band (green), diagnosis window (orange), rule thresholds (dashed), GPU capacity (red).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from .spec import Chart, Panel, Report, y_range

if TYPE_CHECKING:  # matplotlib is imported only when a PNG is drawn
    from matplotlib.axes import Axes

COLUMNS = 2


def _draw(ax: Axes, chart: Chart, window: tuple[int, int, int]) -> None:
    lo, hi = y_range(chart)
    if chart.kind == "stacked":
        steps = chart.series[0].steps
        ax.stackplot(steps, *[s.values for s in chart.series], labels=[s.name for s in chart.series], alpha=0.85)
    else:
        for s in chart.series:
            ax.plot(s.steps, s.values, linewidth=1.0, label=s.name)
    if chart.total is not None:
        ax.plot(chart.total.steps, chart.total.values, color="#222", linestyle=":", linewidth=1.0,
                label=chart.total.name)
    if chart.band is not None:
        y0 = lo if chart.band.low is None else max(chart.band.low, lo)
        y1 = hi if chart.band.high is None else min(chart.band.high, hi)
        if y0 < y1:
            ax.axhspan(y0, y1, color="#2e7d32", alpha=0.12, linewidth=0, zorder=0)
    first, last, _ = window
    ax.axvspan(first - 0.5, last + 0.5, color="#ffa000", alpha=0.15, linewidth=0, zorder=0)
    for line in chart.lines:
        capacity = line.kind == "capacity"
        ax.axhline(line.value, color="#c62828" if capacity else "#6a1b9a", linestyle="-" if capacity else "--",
                   linewidth=1.0)
        ax.annotate(line.label, xy=(1.0, line.value), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                    fontsize=7, color="#c62828" if capacity else "#6a1b9a")
    ax.set_ylim(lo, hi)
    ax.set_title(chart.title + (f"  [{', '.join(chart.diagnoses)}]" if chart.diagnoses else ""), fontsize=9,
                 loc="left")
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.25)
    if len(chart.series) > 1 or chart.total is not None:
        ax.legend(fontsize=6, loc="upper left", framealpha=0.7)


def panel_png(panel: Panel, window: tuple[int, int, int], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = math.ceil(len(panel.charts) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(12, 3.2 * rows), squeeze=False)
    for ax, chart in zip(axes.flat, panel.charts, strict=False):
        _draw(ax, chart, window)
    for ax in list(axes.flat)[len(panel.charts):]:
        ax.set_visible(False)
    fig.suptitle(panel.title, fontsize=12, x=0.01, ha="left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_pngs(report: Report, directory: Path) -> list[Path]:
    """One PNG per shown panel with at least one chart; returns the files written (inside ``directory``)."""
    directory.mkdir(parents=True, exist_ok=True)
    return [panel_png(p, report.window, directory / f"{p.id}.png") for p in report.shown_panels if p.charts]
