"""Results directories as pandas DataFrames, for notebooks: ``tailwise.load_results(DIR)``.

A run directory is one point; a sweep directory is one point per load. ``points`` has one row per
point with its load, rates, verdict and each reported percentile with its CI (float64 columns
``p99_ns``, ``p99_low_ns``, ``p99_high_ns`` ..., NaN where the samples cannot bound it); ``samples`` the raw samples of every point (a
``rate_rps`` column tells the points apart) with the unit in each column's name; ``summary`` the
JSON document itself. Samples are read lazily (``samples`` is a property): a sweep's can be large.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tailwise.results.files import SAMPLE_COLUMN_DTYPES, SWEEP_SCHEMA, load_summary_json as load_summary


@dataclass
class Results:
    """One results directory: ``summary`` (dict), ``points`` and ``samples`` (DataFrames)."""

    path: Path
    summary: dict
    points: pd.DataFrame
    _point_dirs: list[tuple[float, Path]] = field(repr=False, default_factory=list)
    _samples: pd.DataFrame | None = field(repr=False, default=None)

    @property
    def kind(self) -> str:
        """"run" or "sweep"."""
        return "sweep" if self.summary.get("schema") == SWEEP_SCHEMA else "run"

    @property
    def samples(self) -> pd.DataFrame:
        if self._samples is None:
            frames = [read_samples(d).assign(rate_rps=rate) for rate, d in self._point_dirs]
            self._samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return self._samples


def read_samples(run_dir: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """A run directory's samples file (samples.parquet or samples.csv), all columns or those, with
    the documented types whichever the format (``files.SAMPLE_COLUMN_DTYPES``: times int64, flags
    uint32); empty when there is none."""
    if (p := run_dir / "samples.parquet").is_file():
        frame = pd.read_parquet(p, columns=columns)
    elif (p := run_dir / "samples.csv").is_file():
        frame = pd.read_csv(p, usecols=columns)
    else:
        return pd.DataFrame(columns=columns)
    return frame.astype({c: t for c, t in SAMPLE_COLUMN_DTYPES.items() if c in frame.columns})


def _point(summary: dict, **extra) -> dict:
    row = {
        "rate_rps": summary["config"]["rate_rps"],  # the load asked for (a --probe's rate apart)
        "achieved_rps": summary["rate"]["achieved_rps"],
        "completed_rps": summary["rate"]["completed_rps"],
        "duration_s": summary["rate"]["duration_s"],
        "verdict": summary["verdict"],
    } | extra
    for p in summary["latency"]["percentiles"]:
        name = f"p{p['p']:g}".replace(".", "_")
        for column, key in ((f"{name}_ns", "value_ns"), (f"{name}_low_ns", "low_ns"), (f"{name}_high_ns", "high_ns")):
            # pandas' missing value: the JSON's null (a percentile the samples cannot bound) is NaN.
            row[column] = math.nan if p[key] is None else float(p[key])
    return row


def _frame(rows: list[dict]) -> pd.DataFrame:
    """The points as a DataFrame, every percentile column float64 (NaN where unknown), whether or
    not some point lacks a value."""
    frame = pd.DataFrame(rows)
    ns = [c for c in frame.columns if c.startswith("p") and c.endswith("_ns")]
    return frame.astype({c: "float64" for c in ns})


def load_results(path: str | Path) -> Results:
    """Read a results directory written by `tailwise run --out` or `tailwise sweep`; InputError (one
    line, naming the directory and what to give instead) for anything else — a `tailwise compare`
    or `calibrate` output, a directory without a summary.json."""
    root = Path(path)
    summary = load_summary(root)
    if summary["schema"] == SWEEP_SCHEMA:
        rows, dirs = [], []
        for pt in summary["points"]:
            d = root / pt["dir"]
            s = load_summary(d)
            rows.append(_point(s, rate_rps=pt["rate_rps"], saturated=pt["saturated"], meets_slo=pt["meets_slo"]))
            dirs.append((pt["rate_rps"], d))
        return Results(root, summary, _frame(rows), dirs)
    return Results(root, summary, _frame([_point(summary)]), [(summary["config"]["rate_rps"], root)])
