"""A verl 0.9.1 run's metrics read as a 0.7 one: every name known, the renamed ones under the catalog's names.

The fixture (tests/fixtures/metrics/file_logger_v091.jsonl) holds the names verl 0.9.1's V1 trainer logs
for a GRPO run (verl_logs.CATALOGUE_V091, each with its 0.9.1 file:line). The expected renames come from
verl's source: v0.8.0 removed the legacy fsdp_workers.py, and the engine workers' memory peaks
(0.9.1:verl/workers/engine_workers.py:219-221) reach the log under actor/ (trainer_base.py:1861,
rename_dict).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from verl_logs import CATALOGUE_V091, METRICS_FIXTURES, VAL_CATALOGUE_V091

from advisor.cli import app
from advisor.metrics import load_metrics
from advisor.metrics._aliases import parse_version
from advisor.metrics._catalog import load_catalog

REPO = Path(__file__).resolve().parents[3]
FIXTURE = METRICS_FIXTURES / "file_logger_v091.jsonl"
CONFIG = REPO / "examples" / "lr_too_high" / "run.sh"  # a GRPO launch script
VERL_WHEEL = Path(os.environ.get("VERL_0_9_1", "/work/wheels/x/verl-0.9.1"))
RENAMED = {
    "actor/perf/max_memory_allocated_gb": "perf/max_memory_allocated_gb",
    "actor/perf/max_memory_reserved_gb": "perf/max_memory_reserved_gb",
    "actor/perf/cpu_memory_used_gb": "perf/cpu_memory_used_gb",
}


def _logged_names() -> set[str]:
    names: set[str] = set()
    for line in FIXTURE.read_text().splitlines():
        names.update(json.loads(line)["data"])
    return names


def test_the_fixture_holds_the_catalogue_and_nothing_else() -> None:
    expected = {n for n, *_ in CATALOGUE_V091} | {n for n, *_ in VAL_CATALOGUE_V091}
    assert _logged_names() == expected | {"timing_s/testing", "timing_s/save_checkpoint"}


def test_every_name_of_a_0_9_run_is_read_and_known() -> None:
    frame = load_metrics(FIXTURE)
    catalog = load_catalog()

    unknown = [name for name in frame.metrics if not catalog.is_known(name)]
    assert unknown == []
    assert len(frame.metrics) == len(_logged_names())  # no two names merged into one


def test_renamed_names_map_to_the_catalog_names() -> None:
    frame = load_metrics(FIXTURE)

    assert frame.aliases == RENAMED
    assert not set(RENAMED) & set(frame.metrics)
    assert set(RENAMED.values()) <= set(frame.metrics)
    # the values are the logged ones (same quantity, no scale)
    first = json.loads(FIXTURE.read_text().splitlines()[1])
    assert frame["perf/max_memory_reserved_gb"].loc[1] == first["data"]["actor/perf/max_memory_reserved_gb"]


def test_the_names_date_the_log_at_0_9_or_later() -> None:
    hint = load_metrics(FIXTURE).version_hint

    assert hint is not None and hint.consistent, hint
    assert parse_version(hint.lower) >= parse_version("0.9.0") and hint.upper is None, hint.evidence
    assert "training/off_policy/trajectory_spans/mean: >=0.9.0" in hint.evidence


def test_advisor_suggest_reads_every_metric_name() -> None:
    result = CliRunner().invoke(app, ["suggest", str(CONFIG), str(FIXTURE), "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)

    assert data["uncatalogued_metrics"] == []
    assert data["metrics"]["aliases"] == RENAMED
    assert not any("not in the metric catalog" in note for note in data["notes"])


def test_a_name_the_catalog_does_not_know_is_named_in_the_notes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lines = FIXTURE.read_text().splitlines()
    record = json.loads(lines[1])
    record["data"]["my_team/custom_reward"] = 0.5
    path.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")

    data = json.loads(CliRunner().invoke(app, ["suggest", str(CONFIG), str(path), "-f", "json"]).stdout)

    assert data["uncatalogued_metrics"] == ["my_team/custom_reward"]
    assert any("1 metric name not in the metric catalog" in n and "my_team/custom_reward" in n
               for n in data["notes"])


# --- against verl 0.9.1 itself (skipped where the wheel is absent) ----------------------------------------

def _names_script():
    spec = importlib.util.spec_from_file_location("verl_metric_names", REPO / "scripts" / "verl_metric_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not VERL_WHEEL.is_dir(), reason="verl 0.9.1 wheel absent (set VERL_0_9_1)")
def test_every_fixture_name_is_one_verl_0_9_1_writes() -> None:
    written = _names_script().metric_names(str(VERL_WHEEL))
    families = [name for name in written if "*" in name]

    # an f-string family (f"{prefix}/balanced_min", f"{metric_sec}/{data_source}/...") matches by glob
    missing = [n for n in _logged_names() if n not in written and not any(fnmatch.fnmatch(n, f) for f in families)]
    assert missing == []


@pytest.mark.skipif(not VERL_WHEEL.is_dir(), reason="verl 0.9.1 wheel absent (set VERL_0_9_1)")
def test_the_catalog_knows_every_name_verl_0_9_1_writes() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "verl_metric_names.py"), str(VERL_WHEEL),
                           "--check"], capture_output=True, text=True, cwd=REPO)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"== {VERL_WHEEL}: 0 uncatalogued name(s)"]


def test_advisor_report_draws_the_0_9_memory_peaks_under_the_catalog_names() -> None:
    pytest.importorskip("plotly")
    from advisor import load_config
    from advisor.report import build_report
    from advisor.report.html import render_html

    html = render_html(build_report(load_config(CONFIG), FIXTURE, gpu="H100-80GB"))
    charts = [m.split() for m in re.findall(r'data-metrics="([^"]*)"', html)]
    notes = re.findall(r'<li class="note">([^<]*)', html)

    # the memory chart reads perf/max_memory_* (advisor/report/panels.py), logged as actor/perf/* by 0.9.1
    assert ["perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"] in charts
    assert not [n for n in notes if "perf/max_memory" in n and "not logged" in n]
