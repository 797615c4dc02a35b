"""W&B exports: CSV from the API or a chart, and wandb-history.jsonl in a run dir (advisor/metrics/_wandb.py)."""

from __future__ import annotations

import math
import shutil

import pytest

from advisor.errors import MetricsError
from advisor.metrics import load_metrics


def test_api_csv_export_drops_system_and_table_columns(fixtures):
    frame = load_metrics(fixtures / "wandb_api_export.csv")

    assert frame.format == "wandb-csv"
    assert frame.metrics == ["actor/pg_loss", "actor/ppo_kl", "critic/score/mean"]
    assert frame.data.index.tolist() == [1, 2, 3]
    assert frame["actor/ppo_kl"].tolist() == [0.00012, 0.00015, 0.00021]
    assert math.isnan(frame["actor/pg_loss"][3])
    assert frame.dropped_columns == ("val/generations",)


def test_chart_csv_export_strips_the_run_name_and_min_max_bands(fixtures):
    frame = load_metrics(fixtures / "wandb_chart_export.csv")

    assert frame.metrics == ["actor/ppo_kl"]
    assert frame["actor/ppo_kl"].tolist() == [0.00012, 0.00015, 0.00021]


def test_chart_csv_with_two_runs_is_refused(fixtures):
    with pytest.raises(MetricsError, match=r"CSV holds 2 runs \(run-a, run-b\); export one run"):
        load_metrics(fixtures / "wandb_chart_two_runs.csv")


def test_rows_without_a_step_are_skipped(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("_step,actor/ppo_kl\n1,0.1\n,0.2\nabc,0.3\n4,0.4\n")

    frame = load_metrics(path)

    assert frame.data.index.tolist() == [1, 4]
    assert frame.skipped_examples == ((3, "no integer '_step'"), (4, "no integer '_step'"))


def test_local_run_directory_with_wandb_history(fixtures, tmp_path):
    files = tmp_path / "wandb" / "run-20250110_080000-3f9a1b2c" / "files"
    files.mkdir(parents=True)
    shutil.copy(fixtures / "wandb-history.jsonl", files / "wandb-history.jsonl")

    frame = load_metrics(tmp_path / "wandb")

    assert frame.format == "wandb-jsonl"
    assert frame["critic/score/mean"].tolist() == [0.41, 0.44, 0.47]


def test_an_empty_cell_is_missing_and_a_nan_cell_a_logged_nan(tmp_path):
    from advisor.metrics import is_logged_nan

    csv = tmp_path / "export.csv"
    csv.write_text("_step,actor/pg_loss,val-core/x/reward/mean@1\n1,0.5,\n2,NaN,0.3\n3,,\n")
    frame = load_metrics(csv)
    loss = frame.table.column("actor/pg_loss")
    assert list(is_logged_nan(loss)) == [False, True, False] and loss[0] == 0.5
    assert not is_logged_nan(frame.table.column("val-core/x/reward/mean@1")).any()
