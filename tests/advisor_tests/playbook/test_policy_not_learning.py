"""EN003 ("the policy is not learning") is not said of a saturated run (issue 35: a score near its ceiling is
saturation, not a stall).

The published GPG Megatron run (bench/published_runs/SOURCE.md; a reference result, docs/algo/baseline.md:39) ends
with entropy and training score both flat, the score at 0.98 of its 0/1 reward: saturated, so EN003 stays quiet.
The same log with every critic/score/mean scaled by 0.4 (the same flat curve, now in the middle of the reward's
range; every other metric as logged) is a flat score that did not get anywhere, and EN003 speaks.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from advisor.load import load_config_from_log
from advisor.playbook import suggest_run

LOG = Path(__file__).resolve().parents[3] / "bench" / "published_runs" / "gpg_qwen2-7b_math_megatron.log.gz"
_SCORE = re.compile(r"(critic/score/mean:)(-?[\d.]+)")


def _rules_fired(log: Path) -> set[str]:
    result = suggest_run(load_config_from_log(log), log)  # the config the log printed, as `advisor suggest LOG`
    return {d.rule.id for d in result.learning}


def test_saturated_published_run_is_not_called_not_learning(tmp_path: Path) -> None:
    log = tmp_path / "gpg_megatron.log"
    log.write_bytes(gzip.decompress(LOG.read_bytes()))
    fired = _rules_fired(log)
    assert "RW002" in fired  # the saturation the run shows is still reported, as saturation
    assert "EN003" not in fired


def test_the_same_flat_score_mid_range_is_called_not_learning(tmp_path: Path) -> None:
    text = gzip.decompress(LOG.read_bytes()).decode("utf-8")
    scaled, count = _SCORE.subn(lambda m: f"{m.group(1)}{float(m.group(2)) * 0.4:.3f}", text)
    assert count > 100  # every step line's score moved
    log = tmp_path / "gpg_megatron_mid_range.log"
    log.write_text(scaled, encoding="utf-8")
    assert "EN003" in _rules_fired(log)
