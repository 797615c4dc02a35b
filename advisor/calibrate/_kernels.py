"""Stand-ins for the CUDA/Triton kernels verl calls, as autograd Functions that save and allocate what
the real kernels do. They compute nothing (outputs are uninitialised): the harness measures bytes, and
leaving the arithmetic out keeps real CPU runs free of temporaries the GPU kernels never make, so a
run on real tensors under torch.profiler allocates exactly what the fake run counts.

- flash-attn varlen attention (HF ``flash_attention_2`` with packed sequences, verl's remove-padding path):
  flash_attn_interface.py ``FlashAttnVarlenFunc.forward`` saves q, k, v, out and softmax_lse
  (fp32 [heads, tokens]); ``backward`` allocates dq, dk, dv like q, k, v. The kernel's own workspace
  (``dq_accum`` fp32, ``dk/dv_expanded`` for GQA in csrc/flash_attn/flash_api.cpp ``mha_varlen_bwd``) is
  allocated here too and freed with the backward.
- flash-attn's Triton cross entropy (flash_attn/ops/triton/cross_entropy.py ``CrossEntropyLoss``):
  forward returns fp32 losses and z_losses, saves logits, fp32 lse and labels; backward writes the
  logits' gradient into the logits when ``inplace_backward`` else into ``torch.empty_like(logits)``.
- torch.compile'd ``entropy_from_logits`` (verl's default, ``use_torch_compile: true``): Inductor fuses
  softmax, logsumexp and sum(p * logits) into row reductions, so the forward keeps the logits (an input,
  already live) and per-row statistics; the backward writes one gradient like the logits.
"""

from __future__ import annotations

from typing import Any

import torch

_FP32 = torch.float32


class FlashAttnVarlen(torch.autograd.Function):
    """softmax(q k^T) v over packed rows, causal within each sequence (here: the whole row block)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        tokens, heads, _ = q.shape
        out = torch.empty_like(q)  # the kernel writes out and softmax_lse
        lse = torch.empty((heads, tokens), dtype=_FP32, device=q.device)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
        q, k, v, _out, _lse = ctx.saved_tensors
        tokens, heads, head_dim = q.shape
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        # mha_varlen_bwd workspace: dq_accum fp32, softmax_d fp32, dk/dv expanded to all heads for GQA
        workspace = [torch.empty((heads, tokens, head_dim), dtype=_FP32, device=q.device),
                     torch.empty((heads, tokens), dtype=_FP32, device=q.device)]
        if k.shape[1] != heads:
            workspace += [torch.empty((tokens, heads, head_dim), dtype=k.dtype, device=k.device) for _ in range(2)]
        del workspace
        return dq, dk, dv, None


def is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


class FlashCrossEntropy(torch.autograd.Function):
    """flash-attn's Triton cross entropy: losses = lse - logits[label], fp32."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool) -> torch.Tensor:
        if logits.stride(-1) != 1:
            logits = logits.contiguous()
        rows = logits.shape[0]
        losses = torch.empty(rows, dtype=_FP32, device=logits.device)
        lse = torch.empty(rows, dtype=_FP32, device=logits.device)
        z_losses = torch.empty(rows, dtype=_FP32, device=logits.device)
        del z_losses  # returned and dropped by verl (logprobs_from_logits_flash_attn takes output[0])
        ctx.save_for_backward(logits, lse, labels)
        ctx.inplace_backward = inplace_backward
        return losses

    @staticmethod
    def backward(ctx: Any, grad_losses: torch.Tensor) -> tuple[Any, ...]:
        logits, _lse, _labels = ctx.saved_tensors
        dlogits = logits if ctx.inplace_backward else torch.empty_like(logits)
        return dlogits, None, None


class CompiledEntropy(torch.autograd.Function):
    """torch.compile(entropy_from_logits): row reductions forward, one fused gradient backward."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor) -> torch.Tensor:
        rows = logits.shape[0]
        entropy = torch.empty(rows, dtype=logits.dtype, device=logits.device)
        lse = torch.empty(rows, dtype=_FP32, device=logits.device)
        mean_logit = torch.empty(rows, dtype=_FP32, device=logits.device)
        ctx.save_for_backward(logits, lse, mean_logit)
        return entropy

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        logits, _lse, _mean_logit = ctx.saved_tensors
        return (torch.empty_like(logits),)  # d H / d x = -p (x - E_p[x]), one fused kernel


def flash_attention_standin(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: Any, scaling: float | None = None, dropout: float = 0.0,
                            **kwargs: Any) -> tuple[torch.Tensor, None]:
    """HF attention interface with flash_attention_2's tensor handling on packed rows.

    HF's flash path transposes [batch, heads, seq, dim] to [batch, seq, heads, dim] and, for packed
    sequences, makes q, k, v contiguous and flattens them to [tokens, heads, dim]
    (transformers/modeling_flash_attention_utils.py ``_prepare_from_posids``) before
    ``flash_attn_varlen_func``; its output is [tokens, heads, dim] viewed back to [batch, seq, heads, dim].
    """
    batch, heads, seq, dim = query.shape
    q = query.transpose(1, 2).contiguous().view(-1, heads, dim)
    k = key.transpose(1, 2).contiguous().view(-1, key.shape[1], dim)
    v = value.transpose(1, 2).contiguous().view(-1, value.shape[1], dim)
    out = FlashAttnVarlen.apply(q, k, v, float(scaling or dim ** -0.5))
    return out.view(batch, seq, heads, dim), None
