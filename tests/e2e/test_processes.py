"""End to end: what happens to the processes a verb starts when it is killed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_sigkill_of_prepare_leaves_no_worker_processes(tmp_path):
    """`timeout -s KILL` or a scheduler kills `prepare`: its tokenizer workers die with it
    (PR_SET_PDEATHSIG), and nothing it started keeps running."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from synthetic import write_corpus

    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux's")
    write_corpus(tmp_path / "corpus.txt", 60_000)
    (tmp_path / "tok").mkdir()
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "infer_vocab.txt", tmp_path / "tok" / "vocab.txt")
    argv = [sys.executable, "-m", "clozeformer", "prepare", "--input", str(tmp_path / "corpus.txt")]
    argv += ["--tokenizer", str(tmp_path / "tok"), "--out", str(tmp_path / "out"), "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children(pid: int) -> set[int]:
        out: set[int] = set()
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out |= {int(x) for x in f.read().split()}
        except OSError:
            pass
        return out

    def alive(pid: int) -> bool:  # a zombie waiting for init to reap it counts as gone
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while len(workers) < 2:  # the two tokenizer workers (+ the resource tracker) are up
        assert proc.poll() is None and time.monotonic() < deadline, "prepare ended before its workers were seen"
        workers = children(proc.pid)
        time.sleep(0.02)
    time.sleep(0.5)  # let them start tokenizing
    workers |= children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in workers if alive(p)], "workers outlived the killed prepare"
