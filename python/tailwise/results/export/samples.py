"""The samples file: samples.csv or samples.parquet, one row per sampled request (docs/results.md),
written in bounded memory from the rows the run kept on disk (results/samples.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailwise.results import samples as rows_file
from tailwise.results.export.base import RunFiles
from tailwise.results.files import SAMPLE_COLUMN_DTYPES, release_freed_memory
from tailwise.results.rows import Flag

#: The formats the samples file is written in (--samples-format).
SAMPLE_FORMATS = ("csv", "parquet")


#: Columns of the samples file that hold ns: int64 (files.SAMPLE_COLUMN_DTYPES).
SIGNED_NS_COLUMNS = tuple(name for name, dtype in SAMPLE_COLUMN_DTYPES.items() if dtype == "int64")


def sample_columns(samples: np.ndarray) -> dict[str, np.ndarray]:
    """The samples file's columns, from engine rows (``SAMPLE_DTYPE``): per request its intended,
    sent and received times (ns since the engine's start) with the best stamp each has — ``sent_ns``
    the kernel's transmit stamp when there is one, ``received_ns`` the reply time the latency counts
    to (the kernel's receive stamp when flags say KERNEL_RX; 0 without a reply) — and the user-space
    clock around the system calls beside them, so that send lag (sent − intended) and response time
    (received − sent) can be derived per source; then the instant the whole client was last idle
    (``busy_from_ns``), the wait for a slot the target held (``slot_wait_ns``), the engine
    thread, and which request it was (``request``: its index in the run's requests, 0 with one;
    a set has the flag SET). Times are int64 (``SIGNED_NS_COLUMNS``), ``flags`` and ``thread``
    uint32, ``request`` uint16 (issue 36; 0 for rows of an engine before it)."""
    ns = {name: samples[name].astype(np.int64) for name in ("intended_ns", "sent_ns", "tx_ns", "rx_user_ns",
                                                            "latency_ns", "inflation_ns", "busy_from_ns",
                                                            "slot_wait_ns")}
    answered = (samples["flags"] & int(Flag.CENSORED)) == 0
    return {
        "intended_ns": ns["intended_ns"],
        "sent_ns": np.where(ns["tx_ns"] > 0, ns["tx_ns"], ns["sent_ns"]),
        "received_ns": np.where(answered, ns["intended_ns"] + ns["latency_ns"], 0),
        "latency_ns": ns["latency_ns"],
        "flags": samples["flags"].astype(np.uint32),
        "inflation_ns": ns["inflation_ns"],
        "sent_user_ns": ns["sent_ns"],
        "received_user_ns": ns["rx_user_ns"],
        "busy_from_ns": ns["busy_from_ns"],
        "slot_wait_ns": ns["slot_wait_ns"],
        "thread": samples["thread"],
        "request": (samples["request"] if "request" in (samples.dtype.names or ())
                    else np.zeros(len(samples), np.uint16)),
    }


@dataclass(frozen=True)
class SamplesFile:
    """samples.csv / samples.parquet: from the rows the run appended to disk (``result.samples_file``:
    a file, or one per agent), in bounded memory (results/samples.py), or from the rows in memory
    (none was kept on disk)."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        result, path = run.result, directory / f"samples.{run.samples_format}"
        spool = result.samples_file
        paths = [Path(p) for p in (spool if isinstance(spool, list) else [spool])] if spool is not None else []
        if paths and all(p.exists() for p in paths):
            window = run.summary.latency.window
            subsample = run.summary.methodology.subsample
            pieces = rows_file.sorted_rows(paths, result.samples.dtype)
            used_of = rows_file.used_rule(window.start_ns, window.end_ns, subsample.one_in if subsample else 1)
        else:
            pieces = iter([result.samples])
            ok = run.used is not None and len(run.used) == len(result.samples)
            used_of = rows_file.used_in_order(run.used) if ok else (lambda rows: np.zeros(len(rows), np.uint8))
        rows_file.write_samples(path, run.samples_format, pieces, sample_columns, used_of, result.samples.dtype)
        release_freed_memory()  # the merge's pieces and their columns, before the other files
        return [path]
