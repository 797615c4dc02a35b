"""Published verl runs (bench/published_runs/, SOURCE.md): the log alone is read, and a healthy run ending on a
validation-only step is not diagnosed as NaN.

The AMD MI300 PPO baseline linked from verl's docs/algo/baseline.md:41 trains 1,119 steps and ends with
`step:1120 - val/test_score/openai/gsm8k:0.701`, a row of validation only.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
import yaml

from advisor import load_config
from advisor.playbook import suggest_run

CORPUS = Path(__file__).resolve().parents[3] / "bench" / "published_runs"
CASES = yaml.safe_load((CORPUS / "corpus.yaml").read_text())["cases"]


def _unpacked(tmp_path: Path, name: str) -> Path:
    log = tmp_path / name.removesuffix(".gz")
    with gzip.open(CORPUS / name, "rb") as src, log.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return log


def test_the_amd_ppo_baseline_ending_on_a_validation_step_is_not_nan(tmp_path: Path) -> None:
    log = _unpacked(tmp_path, "amd_ppo_run_deepseek7b_llm.log.gz")
    assert log.read_text(errors="replace").rstrip().endswith("step:1120 - val/test_score/openai/gsm8k:0.701")
    cfg = load_config(log)
    assert cfg.from_log is not None and cfg.get("algorithm.adv_estimator") == "gae"
    result = suggest_run(cfg, log)
    ids = {d.id for d in result.diagnoses}
    assert not {"NU001", "NU002"} & ids and result.changes == []
    assert result.metrics.steps[-1] == 1120  # the validation row is read, as validation
    assert "val-core/openai/gsm8k/reward/mean@1" in result.metrics.metrics


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_log_of_the_corpus_names_its_source(case: dict) -> None:
    assert (CORPUS / case["file"]).is_file()
    assert case["file"] in (CORPUS / "SOURCE.md").read_text()
    assert case["expect"] in ("no change", "defensible") and (case["expect"] == "no change" or case.get("why"))
