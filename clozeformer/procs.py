"""Worker processes that do not outlive their parent.

A job scheduler or `timeout` ends a run with SIGTERM or SIGKILL; a SIGKILLed parent cannot
stop its pool, and its workers would keep burning the CPU. `die_with_parent` (a pool
initializer) asks the Linux kernel to signal the worker when its parent dies
(prctl PR_SET_PDEATHSIG); elsewhere it does nothing.
"""

from __future__ import annotations

import signal
import sys


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """In a child process: receive `sig` when the parent process dies (Linux).

    `parent`: the pid the child was started by (pass it from the parent). A parent that died while
    the child was still starting (before this call) sends no signal; the child then sees that it
    was re-parented and gives itself `sig` at once."""
    if sys.platform.startswith("linux"):
        import ctypes
        import os

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig))
        if parent is not None and os.getppid() != parent:
            os.kill(os.getpid(), sig)
