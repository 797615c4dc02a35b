"""Config against metrics: a contradiction is a warning naming both values, and the change starts from what the
run used; after --write, a rerun on the same metrics says they predate the change instead of changing again.

Runs are the bundled examples (their run.sh and metrics.jsonl) with one thing swapped; expected values are the
ones written into the files here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app
from advisor.playbook import suggest_run

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _with_logged(tmp_path: Path, example: str, extra: dict[str, float]) -> Path:
    """The example's metrics with ``extra`` logged on every step."""
    out = tmp_path / "metrics.jsonl"
    rows = [json.loads(line) for line in (EXAMPLES / example / "metrics.jsonl").read_text().splitlines()]
    out.write_text("".join(json.dumps({**r, "data": {**r["data"], **extra}}) + "\n" for r in rows))
    return out


def test_a_ppo_config_with_a_grpo_runs_metrics_warns_with_both_values(tmp_path: Path) -> None:
    # the GRPO run logged actor/lr 1e-4 and actor/kl_loss, and no critic; the PPO config says lr 1e-6, no KL loss
    metrics = _with_logged(tmp_path, "healthy_grpo", {"actor/lr": 1e-4})
    cfg = load_config(EXAMPLES / "healthy_ppo" / "run.sh")
    assert cfg.get("actor_rollout_ref.actor.optim.lr") == 1e-6 and not cfg.get("actor_rollout_ref.actor.use_kl_loss")
    warnings = " | ".join(suggest_run(cfg, metrics).warnings)
    assert "actor/lr logged 0.0001" in warnings and "actor_rollout_ref.actor.optim.lr=1e-06" in warnings
    assert "actor/kl_loss" in warnings and "use_kl_loss=False" in warnings
    assert "no critic/vf_loss" in warnings


def test_a_matching_pair_does_not_warn() -> None:
    for example in ("healthy_ppo", "healthy_grpo", "lr_too_high"):
        result = suggest_run(load_config(EXAMPLES / example / "run.sh"), EXAMPLES / example / "metrics.jsonl")
        assert result.warnings == [], (example, result.warnings)


def test_a_response_length_past_the_cap_warns(tmp_path: Path) -> None:
    cfg = load_config(EXAMPLES / "healthy_grpo" / "run.sh")
    cap = cfg.get("data.max_response_length")
    metrics = _with_logged(tmp_path, "healthy_grpo", {"response_length/max": cap * 2})
    warnings = " | ".join(suggest_run(cfg, metrics).warnings)
    assert f"response_length/max reached {cap * 2}" in warnings and f"data.max_response_length={cap}" in warnings


def test_after_write_a_rerun_on_the_same_metrics_says_they_predate_the_change(tmp_path: Path) -> None:
    for name in ("run.sh", "metrics.jsonl"):
        shutil.copy(EXAMPLES / "lr_too_high" / name, tmp_path / name)
    script, metrics = tmp_path / "run.sh", tmp_path / "metrics.jsonl"
    lr = load_config(script).get("actor_rollout_ref.actor.optim.lr")
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps({**r, "data": {**r["data"], "actor/lr": lr}}) + "\n" for r in rows))
    first = CliRunner().invoke(app, ["suggest", str(script), str(metrics), "--write", "--width", "200"])
    assert first.exit_code == 0, first.output
    written = load_config(script).get("actor_rollout_ref.actor.optim.lr")
    assert written != lr
    again = suggest_run(load_config(script), metrics)
    assert not [c for c in again.changes if c.key == "actor_rollout_ref.actor.optim.lr"]
    text = " | ".join(again.warnings)
    assert "the metrics predate the change" in text and f"logged {lr:g}" in text


def test_a_config_already_past_the_proposal_gets_no_change_back_toward_the_run() -> None:
    # kl_spike_loss logged actor/lr 1e-05 and KL001 halves it (5e-06); a config already at 2e-06 holds more than
    # that change, so proposing 5e-06 would raise the user's lr: no change, and the metrics predate the config
    ex = EXAMPLES / "kl_spike_loss"
    cfg = load_config(ex / "run.sh", ["actor_rollout_ref.actor.optim.lr=2e-6"])
    result = suggest_run(cfg, ex / "metrics.jsonl")
    assert result.changes == []
    assert any("predate" in w and "2e-06" in w and "5e-06" in w for w in result.warnings)
    above = suggest_run(load_config(ex / "run.sh", ["actor_rollout_ref.actor.optim.lr=2e-5"]), ex / "metrics.jsonl")
    assert [(c.old, c.new) for c in above.changes] == [(2e-5, 5e-6)]  # from the run's 1e-05, halved
