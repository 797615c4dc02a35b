"""verl's log-prob path after the lm_head, per verl version, on the packed (remove-padding) rows.

What differs between versions is the temperature step and the order of entropy and log-probs:

- verl 0.2-0.3 (dp_actor.py:100-106 @0.2.0.post2, 117-123 @0.3.0.post1): the in-place divide below, then
  entropy, always computed, then log-probs through flash-attn's cross entropy at its default
  ``inplace_backward=False`` (torch_functional.py:64-68 @0.3.0.post1).
- verl <= 0.7.x, legacy workers (verl/workers/actor/dp_actor.py, e.g. 0.7.1:258-259 / 0.4.1:186-187):
  ``logits_rmpad = output.logits.squeeze(0); logits_rmpad.div_(temperature)`` (a Python float), then
  log-probs, then entropy.
- verl 0.8.0, engine workers (verl/workers/engine/fsdp/transformer_impl.py:1111-1112): the same in-place
  divide on the ``squeeze(0)`` view, by a per-token temperature tensor ``[tokens, 1]`` in the logits' dtype.
- verl 0.9.0 (transformer_impl.py:1348-1352): out of place, ``logits_rmpad / temperature``; entropy first.
- verl >= 0.9.1 (transformer_impl.py:92-103, 1382-1390): out of place, and skipped when the temperature is
  a host scalar 1.0 (``_scale_logits_by_temperature``); entropy first (1397-1434).

An in-place op on a view of a tensor that requires grad turns the base's grad_fn into a ``CopySlices``
node; its backward clones the incoming gradient and the slice before calling the divide's backward
(torch/csrc/autograd/functions/tensor.cpp ``CopySlices::apply``), which is where the extra buffers come from.

Log-probs: ``logprobs_from_logits`` (verl/utils/torch_functional.py:73-107) with flash-attn's Triton
cross entropy, ``inplace_backward = not calculate_entropy`` (dp_actor.py 0.7.1:262-264;
transformer_impl.py 0.9.1:1425-1431). Entropy: ``torch.compile(entropy_from_logits)`` when
``use_torch_compile`` (default true; transformer_impl.py 0.9.1:178-187), ``entropy_from_logits`` eager
otherwise, ``entropy_from_logits_with_chunking`` (torch_functional.py:248-270) when chunked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from advisor.verl import at_least

from ._kernels import CompiledEntropy, FlashCrossEntropy, is_fake

TemperatureStep = Literal["in_place_view", "divide", "divide_unless_one"]
EntropyMode = Literal["off", "on", "eager", "chunked"]


@dataclass(frozen=True)
class VerlPath:
    version: str
    temperature_step: TemperatureStep
    temperature_tensor: bool  # a per-token [tokens, 1] temperature (engine workers) rather than a float
    entropy_first: bool
    source: str
    entropy_always: bool = False  # computed whatever entropy_coeff is, with a cross entropy never in place


def verl_path(version: str) -> VerlPath:
    """The log-prob code path of one verl release."""
    if not at_least(version, "0.4.0"):
        return VerlPath(version, "in_place_view", False, True,
                        "verl/workers/actor/dp_actor.py:117-123 @0.3.0.post1 (100-106 @0.2.0.post2)",
                        entropy_always=True)
    if not at_least(version, "0.8.0"):
        return VerlPath(version, "in_place_view", False, False,
                        "verl/workers/actor/dp_actor.py:258-264 @0.7.1 (186-196 @0.4.1)")
    if not at_least(version, "0.9.0"):
        return VerlPath(version, "in_place_view", True, False,
                        "verl/workers/engine/fsdp/transformer_impl.py:1111-1121 @0.8.0")
    if not at_least(version, "0.9.1"):
        return VerlPath(version, "divide", True, True, "verl/workers/engine/fsdp/transformer_impl.py:1348-1393 @0.9.0")
    return VerlPath(version, "divide_unless_one", True, True,
                    "verl/workers/engine/fsdp/transformer_impl.py:92-103,1382-1431 @0.9.1")


def _scale(logits: torch.Tensor, path: VerlPath, temperature: float) -> torch.Tensor:
    rows = logits.shape[0]
    if path.temperature_step == "divide_unless_one" and temperature == 1.0:
        return logits
    if path.temperature_tensor:
        t = torch.full((rows, 1), temperature, dtype=torch.float32, device=logits.device)
        t = t.clamp(min=1e-8).to(logits.dtype)
    else:
        t = temperature
    if path.temperature_step == "in_place_view":
        return logits.div_(t)
    return logits / t


def _eager_entropy(logits: torch.Tensor) -> torch.Tensor:
    """entropy_from_logits as CUDA autocast runs it: softmax and logsumexp in fp32 (autocast_mode.cpp lists)."""
    if is_fake(logits):  # CUDA's softmax(dtype=fp32) on bf16 writes fp32 directly (half_to_float), no fp32 copy
        pd = torch.ops.aten._softmax(logits, -1, True)
    else:
        pd = torch.softmax(logits, dim=-1, dtype=torch.float32)
    return torch.logsumexp(logits.float(), dim=-1) - torch.sum(pd * logits, dim=-1)


def _chunked_entropy(logits: torch.Tensor, chunk_size: int = 2048) -> torch.Tensor:
    """entropy_from_logits_with_chunking (torch_functional.py:248-270), eager."""
    entropy = torch.zeros(logits.shape[0], device=logits.device)
    for i in range(0, logits.shape[0], chunk_size):
        chunk = logits[i : i + chunk_size].float()
        pd = torch.softmax(chunk, dim=-1)
        entropy[i : i + chunk_size] = torch.logsumexp(chunk, dim=-1) - torch.sum(pd * chunk, dim=-1)
    return entropy


def _entropy(logits: torch.Tensor, mode: EntropyMode) -> torch.Tensor:
    if mode == "on":
        return CompiledEntropy.apply(logits)
    if mode == "eager":
        return _eager_entropy(logits)
    return _chunked_entropy(logits)


def padded_log_prob_path(output_logits: torch.Tensor, responses: torch.Tensor, path: VerlPath, *,
                         entropy: EntropyMode, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The path without remove padding: ``output_logits`` [batch, seq, vocab], all positions computed.

    verl < 0.9 (dp_actor.py:366-375 @0.7.1): ``logits.div_(temperature)`` in place on the model's output (a
    base tensor, no CopySlices), the response slice ``logits[:, -R-1:-1]``, log-probs through
    ``logprobs_from_logits`` (its reshape copies the non-contiguous slice; ``inplace_backward`` left at its
    default, True) and eager ``entropy_from_logits`` on the slice. verl >= 0.9 (transformer_impl.py:1476-1527
    @0.9.1): the temperature step of the release, eager entropy on the whole padded logits, then the real
    tokens' rows concatenated (a copy; here every position is taken as real) for the log-probs.
    """
    response = responses.shape[-1]
    if path.temperature_step == "in_place_view":
        logits = output_logits.div_(temperature)
        sliced = logits[:, -response - 1 : -1, :]
        log_probs = -FlashCrossEntropy.apply(sliced.reshape(-1, sliced.shape[-1]), responses.reshape(-1), True)
        ent = _eager_entropy(sliced) if entropy != "off" else None
        return log_probs, ent
    scaled = output_logits if (path.temperature_step == "divide_unless_one" and temperature == 1.0) \
        else output_logits / temperature
    ent = _eager_entropy(scaled) if entropy != "off" else None
    rows = torch.cat(list(scaled.unbind()))  # torch.cat of the jagged rows: a copy
    log_probs = -FlashCrossEntropy.apply(rows, torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device), True)
    return log_probs, ent


def log_prob_path(output_logits: torch.Tensor, labels: torch.Tensor, path: VerlPath, *, entropy: EntropyMode,
                  temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log_probs, entropy or None) of ``output_logits`` [1, tokens, vocab] as verl computes them."""
    logits = _scale(output_logits.squeeze(0), path, temperature)
    if path.entropy_always and entropy == "off":
        entropy = "on"
    calculate_entropy = entropy != "off"
    ent = _entropy(logits, entropy) if calculate_entropy and path.entropy_first else None
    log_probs = -FlashCrossEntropy.apply(logits, labels, not calculate_entropy and not path.entropy_always)
    if calculate_entropy and not path.entropy_first:
        ent = _entropy(logits, entropy)
    return log_probs, ent
