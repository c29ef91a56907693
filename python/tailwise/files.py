"""The files every command writes: JSON that is always valid (NaN and ±inf → null, numpy scalars
→ Python), written atomically, and the check that an output directory can be written before
anything is measured. Light on purpose (numpy only): `model`, `load`, `report` and `compare` use
it without loading the statistics stack that `results` needs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tailwise.errors import InputError


def _clean(v):
    """JSON-safe: NaN/inf → null, numpy scalars → Python."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def dumps(doc: dict) -> str:
    return json.dumps(_clean(doc), indent=2, allow_nan=False)


def write_json(path: Path, doc: dict) -> None:
    """Write JSON atomically: a reader (or a resumed sweep) sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dumps(doc) + "\n")
    tmp.replace(path)


def check_out_dir(out_dir: str | Path, what: str = "create output directory",
                  remedy: str = "give --out a writable directory (checked before the run, so nothing is lost)") -> Path:
    """Make sure ``out_dir`` can be written (created if need be) before the work that fills it."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".tailwise-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise InputError(f"cannot {what} {out} ({(e.strerror or str(e)).lower()})", remedy) from None
    return out


#: The samples file's columns (samples.csv / samples.parquet) and their types: times and
#: durations in ns are signed, so that a difference (sent_ns − intended_ns where sent_ns is 0 for a
#: request never sent) comes out negative instead of wrapping around; flags are unsigned bit sets.
SAMPLE_COLUMN_DTYPES = {
    "intended_ns": "int64", "sent_ns": "int64", "received_ns": "int64", "latency_ns": "int64",
    "flags": "uint32", "inflation_ns": "int64", "sent_user_ns": "int64", "received_user_ns": "int64",
    "used": "uint8",
}
