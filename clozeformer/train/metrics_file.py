"""RUN_DIR/metrics.jsonl (one JSON object per line), and the --report-to trackers (clozeformer.train.tracking).

Every line has "kind" ("train" | "eval" | "event") and "step". On resume the file is cut back
to the lines of steps <= the checkpoint's step (a killed run may have logged beyond it, and its
last line may be half-written), so a resumed run's file reads as if it never stopped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clozeformer.utils.io import atomic_write_text

if TYPE_CHECKING:
    from clozeformer.train.tracking import Trackers

METRICS_FILE = "metrics.jsonl"


def json_line(record: dict[str, Any]) -> str:
    """One strict-JSON line: a NaN or infinite number (a diverged loss) is written as null, never as
    the `NaN` / `Infinity` literals that other JSON readers reject."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(record), allow_nan=False) + "\n"


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All complete lines of a metrics file (a torn last line is skipped)."""
    records = []
    p = Path(path)
    p = p / METRICS_FILE if p.is_dir() else p
    if not p.is_file():
        return records
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "step" in rec:
            records.append(rec)
    return records


class MetricsLog:
    """Appends metrics on the main process and passes them to `trackers`; other ranks get a no-op instance."""

    def __init__(self, run_dir: Path, enabled: bool, resume_step: int | None, trackers: Trackers | None = None):
        self.enabled = enabled
        self.path = run_dir / METRICS_FILE
        self.trackers = trackers
        if not enabled:
            return
        kept = [r for r in read_metrics(self.path) if resume_step is not None and r["step"] <= resume_step]
        atomic_write_text(self.path, "".join(json_line(r) for r in kept))
        self.file = open(self.path, "a", encoding="utf-8")

    def log(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.file.write(json_line(record))
        self.file.flush()  # a SIGKILL loses at most the line being written
        if self.trackers is not None:
            self.trackers.log(record)

    def close(self, failed: bool = False) -> None:
        if self.enabled:
            self.file.close()
        if self.trackers is not None:
            self.trackers.close(failed=failed)
