"""Rotary position embeddings (RoFormer, Su et al. 2021): queries and keys are rotated by their
position inside attention, so q.k depends on the relative offset; no position table is learned.
`modeling/bert.py` applies them when `position_embedding_type="rotary"`; `hf_format.py` writes
transformers' fixed sinusoid table (which carries no weights) from the same angles.
"""

from __future__ import annotations

import torch

ROTARY_BASE = 10000.0  # RoFormer's theta: pair i of a head turns by position * base^(-2i/D)
Rope = tuple[torch.Tensor, torch.Tensor]  # (cos, sin), each (T, D/2): the tables rotary_tables returns


def rotary_tables(T: int, D: int, device: torch.device) -> Rope:
    """cos and sin of position * frequency, each (T, D/2), in fp32.

    Computed per call (a T x D/2 outer product, negligible next to the matmuls) rather than held
    in a buffer, so a model built on the meta device, exported to ONNX or compiled needs nothing else.
    """
    inv_freq = ROTARY_BASE ** (-torch.arange(0, D, 2, device=device, dtype=torch.float32) / D)  # (D/2,)
    angles = torch.arange(T, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]  # (T, D/2)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair (x[2i], x[2i+1]) of a head by its angle (RoFormer's interleaved layout).

    x (B, NH, T, D); cos, sin (T, D/2). out[2i] = x[2i] cos - x[2i+1] sin, out[2i+1] = x[2i+1] cos + x[2i] sin.
    """
    pairs = x.unflatten(-1, (-1, 2))  # (B, NH, T, D/2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]  # (B, NH, T, D/2) each
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1).flatten(-2)  # (B, NH, T, D)
