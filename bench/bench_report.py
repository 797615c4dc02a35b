"""Cost of `advisor report` on long runs: wall time, HTML size, points per series after downsampling.

Writes verl file-logger logs of 1,000 and 100,000 steps (~150 metrics a step, the generator of
bench_metrics_read.py) and times, in one process, for the config of examples/healthy_grpo:

- build: read the metrics, diagnose (as ``advisor suggest``), check the config, lay out the panels;
- html: build the figures and write the self-contained page (its size is printed: a 1,000-step report
  must stay under 1 MB, what a team channel or e-mail takes);
- png: the --png panels (matplotlib), with ``--png``.

Importing plotly and matplotlib is timed once, apart from the runs.

Also checks that downsampling hid no extreme: every drawn series reaches its metric's max and min.

    python bench/bench_report.py [--steps 1000 100000] [--png] [--dir /tmp/advisor-bench-report]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench this checkout, not whatever `advisor` is installed
sys.path.insert(0, str(REPO / "bench"))

from bench_metrics_read import write_verl_jsonl  # noqa: E402

CONFIG = REPO / "examples" / "healthy_grpo" / "run.sh"


def _extremes_kept(report: object) -> bool:
    frame = report.frame  # type: ignore[attr-defined]
    for chart in report.charts:  # type: ignore[attr-defined]
        if chart.kind != "line":
            continue
        for s in chart.series:
            col = frame[s.name].to_numpy(dtype=float)
            col = col[np.isfinite(col)]
            if s.values.max() != col.max() or s.values.min() != col.min():
                return False
    return True


def run(steps: int, workdir: Path, png: bool) -> None:
    from advisor import load_config
    from advisor.report import build_report, write_html, write_pngs

    log = workdir / f"metrics_{steps}.jsonl"
    if not log.exists():
        write_verl_jsonl(log, steps)
    cfg = load_config(CONFIG)
    from advisor.metrics import load_metrics

    load_metrics(log)  # warm: the readers' first-use costs (pyarrow, alias tables) are not the report's
    start = time.perf_counter()
    load_metrics(log)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    report = build_report(cfg, log)
    built = time.perf_counter()
    out = write_html(report, workdir / f"report_{steps}.html")
    written = time.perf_counter()
    png_s = None
    if png:
        write_pngs(report, workdir / f"png_{steps}")
        png_s = time.perf_counter() - written
    series = [s for c in report.charts for s in c.series]
    points = [len(s.steps) for s in series]
    raw = [s.points for s in series]
    metrics = report.frame.shape[1]  # type: ignore[attr-defined]
    print(f"{steps:>7,} steps, {metrics} metrics, {log.stat().st_size / 1e6:,.0f} MB of JSONL")
    print(f"  build (read + suggest + check + panels) {built - start:6.2f} s   (the read alone: {read_s:.2f} s)")
    print(f"  html  (figures + page)                  {written - built:6.2f} s   "
          f"{out.stat().st_size / 1e6:.2f} MB, {len(report.charts)} charts, {len(series)} series")
    if png_s is not None:
        print(f"  png   ({len(report.shown_panels)} panels)                        {png_s:6.2f} s")
    print(f"  total                                   {written - start + (png_s or 0):6.2f} s")
    print(f"  points per series: max {max(points):,}, median {int(np.median(points)):,} "
          f"(from up to {max(raw):,}); every series keeps its max and min: {_extremes_kept(report)}")
    limit = " (limit 1 MB)" if steps == 1_000 else ""
    print(f"report size: {steps:,} steps -> {out.stat().st_size / 1e6:.2f} MB of HTML{limit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--png", action="store_true", help="also time the --png panels")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the logs (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="advisor-bench-report-") as tmp:
        workdir = args.dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        import matplotlib.pyplot  # noqa: F401  (imports timed once, apart from the runs)
        import plotly.graph_objects  # noqa: F401
        print(f"importing plotly and matplotlib: {time.perf_counter() - started:.2f} s (once per process)")
        for steps in args.steps:
            run(steps, workdir, args.png)


if __name__ == "__main__":
    main()
