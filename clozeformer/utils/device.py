"""Which torch device a `--device` flag names, checked (one place for every stage)."""

from __future__ import annotations

import torch

from clozeformer.utils.errors import ClozeformerError


def resolve_device(device: str | None) -> torch.device:
    """ "auto"/None -> CUDA when available, else CPU; anything else must be a usable torch device."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ClozeformerError(f"--device {device!r}: not a torch device (cpu, cuda, cuda:1, ...)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ClozeformerError(f"--device {device}: CUDA is not available on this machine")
    return dev
