"""The one progress bar: tqdm on stderr, sized to the terminal. Written to a log file (stderr not a
terminal), it prints a line every 5 seconds instead of ten a second."""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(total: float | None = None, *, desc: str | None = None, unit: str = "it", enabled: bool = True, **kw: Any):
    """A tqdm bar (`kw`: tqdm's own options, e.g. initial, unit_scale, leave)."""
    from tqdm import tqdm

    kw.setdefault("mininterval", 0.1 if sys.stderr.isatty() else 5.0)
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True, file=sys.stderr, **kw)
