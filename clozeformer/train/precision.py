"""Which number format the trainer computes in, decided once from the hardware.

| device                               | --precision auto      |
|--------------------------------------|-----------------------|
| CUDA GPU with bf16 (Ampere+)         | bf16 autocast         |
| CUDA GPU without bf16 (V100, T4)     | fp16 autocast + GradScaler |
| CPU with AMX (amx_bf16)              | bf16 autocast         |
| other CPUs (AVX-512 BF16 included)   | fp32                  |

AVX512-BF16 alone (e.g. AMD Zen 4) only adds a bf16 dot-product instruction: oneDNN's bf16
matmuls there are not reliably faster than fp32 end to end, so auto keeps fp32 and
`--precision bf16` opts in (benchmarks/matmul_ceiling.py measures both on the machine).
Weights, optimizer state and the loss stay fp32 in every mode; autocast only lowers matmuls.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from clozeformer.utils.errors import ClozeformerError


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@dataclass(frozen=True)
class Precision:
    name: str  # fp32 | bf16 | fp16
    device_type: str  # cpu | cuda | ...

    @property
    def dtype(self) -> torch.dtype | None:
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    @property
    def needs_grad_scaler(self) -> bool:
        return self.name == "fp16"

    def autocast(self):
        return contextlib.nullcontext() if self.dtype is None else torch.autocast(device_type=self.device_type, dtype=self.dtype)


def resolve_precision(requested: str, device: torch.device) -> Precision:
    if device.type == "cuda":
        if requested == "auto":
            return Precision("bf16" if torch.cuda.is_bf16_supported() else "fp16", "cuda")
        if requested == "bf16" and not torch.cuda.is_bf16_supported():
            raise ClozeformerError("--precision bf16: this GPU has no bf16 support; use fp16 or auto")
        return Precision(requested, "cuda")
    if requested == "auto":
        return Precision("bf16" if "amx_bf16" in cpu_flags() else "fp32", device.type)
    if requested == "fp16":
        raise ClozeformerError("--precision fp16 needs a CUDA GPU; on CPU use fp32 or bf16")
    return Precision(requested, device.type)


def enable_tf32(enabled: bool) -> bool:
    """TF32 matmuls on Ampere+ (10-bit mantissa inputs, fp32 accumulate). True if turned on."""
    if not (enabled and torch.cuda.is_available()) or torch.cuda.get_device_capability()[0] < 8:
        return False
    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    return True
