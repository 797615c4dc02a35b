"""Derive the healthy envelope of verl training metrics from every published run in bench/published_runs/.

Each log there is a verl run its authors published as a reference result (bench/published_runs/SOURCE.md says
where each comes from). This reads each one the way ``advisor suggest`` does (``advisor.metrics.load_metrics``,
old metric names read as today's; the config from the log), splits the run into ten slices of progress (the
fraction of its logged steps: these runs are complete, so their last step is their total), and keeps, per run,
metric and slice, the median and the maximum of that slice. The envelope of a metric at a progress decile is then
the set of those per-run values: quantiles over runs (p5, p50, p95 and the extremes) are written beside them, and
the advisor reads a run's percentile among them (``advisor/playbook/_envelope.py``).

Config dependence is kept only where the data supports it: for each of learning rate, KL coefficient, rollout.n
and response cap, the runs are split by the key's value only when every side has at least ``MIN_RUNS`` runs;
otherwise the key is recorded as the range the runs cover (all published runs so far use lr 1e-6 and a KL
coefficient of 0.001, so the envelope says nothing about other values). Response length is also kept as a share
of the run's cap (``response_length/mean_of_cap``), which makes runs with different caps comparable.

    python scripts/published_envelope.py [--check]

writes knowledge/published_envelope.yaml (``--check``: exit 1 if the committed file differs).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
from _generated import write_or_check  # noqa: E402

from advisor.load import load_config_from_log  # noqa: E402
from advisor.metrics import load_metrics  # noqa: E402
from advisor.playbook import load_playbook  # noqa: E402

RUNS = REPO / "bench" / "published_runs"
OUT = REPO / "knowledge" / "published_envelope.yaml"
DECILES = 10
MIN_RUNS = 3  # a config split needs this many runs on each side to say anything about the key
MIN_STEPS = 20  # a run shorter than this has slices of one or two steps: not an envelope
CAP_SHARE = "response_length/mean_of_cap"
CONFIG = {"lr": "actor_rollout_ref.actor.optim.lr", "kl_coef": "kl_coef", "n": "actor_rollout_ref.rollout.n",
          "response_cap": "data.max_response_length"}
QUANTILES = (5, 50, 95)
# speed and memory depend on the hardware and the model size, not on health: no envelope across runs for them
HARDWARE = ("timing_s/", "timing_per_token_ms/", "perf/")
# a logged learning rate is the config's and its schedule's, not a reading of health; and verl's console prints it to
# three decimals (every published log's `actor/lr:0.000`), so its percentile among the runs would say nothing
CONFIG_ECHOES = ("actor/lr", "critic/lr")


def _rounded(x: float) -> float:
    return float(f"{x:.4g}")


def rule_metrics() -> list[str]:
    """Every concrete metric a playbook rule reads (conditions, harm, evidence, healthy bands), plus the cap share."""
    names = {m for rule in load_playbook() for m in rule.metrics if "*" not in m and not m.startswith(HARDWARE)
             and m not in CONFIG_ECHOES}
    return sorted(names | {CAP_SHARE})


def kl_coef(cfg) -> float | None:
    """The KL coefficient the run applies: the loss's when use_kl_loss, else the reward's when KL is in the reward."""
    if cfg.get("actor_rollout_ref.actor.use_kl_loss"):
        return cfg.get("actor_rollout_ref.actor.kl_loss_coef")
    if cfg.get("algorithm.use_kl_in_reward") or cfg.get("algorithm.adv_estimator") == "gae":
        return cfg.get("algorithm.kl_ctrl.kl_coef")
    return 0.0


def read_run(log: Path, metrics: list[str]) -> dict:
    frame = load_metrics(log)
    cfg = load_config_from_log(log)
    config = {name: (kl_coef(cfg) if key == "kl_coef" else cfg.get(key)) for name, key in CONFIG.items()}
    steps = frame.steps
    cap = config["response_cap"]
    out: dict[str, dict[str, list[float | None]]] = {}
    for metric in metrics:
        if metric == CAP_SHARE:
            if "response_length/mean" not in frame or not cap:
                continue
            series = frame["response_length/mean"].to_numpy(dtype=float) / float(cap)
        elif metric in frame:
            series = frame[metric].to_numpy(dtype=float)
        else:
            continue
        ok = np.isfinite(series)
        if ok.sum() < MIN_STEPS:
            continue
        progress = (steps[ok] - steps[ok][0]) / max(float(steps[ok][-1] - steps[ok][0]), 1.0)
        slice_of = np.minimum((progress * DECILES).astype(int), DECILES - 1)
        medians: list[float | None] = []
        tops: list[float | None] = []
        for d in range(DECILES):
            values = series[ok][slice_of == d]
            medians.append(_rounded(float(np.median(values))) if values.size else None)
            tops.append(_rounded(float(values.max())) if values.size else None)
        out[metric] = {"median": medians, "max": tops}
    return {"steps": len(steps), "config": config, "metrics": out}


def envelope(runs: dict[str, dict], names: list[str]) -> dict[str, dict]:
    """Per metric and decile, quantiles over the runs' slice medians and the highest slice maximum."""
    out: dict[str, dict] = {}
    metrics = sorted({m for name in names for m in runs[name]["metrics"]})
    for metric in metrics:
        per: dict[str, list] = {f"p{q}": [] for q in QUANTILES} | {"min": [], "max": [], "top": [], "runs": []}
        for d in range(DECILES):
            meds = [runs[n]["metrics"][metric]["median"][d] for n in names if metric in runs[n]["metrics"]]
            tops = [runs[n]["metrics"][metric]["max"][d] for n in names if metric in runs[n]["metrics"]]
            meds = [m for m in meds if m is not None]
            tops = [t for t in tops if t is not None]
            for q in QUANTILES:
                per[f"p{q}"].append(_rounded(float(np.percentile(meds, q))) if meds else None)
            per["min"].append(min(meds) if meds else None)
            per["max"].append(max(meds) if meds else None)
            per["top"].append(max(tops) if tops else None)
            per["runs"].append(len(meds))
        out[metric] = per
    return out


def config_splits(runs: dict[str, dict]) -> tuple[dict, dict]:
    """The config keys the runs split on with >= MIN_RUNS each side (n: 1 vs more), and the range of the others."""
    splits: dict[str, dict] = {}
    ranges: dict[str, list] = {}
    for name in CONFIG:
        values = [r["config"][name] for r in runs.values()]
        known = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        ranges[name] = [min(known), max(known)] if known else []
        if name == "n":  # one response per prompt (a critic's advantage) vs a group: the metrics mean other things
            sides = {"1": [k for k, r in runs.items() if r["config"]["n"] == 1],
                     ">1": [k for k, r in runs.items() if (r["config"]["n"] or 1) > 1]}
        else:
            distinct = sorted(set(known))
            sides = {f"{v:g}": [k for k, r in runs.items() if r["config"][name] == v] for v in distinct}
        if len(sides) > 1 and all(len(v) >= MIN_RUNS for v in sides.values()):
            splits[name] = {side: envelope(runs, sorted(members)) for side, members in sides.items()}
    return splits, ranges


def build() -> str:
    metrics = rule_metrics()
    runs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for gz in sorted(RUNS.glob("*.log.gz")):
            log = Path(tmp) / gz.name.removesuffix(".gz")
            with gzip.open(gz, "rb") as src, log.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            runs[gz.name] = read_run(log, metrics)
    splits, ranges = config_splits(runs)
    header = ("# Written by scripts/published_envelope.py from bench/published_runs/*.log.gz (sources: SOURCE.md\n"
              "# there); do not edit. Per metric and decile of run progress (the fraction of the run's logged steps):\n"
              "# quantiles over the published runs of each run's median in that decile (p5/p50/p95, min/max over\n"
              "# runs), and `top`, the highest single step any run logged there. `by`: the same, split by a config\n"
              "# key, only where each side has >= 3 runs; `config_range`: what the runs cover (outside it the\n"
              "# envelope is extrapolated).\n")
    data = {"schema": 1, "deciles": DECILES, "runs_total": len(runs), "config_range": ranges,
            "envelope": envelope(runs, sorted(runs)), "by": splits, "runs": runs}
    return header + yaml.safe_dump(data, sort_keys=False, width=120, default_flow_style=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    return write_or_check({OUT: build()}, REPO, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
