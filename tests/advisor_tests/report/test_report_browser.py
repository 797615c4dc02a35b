"""The report in a real headless browser (Debian's chromium): it renders every chart, without script errors.

The page records every script error in ``#report-errors`` (a handler installed first thing) and marks
``<body data-report-ready="1" data-charts-rendered="N">`` once plotly.js has drawn. A screenshot is kept
as a test artifact in tests/artifacts/report_screenshot.png. `.ci/run` installs chromium when missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _report_html import parse

from advisor import load_config
from advisor.report import build_report
from advisor.report.html import render_html

pytest.importorskip("plotly")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "lr_too_high"  # several diagnoses, every card role
ARTIFACT = REPO / "tests" / "artifacts" / "report_screenshot.png"
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH; .ci/run installs Debian's "
                                   "chromium with apt-get when it can")


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless chromium on a local file, offline and with a throw-away profile."""
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=15000"]
    return subprocess.run([CHROMIUM, *flags, *args, page.as_uri()], capture_output=True, text=True, timeout=180,
                          check=False)


def body_and_errors(page: Path, profile: Path) -> tuple[dict[str, str], list[str]]:
    dom = parse(chromium(page, profile, "--dump-dom").stdout)
    body = dom.find_all("body")[0]
    errors = dom.by_id("report-errors")
    assert errors is not None
    return body.attrs, [li.text for li in errors.find_all("li")]


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    report = build_report(load_config(EXAMPLE / "run.sh"), EXAMPLE / "metrics.jsonl", gpu="H100-80GB")
    page = tmp_path_factory.mktemp("report") / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    return page, len(report.charts)


@needs_browser
def test_every_chart_renders_without_script_errors(report_page: tuple[Path, int], tmp_path: Path) -> None:
    page, charts = report_page
    body, errors = body_and_errors(page, tmp_path / "profile")
    assert body.get("data-report-ready") == "1"
    assert errors == []
    assert int(body["data-charts-expected"]) == charts
    assert int(body["data-charts-rendered"]) == charts


@needs_browser
def test_a_script_error_would_be_caught(report_page: tuple[Path, int], tmp_path: Path) -> None:
    page, _ = report_page
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>notDefinedAnywhere();</script></body>"), encoding="utf-8")
    _, errors = body_and_errors(broken, tmp_path / "profile")
    assert len(errors) == 1 and "notDefinedAnywhere" in errors[0]


@needs_browser
def test_screenshot_is_kept_as_an_artifact(report_page: tuple[Path, int], tmp_path: Path) -> None:
    page, _ = report_page
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.unlink(missing_ok=True)
    chromium(page, tmp_path / "profile", f"--screenshot={ARTIFACT}", "--window-size=1400,2400")
    assert ARTIFACT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ARTIFACT.stat().st_size > 50_000  # charts, not a blank page
