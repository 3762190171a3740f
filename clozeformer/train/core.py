"""The training core that `pretrain`, `finetune` and the experiments share: one copy of each.

* `seed_everything`: Python, NumPy and torch generators from one integer.
* `param_groups`: BERT's weight-decay rule, decay on every matrix and embedding, none on biases
  and LayerNorm parameters (google-research/bert `optimization.py`, `exclude_from_weight_decay`).
* `adamw`: torch's AdamW with the fused kernel where torch has one for the device, else foreach.
* `Schedule`: linear warmup, then linear / cosine decay or constant; ONE warmup
  convention, (step + 1) / warmup_steps, so the first update already moves the weights.
* `guarded_step`: the update after backward: gradient clipping, and no update on a NaN/Inf;
  `check_bad_streak` stops a run after `MAX_BAD_STEPS` such steps in a row.

Which number format a run computes in is `clozeformer.train.precision`; pretraining's extras
(LAMB, step/token/time budgets) are `clozeformer.train.optim`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clozeformer.utils.errors import ClozeformerError

if TYPE_CHECKING:  # torch loads when a function runs: configs import MAX_BAD_STEPS without it
    import torch
    from torch import nn


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's (which takes 32 bits) and torch's generators."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """[decayed params, non-decayed params]; a tied weight is listed once (named_parameters dedups)."""
    from torch import nn

    no_decay_ids = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters(recurse=False)}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if id(p) in no_decay_ids or name.split(".")[-1] == "bias" else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def adamw(
    groups: list[dict], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, impl: str = "auto"
) -> torch.optim.AdamW:
    """AdamW; impl "auto" takes the fused kernel (one pass per tensor list; on CPU since torch
    2.4, ~7x the per-op path for a small model whose embedding matrix dominates) and falls
    back to foreach where the device or torch build has none. "fused", "foreach" and
    "for_loop" force one."""
    import torch

    kw = dict(lr=lr, betas=betas, eps=eps)
    if impl == "auto":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw)
        except (RuntimeError, ValueError, TypeError):
            impl = "foreach"
    if impl == "fused":
        return torch.optim.AdamW(groups, fused=True, **kw)
    return torch.optim.AdamW(groups, foreach=impl == "foreach", **kw)


@dataclass
class Schedule:
    """lr multiplier for the update with 0-based index `step`.

    warmup: (step + 1) / warmup_steps, so the first update already moves the weights; with
    `warmup_ratio`, warmup_steps is that fraction of `total` (while `total` is unknown, at the start of
    a time budget, the multiplier is 0).
    decay: progress p = (step - warmup) / (total - warmup) in [0, 1]; linear 1 - p, cosine
    (1 + cos(pi p)) / 2, both rescaled to end at `min_ratio`; constant stays 1. The last update
    of a run (step = total - 1) still has a small positive lr. Without a known `total` (a time
    budget not yet measured) the multiplier after warmup is 1.
    """

    kind: str = "linear"
    warmup_steps: int = 0
    min_ratio: float = 0.0
    warmup_ratio: float = 0.0  # instead of warmup_steps: this fraction of `total`

    def factor(self, step: int, total: int | None) -> float:
        warmup = self.warmup_steps
        if self.warmup_ratio:
            if total is None:  # a time budget's first steps, before its horizon is estimated: no update yet
                return 0.0
            warmup = max(1, math.ceil(self.warmup_ratio * total))
        if step < warmup:
            return (step + 1) / warmup
        if self.kind == "constant" or total is None:
            return 1.0
        p = min(1.0, (step - warmup) / max(1, total - warmup))
        f = 1.0 - p if self.kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * p))
        return self.min_ratio + (1.0 - self.min_ratio) * f


#: consecutive NaN/Inf steps (each skipped, none applied) after which a run stops
MAX_BAD_STEPS = 10


def check_bad_streak(streak: int, step: int, limit: int, advice: str) -> None:
    """Stop a run whose last `streak` updates (up to update number `step`) were all skipped, once
    they reach `limit`; `advice` ends the message (what to try, where the last good state is)."""
    if streak >= limit:
        raise ClozeformerError(
            f"{streak} consecutive steps with a NaN/Inf loss or gradient (steps {step - streak + 1}-{step}, "
            f"none applied); stopping. {advice}"
        )


def guarded_step(opt, scaler, params, max_grad_norm: float, loss_value: float, lr: float) -> tuple[float, bool]:
    """The update after backward: clip the gradients to `max_grad_norm` (0 = no clipping, the norm
    is still measured), step at `lr`, clear them.

    Returns (norm, bad): bad when the loss or the norm is NaN/Inf, and then no update is made.
    With fp16 loss scaling (a GradScaler `scaler`: the gradients are unscaled first) an
    overflowing norm is routine and GradScaler skips that step itself, so only the loss decides."""
    import torch

    if scaler is not None:
        scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm or float("inf"))
    norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # FSDP: a DTensor
    bad = not math.isfinite(loss_value) or (scaler is None and not math.isfinite(norm))
    if not bad:
        for group in opt.param_groups:
            group["lr"] = lr
        if scaler is not None:
            scaler.step(opt)
        else:
            opt.step()
    if scaler is not None:
        scaler.update()
    opt.zero_grad(set_to_none=True)
    return norm, bad
