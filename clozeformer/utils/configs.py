"""What every typed config shares, below the command line: field metadata (`flag_help`: the
--help text and `min`/`max` bounds), the range check those bounds drive (`check_ranges`, called by
each config's `__post_init__`, so a config built in Python is checked as a flag would be), and the
resolved config as a dict, printed and saved beside a verb's outputs. `commands/flags.py` turns the
same dataclasses into argparse flags.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json


def flag_help(text: str, **kw) -> dict:
    """A config field's metadata: its --help text, and e.g. choices=..., or min=/max= bounds
    that `check_ranges` enforces."""
    return {"help": text, **kw}


#: what every seed flag accepts (NumPy's generators take 32 bits)
SEED_RANGE = {"min": 0, "max": 2**32 - 1}


def canonical_keys(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a config file, a model's saved settings) with dashes as underscores and old names
    (a field's `aliases` metadata) under the field's name."""
    old = {a: f.name for f in dataclasses.fields(cls) for a in f.metadata.get("aliases", ())}
    out: dict[str, Any] = {}
    for k, v in values.items():
        k = k.replace("-", "_")
        out[old.get(k, k)] = v
    return out


def check_ranges(cfg: Any) -> None:
    """Every numeric field of `cfg` within its metadata's [min, max] (bounds inclusive; None: open)."""
    for f in dataclasses.fields(cfg):
        lo, hi = f.metadata.get("min"), f.metadata.get("max")
        v = getattr(cfg, f.name)
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        if numeric and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            bound = f"in [{lo}, {hi}]" if lo is not None and hi is not None else (f">= {lo}" if lo is not None else f"<= {hi}")
            raise ClozeformerError(f"--{f.name.replace('_', '-')} must be {bound}, got {v}")


def config_dict(cfg: Any) -> dict[str, Any]:
    def convert(v: Any) -> Any:
        if isinstance(v, Path):
            return str(v)
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        if isinstance(v, dict):
            return {str(k): convert(x) for k, x in v.items()}
        return v

    return {k: convert(v) for k, v in dataclasses.asdict(cfg).items()}


def print_config(cfg: Any, title: str | None = None) -> None:
    """Print the resolved config, one `name = value` line per field."""
    d = config_dict(cfg)
    print(f"== {title or type(cfg).__name__} ==")
    width = max((len(k) for k in d), default=0)
    for k, v in d.items():
        print(f"  {k:<{width}} = {v}")


def save_config(cfg: Any, path: str | Path) -> None:
    atomic_write_json(path, config_dict(cfg))
