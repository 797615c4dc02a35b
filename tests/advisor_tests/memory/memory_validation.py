"""The memory model's validation set (validation_set.yaml) as runnable cases; shared with the bench."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from advisor import load_config
from advisor.memory import MemoryEstimate, estimate_memory

HERE = Path(__file__).resolve().parent
VERL_SCRIPTS = HERE.parents[1] / "fixtures" / "verl_scripts"


@dataclass(frozen=True)
class Case:
    """One configuration with a known outcome."""

    id: str
    kind: str  # device_tuning | example | cannot_run (an example that cannot run as written, by plain arithmetic)
    script: Path
    gpu: str
    expected: str  # ran | oom
    model: str | None = None
    overrides: tuple[str, ...] = ()
    source: str = ""
    known_miss: str | None = None
    verl_version: str | None = None  # None: detected (the fixtures are verl @ b178a3cd)

    def estimate(self) -> MemoryEstimate:
        cfg = load_config(self.script, overrides=list(self.overrides), verl_version=self.verl_version)
        return estimate_memory(cfg, gpu=self.gpu, model=self.model)

    def right(self, estimate: MemoryEstimate) -> bool:
        """A configuration that ran must not be predicted ``oom``; one that ran out of memory must be."""
        return (estimate.verdict == "oom") == (self.expected == "oom")


def _trail_overrides(prompts: int) -> tuple[str, ...]:
    # what the tuning scripts derive from nproc_per_gpu x GPUs
    return (
        f"data.train_batch_size={prompts}",
        f"data.val_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size={prompts}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size={prompts}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size={prompts}",
    )


def example_gpu(relative: str) -> str:
    """The hardware an example script was written for, by its name (validation_set.yaml `examples.gpu` wins)."""
    name = relative.lower()
    if name.endswith("_npu.sh") or name.startswith("ascend_extras/"):
        return "Ascend-910B"
    if "96gb" in name or "_h20_" in name:
        return "H20"
    if "_h800_" in name:
        return "H800"
    return "H100"


def cases() -> list[Case]:
    data = yaml.safe_load((HERE / "validation_set.yaml").read_text(encoding="utf-8"))
    misses: dict[str, str] = data.get("known_miss") or {}
    out: list[Case] = []
    for entry in data["device_tuning"]:
        for prompts_per_gpu, outcome in entry["points"].items():
            case_id = f"{Path(entry['script']).name}@{prompts_per_gpu}"
            out.append(Case(case_id, "device_tuning", VERL_SCRIPTS / entry["script"], entry["gpu"], outcome,
                            entry.get("model"), _trail_overrides(prompts_per_gpu * entry["gpus"]),
                            entry["source"], misses.get(case_id), data.get("device_tuning_verl_version")))
    examples = data["examples"]
    root = VERL_SCRIPTS / examples["root"]
    gpus = examples.get("gpu") or {}
    overrides = examples.get("overrides") or {}
    cannot_run: dict[str, str] = data.get("cannot_run_as_written") or {}
    for script in sorted(root.rglob("*.sh")):
        relative = script.relative_to(root).as_posix()
        kind, expected, source = "example", "ran", "verl example script"
        if relative in cannot_run:
            kind, expected, source = "cannot_run", "oom", cannot_run[relative]
        out.append(Case(relative, kind, script, gpus.get(relative) or example_gpu(relative), expected,
                        examples["model"].get(relative), tuple(overrides.get(relative) or ()), source,
                        misses.get(relative)))
    return out


@dataclass(frozen=True)
class CalibrationPoint:
    """A published torch max_memory_allocated of a verl run (calibration_points.yaml)."""

    id: str
    url: str
    measured_gib: float
    overrides: tuple[str, ...]
    assumed: str = ""

    def estimate(self) -> MemoryEstimate:
        data = _calibration()
        cfg = load_config(VERL_SCRIPTS / data["base_script"], overrides=list(self.overrides),
                          verl_version=data["verl_version"])
        return estimate_memory(cfg, gpu=data["gpu"])


def _calibration() -> dict:
    return yaml.safe_load((HERE / "calibration_points.yaml").read_text(encoding="utf-8"))


def calibration_points() -> list[CalibrationPoint]:
    out = []
    for p in _calibration()["points"]:
        overrides = [f"actor_rollout_ref.model.path={p['model']}", f"trainer.n_gpus_per_node={p['gpus']}",
                     f"actor_rollout_ref.rollout.tensor_model_parallel_size={p['rollout_tp']}",
                     f"actor_rollout_ref.rollout.gpu_memory_utilization={p['gmu']}", *_trail_overrides(64)]
        if p.get("data"):
            overrides += [f"data.train_files=data/{p['data']}/train.parquet",
                          f"data.max_prompt_length={p['max_prompt']}", f"data.max_response_length={p['max_response']}",
                          f"actor_rollout_ref.rollout.max_model_len={p['max_prompt'] + p['max_response']}"]
        out.append(CalibrationPoint(p["id"], p["url"], float(p["max_allocated_gib"]), tuple(overrides),
                                    p.get("assumed", "")))
    return out


# what torch.cuda.max_memory_allocated sees: not NCCL, the CUDA context or CUDA graphs
_TORCH_CATEGORIES = ("weights", "grads", "optimizer", "activations", "logits", "kv_cache")


def torch_allocated_gib(estimate: MemoryEstimate) -> float:
    """The estimate of a run's torch max_memory_allocated: the engine's pool (kept in torch's counters when
    slept, vllm-project/vllm#17117) plus the largest training phase, or the generate phase if larger."""
    gen = estimate.stage("generate")
    pool = sum(gib for cat, label, gib in gen.details if label.startswith(("vllm weights", "KV cache")))
    gen_torch = sum(gib for cat, _l, gib in gen.details if cat in _TORCH_CATEGORIES)
    training = 0.0
    for stage in estimate.stages:
        if stage.stage == "generate":
            continue
        torch_part = sum(gib for cat, label, gib in stage.details
                         if cat in _TORCH_CATEGORIES and not label.startswith("vllm weights woken"))
        training = max(training, torch_part)
    return max(gen_torch, pool + training)


# The GRPO Qwen2.5-7B / gsm8k config the unit tests of the memory model start from (each adds its own keys).
GRPO_7B = (
    "actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct",
    "actor_rollout_ref.rollout.name=vllm",
    "algorithm.adv_estimator=grpo",
    "data.train_files=/data/gsm8k/train.parquet",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
)
