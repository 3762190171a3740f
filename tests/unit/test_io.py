"""Atomic writes: all-or-nothing, and files get ordinary permissions."""

from __future__ import annotations

import os
import stat

import pytest

from clozeformer.utils.io import atomic_dir, atomic_path, atomic_write_text


def test_atomic_file_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "one")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temp left behind
    mode = stat.S_IMODE(os.stat(target).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_atomic_dir_keeps_the_old_directory_on_failure(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_dir(target) as d:
        (d / "x").write_text("v1")
    with pytest.raises(OSError):
        with atomic_dir(target) as d:
            (d / "x").write_text("v2")
            raise OSError("disk full")
    assert (target / "x").read_text() == "v1"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    assert stat.S_IMODE(os.stat(target).st_mode) & 0o055  # readable by others like a normal mkdir
