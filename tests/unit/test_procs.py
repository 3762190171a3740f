"""Process-level settings (clozeformer/procs.py): the bounded heap of long training runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")

# Fills 200 MB of heap with 64 KB blocks (below glibc's mmap threshold), frees 9 in 10 so that
# the heap is full of holes and its top cannot shrink, waits (until resident memory stops
# changing), and prints whether bounded_heap runs and how many MB went back to the system.
CHILD = """
import ctypes, sys, time
from clozeformer.utils.procs import bounded_heap
applied = bounded_heap(period_s=0.1) if sys.argv[1] == "bounded" else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
blocks = [libc.malloc(64 << 10) for _ in range(3200)]
for b in blocks:
    ctypes.memset(b, 1, 64 << 10)
for i, b in enumerate(blocks):
    if i % 10:
        libc.free(b)
before = rss_anon()
time.sleep(0.5)
last, deadline = rss_anon(), time.monotonic() + 10  # a trim under load can take longer: wait until it settles
while time.monotonic() < deadline:
    time.sleep(0.3)
    now = rss_anon()
    if now == last:
        break
    last = now
print(applied, (before - last) >> 20)
"""


def run_child(mode: str, **env: str) -> tuple[bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LD_PRELOAD"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], env={**clean, **env}, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0] == "True", int(out[1])


def test_bounded_heap_gives_freed_memory_back():
    applied, returned_mb = run_child("default")
    assert not applied and returned_mb < 20  # glibc keeps the holes resident
    applied, returned_mb = run_child("bounded")
    assert applied and returned_mb > 100  # of the 180 MB freed (148-180 seen; without the trim < 20)


def test_bounded_heap_leaves_an_allocator_the_user_chose_alone():
    applied, returned_mb = run_child("bounded", MALLOC_ARENA_MAX="2")
    assert not applied and returned_mb < 20


def test_run_in_processes_returns_results_in_order_and_names_the_failing_runs_log(tmp_path, capsys):
    import math

    from clozeformer.utils.errors import ClozeformerError
    from clozeformer.utils.io import read_json_object
    from clozeformer.utils.procs import run_in_processes

    runs = [(f"pow {i}", math.pow, (2.0, float(i))) for i in range(5)]
    assert run_in_processes(runs, 2, 1, tmp_path / "logs") == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert "5 runs, 2 at a time" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [f"pow_{i}.log" for i in range(5)]

    (tmp_path / "bad.json").write_bytes(b"\xff")
    with pytest.raises(ClozeformerError, match=r"read bad: .*bad\.json: not UTF-8 text .*\(log: .*read_bad\.log\)"):
        run_in_processes([("read bad", read_json_object, (str(tmp_path / "bad.json"),))], 1, 1, tmp_path / "logs")
