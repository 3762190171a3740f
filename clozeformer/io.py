"""Atomic file and directory writes.

Checkpoints and data shards are written to a temporary sibling and renamed into place, so a
reader never sees a half-written file, and a crash (or a full disk) leaves the previous
version intact. `os.replace` is atomic on POSIX when source and target share a filesystem,
which is why the temporary lives next to the target, never in /tmp.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clozeformer.errors import ClozeformerError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success rename it onto `target`.

    On any exception the temporary file is removed and `target` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp_path, target)
        _fsync_dir(target.parent)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def atomic_write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(target: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(target, text.encode("utf-8"))


def atomic_write_json(target: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(target, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside `target`; on success it replaces `target` whole.

    If `target` exists it is moved aside first and deleted only after the new directory is
    in place, so at every instant either the old or the new complete directory is visible
    under its name (plus, at worst, a hidden leftover that the next call cleans up).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual directory mode
        for p in tmp.rglob("*"):
            if p.is_file():
                with open(p, "rb+") as f:
                    os.fsync(f.fileno())
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old"
            if old.exists():
                shutil.rmtree(old)
            os.replace(target, old)
        os.replace(tmp, target)
        _fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def json_object(line: str, where: str, hint: str = "") -> dict[str, Any]:
    """One JSON object from user input (a JSONL line or a whole file), or a one-line error naming
    `where` (FILE:LINE, or FILE and the line inside it)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        at = f" at line {e.lineno}" if e.lineno > 1 else ""
        raise ClozeformerError(f"{where}: invalid JSON{at} ({e.msg}){hint}") from None
    if not isinstance(obj, dict):
        raise ClozeformerError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def read_json_object(path: str | os.PathLike, hint: str = "") -> dict[str, Any]:
    """A JSON file holding one object (a manifest, a config), or a one-line error naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ClozeformerError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}){hint}") from None
    return json_object(text, str(path), hint)
