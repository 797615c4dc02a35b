"""Peak bytes of one verl phase on a fake model: the actor update, a log-prob forward, the critic.

Every peak is of the storages the phase creates (parameters and inputs are the baseline, never counted).
Parameter gradients are dropped as soon as they are accumulated, as FSDP's reduce-scatter frees the
unsharded gradient of a unit (the sharded gradient is the estimator's ``grads`` term, not a per-token one).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from advisor.memory import ModelSpec

from ._model import build_model
from ._tracker import LiveBytes
from ._verl_path import EntropyMode, log_prob_path, padded_log_prob_path, verl_path

Phase = Literal["update", "log_prob", "ref", "critic_update", "critic_values"]
PHASES: tuple[Phase, ...] = ("update", "log_prob", "ref", "critic_update", "critic_values")


@dataclass(frozen=True)
class Switches:
    """verl's switches that change the per-token memory of a training or log-prob micro batch."""

    gradient_checkpointing: bool = False
    lora_rank: int = 0
    entropy: EntropyMode = "on"
    ulysses_sp: int = 1
    verl_version: str = "0.9.1"
    temperature: float = 1.0
    remove_padding: bool = True
    response_tokens: int | None = None  # without remove padding: the response slice (default: half the tokens)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Shape:
    """What is built: ``layers`` and ``vocab`` override the model's (for slopes); ``tokens`` per micro batch."""

    spec: ModelSpec
    tokens: int
    layers: int | None = None
    vocab: int | None = None
    freeze_embeddings: bool = False  # keep the lm_head's weight gradient (a params term) out of per-logit slopes

    @property
    def rank_tokens(self) -> int:
        return self.tokens

    def describe(self) -> dict[str, Any]:
        return {"model": self.spec.name, "layers": self.layers or self.spec.layers,
                "vocab": self.vocab or self.spec.vocab, "tokens": self.tokens}


def rank_tokens(tokens: int, ulysses_sp: int) -> int:
    """Tokens each rank holds: Ulysses SP slices the packed row (ulysses_pad_and_slice_inputs pads to a
    multiple of sp, verl/utils/ulysses.py); its attention all-to-all trades sequence for heads at equal size."""
    return math.ceil(tokens / ulysses_sp)


def _drop_grads_when_accumulated(model: torch.nn.Module) -> None:
    for p in model.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(lambda param: setattr(param, "grad", None))


def _baseline(model: torch.nn.Module, *tensors: torch.Tensor) -> list[torch.Tensor]:
    return [*model.parameters(), *model.buffers(), *tensors]


def measure_phase(shape: Shape, switches: Switches, phase: Phase) -> int:
    """Peak bytes of ``phase`` for ``shape`` under ``switches`` on fake tensors (tokens are per rank)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)  # the meta parameters are to_empty's inputs
    peak: int = _measure(shape, switches, phase, fake_mode, "cpu")["tracker_peak"]
    return peak


def measure_phase_on(shape: Shape, switches: Switches, phase: Phase, device: str, *,
                     track: bool = True) -> dict[str, Any]:
    """The same phase on real tensors of ``device``: the tracker's peak (unless ``track`` is off: a
    torch.compile'd kernel does not run under a Python dispatch mode) and, on CUDA, the allocator's
    (``torch.cuda.max_memory_allocated`` above what was allocated before the phase)."""
    return _measure(shape, switches, phase, None, device, track=track)


def _measure(shape: Shape, switches: Switches, phase: Phase, fake_mode: Any, device: str, *,
             track: bool = True) -> dict[str, Any]:
    critic = phase.startswith("critic")
    train = phase in ("update", "critic_update")
    model = build_model(shape.spec, fake_mode, layers=shape.layers, vocab=shape.vocab,
                        lora_rank=switches.lora_rank if phase != "ref" else 0,
                        gradient_checkpointing=switches.gradient_checkpointing and train, value_head=critic,
                        device=device)
    if shape.freeze_embeddings:
        for name, p in model.named_parameters():
            if "embed_tokens" in name or "lm_head" in name or name.endswith("score.weight"):
                p.requires_grad_(False)
    if not train:
        model.eval()
    _drop_grads_when_accumulated(model)
    context = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with context:
        ids = torch.zeros(1, shape.tokens, dtype=torch.long, device=device)
        pos = torch.arange(shape.tokens, device=device).unsqueeze(0)
        labels = torch.zeros(shape.tokens, dtype=torch.long, device=device)
    tracker = LiveBytes(_baseline(model, ids, pos, labels)) if track else None
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    with context, tracker or contextlib.nullcontext(), torch.set_grad_enabled(train):
        _phase_body(model, ids, pos, labels, switches, phase, tracker, critic=critic, train=train)
    out: dict[str, Any] = {"tracker_peak": tracker.peak} if tracker is not None else {}
    if cuda:
        torch.cuda.synchronize()
        out["allocator_peak"] = torch.cuda.max_memory_allocated() - before
        out["allocated_before"] = before
    del model
    return out


def _phase_body(model: Any, ids: Any, pos: Any, labels: Any, switches: Switches, phase: Phase,
                tracker: LiveBytes | None, *, critic: bool, train: bool) -> None:
    """One micro batch of ``phase`` as verl runs it: forward, the log-prob path or the value head, backward."""
    output = model(input_ids=ids, position_ids=pos, use_cache=False)
    if critic:
        # critic: values = output.logits[..., -1] of the 1-wide head (dp_critic.py), a [1, tokens] slice
        values = output.logits.squeeze(0)[:, -1]
        del output
        loss = values.float().square().mean() if train else None
        del values
    else:
        entropy = "off" if phase == "ref" else switches.entropy
        path = verl_path(switches.verl_version)
        if switches.remove_padding:
            log_probs, ent = log_prob_path(output.logits, labels, path, entropy=entropy,
                                           temperature=switches.temperature)
        else:
            responses = labels[: switches.response_tokens or max(1, labels.shape[0] // 2)].unsqueeze(0)
            log_probs, ent = padded_log_prob_path(output.logits, responses, path, entropy=entropy,
                                                  temperature=switches.temperature)
        del output  # _forward_micro_batch returns only log_probs and entropy
        loss = None
        if train:
            # policy loss on log_probs, minus entropy_coeff x entropy (dp_actor.py 0.7.1:640-645)
            loss = -(log_probs.float()).mean()
            if ent is not None:
                loss = loss - 1e-3 * ent.float().mean()
        del log_probs, ent
    if loss is not None:
        if tracker is not None:
            tracker.watch_graph(loss.grad_fn)
        loss.backward()
        del loss
