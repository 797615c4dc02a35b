"""`advisor report` on the command line: exit codes, one-line errors, --out and --png, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import app
from advisor.report.panels import PANELS

pytest.importorskip("plotly")

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RUN = EXAMPLES / "kl_spike_loss"
CONFIG, METRICS = str(RUN / "run.sh"), str(RUN / "metrics.jsonl")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0]


def test_writes_the_page_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = run("report", CONFIG, METRICS, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!doctype html>")
    assert result.stdout.startswith(f"wrote {out} ") and "KL001" in result.stdout


def test_overrides_after_the_metrics_reach_the_config(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert run("report", CONFIG, METRICS, "actor_rollout_ref.actor.optim.lr=2e-5", "--out", str(out)).exit_code == 0
    html = out.read_text()
    # the override reached the config (the diff's old value), and the metrics, which logged the run's actor/lr 1e-5,
    # contradict it: the halving starts from what the run used (issue #25), and the report says so. An override at
    # or below 5e-06 would already hold the change: no change back toward the run (test_crosscheck.py)
    assert "2e-05 → 5e-06" in html and "actor/lr logged 1e-05" in html


def test_bad_metrics_path_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    result = run("report", CONFIG, str(missing), "--out", str(tmp_path / "r.html"))
    _one_line_error(result, str(missing))
    assert not (tmp_path / "r.html").exists()


def test_unreadable_metrics_exit_2_in_a_subprocess_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "m.jsonl"
    bad.write_text('{"step": 1, "data": {}}\n')
    proc = subprocess.run([sys.executable, "-m", "advisor", "report", CONFIG, str(bad), "--out",
                           str(tmp_path / "r.html")], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr


@pytest.mark.parametrize("which", ["config", "metrics"])
def test_out_pointing_at_an_input_is_refused(tmp_path: Path, which: str) -> None:
    config, metrics = tmp_path / "run.sh", tmp_path / "metrics.jsonl"
    config.write_bytes(Path(CONFIG).read_bytes())
    metrics.write_bytes(Path(METRICS).read_bytes())
    target = config if which == "config" else metrics
    before = target.read_bytes()
    result = run("report", str(config), str(metrics), "--out", str(target))
    _one_line_error(result, str(target), "input")
    assert target.read_bytes() == before


def test_png_writes_one_file_per_panel_inside_the_directory(tmp_path: Path) -> None:
    pngs = tmp_path / "panels"
    result = run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"), "--png", str(pngs))
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in pngs.iterdir())
    # kl_spike_loss is GRPO: no critic panel
    assert written == sorted(f"{p.id}.png" for p in PANELS if p.id != "critic")
    for name in written:
        assert (pngs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"wrote {pngs / name}" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["panels", "r.html"]  # nothing outside DIR and --out
    again = run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"), "--png", str(pngs))
    assert again.exit_code == 0  # our own PNG names are rewritten


def test_png_to_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "x.png"
    file.write_bytes(b"keep")
    _one_line_error(run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"), "--png", str(file)), str(file))
    assert file.read_bytes() == b"keep"


def test_unknown_gpu_exits_2(tmp_path: Path) -> None:
    _one_line_error(run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"), "--gpu", "Z9000"), "Z9000")


def test_without_the_report_extra_one_line_says_what_to_install(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # makes `import plotly` fail
    result = run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"))
    _one_line_error(result, "plotly", "pip install -e '.[report]' (from the verl-advisor checkout)")
    assert not (tmp_path / "r.html").exists()


def test_png_needs_matplotlib(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = run("report", CONFIG, METRICS, "--out", str(tmp_path / "r.html"), "--png", str(tmp_path / "p"))
    _one_line_error(result, "matplotlib", "pip install -e '.[report]'")


@pytest.mark.parametrize("command", [["suggest", CONFIG, METRICS, "-f", "json"], ["check", CONFIG, "-f", "json"]])
def test_suggest_and_check_never_import_the_plotting_libraries(command: list[str]) -> None:
    code = (f"import sys; from advisor.cli import main; sys.argv=['advisor', *{command!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "bad=[m for m in ('plotly','matplotlib','advisor.report') if m in sys.modules]\n"
            "sys.stderr.write('LOADED:' + repr(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stderr.strip().endswith("LOADED:[]"), proc.stderr
