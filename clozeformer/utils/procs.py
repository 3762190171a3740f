"""Process-level settings: workers that do not outlive their parent, a heap that gives memory back.

A job scheduler or `timeout` ends a run with SIGTERM or SIGKILL; a SIGKILLed parent cannot
stop its pool, and its workers would keep burning the CPU. `die_with_parent` (a pool
initializer) asks the Linux kernel to signal the worker when its parent dies
(prctl PR_SET_PDEATHSIG); elsewhere it does nothing.

`bounded_heap` keeps a long training run's memory flat: glibc otherwise keeps what training frees
in a heap that fragments and grows.

`run_in_processes` runs independent jobs (experiment arms, fine-tuning seeds) N at a time in
spawned workers that use both.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """In a child process: receive `sig` when the parent process dies (Linux).

    `parent`: the pid the child was started by (pass it from the parent). A parent that died while
    the child was still starting (before this call) sends no signal; the child then sees that it
    was re-parented and gives itself `sig` at once."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # 1: PR_SET_PDEATHSIG
        if parent is not None and os.getppid() != parent:
            os.kill(os.getpid(), sig)


#: the allocator environment a user may have chosen; bounded_heap leaves it alone
_ALLOCATOR_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "LD_PRELOAD")
_TRIMMER: threading.Thread | None = None


def bounded_heap(period_s: float = 10.0) -> bool:
    """Give the memory that training frees back to the system every `period_s` seconds (Linux
    with glibc: a daemon thread calls malloc_trim; the CLI starts it once per process). Returns
    whether the trimming runs.

    Tensors whose sizes change every step (masked positions, batch lengths) fragment glibc's heap,
    which only grows: `tiny`'s pretraining reached 1.3 GB after 400 steps and 3 GB after 5,500.
    malloc_trim returns its free pages; a fixed mmap threshold would too, but cost 14-37% of the
    step rate (BENCHMARKS.md, "Memory of a long run"). Nothing happens when the user chose an
    allocator or its settings (MALLOC_*_ environment, LD_PRELOAD) or where there is no glibc."""
    global _TRIMMER
    if _TRIMMER is not None:
        return True
    if not sys.platform.startswith("linux") or any(os.environ.get(k) for k in _ALLOCATOR_ENV):
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False

    def trim() -> None:
        while True:
            time.sleep(period_s)
            malloc_trim(0)

    _TRIMMER = threading.Thread(target=trim, name="clozeformer-malloc-trim", daemon=True)
    _TRIMMER.start()
    return True


_PARENT: int | None = None  # in a pool worker: the pid of the process that started the pool


def _worker_init(parent: int) -> None:
    """Pool-worker initializer: the worker gets SIGTERM when its parent dies (a pretraining run takes
    it as "checkpoint and stop"; `_logged` then ends the worker), and its freed memory goes back to
    the system as in the CLI."""
    global _PARENT
    _PARENT = parent
    die_with_parent(signal.SIGTERM, parent)
    bounded_heap()


def _logged(log: str, threads: int | None, fn: Callable, *args: Any) -> Any:
    """A worker: fn(*args) with `threads` torch threads and its stdout/stderr in the file `log`."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(log, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            return fn(*args)
    finally:
        if _PARENT is not None and os.getppid() != _PARENT:  # orphaned: nobody will collect the result
            os._exit(1)


def slug(name: str) -> str:
    """`name` as a file name: letters, digits, '-' and '.' kept, anything else '_' (none at the ends)."""
    return "".join(c if c.isalnum() or c in "-." else "_" for c in name).strip("_")


def run_in_processes(runs: list[tuple[str, Callable, tuple]], jobs: int, threads: int | None, log_dir: Path) -> list[Any]:
    """Each run is (name, fn, args), fn a module-level function; returns the results in order.

    `jobs` spawned processes (a fresh interpreter each, so no torch state is shared) with `threads`
    torch threads each; each run's output goes to LOG_DIR/NAME.log and one line is printed here as
    it ends. A failing run stops the rest and names its log. Killing this process ends the workers.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from clozeformer.utils.errors import ClozeformerError

    results: list[Any] = [None] * len(runs)
    logs = [log_dir / f"{slug(name)}.log" for name, _, _ in runs]
    print(f"{len(runs)} runs, {jobs} at a time with {threads} thread(s) each; logs in {log_dir}", flush=True)
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(runs)), mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(os.getpid(),)
    ) as pool:
        futures = {pool.submit(_logged, str(logs[i]), threads, fn, *args): i for i, (_, fn, args) in enumerate(runs)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as e:
                pool.shutdown(wait=False, cancel_futures=True)
                if isinstance(e, ClozeformerError):
                    raise ClozeformerError(f"{runs[i][0]}: {e} (log: {logs[i]})") from e
                raise
            done = sum(r is not None for r in results)
            score = f": {results[i]:.4f}" if isinstance(results[i], float) else ""
            print(f"  [{done}/{len(runs)}] {runs[i][0]}{score}", flush=True)
    return results
