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
import sys
import tempfile
from collections.abc import Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from clozeformer import __version__
from clozeformer.utils.errors import ClozeformerError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # best effort: some filesystems cannot open or sync a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` when it is a file (so `path` cannot be created), else None."""
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    return None if parent.is_dir() else parent


def check_output_file(path: str | os.PathLike, flag: str = "--output") -> Path:
    """An output file's path, checked before any work: not an existing directory, not under a file."""
    out = Path(path)
    if out.is_dir():
        raise ClozeformerError(f"{flag} {out}: is a directory; give a file name (e.g. {out / 'out.txt'})")
    if (blocker := _blocking_file(out)) is not None:
        raise ClozeformerError(f"{flag} {out}: cannot be created, {blocker} is a file, not a directory")
    return out


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success rename it onto `target`.

    On any exception the temporary file is removed and `target` is untouched.
    """
    target = check_output_file(target, "output file")
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


def atomic_write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(text.encode("utf-8"))


def atomic_write_json(target: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(target, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------- output directories
# One rule for every verb that writes a directory (prepare, tokenizer train, finetune, embed
# --build-index, demo): a missing or empty target is written; a non-empty one is refused unless
# --overwrite, and --overwrite replaces only a directory that clozeformer wrote (it carries
# OWNER_FILE, or, for directories written before OWNER_FILE existed, one of LEGACY_OWNER_FILES).

#: written into every directory a verb creates: who wrote it, and whether it finished
OWNER_FILE = ".clozeformer.json"
LEGACY_OWNER_FILES = ("tokenizer_train_config.json", "finetune_config.json", "pretrain_config.json")


def written_by_clozeformer(directory: str | os.PathLike) -> bool:
    d = Path(directory)
    if (d / OWNER_FILE).is_file() or any((d / name).is_file() for name in LEGACY_OWNER_FILES):
        return True
    manifest = d / "manifest.json"  # prepare's data dirs and embed's indexes of earlier versions
    try:
        return manifest.is_file() and "clozeformer" in manifest.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False


def check_dir_path(path: str | os.PathLike, flag: str = "--out") -> Path:
    """A directory that a verb writes into: an existing directory, or one that can be created (not under a file)."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ClozeformerError(f"{flag} {out}: exists and is not a directory")
    if (blocker := _blocking_file(out)) is not None:
        raise ClozeformerError(f"{flag} {out}: cannot be created, {blocker} is a file, not a directory")
    return out


def check_output_dir(path: str | os.PathLike, overwrite: bool, flag: str = "--out") -> Path:
    """The output directory of a verb, checked before any work is done (see the rule above)."""
    out = check_dir_path(path, flag)
    try:
        nonempty = out.is_dir() and any(out.iterdir())
    except OSError as e:
        raise ClozeformerError(f"{flag} {out}: cannot be read ({e.strerror or e})") from None
    if nonempty and not overwrite:
        raise ClozeformerError(
            f"{flag} {out}: directory is not empty; choose a new directory, or pass --overwrite to replace "
            "one that clozeformer wrote"
        )
    if nonempty and not written_by_clozeformer(out):
        raise ClozeformerError(
            f"{flag} {out}: not written by clozeformer (no {OWNER_FILE}); --overwrite only replaces "
            "directories clozeformer wrote, never other files: choose a new directory"
        )
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent if not out.exists() else out, os.W_OK):
        raise ClozeformerError(f"{flag} {out}: not writable (permission denied)")
    return out


def mark_owned(directory: str | os.PathLike, verb: str, complete: bool = True) -> None:
    """Write OWNER_FILE: `complete` False while a verb that writes in place (finetune) is running."""
    atomic_write_json(
        Path(directory) / OWNER_FILE, {"written_by": f"clozeformer {verb}", "version": __version__, "complete": complete}
    )


def check_complete(directory: str | os.PathLike) -> None:
    """Refuse a directory whose writer never finished (killed mid-run): it is not a model."""
    marker = Path(directory) / OWNER_FILE
    if not marker.is_file():
        return
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return  # a damaged marker says nothing about the weights beside it
    if isinstance(info, dict) and info.get("complete") is False:
        raise ClozeformerError(
            f"{directory}: written by an unfinished `{info.get('written_by', 'clozeformer')}` run (it was stopped "
            f"before it completed; see {marker}); rerun it with --overwrite"
        )


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, owner: str | None = None) -> Iterator[Path]:
    """Yield a temporary directory beside `target`; on success it replaces `target` whole.

    If `target` exists it is moved aside first and deleted only after the new directory is
    in place, so at every instant either the old or the new complete directory is visible
    under its name. Hidden leftovers of an earlier call that was killed are removed first.
    With `owner` (the verb), the new directory carries OWNER_FILE.
    """
    target = check_dir_path(target, "output directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in [*target.parent.glob(f".{glob_escape(target.name)}.*.tmp"), target.parent / f".{target.name}.old"]:
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
            print(f"note: removed {stale}, left by an earlier run that was interrupted", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        if owner:
            mark_owned(tmp, owner)
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


# ----------------------------------------------------------------------------- reading user files
# One policy for every text file a user gives: gzip is recognised by its magic bytes (not the
# name), a UTF-8 BOM is dropped, NUL bytes mean a binary file, and the first byte that is not
# UTF-8 is reported with its line. Whole files (task data, prediction inputs) go through
# `decode_text`; corpora stream through `open_binary` (data/readers.py counts bad bytes instead).

GZIP_MAGIC = b"\x1f\x8b"


def open_binary(path: str | os.PathLike):
    """(the disk file, its decompressed binary stream): gzip when the file starts with its magic bytes."""
    import gzip

    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    return (raw, gzip.GzipFile(fileobj=raw, mode="rb")) if head == GZIP_MAGIC else (raw, raw)


def decode_text(data: bytes, name: str) -> str:
    """A whole file's bytes as text (gunzipped when they are gzip), or one error line naming `name`
    (and the line of the first byte that is not UTF-8)."""
    if data[:2] == GZIP_MAGIC:
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ClozeformerError(f"{name}: not a readable gzip file ({e})") from None
    if not data.strip():
        raise ClozeformerError(f"{name}: empty file")
    if b"\x00" in data[:8192]:
        raise ClozeformerError(f"{name}: looks binary (contains NUL bytes), expected a text file")
    try:
        return data.decode("utf-8-sig")  # -sig: a BOM is dropped (MRPC's train/dev start with one)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ClozeformerError(f"{name}:{line}: not UTF-8 (byte 0x{data[e.start]:02x}); re-save the file as UTF-8") from None


def json_object(line: str, where: str, hint: str = "") -> dict[str, Any]:
    """One JSON object from user input (a JSONL line or a whole file), or a one-line error naming
    `where` (FILE:LINE for a line; a whole file's error adds the line inside it: FILE:LINE)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        at = f":{e.lineno}" if e.lineno > 1 else ""
        raise ClozeformerError(f"{where}{at}: invalid JSON ({e.msg}){hint}") from None
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
