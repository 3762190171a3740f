"""torchrun integration: process group, device, DDP / FSDP2 wrapping, small collectives.

Launch with `torchrun --nproc_per_node N -m clozeformer pretrain ...` (one node) or with
`--nnodes M --node_rank R --rdzv_endpoint HOST:PORT` (several nodes); torchrun sets RANK,
WORLD_SIZE, LOCAL_RANK and MASTER_ADDR/PORT, which `setup` reads. Without them the trainer runs
as one process and every helper here is a no-op.

Order in which the trainer applies things to the model (the model itself knows none of it):
  1. build / load weights on CPU     2. move to the device
  3. FSDP2 `fully_shard` (each encoder layer, then the root) when --fsdp
  4. torch.compile when --compile    5. DDP (default, when world_size > 1)
autocast is a context around the forward pass, not a wrapper.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None  # gloo | nccl | None (single process)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.backend is not None


def setup(timeout_minutes: float = 30.0) -> DistInfo:
    """Join the process group torchrun describes (NCCL on GPUs, gloo on CPU) and pick the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world == 1:
        return DistInfo(0, 1, 0, device, None)
    backend = "nccl" if cuda else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timedelta(minutes=timeout_minutes), device_id=device if cuda else None)
    return DistInfo(rank, world, local_rank, device, backend)


def teardown(barrier: bool = True) -> None:
    """Leave the process group. After a normal run the ranks first meet at a barrier: a rank that
    exits while another is still inside a gloo collective can abort ("terminate called without
    an active exception"). After an error there is no barrier: the other ranks may never reach it."""
    if dist.is_initialized():
        try:
            if barrier:
                dist.barrier()
        finally:
            dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    if info.distributed:
        dist.barrier()


def all_reduce(t: torch.Tensor, info: DistInfo, op: str = "sum") -> torch.Tensor:
    """In-place all-reduce (sum | max | min); returns `t`. NCCL needs the tensor on the GPU."""
    if info.distributed:
        on_device = t.to(info.device)
        dist.all_reduce(on_device, op=getattr(dist.ReduceOp, op.upper()))
        t.copy_(on_device.to(t.device))
    return t


def gather_bytes(data: bytes, info: DistInfo) -> list[bytes]:
    """Every rank's `data`, in rank order, on every rank (padded uint8 tensors, no pickle)."""
    if not info.distributed:
        return [data]
    size = torch.tensor([len(data)], dtype=torch.int64, device=info.device)
    sizes = [torch.zeros_like(size) for _ in range(info.world_size)]
    dist.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    buf = torch.zeros(longest, dtype=torch.uint8, device=info.device)
    if data:
        buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(info.device)
    bufs = [torch.zeros_like(buf) for _ in range(info.world_size)]
    dist.all_gather(bufs, buf)
    return [bytes(b[: int(s.item())].cpu().numpy().tobytes()) for b, s in zip(bufs, sizes)]


def gather_json(obj, info: DistInfo) -> list:
    return [json.loads(b) for b in gather_bytes(json.dumps(obj).encode("utf-8"), info)]


# ----------------------------------------------------------------------------- wrapping


def shard_fsdp(model: nn.Module, info: DistInfo) -> nn.Module:
    """FSDP2: each encoder layer is one all-gather unit; the root holds embeddings and heads
    (the tied word-embedding / MLM decoder weight therefore stays in one unit)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(info.device.type, (info.world_size,))
    for layer in model.bert.encoder.layer:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def wrap_ddp(model: nn.Module, info: DistInfo) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[info.device.index] if info.device.type == "cuda" else None)


@contextlib.contextmanager
def grad_sync(wrapped: nn.Module, raw: nn.Module, enabled: bool, fsdp: bool):
    """Skip the gradient all-reduce on all but the last micro-batch of an accumulated step."""
    if fsdp:
        raw.set_requires_gradient_sync(enabled)
    with wrapped.no_sync() if not (enabled or fsdp) and hasattr(wrapped, "no_sync") else contextlib.nullcontext():
        yield
