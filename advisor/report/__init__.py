"""``advisor report``: one self-contained HTML page (and optional PNGs) of a run's metrics and diagnoses.

    build_report(cfg, metrics_path, *, window=None, gpu=None, gpu_memory_gib=None, model_config=None) -> Report
    write_html(report, path) -> Path
    write_pngs(report, directory) -> list[Path]
    missing_plotting(png=False) -> str | None   # which optional library is not installed

Data flows one way: Suggestion/CheckReport -> panels and cards (``build``, ``panels``, pure data) ->
rendering (``html`` with plotly, ``png`` with matplotlib). The plotting libraries are imported only
inside the renderers, so ``advisor check`` / ``advisor suggest`` never load them.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from advisor.errors import install_hint

from .build import assemble, build_report
from .spec import Report

INSTALL_HINT = install_hint("report")


def missing_plotting(png: bool = False) -> str | None:
    """The first plotting library the report needs that cannot be imported, or None."""
    for name in ("plotly", *(("matplotlib",) if png else ())):
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def write_html(report: Report, path: Path) -> Path:
    from .html import write_html as _write

    return _write(report, path)


def write_pngs(report: Report, directory: Path) -> list[Path]:
    from .png import write_pngs as _write

    return _write(report, directory)


__all__ = ["INSTALL_HINT", "Report", "assemble", "build_report", "missing_plotting", "write_html", "write_pngs"]
