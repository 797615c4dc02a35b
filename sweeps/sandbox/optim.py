"""AdamW, gradient clipping and the LR schedule (warmup, then constant or cosine) of verl's FSDP workers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class AdamW:
    """torch.optim.AdamW (decoupled weight decay, bias-corrected moments), on one parameter array."""

    params: np.ndarray
    betas: tuple[float, float]
    weight_decay: float
    eps: float = 1e-8
    step_count: int = 0
    exp_avg: np.ndarray = field(init=False)
    exp_avg_sq: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.exp_avg = np.zeros_like(self.params)
        self.exp_avg_sq = np.zeros_like(self.params)

    def step(self, grad: np.ndarray, lr: float) -> None:
        b1, b2 = self.betas
        self.step_count += 1
        self.params *= 1.0 - lr * self.weight_decay
        self.exp_avg += (1.0 - b1) * (grad - self.exp_avg)
        self.exp_avg_sq = b2 * self.exp_avg_sq + (1.0 - b2) * grad * grad
        bias1 = 1.0 - b1 ** self.step_count
        bias2 = 1.0 - b2 ** self.step_count
        denom = np.sqrt(self.exp_avg_sq) / math.sqrt(bias2) + self.eps
        self.params -= (lr / bias1) * self.exp_avg / denom


def clip_grad_norm(grad: np.ndarray, max_norm: float) -> float:
    """torch.nn.utils.clip_grad_norm_: scale in place to max_norm; return the norm before clipping."""
    total = float(np.sqrt(np.sum(grad * grad)))
    coef = max_norm / (total + 1e-6)
    if coef < 1.0 and math.isfinite(total):
        grad *= coef
    return total


def lr_factor(step: int, warmup: int, total: int, kind: str, min_lr_ratio: float, num_cycles: float) -> float:
    """verl/utils/torch_functional.py get_constant/cosine_schedule_with_warmup, as a multiplier of lr."""
    if step < warmup:
        return float(step) / float(max(1, warmup))
    if kind == "constant":
        return 1.0
    progress = float(step - warmup) / float(max(1, total - warmup))
    coef, intercept = (1 - min_lr_ratio) * 0.5, (1 + min_lr_ratio) * 0.5
    return max(min_lr_ratio, math.cos(math.pi * num_cycles * 2.0 * progress) * coef + intercept)


def warmup_steps(explicit: int, ratio: float, total: int) -> int:
    """fsdp_workers.py: a negative lr_warmup_steps means int(ratio * total)."""
    return int(explicit) if explicit >= 0 else int(ratio * total)
