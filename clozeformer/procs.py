"""Worker processes that do not outlive their parent.

A job scheduler or `timeout` ends a run with SIGTERM or SIGKILL; a SIGKILLed parent cannot
stop its pool, and its workers would keep burning the CPU. `die_with_parent` (a pool
initializer) asks the Linux kernel to signal the worker when its parent dies
(prctl PR_SET_PDEATHSIG); elsewhere it does nothing.
"""

from __future__ import annotations

import signal
import sys


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child process: receive `sig` when the parent process dies (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
