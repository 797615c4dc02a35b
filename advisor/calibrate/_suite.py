"""Every coefficient the harness measures for knowledge/memory_measured.yaml, each with its command.

``advisor calibrate --all --out knowledge/memory_measured.yaml`` re-measures them all (a few minutes on
2 CPU cores); each entry's ``command`` re-measures that one.
"""

from __future__ import annotations

import datetime
import platform
from dataclasses import replace
from typing import Any

from ._measure import Phase, Switches
from ._request import Request, run
from ._verl_path import EntropyMode

BASE_MODEL = "Qwen2.5-0.5B"
TOKENS = 1024
VERSIONS = ("0.3.0", "0.7.1", "0.8.0", "0.9.0", "0.9.1")
ENTROPY: tuple[EntropyMode, ...] = ("off", "on", "eager", "chunked")
_ON_OFF: tuple[EntropyMode, ...] = ("off", "on")
_FORWARDS: tuple[tuple[Phase, EntropyMode], ...] = (("log_prob", "on"), ("ref", "off"))  # no-grad phases


def _requests() -> list[tuple[str, str, Request]]:
    """(id, what it measures, request)."""
    out: list[tuple[str, str, Request]] = []
    act = Request(BASE_MODEL, TOKENS, layers=(1, 3), vocab=(256,))
    out.append(("act.full", "actor update, full fine-tune: bytes per token per decoder layer", act))
    for rank in (16, 32):
        out.append((f"act.lora{rank}", f"actor update, LoRA rank {rank} all-linear: bytes per token per layer",
                    replace(act, switches=Switches(lora_rank=rank))))
    out.append(("act.gc", "actor update, gradient checkpointing: bytes per token per layer",
                replace(act, switches=Switches(gradient_checkpointing=True))))
    out.append(("act.gc_lora32", "actor update, gradient checkpointing + LoRA 32: bytes per token per layer",
                replace(act, switches=Switches(gradient_checkpointing=True, lora_rank=32))))
    out.append(("act.critic", "critic update (value head): bytes per token per layer",
                replace(act, phase="critic_update")))
    for model in ("Qwen2.5-1.5B", "Qwen2.5-7B", "Qwen2.5-32B", "Llama-3.1-8B"):
        out.append((f"act.full.{model}", f"actor update, full fine-tune, {model} shapes: bytes per token per layer",
                    replace(act, model=model)))
    fwd = Request(BASE_MODEL, TOKENS, token_pair=(2 * TOKENS,), layers=(2,), vocab=(256,))
    for phase in ("log_prob", "critic_values"):
        out.append((f"fwd.{phase}", f"{phase} forward (no grad), 2 layers, vocab 256: bytes per token",
                    replace(fwd, phase=phase)))
    out.append(("gc.one_layer", "actor update with gradient checkpointing, 1 layer, vocab 256: peak bytes per token "
                "(compare nogc.one_layer: the recomputed layer and the logits are never live together)",
                Request(BASE_MODEL, TOKENS, token_pair=(2 * TOKENS,), layers=(1,), vocab=(256,),
                        switches=Switches(gradient_checkpointing=True))))
    out.append(("nogc.one_layer", "actor update without checkpointing, 1 layer, vocab 256: bytes per token",
                Request(BASE_MODEL, TOKENS, token_pair=(2 * TOKENS,), layers=(1,), vocab=(256,))))
    logit = Request(BASE_MODEL, TOKENS, vocab=(32768, 65536), layers=(1,))  # logits above one layer's intermediates
    for version in VERSIONS:
        for entropy in ENTROPY:
            out.append((f"logits.update.{version}.{entropy}",
                        f"actor update, verl {version}, entropy {entropy}, temperature 1: bytes per logit",
                        replace(logit, switches=Switches(verl_version=version, entropy=entropy))))
        for phase, entropy in _FORWARDS:
            out.append((f"logits.{phase}.{version}", f"{phase} forward (no grad), verl {version}: bytes per logit",
                        replace(logit, phase=phase, switches=Switches(verl_version=version, entropy=entropy))))
    for version in ("0.7.1", "0.9.1"):
        for entropy in _ON_OFF:
            out.append((f"logits.padded.update.{version}.{entropy}",
                        f"actor update without remove padding (one padded row, response = half), verl {version}, "
                        f"entropy {entropy} (eager, as verl's padded path computes it): bytes per padded logit",
                        replace(logit, switches=Switches(verl_version=version, entropy=entropy,
                                                         remove_padding=False))))
    for entropy in ENTROPY[2:]:  # eager, chunked
        out.append((f"logits.log_prob.0.9.1.{entropy}", f"log_prob forward (no grad), verl 0.9.1, entropy {entropy}: "
                    "bytes per logit", replace(logit, phase="log_prob", switches=Switches(entropy=entropy))))
    for entropy in _ON_OFF:
        out.append((f"logits.update.0.9.1.{entropy}.t07",
                    f"actor update, verl 0.9.1, entropy {entropy}, temperature 0.7: bytes per logit",
                    replace(logit, switches=Switches(verl_version="0.9.1", entropy=entropy, temperature=0.7))))
    out.append(("logits.log_prob.0.9.1.t07", "log_prob forward (no grad), verl 0.9.1, temperature 0.7: bytes per logit",
                replace(logit, phase="log_prob", switches=Switches(verl_version="0.9.1", temperature=0.7))))
    return out


def versions() -> dict[str, str]:
    import peft
    import torch
    import transformers

    return {"torch": str(torch.__version__), "transformers": str(transformers.__version__),
            "peft": str(peft.__version__), "python": platform.python_version()}


def measure_all(progress: Any = None) -> dict[str, Any]:
    """The data of knowledge/memory_measured.yaml."""
    entries = []
    for ident, what, request in _requests():
        if progress:
            progress(ident)
        entries.append({"id": ident, "what": what, "command": request.command(), "shape": request.shape(),
                        "switches": request.switches.to_dict(), "phase": request.phase,
                        "result": run(request)})
    return {
        "schema": 1,
        "measured": {"date": datetime.date.today().isoformat(), **versions(),
                     "how": "advisor.calibrate: HF model built on meta, to_empty under FakeTensorMode (fake device "
                            "cpu), live-storage bytes from a TorchDispatchMode, autograd accumulation corrected "
                            "(docs/memory-calibration.md)"},
        "entries": entries,
    }
