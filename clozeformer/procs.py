"""Process-level settings: workers that do not outlive their parent, a heap that gives memory back.

A job scheduler or `timeout` ends a run with SIGTERM or SIGKILL; a SIGKILLed parent cannot
stop its pool, and its workers would keep burning the CPU. `die_with_parent` (a pool
initializer) asks the Linux kernel to signal the worker when its parent dies
(prctl PR_SET_PDEATHSIG); elsewhere it does nothing.

`bounded_heap` keeps a long training run's memory flat: glibc otherwise keeps what training frees
in a heap that fragments and grows.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """In a child process: receive `sig` when the parent process dies (Linux).

    `parent`: the pid the child was started by (pass it from the parent). A parent that died while
    the child was still starting (before this call) sends no signal; the child then sees that it
    was re-parented and gives itself `sig` at once."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
        if parent is not None and os.getppid() != parent:
            os.kill(os.getpid(), sig)


#: the allocator environment a user may have chosen; bounded_heap leaves it alone
_ALLOCATOR_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "LD_PRELOAD")
_TRIMMER: threading.Thread | None = None


def bounded_heap(period_s: float = 10.0) -> bool:
    """Give the memory that training frees back to the system every `period_s` seconds (Linux
    with glibc: a daemon thread calls malloc_trim; the CLI starts it once per process).

    Training frees and allocates tensors whose sizes change every step (the masked positions, the
    batch's lengths). glibc keeps the freed blocks in its heap, which fragments and only grows:
    `tiny`'s pretraining reached 1.3 GB after 400 steps and 3 GB after 5,500. malloc_trim returns
    the free pages inside the heap; a fixed mmap threshold would too, but cost 14-37% of the step
    rate (BENCHMARKS.md, "Memory of a long run"). Nothing happens when the user chose an allocator
    or its settings (MALLOC_*_ environment, LD_PRELOAD) or where there is no glibc. Returns
    whether the trimming runs."""
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
