"""Checkpoints that a crash, a full disk or SIGKILL cannot corrupt, and exact resumption.

    RUN_DIR/checkpoints/step-000123/
        config.json, model.safetensors        HF format: BertForMaskedLM / BertForPreTraining
        vocab.txt, tokenizer_config.json      copied from DATA_DIR/tokenizer/
        optimizer.pt                          full (unsharded) optimizer state, parameter names as keys
        rng_rank{r}.safetensors               python / numpy / torch (/ cuda) RNG of every rank
        trainer_state.json                    step, tokens, clock, counters, every rank's loader position

A checkpoint is written into a hidden temporary sibling and renamed into place
(`clozeformer.utils.io.atomic_dir`), so `step-*` names only ever point at complete directories;
leftovers of an interrupted write are hidden names that `clean_partial` removes. Old
checkpoints are renamed to a hidden name before deletion, for the same reason. Nothing here is
unpickled: weights and RNG states are safetensors, optimizer.pt is read with weights_only=True.

Test hook: CLOZEFORMER_DEBUG_CKPT_SLEEP="STEP:SECONDS" pauses in the middle of writing the
checkpoint of step STEP (weights written, trainer state not yet), so tests can kill a run there.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import random
import re
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_dir

CHECKPOINTS = "checkpoints"
_NAME = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.json"


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def list_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints of a run, oldest first."""
    found = (p for p in (Path(run_dir) / CHECKPOINTS).glob("step-*") if _NAME.match(p.name) and (p / STATE_FILE).is_file())
    return sorted((int(p.name.removeprefix("step-")), p) for p in found)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1][1] if ckpts else None


def clean_partial(run_dir: str | Path) -> list[str]:
    """Remove hidden leftovers of interrupted writes / deletions; returns their names."""
    leftovers = [p for p in (Path(run_dir) / CHECKPOINTS).glob(".*") if p.is_dir()]
    for p in leftovers:
        shutil.rmtree(p, ignore_errors=True)
    return [p.name for p in leftovers]


def prune(run_dir: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` checkpoints (renamed hidden first, then removed)."""
    ckpts = list_checkpoints(run_dir)
    doomed = [p for _, p in ckpts[:-keep_last]] if keep_last > 0 else []
    for p in doomed:
        trash = p.parent / f".trash-{p.name}"
        os.replace(p, trash)
        shutil.rmtree(trash, ignore_errors=True)
    return doomed


# ----------------------------------------------------------------------------- RNG


def rng_state() -> dict[str, torch.Tensor]:
    """This process's python, numpy and torch RNG states as tensors (safetensors-ready)."""
    version, internal, gauss_next = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    d = {
        "torch": torch.get_rng_state(),
        "python": torch.tensor([version, *internal], dtype=torch.int64),
        "python_gauss": torch.tensor([gauss_next is not None, gauss_next or 0.0], dtype=torch.float64),
        "numpy_keys": torch.from_numpy(keys.astype(np.int64)),
        "numpy_rest": torch.tensor([pos, has_gauss, cached], dtype=torch.float64),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        d["cuda"] = torch.cuda.get_rng_state()
    return d


def set_rng_state(d: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(d["torch"])
    py = d["python"].tolist()
    has_gauss, gauss = d["python_gauss"].tolist()
    random.setstate((py[0], tuple(py[1:]), gauss if has_gauss else None))
    pos, has_np_gauss, cached = d["numpy_rest"].tolist()
    np.random.set_state(("MT19937", d["numpy_keys"].numpy().astype(np.uint32), int(pos), int(has_np_gauss), float(cached)))
    if "cuda" in d and torch.cuda.is_available():
        torch.cuda.set_rng_state(d["cuda"])


@contextlib.contextmanager
def preserve_rng():
    """Run a block (evaluation, checkpoint assembly) without moving any global RNG stream."""
    py, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else []):
        yield
    random.setstate(py)
    np.random.set_state(np_state)


def rng_bytes() -> bytes:
    return safetensors_bytes({k: v.contiguous() for k, v in rng_state().items()})


# ----------------------------------------------------------------------------- model / optimizer state


def model_from_state_dict(model_cls, config, state_dict: dict[str, torch.Tensor]):
    """A CPU model around an existing full state dict, without allocating a second copy."""
    with torch.device("meta"):
        model = model_cls(config)
    model.load_state_dict(state_dict, assign=True)
    model.tie_weights()
    return model


def full_model_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded state dict on CPU on rank 0 (collective under FSDP: call on every rank)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
    """Optimizer state keyed by parameter name, unsharded, on CPU (collective under FSDP).

    Names rather than positions make the file independent of DDP / FSDP / single process.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model: torch.nn.Module, opt: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, opt, state, options=StateDictOptions(full_state_dict=True))


# ----------------------------------------------------------------------------- save / load


def _debug_pause(step: int) -> None:
    spec = os.environ.get("CLOZEFORMER_DEBUG_CKPT_SLEEP")
    if spec:
        at, seconds = spec.split(":")
        if int(at) == step:
            time.sleep(float(seconds))


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    write_model: Callable[[Path], None],
    tokenizer_dir: Path,
    optimizer_state: dict[str, Any],
    rng_blobs: list[bytes],
    trainer_state: dict[str, Any],
    keep_last: int,
    card: Callable[[Path], str] | None = None,
) -> Path:
    """Write RUN_DIR/checkpoints/step-N atomically, then prune to the newest `keep_last`.

    Raises OSError (disk full, permissions) with every earlier checkpoint untouched.
    """
    target = Path(run_dir) / CHECKPOINTS / checkpoint_name(step)
    with atomic_dir(target) as tmp:
        write_model(tmp)
        # the tokenizer beside the weights, and beside a saved sub-model's (ELECTRA's generator/)
        for d in [tmp, *(s for s in sorted(tmp.iterdir()) if (s / "config.json").is_file())]:
            for f in sorted(tokenizer_dir.iterdir()):
                if f.is_file():
                    shutil.copyfile(f, d / f.name)
        if card is not None:  # the model card, which may read what was just written
            (tmp / "README.md").write_text(card(tmp), encoding="utf-8")
        _debug_pause(step)
        torch.save(optimizer_state, tmp / "optimizer.pt")
        for r, blob in enumerate(rng_blobs):
            (tmp / f"rng_rank{r}.safetensors").write_bytes(blob)
        # written last: list_checkpoints only counts directories that have it
        (tmp / STATE_FILE).write_text(json.dumps(trainer_state, indent=2) + "\n", encoding="utf-8")
    prune(run_dir, keep_last)
    return target


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    path = ckpt / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ClozeformerError(f"{ckpt}: not a pretraining checkpoint (no {STATE_FILE})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ClozeformerError(f"{path}: unreadable trainer state ({e})") from None
    if not isinstance(state, dict):
        raise ClozeformerError(f"{path}: the trainer state must be a JSON object")
    for key in ("step", "tokens", "elapsed_s", "loader"):
        if key not in state:
            raise ClozeformerError(f"{path}: trainer state lacks {key!r}")
    for key in ("step", "tokens"):
        if isinstance(state[key], bool) or not isinstance(state[key], int) or state[key] < 0:
            raise ClozeformerError(f"{path}: {key} must be a non-negative integer, got {state[key]!r}")
    e = state["elapsed_s"]
    if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or e < 0:
        raise ClozeformerError(f"{path}: elapsed_s must be a non-negative number, got {e!r}")
    if not isinstance(state["loader"], list) or not state["loader"] or not all(isinstance(x, dict) for x in state["loader"]):
        raise ClozeformerError(f"{path}: loader must be a non-empty list of loader states")
    return state


def load_optimizer_file(ckpt: Path) -> dict[str, Any]:
    path = ckpt / "optimizer.pt"
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ClozeformerError(f"{ckpt}: no optimizer.pt (not a resumable checkpoint)") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
        raise ClozeformerError(f"{path}: unreadable optimizer state ({str(e).splitlines()[0]})") from None


def load_rng(ckpt: Path, rank: int) -> dict[str, torch.Tensor] | None:
    """This rank's saved RNG state, or None when the checkpoint has none for it."""
    path = ckpt / f"rng_rank{rank}.safetensors"
    if not path.is_file():
        return None
    try:
        d = load_file(str(path))
    except Exception as e:  # safetensors' own error type: a truncated or garbage file
        raise ClozeformerError(
            f"{path}: unreadable RNG state ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    missing = [k for k in ("torch", "python", "python_gauss", "numpy_keys", "numpy_rest") if k not in d]
    if missing:
        raise ClozeformerError(f"{path}: RNG state lacks {', '.join(missing)}")
    return d


def check_resumable(ckpt: Path, rank: int = 0) -> None:
    """Raise ClozeformerError naming the file when `ckpt` cannot be resumed from: its trainer
    state, this rank's RNG state, and that the weights and optimizer files are whole (their
    headers / zip directories read, not the tensors)."""
    load_trainer_state(ckpt)
    load_rng(ckpt, rank)
    weights = ckpt / "model.safetensors"
    try:
        with safe_open(str(weights), framework="pt"):
            pass
    except Exception as e:
        raise ClozeformerError(
            f"{weights}: unreadable weights ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    opt = ckpt / "optimizer.pt"
    try:
        zipfile.ZipFile(opt).close()
    except (OSError, zipfile.BadZipFile) as e:
        raise ClozeformerError(f"{opt}: unreadable optimizer state ({e})") from None
