"""The memory model against the memory published verl runs measured themselves (issue 37).

    python bench/bench_memory_published.py [-v]

Points, each with its source:
- every whole log of bench/published_runs/ (corpus.yaml, SOURCE.md) that logs ``perf/max_memory_allocated_gb``
  and whose GPU type its source states: the config is the one the log printed, read by ``advisor.load_config``;
  the measured value is the largest ``perf/max_memory_allocated_gb`` of the run, and the estimate is made at the
  lengths the run reached (the largest ``prompt_length/mean + response_length/mean`` of any step);
- the published points of tests/advisor_tests/memory/calibration_points.yaml (verl-data's GRPO-LoRA runs, the
  final step's running max read from each log; the logs are not kept here, see SOURCE.md), estimated from verl's
  own LoRA tuning script with each run's keys, at the dataset table's lengths;
- bench/published_runs/memory_points.yaml: more of verl-data's runs read the same way, each with its node RAM and
  the lengths the estimate is made at: those of the step whose line first shows the run's final running max where
  that step was read (``lengths.step``), else the final step's (a lower bound: the running max is set at the
  heaviest step); and bench/published_runs/memory_points_more.yaml
  when present (another collector's points, same schema; a point already listed, by id, is judged once).

The points files' schema: ``base`` (a calibration file beside tests/advisor_tests/memory/ naming base_script,
verl_version and gpu), ``prompts`` (the batch keys' value), and ``points``, each with ``id``, ``url``,
``lengths`` (prompt_mean, response_mean; prompt_max, response_max when logged) and any of ``max_allocated_gib``,
``cpu_memory_used_gb`` and ``kv_cache`` (vLLM's own line: ``tokens``, or ``gpu_blocks`` and ``block_size``, or
``line``, the log line). The config: the base script with the point's ``model``, ``gpus``, ``rollout_tp``,
``gmu``, ``data`` (train, max_prompt, max_response) and extra ``overrides``; or, when the point names one,
its own ``script`` (a path in this repository) with its ``overrides``; ``gpu``, ``verl_version``, ``prompts``
and ``max_model_len`` (default 1536) per point override the file's.

What the metric measures (docs/memory.md, "Measured points"): ``torch.cuda.max_memory_allocated()`` of the
actor worker process (fsdp_workers.py update_actor, verl v0.3.x:459 / v0.4.x:588), never reset, so the running
max over every phase of that process, the sleeping vLLM pool included; the estimate compared is
``torch_allocated_gib`` of tests/advisor_tests/memory/memory_validation.py (the engine's pool plus the largest
training phase's torch-allocated terms).

Host RAM: ``perf/cpu_memory_used_gb`` is ``psutil.virtual_memory().used`` (fsdp_workers.py:625 @ v0.4.1): the
node's used RAM, every process on it, sampled inside update_actor. Pinned host memory (every verl offload,
vLLM's level-1 sleep copy and V0 swap space) is not in ``used`` (knowledge/memory.yaml ``host``), so the estimate
of that moment is the model's ``host.sampled_gib``: the per-worker baseline, fitted on the seven MATH runs
(``host.worker_baseline_fit_ids``); the bench prints the median over the other points apart.

KV cache: vLLM's start-up line against
the model's ``estimate.kv.tokens``; only logs that carry the line count (V0 0.8.5 prints ``# cuda blocks: N``,
vllm/executor/executor_base.py:112; V1 ``GPU KV cache size: N tokens``, vllm/v1/core/kv_cache_utils.py:634).

Ends with exactly:

    memory vs published runs: N points, estimate/measured median R, within 15%: k/N, under by more than 10%: j/N
    host RAM vs published runs: N points, median |error| E%
    KV cache vs vLLM's own line: N points, median |error| E%
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "advisor_tests" / "memory"))

from memory_validation import VERL_SCRIPTS, calibration_points, torch_allocated_gib  # noqa: E402

from advisor import load_config  # noqa: E402
from advisor.errors import ConfigError  # noqa: E402
from advisor.memory import MemoryEstimate, estimate_memory  # noqa: E402
from advisor.metrics import parse_metrics_line  # noqa: E402

CORPUS = REPO / "bench" / "published_runs"
_KV_V1 = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_KV_V0 = re.compile(r"# (?:GPU|cuda) blocks: (\d+)")
_BLOCK = re.compile(r"block_size=(\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Run:
    """What one whole log says about its own memory."""

    steps: dict[int, dict[str, float]]
    kv_tokens: float | None

    def peak(self, key: str) -> float | None:
        values = [m[key] for m in self.steps.values() if key in m]
        return max(values) if values else None

    def sequence_tokens(self) -> float | None:
        totals = [m["prompt_length/mean"] + m["response_length/mean"] for m in self.steps.values()
                  if "prompt_length/mean" in m and "response_length/mean" in m]
        return max(totals) if totals else None


def read_run(text: str) -> Run:
    """The step metrics and vLLM's KV-cache line of a console log."""
    steps: dict[int, dict[str, float]] = {}
    kv = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        record = parse_metrics_line(line, "console")  # advisor's reading of verl's console logger
        if record is not None:
            steps.setdefault(record[0], {}).update(record[1])
            continue
        if kv is None:
            v1 = _KV_V1.search(line)
            if v1:
                kv = float(v1.group(1).replace(",", ""))
            else:
                v0 = _KV_V0.search(line)
                block = _BLOCK.search(text)
                if v0 and block:
                    kv = float(v0.group(1)) * int(block.group(1))
    return Run(steps, kv)


@dataclass
class Point:
    id: str
    source: str
    measured: float
    estimate: float
    upper: float | None = None  # the estimate at the longest prompt and response the run logged (-v only)

    @property
    def ratio(self) -> float:
        return self.estimate / self.measured


def _batch_of(prompts: int) -> list[str]:
    """The runs' batch keys: train batch = mini = micro (global) = log-prob micro = ``prompts``."""
    keys = ("data.train_batch_size", "data.val_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
            "actor_rollout_ref.actor.ppo_micro_batch_size", "actor_rollout_ref.rollout.log_prob_micro_batch_size",
            "actor_rollout_ref.ref.log_prob_micro_batch_size")
    return [f"{key}={prompts}" for key in keys]


POINT_FILES = ("memory_points.yaml", "memory_points_more.yaml")  # the second is optional (another collector's)


def kv_tokens_of(entry: dict) -> float | None:
    """vLLM's own KV-cache size of a point, in tokens per GPU (``kv_cache``: ``tokens``; ``gpu_blocks`` with
    ``block_size``; or ``line``, the log line itself, read as ``read_run`` reads a whole log)."""
    kv = entry.get("kv_cache")
    if not isinstance(kv, dict):
        return None
    if kv.get("tokens") is not None:
        return float(kv["tokens"])
    if kv.get("gpu_blocks") is not None and kv.get("block_size") is not None:
        return float(kv["gpu_blocks"]) * int(kv["block_size"])
    if kv.get("line"):
        line = str(kv["line"])
        return read_run(line if "block_size" in line or not kv.get("block_size")
                        else f"{line}\nblock_size={kv['block_size']}").kv_tokens
    return None


def _point_config(data: dict, base: dict, p: dict):
    """A point's config: its own script and overrides when it names them, else the file's base script with the
    point's keys (model, GPUs, rollout TP, gmu, data, batch)."""
    if p.get("script"):
        return load_config(REPO / p["script"], overrides=list(p.get("overrides") or ()),
                           verl_version=p.get("verl_version") or base.get("verl_version"))
    overrides = [f"actor_rollout_ref.model.path={p['model']}", f"trainer.n_gpus_per_node={p['gpus']}",
                 f"actor_rollout_ref.rollout.tensor_model_parallel_size={p['rollout_tp']}",
                 f"actor_rollout_ref.rollout.gpu_memory_utilization={p['gmu']}",
                 *_batch_of(p.get("prompts") or data["prompts"]),
                 f"data.train_files=data/{p['data']['train']}/train.parquet",
                 f"data.max_prompt_length={p['data']['max_prompt']}",
                 f"data.max_response_length={p['data']['max_response']}",
                 f"actor_rollout_ref.rollout.max_model_len={p.get('max_model_len', 1536)}",
                 *(p.get("overrides") or ())]
    return load_config(VERL_SCRIPTS / base["base_script"], overrides=overrides,
                       verl_version=p.get("verl_version") or base["verl_version"])


def set_aside(p: dict, default_gpu: str | None = None) -> tuple[str | None, str | None]:
    """Why a point cannot judge the GPU model, and why not the host model (None: it can), from the point's own
    record: a reference model other than the actor's is a fork's (verl's ActorRolloutRefWorker builds the reference
    from the actor's actor_rollout_ref.model.path, so the model reads one model); a run on some of a node's GPUs
    shares psutil's node-wide ``used`` with whatever else ran there. (Torch's counter above the card is no reason:
    it counts the sleeping engine's pool, and so does the estimate compared.)"""
    gpu_why = host_why = None
    config = p.get("config") or {}
    ref = config.get("actor_rollout_ref.ref.model.path")
    if ref and ref != config.get("actor_rollout_ref.model.path"):
        gpu_why = host_why = f"its reference model {ref} is not the actor's (a fork's teacher; the model reads one)"
    elif not (p.get("gpu") or default_gpu):
        gpu_why = "the GPU type is not stated"
    if host_why is None and p.get("host_gpus") and p.get("gpus") and int(p["host_gpus"]) > int(p["gpus"]):
        host_why = (f"the run used {p['gpus']} of the node's {p['host_gpus']} GPUs: psutil's used RAM is the "
                    "node's, other jobs included")
    return gpu_why, host_why


def _config_script(p: dict, tmp: Path) -> Path:
    """A point that states its resolved config (``config``: dotted keys) as a verl launch line to read."""
    script = tmp / f"{p['id']}.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n" + " \\\n".join(
        f"    {key}={'null' if value is None else str(value).lower() if isinstance(value, bool) else value}"
        for key, value in p["config"].items()) + "\n", encoding="utf-8")
    return script


def log_read_points(files: tuple[str | Path, ...] = POINT_FILES,
                    set_aside_out: list[str] | None = None) -> list[tuple[dict, MemoryEstimate, MemoryEstimate]]:
    """The points of memory_points.yaml (and memory_points_more.yaml when present), each estimated at its own
    lengths: the mean it reached, and (second estimate) the longest prompt and response it logged. A point that can
    judge neither the GPU nor the host model (``set_aside``) is left out, its reason appended to ``set_aside_out``;
    one that can judge only one of them carries the other's reason under ``gpu_set_aside`` / ``host_set_aside``."""
    out = []
    seen: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name in files:
            path = name if isinstance(name, Path) else CORPUS / name
            if not path.exists():
                continue
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            base = yaml.safe_load((REPO / "tests/advisor_tests/memory" / data["base"]).read_text(encoding="utf-8")) \
                if data.get("base") else {}  # a points file may name every point's own script instead
            for p in data.get("points") or ():
                if p["id"] in seen:
                    continue  # the same run listed by both collectors: judged once
                seen.add(p["id"])
                gpu_why, host_why = set_aside(p, base.get("gpu"))
                if gpu_why and (host_why or p.get("cpu_memory_used_gb") is None):
                    if set_aside_out is not None:
                        set_aside_out.append(f"{p['id']}: {gpu_why}" + (
                            f"; host: {host_why}" if host_why and host_why != gpu_why else ""))
                    continue
                if p.get("config") and not p.get("script") and not base:
                    cfg = load_config(_config_script(p, Path(tmp)), verl_version=p.get("verl_version"))
                else:
                    cfg = _point_config(data, base, p)
                gpu = p.get("gpu") or base.get("gpu") or "H100"  # a host-only point: the host terms read no GPU
                lengths = p["lengths"]
                mean = lengths["prompt_mean"] + lengths["response_mean"]
                longest = lengths.get("prompt_max", 0) + lengths.get("response_max", 0) or mean
                model = p.get("model_name")  # a catalog name when the config's path does not say the model
                entry = {**p, "gpu_set_aside": gpu_why, "host_set_aside": host_why}
                try:
                    estimates = (estimate_memory(cfg, gpu=gpu, model=model, sequence_tokens=mean),
                                 estimate_memory(cfg, gpu=gpu, model=model, sequence_tokens=longest))
                except ConfigError as exc:  # e.g. a model the catalog does not hold: nothing to compare
                    if set_aside_out is not None:
                        set_aside_out.append(f"{p['id']}: {str(exc).split(';')[0]}")
                    continue
                out.append((entry, *estimates))
    return out


def host_at_sample(est: MemoryEstimate) -> float:
    """The model's node RAM (GiB) as perf/cpu_memory_used_gb reads it: psutil's ``used`` inside update_actor."""
    return est.host.sampled_gib


def _host_fit_ids() -> set[str]:
    """The points the per-worker host baseline was fitted on (knowledge/memory.yaml host), reported apart."""
    data = yaml.safe_load((REPO / "knowledge" / "memory.yaml").read_text(encoding="utf-8"))
    return set(data["host"]["worker_baseline_fit_ids"])


def _median_abs_error(pairs: list[tuple[float, float]]) -> str:
    if not pairs:
        return "n/a (no point)"
    return f"{statistics.median(abs(e - m) / m * 100 for e, m in pairs):.0f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per point")
    args = parser.parse_args()
    cases = yaml.safe_load((CORPUS / "corpus.yaml").read_text(encoding="utf-8"))["cases"]
    points: list[Point] = []
    host: list[tuple[str, float, float]] = []  # (point, estimate, logged)
    kv: list[tuple[float, float]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            text = gzip.decompress((CORPUS / case["file"]).read_bytes()).decode("utf-8", "replace")
            run = read_run(text)
            allocated = run.peak("perf/max_memory_allocated_gb")
            cpu = run.peak("perf/cpu_memory_used_gb")
            if allocated is None and cpu is None and run.kv_tokens is None:
                continue
            hardware = case.get("hardware") or {}
            log = Path(tmp) / case["file"].removesuffix(".gz")
            log.write_text(text, encoding="utf-8")
            cfg = load_config(log)
            gpu = hardware.get("gpu")
            # the host estimate does not read the GPU; the GPU-side ones need the card the run used
            est = estimate_memory(cfg, gpu=gpu or "H100", model=case.get("model"),
                                  sequence_tokens=run.sequence_tokens())
            if cpu is not None:
                host.append((case["file"], host_at_sample(est), cpu))
                if args.verbose:
                    print(f"host {case['file']}: estimate at the sample {host_at_sample(est):.1f} GiB "
                          f"(node peak {est.host.peak_gib:.1f}), logged {cpu:.1f} GB used (node)")
            if not gpu:
                skipped.append(f"{case['file']}: GPU type not stated ({hardware.get('from', 'no hardware entry')})")
                continue
            if allocated is not None:
                longest = (run.peak("prompt_length/max") or 0) + (run.peak("response_length/max") or 0)
                upper = estimate_memory(cfg, gpu=gpu, model=case.get("model"), sequence_tokens=longest or None)
                points.append(Point(case["file"], "bench/published_runs", allocated, torch_allocated_gib(est),
                                    torch_allocated_gib(upper)))
            if run.kv_tokens is not None and est.kv is not None and est.kv.tokens:
                kv.append((est.kv.tokens, run.kv_tokens))
    read_here = log_read_points(set_aside_out=skipped)
    judged_here = {entry["url"].split("/", 7)[-1] for entry, _est, _longest in read_here}  # the path in the repository
    for point in calibration_points():
        if point.url.split("/", 7)[-1] in judged_here:
            continue  # the same log, judged below at the lengths it reached rather than the dataset table's
        points.append(Point(point.id, point.url, point.measured_gib, torch_allocated_gib(point.estimate())))
    for entry, est, longest in read_here:
        if entry.get("max_allocated_gib") is not None and not entry.get("gpu_set_aside"):
            points.append(Point(entry["id"], entry["url"], float(entry["max_allocated_gib"]), torch_allocated_gib(est),
                                torch_allocated_gib(longest)))
        kv_logged = kv_tokens_of(entry)
        if kv_logged is not None and est.kv is not None and est.kv.tokens:
            kv.append((est.kv.tokens, kv_logged))
        for side in ("gpu", "host"):
            if entry.get(f"{side}_set_aside") and (side == "gpu" or entry.get("cpu_memory_used_gb") is not None):
                skipped.append(f"{entry['id']} ({side} only): {entry[f'{side}_set_aside']}")
        if entry.get("cpu_memory_used_gb") is not None and not entry.get("host_set_aside"):
            host.append((entry["id"], host_at_sample(est), float(entry["cpu_memory_used_gb"])))
            if args.verbose:
                print(f"host {entry['id']}: estimate at the sample {host_at_sample(est):.1f} GiB "
                      f"(node peak {est.host.peak_gib:.1f}), logged {entry['cpu_memory_used_gb']:.1f} GB used (node)")
    if args.verbose:
        for p in points:
            longest = "" if p.upper is None else f" (at the longest sequences logged: {p.upper:5.1f})"
            print(f"{p.id:34s} measured {p.measured:5.1f} estimate {p.estimate:5.1f} ratio {p.ratio:4.2f}{longest}")
        for line in skipped:
            print(f"set aside: {line}")
    if skipped:
        print(f"set aside: {len(skipped)} (why: -v)")
    n = len(points)
    within = sum(abs(p.ratio - 1) <= 0.15 for p in points)
    under = sum(p.ratio < 0.90 for p in points)
    median = f"{statistics.median(p.ratio for p in points):.2f}" if points else "n/a"
    print(f"memory vs published runs: {n} points, estimate/measured median {median}, within 15%: {within}/{n}, "
          f"under by more than 10%: {under}/{n}")
    fitted = _host_fit_ids()
    held_out = [(e, m) for pid, e, m in host if pid not in fitted]
    print(f"host RAM, the points not fitted on: {len(held_out)} points, median |error| {_median_abs_error(held_out)} "
          f"(the per-worker baseline was fitted on {len([1 for pid, _e, _m in host if pid in fitted])}: "
          "knowledge/memory.yaml host)")
    print(f"host RAM vs published runs: {len(host)} points, median |error| "
          f"{_median_abs_error([(e, m) for _pid, e, m in host])}")
    print(f"KV cache vs vLLM's own line: {len(kv)} points, median |error| {_median_abs_error(kv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
