"""The intervention-labelled world (issue 35): its config space, faults, splits, labels and dataset file.

A *world run* is one sandbox run of a config drawn at random from the ranges verl users run (scaled to the
sandbox) with, three times in four, one fault of the debugging guides' trees at a random severity. It is
labelled by intervention: every candidate one-key change (each fix any advisor rule offers for the run, the
fault's key put back, two random one-key changes) is run on the world's two seeds, and the label is the set of
keys whose change improves held-out validation beyond noise (``improves``). A run whose label is empty is healthy.
A change two seeds leave undecided (``undecided``) is run on two more (``more_seeds``; reseed.py) and judged on four.

The two splits never mix. Each draws from its own seed range (``SEED_RANGES``) and its own part of the config
space: a base config is in the test region when its mode-by-KL cell is one of ``TEST_CELLS``, its learning rate is
in ``TEST_LR`` or its temperature in ``TEST_TEMPERATURE``; the train split draws only outside that region, the test
split only inside it (``in_test_region``). Thresholds and rule conditions fitted on the train split therefore
never read a test config.

Sizing (measured 2026-12-07 on the shared 2-core machine, one torch thread, language-model policy): a 12-step
GRPO run of 32 prompts x 4 responses with validation on 128 prompts takes 2-3 s at load 1-2, 5 s at load 5; an
lr x100 fault, a response cap of 8 and an entropy bonus of 0.5 each show within those steps (validation 0.00,
0.16-0.20 and 0.02-0.07 against 0.74-0.75 healthy). The world validates at steps 6 and 12 (``TEST_FREQ``). A
world run is its two base runs and two per candidate, 8-20 sandbox runs: the first 13 took 315 s of CPU in all
(24 s each) and 20-150 s of wall time each at load 4-8.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

VERSION = 1
DATA = Path(__file__).resolve().parent / "data" / f"world-v{VERSION}.jsonl.gz"
SIZE_BUDGET_MB = 30  # the dataset file stays under this (a world run is about 10 KB compressed)

# run size: enough steps for a fault to show on the language model, few enough for ~250 worlds in ~2 h of a core
STEPS = 12
TEST_FREQ = 6  # validations at steps 6 and 12: final_validation averages the last two
VAL_SIZE = 128
SIZE = {"steps": STEPS, "test_freq": TEST_FREQ, "val_size": VAL_SIZE, "policy": "lm"}

# world seeds: train [0, 1e6), test [1e6, 2e6); a fresh test split takes its seeds from [2e6, 1e9). The two
# sandbox seeds of world seed w are 2w+1 and 2w+2, so the splits' sandbox seeds are disjoint too.
SEED_RANGES = {"train": (0, 1_000_000), "test": (1_000_000, 2_000_000), "fresh": (2_000_000, 1_000_000_000)}

# a change improves validation beyond noise when its mean paired gain (the candidate's validation minus the
# base run's, on the same seed) exceeds both GAIN_FLOOR and twice its standard error over the seeds: on two seeds
# that is the seed-to-seed spread |gain_1 - gain_2| (the same change's effect must be larger than the amount by
# which it differs between two seeds), and a t-statistic above 2 on any number of seeds
GAIN_FLOOR = 0.02  # 2.6 of 128 validation prompts
# two seeds decide a change weakly (a t-statistic on one degree of freedom): a candidate whose two gains leave its
# verdict open, a mean above GAIN_FLOOR with t between 1 and 6 (mean between half and three times the spread),
# is run on two more seeds (reseed.py) and judged on all four, whichever way the two had it
UNDECIDED_T = (1.0, 6.0)
MORE_SEEDS_OFFSET = 4_000_000_000  # the extra sandbox seeds of world w: 2w+1 and 2w+2 past this, disjoint from all
P_HEALTHY = 0.25  # share of world runs drawn without a fault
MAX_ADVISOR_CANDIDATES = 6  # one-key fixes the advisor offers, in its order (changes, alternatives, other rules')
RANDOM_CANDIDATES = 2

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."
LR = f"{A}optim.lr"
GROUP_MODES = ("grpo", "rloo", "dapo")
MODES = ("grpo", "gae", "rloo", "reinforce_plus_plus", "dapo")
KL_PLACEMENTS = {"grpo": ("loss", "reward", "none"), "gae": ("loss", "reward", "none"),
                 "rloo": ("loss", "reward", "none"), "reinforce_plus_plus": ("loss", "reward", "none"),
                 "dapo": ("none",)}
CELLS = [(m, k) for m in MODES for k in KL_PLACEMENTS[m]]
# the test region of the config space (see the module docstring)
TEST_CELLS = frozenset({("rloo", "reward"), ("reinforce_plus_plus", "loss"), ("gae", "loss")})
LR_RANGE = (2e-7, 4e-6)  # log-uniform; verl's examples run 1e-6 to 3e-6 (x sandbox.lr_scale on the tiny model)
TEST_LR = (2e-6, 4e-6)
TEMPERATURE_RANGE = (0.7, 1.2)
TEST_TEMPERATURE = (1.05, 1.2)
FIXED = [f"{R}name=vllm", "data.filter_overlong_prompts=true", "trainer.val_before_train=false",
         "+sandbox.deterministic_timing=true"]
# keys a random one-key change may redraw (the mode, KL placement and batch layers stay: they define the cell)
RANDOM_KEYS = (LR, f"{R}temperature", f"{R}top_p", f"{A}ppo_epochs", f"{A}clip_ratio", f"{A}entropy_coeff",
               "data.max_response_length", f"{A}loss_agg_mode", f"{A}kl_loss_coef", "algorithm.kl_ctrl.kl_coef",
               "critic.optim.lr", f"{A}grad_clip")


def in_test_region(base: dict[str, Any]) -> bool:
    """Whether a base config (before its fault) lies in the test split's part of the config space."""
    return ((base["mode"], base["kl"]) in TEST_CELLS or TEST_LR[0] <= base["knobs"][LR] <= TEST_LR[1]
            or TEST_TEMPERATURE[0] <= base["knobs"][f"{R}temperature"] <= TEST_TEMPERATURE[1])


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(f"{math.exp(rng.uniform(math.log(lo), math.log(hi))):.3g}")


def _pick(rng: np.random.Generator, values: list[Any], p: list[float] | None = None) -> Any:
    value = values[int(rng.choice(len(values), p=p))]
    return value.item() if hasattr(value, "item") else value


def draw_base(rng: np.random.Generator, split: str) -> dict[str, Any]:
    """A base config of ``split``: its mode, KL placement and knobs (verl keys -> values)."""
    test = split != "train"
    # a test draw lands in one test dimension at least (the cell, the lr band, the temperature band), chosen at
    # random; a train draw in none
    forced = int(rng.integers(3)) if test else -1
    cells = [c for c in CELLS if c not in TEST_CELLS] if not test else list(TEST_CELLS) if forced == 0 else CELLS
    mode, kl = sorted(cells)[int(rng.integers(len(cells)))]
    lr_lo, lr_hi = TEST_LR if forced == 1 else LR_RANGE if test else (LR_RANGE[0], TEST_LR[0] * 0.999)
    t_lo, t_hi = (TEST_TEMPERATURE if forced == 2 else TEMPERATURE_RANGE if test
                  else (TEMPERATURE_RANGE[0], TEST_TEMPERATURE[0] - 0.001))
    n = 1 if mode == "gae" else _pick(rng, [3, 4, 5, 6, 8])
    batch = _pick(rng, [32, 48, 64]) if mode == "gae" else _pick(rng, [16, 24, 32])
    mini = batch // _pick(rng, [1, 2, 4] if batch % 4 == 0 else [1, 2])
    ranks = _pick(rng, [1, 2], [0.7, 0.3])
    per_rank = mini * n // ranks  # responses in a mini-batch on one rank: the micro-batch must divide it
    micro = _pick(rng, [m for m in (2, 4, 8) if per_rank % m == 0] or [1])
    knobs: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo" if mode == "dapo" else mode,
        f"{R}n": n, "data.train_batch_size": batch, f"{A}ppo_mini_batch_size": mini,
        f"{A}ppo_micro_batch_size_per_gpu": micro, "trainer.n_gpus_per_node": ranks,
        f"{R}log_prob_micro_batch_size_per_gpu": _pick(rng, [4, 8, 16]),
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": _pick(rng, [4, 8, 16]),
        LR: _log_uniform(rng, lr_lo, lr_hi),
        f"{R}temperature": round(float(rng.uniform(t_lo, t_hi)), 3),
        f"{R}top_p": _pick(rng, [1.0, 0.95, 0.9], [0.6, 0.2, 0.2]),
        f"{A}ppo_epochs": _pick(rng, [1, 2], [0.75, 0.25]),
        f"{A}clip_ratio": round(float(rng.uniform(0.15, 0.25)), 3),
        f"{A}entropy_coeff": _pick(rng, [0.0, 0.001], [0.7, 0.3]),
        f"{A}grad_clip": 1.0,
        "data.max_response_length": _pick(rng, [24, 32, 48]),
        f"{A}loss_agg_mode": "token-mean" if mode == "dapo" else _pick(
            rng, ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm", "seq-mean-token-sum"],
            [0.5, 0.2, 0.2, 0.1]),
        f"{A}use_kl_loss": kl == "loss", "algorithm.use_kl_in_reward": kl == "reward",
    }
    if kl == "loss":
        knobs[f"{A}kl_loss_coef"] = _log_uniform(rng, 5e-4, 1e-2)
        knobs[f"{A}kl_loss_type"] = _pick(rng, ["low_var_kl", "kl"])
    if kl == "reward":
        knobs["algorithm.kl_ctrl.kl_coef"] = _log_uniform(rng, 5e-4, 5e-3)
    if mode == "dapo":
        knobs[f"{A}clip_ratio_high"] = 0.28
    if mode == "grpo":
        knobs["algorithm.norm_adv_by_std_in_grpo"] = True
    if mode == "gae":
        knobs["critic.optim.lr"] = _log_uniform(rng, 5e-6, 2e-5)
        knobs["critic.ppo_micro_batch_size_per_gpu"] = micro
    return {"mode": mode, "kl": kl, "knobs": knobs}


@dataclass(frozen=True)
class Fault:
    """A cause of the guides' trees: ``key`` set by ``draw`` (a random severity) where ``applies``."""

    name: str
    key: str
    draw: Callable[[np.random.Generator, dict[str, Any]], Any]
    applies: Callable[[dict[str, Any]], bool] = lambda base: True


def _lr(base: dict[str, Any]) -> float:
    return float(base["knobs"][LR])


def _small_groups(base: dict[str, Any]) -> list[int]:
    """Group sizes below 3 that keep the batch layout verl accepts (the micro-batch divides a rank's mini-batch;
    RLOO needs two responses to leave one out)."""
    k = base["knobs"]
    mini, ranks = k[f"{A}ppo_mini_batch_size"], k["trainer.n_gpus_per_node"]
    micro = k[f"{A}ppo_micro_batch_size_per_gpu"]
    return [n for n in ((2,) if base["mode"] == "rloo" else (1, 2))
            if mini * n % ranks == 0 and (mini * n // ranks) % micro == 0]


FAULTS = (
    Fault("lr_too_high", LR, lambda r, b: float(f"{_lr(b) * 10 ** r.uniform(0.7, 2.3):.3g}")),
    Fault("lr_too_low", LR, lambda r, b: float(f"{_lr(b) / 10 ** r.uniform(0.7, 2.0):.3g}")),
    Fault("lr_warmup_too_long", f"{A}optim.lr_warmup_steps", lambda r, b: int(r.integers(6, 60))),
    Fault("response_too_short", "data.max_response_length", lambda r, b: int(r.integers(4, 15))),
    Fault("entropy_bonus_too_large", f"{A}entropy_coeff", lambda r, b: _log_uniform(r, 0.02, 1.0)),
    Fault("temperature_too_low", f"{R}temperature", lambda r, b: round(float(r.uniform(0.02, 0.4)), 3)),
    Fault("temperature_too_high", f"{R}temperature", lambda r, b: round(float(r.uniform(1.4, 2.0)), 3)),
    Fault("top_p_too_low", f"{R}top_p", lambda r, b: round(float(r.uniform(0.05, 0.5)), 3)),
    Fault("kl_loss_too_strong", f"{A}kl_loss_coef", lambda r, b: _log_uniform(r, 0.1, 3.0),
          lambda b: b["kl"] == "loss"),
    Fault("reward_kl_too_strong", "algorithm.kl_ctrl.kl_coef", lambda r, b: _log_uniform(r, 0.1, 3.0),
          lambda b: b["kl"] == "reward"),
    Fault("too_many_epochs", f"{A}ppo_epochs", lambda r, b: int(r.integers(3, 9))),
    Fault("clip_ratio_too_tight", f"{A}clip_ratio", lambda r, b: round(float(r.uniform(0.005, 0.05)), 3),
          lambda b: b["mode"] != "dapo"),
    Fault("grad_clip_too_low", f"{A}grad_clip", lambda r, b: _log_uniform(r, 0.003, 0.1)),
    Fault("group_too_small", f"{R}n", lambda r, b: _pick(r, _small_groups(b)),
          lambda b: b["mode"] in GROUP_MODES and bool(_small_groups(b))),
    Fault("std_norm_off", "algorithm.norm_adv_by_std_in_grpo", lambda r, b: False, lambda b: b["mode"] == "grpo"),
    Fault("loss_agg_seq_sum", f"{A}loss_agg_mode", lambda r, b: "seq-mean-token-sum",
          lambda b: b["knobs"][f"{A}loss_agg_mode"] != "seq-mean-token-sum"),
    Fault("critic_lr_too_low", "critic.optim.lr", lambda r, b: _log_uniform(r, 1e-9, 2e-7),
          lambda b: b["mode"] == "gae"),
    Fault("critic_lr_too_high", "critic.optim.lr", lambda r, b: _log_uniform(r, 2e-4, 3e-3),
          lambda b: b["mode"] == "gae"),
)
# verl's value of a fault key the base config leaves unset (optim.lr_warmup_steps: -1, no warm-up with the
# default lr_warmup_steps_ratio 0.0; verl/trainer/config/actor/actor.yaml)
UNSET_DEFAULTS = {f"{A}optim.lr_warmup_steps": -1}


def draw_fault(rng: np.random.Generator, base: dict[str, Any]) -> dict[str, Any] | None:
    """None (a run without a fault, P_HEALTHY of the time) or {name, key, value, base_value}."""
    if rng.random() < P_HEALTHY:
        return None
    faults = [f for f in FAULTS if f.applies(base)]
    fault = faults[int(rng.integers(len(faults)))]
    old = base["knobs"].get(fault.key, UNSET_DEFAULTS.get(fault.key))
    value = fault.draw(rng, base)
    if value == old:  # a severity equal to the base value is no fault; draw the other side of the range
        value = fault.draw(rng, base)
    return {"name": fault.name, "key": fault.key, "value": value, "base_value": old}


def render(key: str, value: Any) -> str:
    """One Hydra override, as verl reads it."""
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    return f"{key}={value}"


def run_overrides(base: dict[str, Any], fault: dict[str, Any] | None, size: dict[str, Any]) -> list[str]:
    """The run's overrides (without its seed): the base knobs, the fault, the run size."""
    knobs = dict(base["knobs"])
    if fault:
        knobs[fault["key"]] = fault["value"]
    return [*FIXED, *(render(k, v) for k, v in knobs.items()), f"trainer.total_training_steps={size['steps']}",
            f"trainer.test_freq={size['test_freq']}", f"+sandbox.val_size={size['val_size']}",
            f"+sandbox.policy={size['policy']}",
            # a pilot world at another sandbox lr scale (generate.py --lr-scale); the dataset's runs use the policy's
            *([f"+sandbox.lr_scale={size['lr_scale']}"] if "lr_scale" in size else [])]


def random_changes(rng: np.random.Generator, base: dict[str, Any], split: str, fault: dict[str, Any] | None,
                   count: int = RANDOM_CANDIDATES) -> list[str]:
    """``count`` one-key changes drawn from the split's own ranges: a key of RANDOM_KEYS the run sets (not the
    fault's), given the value another base config of the same cell would have."""
    current = dict(base["knobs"])
    if fault:
        current[fault["key"]] = fault["value"]
    out: list[str] = []
    for _ in range(50):
        if len(out) == count:
            break
        other = draw_base(rng, split)["knobs"]
        keys = [k for k in RANDOM_KEYS if k in current and k in other and other[k] != current[k]
                and (not fault or k != fault["key"]) and not any(o.startswith(k + "=") for o in out)]
        if keys:
            key = keys[int(rng.integers(len(keys)))]
            out.append(render(key, other[key]))
    return out


def _finite(gains: list[float]) -> list[float]:
    return [g for g in gains if g is not None and math.isfinite(g)]


def _t_noise(finite: list[float]) -> float:
    """Twice the standard error of the mean gain; on two seeds exactly the spread |g1 - g2|."""
    if len(finite) == 2:
        return abs(finite[0] - finite[1])
    return 2 * statistics.stdev(finite) / math.sqrt(len(finite))


def improves(gains: list[float]) -> bool:
    """A change improves validation beyond noise: its mean paired gain over the seeds exceeds GAIN_FLOOR and twice
    its standard error (on two seeds, the spread of the two gains). A seed whose run failed leaves it unproven."""
    finite = _finite(gains)
    if len(finite) < 2 or len(finite) < len(gains):
        return False
    mean = sum(finite) / len(finite)
    return mean > GAIN_FLOOR and mean > _t_noise(finite)


def undecided(gains: list[float]) -> bool:
    """Two seeds leave the change's verdict open (UNDECIDED_T): reseed.py runs it on two more."""
    finite = _finite(gains)
    if len(gains) != 2 or len(finite) != 2:
        return False
    mean = sum(finite) / 2
    noise = _t_noise(finite)
    lo, hi = UNDECIDED_T
    return mean > GAIN_FLOOR and lo * noise / 2 < mean < hi * noise / 2


def label(candidates: list[dict[str, Any]]) -> list[str]:
    """The run's label: the keys of the one-key candidates whose change improves validation beyond noise."""
    return sorted({c["keys"][0] for c in candidates if len(c["keys"]) == 1 and improves(c["gains"])})


def key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def world_seed(split: str, index: int, start: int | None = None) -> int:
    lo, hi = SEED_RANGES[split]
    seed = (lo if start is None else start) + index
    if not lo <= seed < hi:
        raise ValueError(f"world seed {seed} is outside the {split} range [{lo}, {hi})")
    return seed


def sandbox_seeds(seed: int) -> tuple[int, int]:
    return 2 * seed + 1, 2 * seed + 2


def more_seeds(seed: int) -> tuple[int, int]:
    """The two further sandbox seeds an undecided candidate of world ``seed`` runs on (reseed.py)."""
    return tuple(MORE_SEEDS_OFFSET + s for s in sandbox_seeds(seed))


def draw_world(split: str, seed: int) -> tuple[dict[str, Any], dict[str, Any] | None, np.random.Generator]:
    """The base config and fault of world ``seed`` (a function of the seed alone), and the generator to go on with."""
    rng = np.random.default_rng(seed)
    base = draw_base(rng, "train" if split == "train" else "test")
    return base, draw_fault(rng, base), rng


# --- the dataset file: one gzip member per world run, so a run appended is never lost by a later one ---------


def append(path: Path, record: dict[str, Any]) -> None:
    """One gzip member, written with a single append (two processes appending to one file do not interleave)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    member = gzip.compress((json.dumps(record, separators=(",", ":")) + "\n").encode(), compresslevel=9, mtime=0)
    with open(path, "ab") as fh:
        fh.write(member)


def read(path: Path) -> list[dict[str, Any]]:
    """Every complete record of the file (a member cut short by a stopped generator is left out)."""
    if not path.exists():
        return []
    out = []
    try:
        with gzip.open(path, "rt") as fh:
            for line in fh:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except (EOFError, zlib.error, gzip.BadGzipFile):
        pass
    return out


def repair(path: Path) -> list[dict[str, Any]]:
    """The file's complete records; a tail cut short (a generator stopped mid-write) is dropped from the file, so
    that records appended after it stay readable."""
    records = read(path)
    try:
        with gzip.open(path, "rt") as fh:
            whole = sum(1 for _ in fh) == len(records)
    except (EOFError, zlib.error, gzip.BadGzipFile, FileNotFoundError):
        whole = not path.exists()
    if not whole:
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", compresslevel=9) as fh:
            fh.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
        tmp.replace(path)
    return records


def beside(data: Path, kind: str) -> Path:
    """A file kept beside dataset ``data``: ``extra`` (the diffs bench_world.py --run-missing ran) or ``seeds34``
    (the undecided candidates' runs on two more seeds, reseed.py)."""
    return data.with_name(data.name.replace(".jsonl.gz", f"-{kind}.jsonl.gz"))


def compact_metrics(records: list[tuple[int, dict[str, Any]]]) -> list[list[Any]]:
    """The run's metrics as the file logger writes them, numbers to 5 significant digits (the size budget)."""
    out = []
    for step, metrics in records:
        row = {}
        for k, v in metrics.items():
            if isinstance(v, bool) or v is None:
                row[k] = v
            elif isinstance(v, (int, float, np.floating, np.integer)):
                f = float(v)
                row[k] = float(f"{f:.5g}") if math.isfinite(f) else None
        out.append([int(step), row])
    return out


def meta(size: dict[str, Any] | None = None) -> dict[str, Any]:
    """The generator's ranges, stored beside the dataset (world-v<VERSION>.meta.json); ``size``: the run size it
    draws at (a pilot's lr scale too), SIZE by default."""
    return {
        "version": VERSION, "size": size or SIZE, "seed_ranges": SEED_RANGES,
        "sandbox_seeds": "world seed w runs on sandbox seeds 2w+1 and 2w+2",
        "test_region": {"cells": sorted(TEST_CELLS), "lr": TEST_LR, "temperature": TEST_TEMPERATURE,
                        "rule": "test: the base config is in one of these at least; train: in none"},
        "ranges": {"cells": CELLS, "lr": LR_RANGE, "temperature": TEMPERATURE_RANGE},
        "faults": [f.name + ": " + f.key for f in FAULTS], "p_no_fault": P_HEALTHY,
        "noise": f"a change improves when its mean paired validation gain over the seeds exceeds {GAIN_FLOOR} "
                 "and twice its standard error (two seeds: the spread |gain_1 - gain_2|)",
        "more_seeds": f"a candidate whose two seeds leave it open (mean gain above {GAIN_FLOOR}, t in "
                      f"{list(UNDECIDED_T)}) runs on sandbox seeds {MORE_SEEDS_OFFSET}+2w+1 and +2w+2 too "
                      "(reseed.py, kept in <dataset>-seeds34.jsonl.gz) and is judged on the four",
        "validation": "mean of the last two held-out validations (val-core/*/reward/mean@1), greedy",
        "candidates": f"the advisor's whole proposal, up to {MAX_ADVISOR_CANDIDATES} one-key fixes it offers, the "
                      f"fault key put back, {RANDOM_CANDIDATES} random one-key changes",
    }
