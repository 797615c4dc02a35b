"""Config against metrics: a contradiction is a warning naming both values, and the change starts from what the
run used; after --write, a rerun on the same metrics says they predate the change instead of changing again.

Runs are the bundled examples (their run.sh and metrics.jsonl) with one thing swapped; expected values are the
ones written into the files here.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from advisor import load_config
from advisor.cli import app
from advisor.playbook import suggest_run

REPO = Path(__file__).resolve().parents[3]
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


def test_a_raised_response_cap_next_to_the_old_runs_metrics_is_not_raised_again(tmp_path: Path) -> None:
    # truncation: the run cut responses at 256 tokens (response_length/max 256, clip_ratio > 0); after --write
    # doubles the cap, the same metrics must not double it again
    for name in ("run.sh", "metrics.jsonl"):
        shutil.copy(EXAMPLES / "truncation" / name, tmp_path / name)
    script, metrics = tmp_path / "run.sh", tmp_path / "metrics.jsonl"
    cap = load_config(script).get("data.max_response_length")
    first = suggest_run(load_config(script), metrics)
    assert [c.key for c in first.changes] == ["data.max_response_length"] and first.warnings == []
    written = CliRunner().invoke(app, ["suggest", str(script), str(metrics), "--write"])
    assert written.exit_code == 0, written.output
    assert load_config(script).get("data.max_response_length") == first.changes[0].new != cap
    again = suggest_run(load_config(script), metrics)
    assert again.changes == []
    text = " | ".join(again.warnings)
    assert f"responses were cut at the run's cap, {cap} tokens" in text and "the metrics predate the change" in text


N_KEY, BATCH_KEY = "actor_rollout_ref.rollout.n", "data.train_batch_size"


def _rewritten(tmp_path: Path, example: str, change: Any) -> Path:
    """The example's metrics with ``change(data)`` applied to every step's record."""
    out = tmp_path / "metrics.jsonl"
    rows = [json.loads(line) for line in (EXAMPLES / example / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        change(row["data"])
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _responses_per_step(metrics: Path) -> float:
    """perf/total_num_tokens / (prompt_length/mean + response_length/mean), the median over steps (verl's
    metric_utils.py:679, 589, 573 @1dda039b: the sum and the means of the same responses' tokens)."""
    rows = [json.loads(line)["data"] for line in metrics.read_text().splitlines()]
    ratios = sorted(d["perf/total_num_tokens"] / (d["prompt_length/mean"] + d["response_length/mean"])
                    for d in rows if "perf/total_num_tokens" in d)
    return ratios[len(ratios) // 2]


def test_an_n2_script_beside_an_n5_runs_metrics_warns_and_the_advice_starts_from_5(tmp_path: Path) -> None:
    ex = EXAMPLES / "grpo_flat_groups"
    cfg = load_config(ex / "run.sh", [f"{N_KEY}=2"])
    batch = cfg.get(BATCH_KEY)
    real_n = round(_responses_per_step(ex / "metrics.jsonl") / batch)
    assert real_n == 5  # the example's run.sh says 5: the metrics are that run's
    result = suggest_run(cfg, ex / "metrics.jsonl")
    text = " | ".join(result.warnings)
    assert f"{N_KEY} is {batch} × 2 = {batch * 2:,}" in text and f"the run used rollout.n={real_n}" in text
    assert "perf/total_num_tokens" in text and f"= {real_n:.3f} responses each" in text
    assert result.facts.plan.n == real_n  # what the flat-group arithmetic reads
    # AD001's second fix doubles n ("{current} * 2"): from the run's 5, never from the file's 2
    proposed = [c for alt in [result.changes, *result.alternatives] for c in alt if c.key == N_KEY]
    assert proposed and all(c.new == 2 * real_n and c.old == 2 for c in proposed)


def test_the_n_crosscheck_tolerates_console_rounding(tmp_path: Path) -> None:
    def rounded(data: dict[str, Any]) -> None:  # a console log's 3 significant-ish decimals
        for key in ("prompt_length/mean", "response_length/mean"):
            if key in data:
                data[key] = float(f"{data[key]:.1f}")

    metrics = _rewritten(tmp_path, "grpo_flat_groups", rounded)
    result = suggest_run(load_config(EXAMPLES / "grpo_flat_groups" / "run.sh", [f"{N_KEY}=2"]), metrics)
    assert result.facts.plan.n == 5
    same = suggest_run(load_config(EXAMPLES / "grpo_flat_groups" / "run.sh"), metrics)
    assert same.warnings == []


def test_grpo_advantages_past_what_n_allows_name_the_group_size(tmp_path: Path) -> None:
    # without the token count, a GRPO advantage can show n: |A| <= (n-1)/sqrt(n) for a group of n (Samuelson's
    # inequality; verl divides by the unbiased std, core_algos.py:321, 326), reached by one response apart
    metrics = _rewritten(tmp_path, "lr_too_high", lambda d: d.pop("perf/total_num_tokens", None))
    largest = max(max(abs(d.get("critic/advantages/max", 0)), abs(d.get("critic/advantages/min", 0)))
                  for d in (json.loads(line)["data"] for line in metrics.read_text().splitlines()))
    assert abs(largest - 4 / math.sqrt(5)) < 1e-3  # the example's n=5 groups reach the bound
    result = suggest_run(load_config(EXAMPLES / "lr_too_high" / "run.sh", [f"{N_KEY}=2"]), metrics)
    text = " | ".join(result.warnings)
    assert f"{N_KEY}=2" in text and f"(n-1)/√n = {1 / math.sqrt(2):.4g}" in text and "n=5" in text
    assert result.facts.plan.n == 5
    # the config's own n allows them: quiet
    assert suggest_run(load_config(EXAMPLES / "lr_too_high" / "run.sh"), metrics).warnings == []


def test_a_halved_batch_size_beside_the_runs_metrics_warns_about_the_batch_not_n() -> None:
    ex = EXAMPLES / "healthy_grpo"
    cfg = load_config(ex / "run.sh", [f"{BATCH_KEY}=256"])
    responses = _responses_per_step(ex / "metrics.jsonl")
    result = suggest_run(cfg, ex / "metrics.jsonl")
    text = " | ".join(result.warnings)
    assert f"{BATCH_KEY}={round(responses / 5)}" in text and f"{N_KEY} is 256 × 5 = 1,280" in text
    assert result.facts.plan.n == 5 and result.facts.plan.prompts_per_step == round(responses / 5)


def test_a_prompt_longer_than_a_filtered_cap_warns(tmp_path: Path) -> None:
    ex = EXAMPLES / "healthy_grpo"
    cfg = load_config(ex / "run.sh", ["data.filter_overlong_prompts=True"])
    cap = cfg.get("data.max_prompt_length")
    metrics = _with_logged(tmp_path, "healthy_grpo", {"prompt_length/max": cap + 100})
    text = " | ".join(suggest_run(cfg, metrics).warnings)
    assert f"prompt_length/max reached {cap + 100}" in text and f"data.max_prompt_length={cap}" in text
    unfiltered = load_config(ex / "run.sh", ["data.filter_overlong_prompts=False"])
    assert not any("prompt_length/max" in w for w in suggest_run(unfiltered, metrics).warnings)


def test_every_bundled_example_matches_its_own_config() -> None:
    for metrics in sorted(EXAMPLES.glob("*/metrics.jsonl")):
        result = suggest_run(load_config(metrics.parent / "run.sh"), metrics)
        assert result.warnings == [], (metrics.parent.name, result.warnings)


# --- on runs verl's authors published (bench/published_runs/SOURCE.md): the formulas hold on verl's own numbers --

PUBLISHED = REPO / "bench" / "published_runs"


def _published(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name.removesuffix(".gz")
    out.write_bytes(gzip.decompress((PUBLISHED / name).read_bytes()))
    return out


def test_a_published_gpg_run_logs_batch_times_n_responses_and_an_n2_config_is_caught(tmp_path: Path) -> None:
    # docs/algo/baseline.md:38's GPG run: train_batch_size 1024, rollout.n 5 in its printed config; its own
    # perf/total_num_tokens / (prompt + response mean) is 5120 = 1024 x 5 on every step
    log = _published(tmp_path, "gpg_qwen2-7b_math.log.gz")
    as_published = load_config(log)
    assert (as_published.get(BATCH_KEY), as_published.get(N_KEY)) == (1024, 5)
    assert round(_per_step(log)) == 1024 * 5
    assert suggest_run(as_published, log).warnings == []
    edited = suggest_run(load_config(log, [f"{N_KEY}=2"]), log)
    text = " | ".join(edited.warnings)
    assert f"{N_KEY} is 1024 × 2 = 2,048" in text and "the run used rollout.n=5" in text
    assert edited.facts.plan.n == 5


def test_a_published_grpo_runs_advantages_reach_the_bound_of_its_n(tmp_path: Path) -> None:
    # docs/algo/baseline.md:42's GRPO run (rollout.n 5, no perf/total_num_tokens in its verl 0.2-0.3 log): its
    # advantages peak at 1.789 = (5-1)/sqrt(5), a group with one response apart from the other four
    log = _published(tmp_path, "amd_grpo_run_deepseek7b_llm.log.gz")
    assert load_config(log).get(N_KEY) == 5
    assert suggest_run(load_config(log), log).warnings == []
    edited = suggest_run(load_config(log, [f"{N_KEY}=2"]), log)
    text = " | ".join(edited.warnings)
    assert f"{4 / math.sqrt(5):.4g} is (n-1)/√n for n=5" in text and f"{N_KEY}=2" in text
    assert edited.facts.plan.n == 5


def _per_step(log: Path) -> float:
    from advisor.metrics import as_table, load_metrics

    table = as_table(load_metrics(log))
    total, prompt, response = (table.column(k) for k in ("perf/total_num_tokens", "prompt_length/mean",
                                                        "response_length/mean"))
    ok = [t / (p + r) for t, p, r in zip(total, prompt, response, strict=True) if t == t and p == p and r == r]
    return sorted(ok)[len(ok) // 2]


def test_a_batch_that_varies_step_to_step_is_not_read_as_another_n_or_batch(tmp_path: Path) -> None:
    # groups filtered and not refilled (a DAPO-style run): each step trains a different number of responses, so no
    # one count contradicts the config
    step = iter(range(10_000))

    def shrunk(data: dict[str, Any]) -> None:
        if "perf/total_num_tokens" in data:
            data["perf/total_num_tokens"] *= 0.5 + 0.4 * ((next(step) * 7) % 10) / 10

    metrics = _rewritten(tmp_path, "healthy_grpo", shrunk)
    cfg = load_config(EXAMPLES / "healthy_grpo" / "run.sh")
    assert suggest_run(cfg, metrics).warnings == []
