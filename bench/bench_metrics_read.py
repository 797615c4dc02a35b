"""Read throughput of ``advisor.metrics.load_metrics`` on verl file-logger JSONL, against pyarrow.

Generates realistic verl ``file`` logger logs (the full metric set of a GRPO/PPO run on verl 0.7:
~150 metrics a step, validation every 10 steps, a step-0 validation record, NaN written as verl 0.7
writes it) of 1,000 and 100,000 steps, then times on the same file, in the same process:

- ``pyarrow.json.read_json(path)``: pyarrow's own JSON reader, nothing else;
- ``load_metrics(path)``: ours (sniffing, the step frame, restarts, aliases, metadata).

Each runs ``--repeat`` times after one warm-up (the file is in the page cache for all), interleaved so
background load hits all alike; the best time counts. pyarrow is timed given the path and given the
file memory-mapped (as ours reads it); the faster of the two is the baseline. Prints MB/s and
ours/pyarrow as a ratio (target: >= 0.8).

    python bench/bench_metrics_read.py [--steps 1000 100000] [--repeat 3] [--dir /tmp/advisor-bench]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# bench this checkout, not whatever `advisor` is installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_RATIO = 0.8

# (name, typical level, relative noise): the metrics verl 0.7 logs each step for a GRPO run with a
# critic-free estimator, rollout correction metrics on, and agent-loop timing (shared/research §4.2).
_STEP_METRICS: list[tuple[str, float, float]] = [
    *[(f"global_seqlen/{k}", v, 0.05) for k, v in (
        ("min", 410_000), ("max", 530_000), ("minmax_diff", 120_000), ("balanced_min", 468_000),
        ("balanced_max", 469_000), ("mean", 468_500))],
    ("actor/entropy", 0.62, 0.05),
    ("perf/mfu/actor_infer", 0.0, 0.0),
    *[(f"training/rollout_probs_diff_{k}", v, 0.1) for k, v in (
        ("valid", 1.0), ("max", 0.71), ("mean", 0.0031), ("std", 0.012))],
    ("training/rollout_actor_probs_pearson_corr", 0.998, 0.001),
    *[(f"rollout_corr/rollout_is_{k}", v, 0.05) for k, v in (
        ("mean", 1.0), ("max", 3.2), ("min", 0.21), ("std", 0.09), ("eff_sample_size", 0.97),
        ("ratio_fraction_high", 0.0012), ("ratio_fraction_low", 0.0009), ("batch_norm_factor", 1.0),
        ("seq_mean", 1.0), ("seq_std", 0.04), ("seq_max", 1.6), ("seq_min", 0.55), ("seq_max_deviation", 0.6),
        ("seq_fraction_high", 0.003), ("seq_fraction_low", 0.002))],
    ("rollout_corr/rollout_rs_masked_fraction", 0.0, 0.0),
    ("rollout_corr/rollout_rs_seq_masked_fraction", 0.0, 0.0),
    *[(f"rollout_corr/rollout_rs_token_k1_{k}", v, 0.05) for k, v in (
        ("mean", 1.0), ("max", 2.1), ("min", 0.3), ("std", 0.08), ("fraction_high", 0.001),
        ("fraction_low", 0.001), ("masked_fraction", 0.0), ("seq_masked_fraction", 0.0))],
    *[(f"rollout_corr/{k}", v, 0.05) for k, v in (
        ("training_ppl", 1.31), ("training_log_ppl", 0.27), ("kl", 0.0008), ("k3_kl", 0.0007),
        ("rollout_ppl", 1.31), ("rollout_log_ppl", 0.27), ("log_ppl_diff", 0.0004), ("log_ppl_abs_diff", 0.006),
        ("log_ppl_diff_max", 0.08), ("log_ppl_diff_min", -0.07), ("ppl_ratio", 1.0004), ("chi2_token", 0.004),
        ("chi2_seq", 0.02))],
    ("actor/pg_loss", -0.004, 2.0),
    ("actor/kl_loss", 0.0021, 0.2),
    ("actor/pg_clipfrac", 0.0032, 0.3),
    ("actor/ppo_kl", 0.00012, 0.5),
    ("actor/pg_clipfrac_lower", 0.0, 0.0),
    ("actor/kl_coef", 0.001, 0.0),
    ("actor/grad_norm", 0.21, 0.3),
    ("perf/mfu/actor", 0.31, 0.03),
    ("perf/max_memory_allocated_gb", 61.4, 0.01),
    ("perf/max_memory_reserved_gb", 72.9, 0.01),
    ("perf/cpu_memory_used_gb", 214.0, 0.02),
    ("actor/lr", 1e-6, 0.0),
    ("critic/vf_loss", 0.021, 0.3),
    ("critic/vf_clipfrac", 0.01, 0.3),
    ("critic/vpred_mean", 0.41, 0.1),
    ("critic/grad_norm", 3.1, 0.3),
    ("critic/lr", 1e-5, 0.0),
    ("perf/mfu/critic", 0.28, 0.03),
    ("training/global_step", 0, 0.0),
    ("training/epoch", 0, 0.0),
    *[(f"critic/{g}/{k}", v, 0.1) for g, level in (("score", 0.45), ("rewards", 0.45), ("advantages", 0.0),
                                                    ("returns", 0.45), ("values", 0.41))
      for k, v in (("mean", level), ("max", 1.0 + abs(level)), ("min", -abs(level) - 0.5))],
    ("critic/vf_explained_var", 0.35, 0.2),
    *[(f"response_length/{k}", v, 0.05) for k, v in (("mean", 612.0), ("max", 2048), ("min", 38),
                                                      ("clip_ratio", 0.021))],
    *[(f"response_length_non_aborted/{k}", v, 0.05) for k, v in (("mean", 612.0), ("max", 2048), ("min", 38),
                                                                  ("clip_ratio", 0.021))],
    ("response/aborted_ratio", 0.0, 0.0),
    *[(f"prompt_length/{k}", v, 0.05) for k, v in (("mean", 231.0), ("max", 512), ("min", 61),
                                                    ("clip_ratio", 0.0))],
    *[(f"num_turns/{k}", v, 0.0) for k, v in (("min", 2), ("max", 2), ("mean", 2.0))],
    *[(f"timing_s/{k}", v, 0.1) for k, v in (
        ("start_profile", 1.2e-05), ("gen", 71.3), ("reward", 0.0021), ("old_log_prob", 12.4), ("ref", 11.8),
        ("values", 12.1), ("adv", 0.31), ("update_critic", 24.2), ("update_actor", 31.7),
        ("update_weights", 4.1), ("stop_profile", 9.8e-06), ("step", 168.2))],
    *[(f"timing_s/agent_loop/{g}/{k}", v, 0.1) for g, level in (("generate_sequences", 31.0),
                                                                 ("tool_calls", 0.0), ("num_preempted", 0))
      for k, v in (("min", level * 0.1), ("max", level * 2.1), ("mean", level))],
    *[(f"timing_s/agent_loop/slowest/{k}", v, 0.1) for k, v in (
        ("generate_sequences", 66.0), ("tool_calls", 0.0), ("prompt_length", 301), ("response_length", 2048),
        ("num_preempted", 0))],
    *[(f"timing_per_token_ms/{k}", v, 0.1) for k, v in (
        ("gen", 0.056), ("ref", 0.012), ("values", 0.013), ("adv", 0.0003), ("update_critic", 0.025),
        ("update_actor", 0.033))],
    ("perf/total_num_tokens", 937_000, 0.05),
    ("perf/time_per_step", 168.2, 0.1),
    ("perf/throughput", 696.4, 0.1),
    *[(f"variance_proxy/{k}", v, 0.1) for k, v in (
        ("proxy1_signal_strength", 0.012), ("proxy2_total_power", 0.31), ("proxy3_pure_noise", 0.29),
        ("expected_a_squared", 0.84), ("expected_w", 0.37))],
]
_VAL_METRICS: list[tuple[str, float]] = [
    ("val-core/openai/gsm8k/reward/mean@1", 0.52),
    ("val-aux/openai/gsm8k/reward/std@1", 0.0),
    ("val-aux/num_turns/min", 2),
    ("val-aux/num_turns/max", 2),
    ("val-aux/num_turns/mean", 2.0),
]
_INT_METRICS = {name for name, level, _ in _STEP_METRICS if isinstance(level, int)} | {
    name for name, level in _VAL_METRICS if isinstance(level, int)}
_TEST_FREQ = 10


def write_verl_jsonl(path: Path, steps: int, *, seed: int = 0) -> None:
    """A verl 0.7 ``file`` logger log: ``json.dumps({"step": N, "data": {...}})`` per line."""
    rng = np.random.default_rng(seed)
    names = [name for name, _, _ in _STEP_METRICS]
    levels = np.array([level for _, level, _ in _STEP_METRICS], dtype=float)
    noise = np.array([sd for _, _, sd in _STEP_METRICS], dtype=float)
    is_int = np.array([name in _INT_METRICS for name in names])
    chunk = 5_000
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"step": 0, "data": _val_record(rng)}) + "\n")
        for start in range(1, steps + 1, chunk):
            block = np.arange(start, min(start + chunk, steps + 1))
            values = levels * (1.0 + noise * rng.standard_normal((len(block), len(names))))
            lines = []
            for row, step in zip(values, block, strict=True):
                data: dict[str, float | int] = {}
                for name, value, integer in zip(names, row.tolist(), is_int.tolist(), strict=True):
                    data[name] = int(value) if integer else value
                data["training/global_step"] = int(step)
                data["training/epoch"] = int(step) // 500
                if step % 997 == 0:
                    data["actor/grad_norm"] = math.nan  # a non-finite grad norm, written as verl 0.7 writes it
                if step % _TEST_FREQ == 0 or step == steps:
                    data.update(_val_record(rng))
                lines.append(json.dumps({"step": int(step), "data": data}))
            fh.write("\n".join(lines) + "\n")


def _val_record(rng: np.random.Generator) -> dict[str, float | int]:
    return {name: level if isinstance(level, int) else float(level + 0.05 * rng.standard_normal())
            for name, level in _VAL_METRICS}


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(path: Path, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` wall times, the three readers interleaved so background load hits all alike."""
    import pyarrow as pa
    import pyarrow.json as pj

    from advisor.metrics import load_metrics

    readers: dict[str, Callable[[], object]] = {
        # pyarrow's reader given the path, and given the file memory-mapped (what ours does); the faster counts
        "pyarrow_path": lambda: pj.read_json(str(path)),
        "pyarrow_mmap": lambda: pj.read_json(pa.BufferReader(pa.memory_map(str(path)).read_buffer())),
        "ours": lambda: load_metrics(path),
    }
    for fn in readers.values():
        fn()  # warm-up: page cache, imports, pyarrow's thread pool
    best = dict.fromkeys(readers, math.inf)
    for _ in range(repeat):
        for name, fn in readers.items():
            best[name] = min(best[name], _seconds(fn))
    frame = load_metrics(path)
    size_mb = path.stat().st_size / 1e6
    t_pyarrow = min(best["pyarrow_path"], best["pyarrow_mmap"])
    return {
        "size_mb": size_mb,
        "rows": float(frame.data.shape[0]),
        "metrics": float(frame.data.shape[1]),
        "pyarrow_path_mb_s": size_mb / best["pyarrow_path"],
        "pyarrow_mmap_mb_s": size_mb / best["pyarrow_mmap"],
        "pyarrow_mb_s": size_mb / t_pyarrow,
        "ours_mb_s": size_mb / best["ours"],
        "ratio": t_pyarrow / best["ours"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "advisor-bench")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"cpus={os.cpu_count()}  target ratio >= {TARGET_RATIO}")
    print(f"{'steps':>8} {'MB':>8} {'rows':>7} {'cols':>5} {'pyarrow(path)':>14} {'pyarrow(mmap)':>14} "
          f"{'ours':>8} {'ratio':>6}   (MB/s; ratio = ours / the faster pyarrow)")
    worst = math.inf
    for steps in args.steps:
        path = args.dir / f"verl_{steps}.jsonl"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            write_verl_jsonl(tmp, steps)
            tmp.replace(path)
        r = bench(path, args.repeat)
        worst = min(worst, r["ratio"])
        print(f"{steps:>8} {r['size_mb']:>8.1f} {int(r['rows']):>7} {int(r['metrics']):>5} "
              f"{r['pyarrow_path_mb_s']:>14.1f} {r['pyarrow_mmap_mb_s']:>14.1f} {r['ours_mb_s']:>8.1f} "
              f"{r['ratio']:>6.2f}")
    print(f"worst ratio {worst:.2f} ({'meets' if worst >= TARGET_RATIO else 'misses'} the {TARGET_RATIO} target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
