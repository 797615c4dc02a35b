"""The metric catalog (knowledge/metrics.yaml): complete against verl-internals §4.2, sourced, and loadable.

The expected names below were written from ../shared/research/verl-internals.md §4.2 and the seeds
(../shared/seeds/*.txt), not from the YAML.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from advisor.errors import PlaybookError
from advisor.metrics._catalog import load_catalog, parse_catalog

VERL_MIRROR = Path(os.environ.get("VERL_GIT", "/work/.mirror/verl-project+verl/repo"))
VERL_WHEEL = Path(os.environ.get("VERL_0_9_1", "/work/wheels/x/verl-0.9.1"))  # `pip download verl==0.9.1`, unzipped


def _family(prefix: str, stats: str = "mean,max,min") -> list[str]:
    return [f"{prefix}/{s}" for s in stats.split(",")]


# verl-internals §4.2, row by row (the {mean,max,min} families expanded)
SECTION_4_2 = [
    *_family("global_seqlen", "min,max,minmax_diff,balanced_min,balanced_max,mean"),
    "actor/entropy",
    "perf/mfu/actor_infer",
    "training/rollout_probs_diff_valid", "training/rollout_probs_diff_max", "training/rollout_probs_diff_mean",
    "training/rollout_probs_diff_std", "training/rollout_actor_probs_pearson_corr",
    "actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff",
    *[f"rollout_corr/rollout_is_{k}" for k in (
        "mean", "max", "min", "std", "eff_sample_size", "ratio_fraction_high", "ratio_fraction_low",
        "batch_norm_factor", "seq_mean", "seq_std", "seq_max", "seq_min", "seq_max_deviation",
        "seq_fraction_high", "seq_fraction_low")],
    "rollout_corr/rollout_rs_masked_fraction", "rollout_corr/rollout_rs_seq_masked_fraction",
    "rollout_corr/rollout_rs_token_k1_mean", "rollout_corr/rollout_rs_token_k1_seq_max",
    *[f"rollout_corr/{k}" for k in (
        "training_ppl", "training_log_ppl", "kl", "k3_kl", "rollout_ppl", "rollout_log_ppl", "log_ppl_diff",
        "log_ppl_abs_diff", "log_ppl_diff_max", "log_ppl_diff_min", "ppl_ratio", "chi2_token", "chi2_seq")],
    "critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr", "perf/mfu/critic",
    "actor/pg_loss", "actor/kl_loss", "actor/kl_coef", "actor/pg_clipfrac", "actor/ppo_kl",
    "actor/pg_clipfrac_lower", "actor/grad_norm",
    "perf/mfu/actor", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb",
    "actor/lr",
    "val-core/openai/gsm8k/reward/mean@1", "val-core/openai/gsm8k/acc/maj@8/mean",
    "val-aux/openai/gsm8k/reward/std@4", "val-aux/openai/gsm8k/score/worst@2/std",
    *_family("val-aux/num_turns", "min,max,mean"),
    "training/global_step", "training/epoch",
    *_family("critic/score"), *_family("critic/rewards"), *_family("critic/advantages"),
    *_family("critic/returns"), *_family("critic/values"), "critic/vf_explained_var",
    *_family("response_length"), "response_length/clip_ratio",
    *_family("response_length_non_aborted", "mean,max,min,clip_ratio"), "response/aborted_ratio",
    *_family("prompt_length", "mean,max,min,clip_ratio"),
    *_family("num_turns", "min,max,mean"), *_family("tool_call_counts", "min,max,mean"),
    *[f"timing_s/{s}" for s in (
        "start_profile", "step", "gen", "gen_max", "reward", "old_log_prob", "ref", "values", "adv",
        "update_critic", "update_actor", "update_weights", "dump_rollout_generations", "testing",
        "save_checkpoint", "stop_profile")],
    *[f"timing_s/agent_loop/{k}/{s}" for k in ("generate_sequences", "tool_calls", "num_preempted")
      for s in ("min", "max", "mean")],
    *[f"timing_s/agent_loop/slowest/{k}" for k in (
        "generate_sequences", "tool_calls", "prompt_length", "response_length", "num_preempted")],
    *[f"timing_per_token_ms/{s}" for s in ("gen", "ref", "values", "adv", "update_critic", "update_actor")],
    "perf/total_num_tokens", "perf/time_per_step", "perf/throughput",
    *[f"variance_proxy/{k}" for k in (
        "proxy1_signal_strength", "proxy2_total_power", "proxy3_pure_noise", "expected_a_squared", "expected_w")],
    "train/num_gen_batches",
]

# names the seeds use that verl (HEAD) writes under the same name
SEEDS_VERL_NAMES = [
    "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower", "actor/kl_loss",
    "actor/kl_coef", "actor/grad_norm", "actor/lr", "actor/entropy", "actor/entropy_loss",
    "critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/vf_explained_var", "critic/grad_norm",
    "critic/lr", "actor/reward_kl_penalty", "actor/reward_kl_penalty_coeff",
    "response_length/clip_ratio", "prompt_length/clip_ratio", "response/aborted_ratio",
    "timing_s/gen", "timing_s/ref", "timing_s/values", "timing_s/adv", "timing_s/update_critic",
    "timing_s/update_actor", "timing_s/step", "timing_per_token_ms/gen", "timing_per_token_ms/ref",
    "timing_per_token_ms/values", "perf/total_num_tokens", "perf/time_per_step", "perf/throughput",
    "perf/mfu/actor", "perf/mfu/critic", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
    "perf/cpu_memory_used_gb", "training/global_step", "training/epoch", "training/rollout_probs_diff_mean",
    "val-core/openai/gsm8k/acc/mean@4",
]

# names seed 001 describes that no verl release writes (§5, §9, §10, §11.2)
SEEDS_NOT_VERL = ["episode/reward/mean", "episode/length/max", "episode/success_rate_alfworld",
                  "world_model/loss", "world_model/grad_norm", "val/score", "val/accuracy", "val/pass@k",
                  "critic/rewards/std"]


@pytest.mark.parametrize("name", SECTION_4_2)
def test_every_metric_of_verl_internals_4_2_is_catalogued(name: str) -> None:
    assert load_catalog().is_known(name), name


@pytest.mark.parametrize("name", SEEDS_VERL_NAMES)
def test_metrics_the_seeds_discuss_are_catalogued(name: str) -> None:
    assert load_catalog().is_known(name), name


@pytest.mark.parametrize("name", SEEDS_NOT_VERL)
def test_seed_names_verl_never_logs_are_marked_not_logged(name: str) -> None:
    catalog = load_catalog()
    assert not catalog.is_known(name)
    entry = catalog.lookup_not_logged(name)
    assert entry is not None and entry.seen_in and "seed" not in entry.seen_in  # users cannot open the seeds
    assert all(catalog.is_known(i) for i in entry.instead), entry.instead


# names verl 0.8-0.9.1 write, from the 0.9.1 wheel (docs/metrics.md lists each with its file:line)
VERL_0_9_NAMES = [
    "actor/loss", "critic/loss", "critic/perf/max_memory_allocated_gb", "critic/perf/cpu_memory_used_gb",
    "actor/distillation/loss", "training/num_turns/mean", "training/off_policy/trajectory_staleness_worst/max",
    "training/off_policy/evicted_samples_staleness/mean", "training/filter_groups/discarded_surplus_samples",
    "training/rollout_failure/evicted_samples", "validation/off_policy/evicted_samples",
    "rollout/spec_accept_rate", "rollout/moe/max_vio/layer_3", "checkpoint_engine/payload_mbytes",
    "separate_async/decision/should_switch_to_rollout", "timing_s/switch_wait",
    "timing_s/agent_loop/compute_score/mean", "timing_s/agent_loop/slowest/compute_score", "gdpo/format/mean",
]


@pytest.mark.parametrize("name", VERL_0_9_NAMES)
def test_names_verl_0_8_and_0_9_added_are_catalogued(name: str) -> None:
    assert load_catalog().is_known(name), name


def test_dropped_metrics_say_their_last_release() -> None:
    catalog = load_catalog()
    # v0.8.0 generates REMAX's greedy baseline with the samples (0.9.1 ray_trainer.py:1525-1526) and removed
    # the legacy workers that timed the synchronous rollout (v0.7.1 fsdp_workers.py:1075-1086)
    assert catalog.lookup("timing_s/gen_max").until == "0.7.1"
    assert catalog.lookup("timing_s/generation_timing/max").until == "0.7.1"
    assert catalog.lookup("actor/pg_loss").until is None


@pytest.mark.skipif(not VERL_WHEEL.is_dir(), reason="verl 0.9.1 wheel absent")
def test_no_entry_with_an_until_is_written_by_verl_0_9_1() -> None:
    import importlib.util

    script = Path(__file__).parents[3] / "scripts" / "verl_metric_names.py"
    spec = importlib.util.spec_from_file_location("names", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.metric_names(str(VERL_WHEEL))
    catalog = load_catalog()
    dropped = [e for e in [*catalog.metrics.values(), *catalog.patterns.values()] if e.until]
    assert dropped
    for entry in dropped:
        assert not [n for n in written if catalog.lookup(n) is entry], entry.name


def test_catalog_size() -> None:
    catalog = load_catalog()
    assert len(catalog.metrics) >= 110
    assert {"timing_s/*", "timing_per_token_ms/*", "val-core/*", "val-aux/*", "rollout_corr/*",
            "timing_s/agent_loop/*"} <= set(catalog.patterns)


def test_every_entry_has_a_verl_source_and_a_formula() -> None:
    catalog = load_catalog()
    ref = re.compile(r"(verl|recipe)/[\w/]+\.py:\d+")
    for entry in [*catalog.metrics.values(), *catalog.patterns.values()]:
        assert ref.search(entry.source), (entry.name, entry.source)
        assert len(entry.formula) > 10 and len(entry.meaning) > 5, entry.name
        assert re.fullmatch(r"0\.\d+(\.\d+)?(\.dev)?", entry.since), (entry.name, entry.since)


@pytest.mark.parametrize("name, low, high, cited", [
    # verl docs/perf/best_practices.rst:102 @1dda039b,122; the PPO paper's KL target (arXiv:1707.06347 §4); verl's
    # kl_loss_coef (docs/algo/grpo.md:47); published verl runs (knowledge/published_runs.yaml)
    ("actor/ppo_kl", 0.0, 0.01, "1707.06347"),
    ("actor/pg_clipfrac", 0.0, 0.30, "published_runs"),
    ("actor/kl_loss", 0.0, 0.1, "grpo.md:47"),
    ("actor/grad_norm", 0.1, 10.0, "published_runs"),
    ("response_length/clip_ratio", 0.0, 0.1, "best_practices.rst:131 @1dda039b"),
    ("prompt_length/clip_ratio", 0.0, 0.05, "best_practices.rst:102 @1dda039b"),
])
def test_healthy_ranges_are_the_published_ones(name: str, low: float | None, high: float | None, cited: str) -> None:
    healthy = load_catalog().metrics[name].healthy
    assert healthy is not None and (healthy.low, healthy.high) == (low, high)
    assert cited in healthy.source


def test_published_healthy_runs_sit_inside_every_band() -> None:
    """The steady state (p5..p95) of every published verl run sits inside each band the catalog and rules cite."""
    import yaml

    from advisor.playbook._rule_loader import load_playbook

    published = yaml.safe_load((Path(__file__).resolve().parents[3] / "knowledge" / "published_runs.yaml").read_text())
    catalog = load_catalog().metrics
    bands = [(m, h.low, h.high, "metrics.yaml") for m, e in catalog.items() if (h := e.healthy) is not None]
    judged_against_the_config = {("CF005", "actor/grad_norm")}  # against actor.grad_clip, not a general range
    bands += [(m, b.get("low"), b.get("high"), r.id) for r in load_playbook() for m, b in r.healthy.items()
              if (r.id, m) not in judged_against_the_config]
    checked = 0
    for run, data in published["runs"].items():
        for metric, low, high, where in bands:
            q = data["metrics"].get(metric)
            if q is None:
                continue
            checked += 1
            assert low is None or q["p5"] >= low, (run, metric, where, q, low)
            assert high is None or q["p95"] <= high, (run, metric, where, q, high)
    assert checked >= 20


def test_no_range_is_invented_for_reward_scale_metrics() -> None:
    # seed 001 §3.1: score depends on the task and the reward function; nobody publishes a range
    assert load_catalog().metrics["critic/score/mean"].healthy is None


@pytest.mark.parametrize("name, pattern", [
    ("timing_s/agent_loop/slowest/response_length", "timing_s/agent_loop/slowest/*"),
    ("timing_s/agent_loop/tool_calls/max", "timing_s/agent_loop/*"),
    ("timing_s/some_new_stage", "timing_s/*"),
    ("rollout_corr/rollout_is_seq_std", "rollout_corr/rollout_is_*"),
    ("rollout_corr/something_new", "rollout_corr/*"),
])
def test_the_most_specific_pattern_wins(name: str, pattern: str) -> None:
    info = load_catalog().lookup(name)
    assert info is not None and info.name == pattern


def test_a_named_metric_beats_its_family() -> None:
    info = load_catalog().lookup("timing_s/gen")
    assert info is not None and not info.is_pattern and "565-572" in info.source


def test_unknown_names_are_not_known() -> None:
    catalog = load_catalog()
    assert not catalog.is_known("actor/ppo_kll")
    assert not catalog.is_known("timing/gen")  # verl 0.1's name; only the alias table knows it
    assert catalog.closest("actor/ppo_kll")[0] == "actor/ppo_kl"
    assert "timing_s/gen" in catalog.closest("timing/gen")


@pytest.mark.parametrize("data, message", [
    ({"schema": 2}, "schema: 1"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z"}}}, "missing or empty since"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1",
                                       "healty": {}}}}, "unknown field(s) healty"),
    ({"schema": 1, "metrics": {"a/*": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1"}}},
     "may not hold '*'"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1",
                                       "healthy": {"low": 2, "high": 1, "source": "s"}}}}, "above high"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1",
                                       "healthy": {"low": 1}}}}, "healthy must be"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1",
                                       "until": ""}}}, "until must be a non-empty string"),
    ({"schema": 1, "metrics": {"a/b": {"source": "x", "formula": "y", "meaning": "z", "since": "0.1",
                                       "source_before": 3}}}, "source_before must be a non-empty string"),
])
def test_malformed_catalog_is_one_line_playbook_error(data: dict, message: str) -> None:
    with pytest.raises(PlaybookError, match=re.escape(message)) as info:
        parse_catalog(data)
    assert "\n" not in str(info.value) and str(info.value).startswith("metrics.yaml")


# --- sources checked against verl itself (skipped where the wheel or the verl clone is absent) -------------

@cache
def _verl_lines(rev: str, path: str) -> tuple[str, ...] | None:
    if rev == "0.9.1":
        file = VERL_WHEEL / path
        return tuple(file.read_text().splitlines()) if file.is_file() else None
    proc = subprocess.run(["git", "-C", str(VERL_MIRROR), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return tuple(proc.stdout.splitlines()) if proc.returncode == 0 else None


def _cited_ranges(source: str, default_rev: str) -> list[tuple[str, str, int, int]]:
    """(rev, file, first, last) for every line range the source cites; a bare range belongs to the file before."""
    out: list[tuple[str, str, int, int]] = []
    rev, path = default_rev, ""
    for match in re.finditer(
            r"(?:(v[0-9.]+):)?((?:verl|recipe)/[\w/]+\.py):([0-9][0-9,\-]*)|(?:at|in) ([0-9][0-9,\-]*)", source):
        if match.group(2):
            rev, path, ranges = match.group(1) or default_rev, match.group(2), match.group(3)
        else:
            ranges = match.group(4)
        for part in filter(None, ranges.split(",")):
            first, _, last = part.partition("-")
            out.append((rev, path, int(first), int(last or first)))
    return out


def _leaf(name: str, is_pattern: bool) -> str:
    if name.startswith("timing_s/") and not is_pattern:
        return name.split("/", 1)[1]  # the marked_timer name
    if name.startswith("perf/mfu/"):
        return "mfu"  # engine workers write mfu, renamed perf/mfu/<role> by the trainer
    return name.rstrip("*").rstrip("/_").rsplit("/", 1)[-1]


def _citation_problems(field: str, default_rev: str) -> list[str]:
    catalog = load_catalog()
    problems = []
    for entry in [*catalog.metrics.values(), *catalog.patterns.values()]:
        source = getattr(entry, field)
        if source is None:
            continue
        leaf = _leaf(entry.name, entry.is_pattern)
        named = False
        for rev, path, first, last in _cited_ranges(source, default_rev):
            if path.startswith("recipe/") and rev == "0.9.1":
                continue  # the recipes left verl after v0.7.0 (verl-recipe repository)
            lines = _verl_lines(rev, path)
            if lines is None or last > len(lines) or first > last:
                problems.append(f"{entry.name}: {rev}:{path}:{first}-{last} does not exist")
                continue
            named = named or leaf in "\n".join(lines[first - 1:last])
        if not named:
            problems.append(f"{entry.name}: no cited range of {field} mentions '{leaf}'")
    return problems


@pytest.mark.skipif(not VERL_WHEEL.is_dir() or not VERL_MIRROR.is_dir(), reason="verl 0.9.1 wheel or clone absent")
def test_every_0_9_1_line_exists_and_one_range_names_the_metric() -> None:
    assert load_catalog().verl_version == "0.9.1"
    problems = _citation_problems("source", "0.9.1")
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not VERL_MIRROR.is_dir(), reason="verl clone not available")
def test_every_earlier_line_exists_at_the_before_commit_and_names_the_metric() -> None:
    catalog = load_catalog()
    problems = _citation_problems("source_before", catalog.before_commit)
    assert not problems, "\n".join(problems)
