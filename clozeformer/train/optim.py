"""Pretraining's optimizer choice and budgets, on top of the shared core (`clozeformer.train.core`).

* `build_optimizer`: the core's AdamW (fused kernel where torch has one for the device, checked
  against the foreach kernel in tests/test_optim.py) or `Lamb` below, over the core's
  weight-decay groups.
* `Lamb`: torch ships none. LAMB = Adam's direction, rescaled per tensor by the trust ratio
  ||w|| / ||update|| so every layer moves by a similar relative amount; it is what made
  64k-sequence batches trainable (You et al. 2020, https://arxiv.org/abs/1904.00962, Alg. 2).
* `Budget`: the schedule's horizon (`clozeformer.train.core.Schedule`) set by a step, token or
  wall-clock budget.
* `micro_batches_at`: the batch ramp (Cramming, Geiping & Goldstein 2023,
  https://arxiv.org/abs/2212.14034): how many micro-batches an optimizer step takes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from clozeformer.train.core import adamw, param_groups
from clozeformer.train.pretrain_config import PretrainConfig


class Lamb(torch.optim.Optimizer):
    """LAMB with decoupled weight decay and Adam bias correction (as NVIDIA's BERT recipe).

    For each tensor w with gradient g, at step t:
        m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
        u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * w
        r = ||w|| / ||u||   (1 when either norm is 0, or when the group has layer_adaptation=False)
        w = w - lr * r * u
    Groups without weight decay (biases, LayerNorm) are usually also excluded from layer
    adaptation, as in the reference TF implementation (`exclude_from_layer_adaptation`
    defaults to the weight-decay exclusions); `build_optimizer` sets that.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        layer_adaptation: bool = True,
    ):
        if lr <= 0 or eps <= 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"invalid LAMB hyper-parameters lr={lr} betas={betas} eps={eps}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, layer_adaptation=layer_adaptation))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)  # a tensor, like torch's Adam (checkpoint format)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"].item()
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                update = (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                if group["layer_adaptation"]:
                    w_norm, u_norm = p.norm(), update.norm()
                    # scalars on the param's device: no host sync per tensor
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    update.mul_(ratio)
                p.add_(update, alpha=-group["lr"])
        return loss


def build_optimizer(model: nn.Module, cfg: PretrainConfig) -> torch.optim.Optimizer:
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "lamb":
        groups[1]["layer_adaptation"] = False
        return Lamb(groups, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
    return adamw(groups, cfg.lr, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps, cfg.optimizer_impl)


def optimizer_kernel(opt: torch.optim.Optimizer) -> str:
    """ "fused" / "foreach" / "for_loop" / "lamb": which implementation actually runs."""
    if isinstance(opt, Lamb):
        return "lamb"
    d = opt.defaults
    return "fused" if d.get("fused") else "foreach" if d.get("foreach") else "for_loop"


# ----------------------------------------------------------------------------- budgets


def micro_batches_at(step: int, grad_accum: int, ramp_steps: int) -> int:
    """Micro-batches in optimizer step `step` (0-based): `grad_accum`, except during a batch ramp of
    `ramp_steps` steps, where it rises linearly from 1 (step 0) towards `grad_accum` (step ramp_steps).
    A function of the step alone, so a resumed run takes the same batches as an uninterrupted one."""
    if step >= ramp_steps:
        return grad_accum
    return 1 + (grad_accum - 1) * step // ramp_steps


#: updates measured before a wall-clock budget is turned into a step horizon
TIME_ESTIMATE_MIN_STEPS = 3


@dataclass
class Budget:
    """When to stop, and the schedule's horizon in steps: the smallest of the given budgets'.

    Steps and tokens give a fixed horizon (a batch ramp's smaller steps counted as such). A
    wall-clock budget is turned into steps from the measured pace: after `steps_done` updates in
    `elapsed_s` seconds (evaluations and checkpoints included), the steps that train on
    tokens_before(steps_done) * max_time_s / elapsed_s positions, re-estimated before every update,
    so linear decay follows elapsed / budget and reaches its floor when the clock runs out.
    `tokens_per_step` is a full step's (grad_accum micro-batches; fewer during a ramp: `tokens_in`).
    """

    max_steps: int | None
    max_tokens: int | None
    max_time_s: float | None
    tokens_per_step: int
    grad_accum: int = 1
    ramp_steps: int = 0

    def tokens_in(self, step: int) -> int:
        """Token positions of the `step`-th update (0-based)."""
        return self.tokens_per_step // self.grad_accum * micro_batches_at(step, self.grad_accum, self.ramp_steps)

    def tokens_before(self, steps: int) -> int:
        """Token positions of the first `steps` updates."""
        ramp = min(steps, self.ramp_steps)
        return sum(self.tokens_in(i) for i in range(ramp)) + (steps - ramp) * self.tokens_per_step

    def steps_for_tokens(self, tokens: int) -> int:
        """Updates that train on at least `tokens` positions."""
        steps, seen = 0, 0
        while steps < self.ramp_steps and seen < tokens:
            seen, steps = seen + self.tokens_in(steps), steps + 1
        return steps + max(0, math.ceil((tokens - seen) / self.tokens_per_step))

    def horizon(self, steps_done: int, elapsed_s: float) -> int | None:
        candidates = [self.max_steps, None if self.max_tokens is None else self.steps_for_tokens(self.max_tokens)]
        if self.max_time_s is not None and steps_done >= TIME_ESTIMATE_MIN_STEPS and elapsed_s > 0:
            pace = self.tokens_before(steps_done) * self.max_time_s / elapsed_s  # tokens the budget allows
            candidates.append(max(steps_done, self.steps_for_tokens(math.ceil(pace))))
        return min((c for c in candidates if c is not None), default=None)

    def done(self, steps_done: int, tokens: int, elapsed_s: float) -> bool:
        used = ((steps_done, self.max_steps), (tokens, self.max_tokens), (elapsed_s, self.max_time_s))
        return any(limit is not None and n >= limit for n, limit in used)
