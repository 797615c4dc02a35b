"""Differential test of `advisor check` against verl's own config validation (issue 36, item 1).

A seeded generator draws configs around verl's example scripts (examples/grpo_trainer/run_qwen2-7b.sh,
examples/ppo_trainer/run_deepseek7b_llm.sh and their kin): the four batch layers (train_batch_size, rollout.n,
ppo_mini_batch_size, the micro batch or dynamic batching with its token budget), GPUs and nodes, Ulysses SP, the
rollout's TP, offload, rollout engine settings, KL placement and the advantage estimator. Each config goes to
verl's validation in the release's own environment (``verl_side.py``, one subprocess per release for all configs)
and to ``advisor check``'s checks at that version (``load_config(None, overrides, verl_version=...)`` and
``run_checks``), and the two verdicts are compared:

* agree: both accept; or both reject and, where verl's message (or the line that raised) names config keys,
  one of the advisor's errors names one of them;
* "rejects verl accepts": an advisor error verl's validation would have raised (its check cites code the
  harness runs) on a config verl accepts;
* "misses verl rejects": verl rejects and no advisor error names what verl named (or none at all).

An advisor error whose check cites code verl runs later (worker start-up, the engine, the first step: the
harness does not run it) does not count against a config verl's validation accepts; those are counted apart.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ORACLE_DIR = Path(os.environ.get("VERL_ORACLE_DIR", REPO / ".oracle"))
VERSIONS = ("0.4.1", "0.7.1", "0.9.1")
VERL_SIDE = Path(__file__).resolve().parent / "verl_side.py"

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."
REF = "actor_rollout_ref.ref."

# The files whose code verl_side.py runs, per release: an advisor check citing one of them mirrors a rule the
# harness can see fire. Everything else (workers, engines, agent loop, core_algos) runs after start-up.
_REACH = {
    "0.4": ("verl/trainer/ppo/ray_trainer.py",),
    # the worker config dataclasses nest (actor -> optim, fsdp engine; critic -> model): the whole directory runs
    "0.7": ("verl/utils/config.py", "verl/workers/config/", "verl/trainer/ppo/utils.py", "verl/trainer/config/"),
}


def installed(version: str) -> Path | None:
    """The release's test environment (scripts/install_verl_oracle.sh), or None."""
    target = ORACLE_DIR / f"verl-{version}"
    return target if (target / ".complete").is_file() and (target / "verl").is_dir() else None


def _at_least(version: str, minor: tuple[int, int]) -> bool:
    return tuple(int(p) for p in version.split(".")[:2]) >= minor


# ---------------------------------------------------------------------------------------------- the generator
def draw(rng: random.Random, version: str) -> list[tuple[str, Any]]:
    """One config as overrides: a base drawn from the example scripts' shapes, then a few perturbations."""
    gpus = rng.choice([1, 2, 4, 8, 8, 8, 16])
    nodes = rng.choice([1, 1, 1, 2, 4])
    n = rng.choice([1, 2, 4, 5, 8, 8, 16])
    train = rng.choice([8, 16, 32, 60, 64, 96, 100, 128, 256, 512, 1024])
    mini = rng.choice([train, max(1, train // 2), max(1, train // 4), 16, 32, 64, 24, 40, 256])
    estimator = rng.choice(["grpo", "grpo", "gae", "rloo", "reinforce_plus_plus", "remax"])
    cfg: dict[str, Any] = {
        "data.train_batch_size": train,
        "trainer.n_gpus_per_node": gpus,
        "trainer.nnodes": nodes,
        R + "n": n,
        A + "ppo_mini_batch_size": mini,
        "algorithm.adv_estimator": estimator,
        "data.max_prompt_length": rng.choice([512, 1024, 2048]),
        "data.max_response_length": rng.choice([512, 1024, 4096]),
    }
    if _at_least(version, (0, 6)) or rng.random() < 0.5:
        cfg[R + "name"] = rng.choice(["vllm", "vllm", "sglang"])
    if rng.random() < 0.3:
        cfg[A + "use_dynamic_bsz"] = True
        cfg[A + "ppo_max_token_len_per_gpu"] = rng.choice([4096, 16384, 24000, 32768])
        if rng.random() < 0.5:
            cfg[R + "log_prob_max_token_len_per_gpu"] = rng.choice([16384, 32768])
    if rng.random() < 0.9:
        cfg[A + "ppo_micro_batch_size_per_gpu"] = rng.choice([1, 2, 4, 8, 16, 32, 3])
    if rng.random() < 0.08:
        cfg[A + "ppo_micro_batch_size"] = rng.choice([8, 16, 32, 64])
    if rng.random() < 0.9:
        cfg[R + "log_prob_micro_batch_size_per_gpu"] = rng.choice([1, 2, 4, 8, 16, 32])
    if rng.random() < 0.06:
        cfg[R + "log_prob_micro_batch_size"] = rng.choice([8, 16, 32])
    kl_loss = rng.random() < 0.5
    cfg[A + "use_kl_loss"] = kl_loss
    if kl_loss:
        cfg[A + "kl_loss_coef"] = rng.choice([0.001, 0.01])
        cfg[A + "kl_loss_type"] = rng.choice(["low_var_kl", "low_var_kl", "kl", "mse"])
    if rng.random() < 0.2:
        cfg["algorithm.use_kl_in_reward"] = True
    if (kl_loss or cfg.get("algorithm.use_kl_in_reward")) and rng.random() < 0.9:
        cfg[REF + "log_prob_micro_batch_size_per_gpu"] = rng.choice([1, 2, 4, 8, 16, 32])
    if rng.random() < 0.25:
        sp = rng.choice([2, 4])
        cfg[A + "ulysses_sequence_parallel_size"] = sp
        cfg["actor_rollout_ref.model.use_remove_padding"] = rng.random() < 0.8
    elif rng.random() < 0.5:
        cfg["actor_rollout_ref.model.use_remove_padding"] = True
    cfg[R + "tensor_model_parallel_size"] = rng.choice([1, 1, 2, 2, 4, 8])
    cfg[R + "gpu_memory_utilization"] = rng.choice([0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    if rng.random() < 0.3:
        cfg[A + "fsdp_config.param_offload"] = True
        cfg[A + "fsdp_config.optimizer_offload"] = True
    if rng.random() < 0.2:
        cfg[REF + "fsdp_config.param_offload"] = True
    if rng.random() < 0.2:
        cfg[R + "enable_chunked_prefill"] = rng.random() < 0.5
        cfg[R + "max_num_batched_tokens"] = rng.choice([4096, 8192, 16384])
    if rng.random() < 0.1:
        cfg[A + "loss_agg_mode"] = rng.choice(["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
    if rng.random() < 0.05:
        cfg[R + "val_kwargs.do_sample"] = True
        cfg[R + "temperature"] = rng.choice([0.0, 1.0])
    if estimator == "gae" or rng.random() < 0.05:
        if rng.random() < 0.9:
            cfg["critic.ppo_micro_batch_size_per_gpu"] = rng.choice([1, 2, 4, 8, 16, 3])
        if rng.random() < 0.3:
            cfg["critic.ppo_mini_batch_size"] = rng.choice([16, 32, 64, 256])
        if rng.random() < 0.2:
            cfg["critic.use_dynamic_bsz"] = True
        if rng.random() < 0.2:
            cfg["critic.ulysses_sequence_parallel_size"] = rng.choice([2, 4])
            cfg["critic.model.use_remove_padding"] = rng.random() < 0.7
    return list(cfg.items())


def draws(seed: int, count: int, version: str) -> list[list[tuple[str, Any]]]:
    rng = random.Random(f"{seed}-{version}")
    return [draw(rng, version) for _ in range(count)]


# ------------------------------------------------------------------------------------------------- verl's side
def code_stamp(source: str) -> str:
    """A hash of the code alone: comments and docstrings (citations) can change without invalidating verdicts."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def run_verl(version: str, configs: list[list[tuple[str, Any]]], timeout: float = 3600) -> list[dict[str, Any]]:
    """verl's verdict on each config, from the release's own environment (one subprocess for those not in the
    cache). The cache (``.oracle/verdicts-<version>.json``) keys each verdict by the config and the hash of
    verl_side.py: verl's verdict does not depend on the advisor, so a rerun after an advisor change costs only
    the advisor's side."""
    stamp = code_stamp(VERL_SIDE.read_text())
    cache_file = ORACLE_DIR / f"verdicts-{version}.json"
    cache: dict[str, dict[str, Any]] = {}
    if cache_file.is_file():
        stored = json.loads(cache_file.read_text())
        cache = stored.get("verdicts", {}) if stored.get("stamp") == stamp else {}
    keys = [json.dumps(c) for c in configs]
    todo = sorted({k for k in keys if k not in cache})
    if todo:
        fresh = _run_verl_side(version, [json.loads(k) for k in todo], timeout)
        cache.update(zip(todo, fresh, strict=True))
        cache_file.write_text(json.dumps({"stamp": stamp, "verdicts": cache}))
    return [cache[k] for k in keys]


def _run_verl_side(version: str, configs: list[Any], timeout: float) -> list[dict[str, Any]]:
    target = installed(version)
    if target is None:
        raise FileNotFoundError(f"verl {version} is not installed under {ORACLE_DIR} "
                                "(scripts/install_verl_oracle.sh)")
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONDONTWRITEBYTECODE": "1", "RAY_DEDUP_LOGS": "0"}
    proc = subprocess.run([sys.executable, str(VERL_SIDE), version], input=json.dumps(configs),
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"verl {version}'s side failed: {proc.stderr[-2000:]}")
    results: list[dict[str, Any]] = json.loads(proc.stdout)
    return results


# --------------------------------------------------------------------------------------------- advisor's side
def _override(key: str, value: Any) -> str:
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return f"{key}={text}"


@dataclass
class AdvisorVerdict:
    errors: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)  # (id, keys, message) in reach
    later: list[str] = field(default_factory=list)  # error ids whose rule runs after the code verl_side runs


def in_reach(source: str, version: str) -> bool:
    files = _REACH["0.7"] if _at_least(version, (0, 7)) else _REACH["0.4"]
    return any(f in source for f in files)


def run_advisor(version: str, config: list[tuple[str, Any]]) -> AdvisorVerdict:
    from advisor.checks import CHECKS, run_checks
    from advisor.findings import Severity
    from advisor.load import load_config

    check_ids = {c.id for c in CHECKS}
    cfg = load_config(None, [_override(k, v) for k, v in config], verl_version=version)
    verdict = AdvisorVerdict()
    for f in run_checks(cfg, verify_fixes=False):
        if f.severity != Severity.ERROR:
            continue
        # the finding's own source: a check may cite another stage for one of its issues (A007's critic, 0.8+)
        if f.id in check_ids and not in_reach(f.source or "", version):
            verdict.later.append(f.id)
        else:
            verdict.errors.append((f.id, tuple(f.keys), f.message))
    return verdict


# --------------------------------------------------------------------------------------------------- compare
@dataclass
class Row:
    config: list[tuple[str, Any]]
    verl: dict[str, Any]
    advisor: AdvisorVerdict

    @property
    def outcome(self) -> str:
        """'agree', 'reject' (advisor rejects what verl accepts) or 'miss' (verl rejects, advisor does not)."""
        if self.verl["ok"]:
            return "reject" if self.advisor.errors else "agree"
        if not self.advisor.errors:
            return "miss"
        named = set(self.verl.get("named", ()))
        if not named:
            return "agree"
        leaves = {k.rsplit(".", 1)[-1] for _, keys, _ in self.advisor.errors for k in keys}
        # verl 0.4.1's check_mutually_exclusive names 'actor_rollout_ref.actor.micro_batch_size' for the actor's
        # and critic's ppo_micro_batch_size(_per_gpu) keys (ray_trainer.py:384-398): a suffix names the key too
        return "agree" if any(leaf == name or leaf.endswith("_" + name) for leaf in leaves for name in named) \
            else "miss"


@dataclass
class Agreement:
    version: str
    rows: list[Row]

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.rows if r.outcome == outcome)

    def line(self) -> str:
        return (f"verl agreement {self.version}: {self.count('agree')}/{len(self.rows)} configs "
                f"(rejects verl accepts: {self.count('reject')}, misses verl rejects: {self.count('miss')})")

    def disagreements(self) -> Iterator[Row]:
        return (r for r in self.rows if r.outcome != "agree")


def compare(version: str, configs: list[list[tuple[str, Any]]]) -> Agreement:
    verl = run_verl(version, configs)
    return Agreement(version, [Row(c, v, run_advisor(version, c)) for c, v in zip(configs, verl, strict=True)])
