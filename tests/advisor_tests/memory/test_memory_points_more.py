"""bench/published_runs/memory_points_more.yaml holds what each log says, consistently (issue 37).

The points are read by hand-run extraction from logs that are not kept here (their URLs are in the file), so these
checks guard the transcription: every field that restates a config key agrees with the config the point records,
no logged length exceeds the cap the run set, torch's reserved peak is never below its allocated peak (the caching
allocator reserves what it allocates), and runs listed as repeats of one memory config measured the same peak.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

FILE = Path(__file__).resolve().parents[3] / "bench" / "published_runs" / "memory_points_more.yaml"
POINTS = yaml.safe_load(FILE.read_text(encoding="utf-8"))["points"]
REPEAT_SPREAD = 0.02  # same memory config, same card: the repeats' peaks agree within 2% of the point's


@pytest.mark.parametrize("point", POINTS, ids=[p["id"] for p in POINTS])
def test_point_restates_its_config(point):
    cfg = point["config"]
    assert point["gpus"] == cfg["trainer.n_gpus_per_node"]
    assert point["nodes"] == cfg["trainer.nnodes"]
    assert point["rollout_tp"] == cfg["actor_rollout_ref.rollout.tensor_model_parallel_size"]
    assert point["gmu"] == cfg["actor_rollout_ref.rollout.gpu_memory_utilization"]
    assert point["data"]["max_prompt"] == cfg["data.max_prompt_length"]
    assert point["data"]["max_response"] == cfg["data.max_response_length"]
    assert point["model_printed"] == cfg["actor_rollout_ref.model.path"]


@pytest.mark.parametrize("point", POINTS, ids=[p["id"] for p in POINTS])
def test_point_is_physically_consistent(point):
    assert point["max_reserved_gib"] >= point["max_allocated_gib"] > 0
    assert point["peak_step"] >= 1
    for lengths in (point["lengths"], point["lengths_run_max"]):
        if lengths is None:
            continue
        assert lengths["response_max"] <= point["data"]["max_response"]
        assert lengths["response_mean"] <= lengths["response_max"]
        assert lengths["prompt_mean"] <= lengths["prompt_max"]
    assert re.search(r"/blob/[0-9a-f]{40}/", point["url"]), "a source URL pinned to a commit"


def test_repeats_measured_the_same_peak():
    with_repeats = [p for p in POINTS if p.get("repeats")]
    assert with_repeats
    for point in with_repeats:
        for rep in point["repeats"]:
            assert abs(rep["max_allocated_gib"] / point["max_allocated_gib"] - 1) <= REPEAT_SPREAD, rep["run"]
