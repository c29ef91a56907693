"""The files every command writes: JSON that is always valid (NaN and ±inf → null, numpy scalars
→ Python), written atomically, the check that an output directory can be written before
anything is measured, and what tailwise writes into a results directory (to refuse a directory
that holds results, or with --force to replace them whole). Light on purpose (numpy only): `model`, `load`, `report` and `compare` use
it without loading the statistics stack that `results` needs.
"""

from __future__ import annotations

import ctypes
import fnmatch
import json
import math
import shutil
from pathlib import Path

import numpy as np

from tailwise.errors import InputError

# Each document's schema id, defined once (docs/schema/ holds the schemas).
RUN_SCHEMA = "tailwise.summary/1"
SWEEP_SCHEMA = "tailwise.sweep/1"
COMPARE_SCHEMA = "tailwise.compare/1"
CALIBRATE_SCHEMA = "tailwise.calibrate/1"
DOCTOR_SCHEMA = "tailwise.doctor/1"


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


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system: glibc's ``malloc_trim(0)``; nothing where
    the C library has none (musl). glibc raises its mmap threshold as large blocks are freed, up
    to 32 MB (mallopt(3), M_MMAP_THRESHOLD), so a run's end analysis takes its arrays of 2²⁰
    values (8 MB each) from the heap and keeps their pages once they are freed: ~135 MB still
    resident through the samples file's write, whose Arrow buffers have their own allocator and
    cannot reuse them (BENCHMARKS.md, "Memory"). Called between the end's phases, once the engine
    has stopped: never while requests are timed."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


#: The samples file's columns (samples.csv / samples.parquet) and their types: times and
#: durations in ns are signed, so that a difference (sent_ns − intended_ns where sent_ns is 0 for a
#: request never sent) comes out negative instead of wrapping around; flags are unsigned bit sets;
#: request is the request's index in the run's requests (issue 36).
SAMPLE_COLUMN_DTYPES = {
    "intended_ns": "int64", "sent_ns": "int64", "received_ns": "int64", "latency_ns": "int64",
    "flags": "uint32", "inflation_ns": "int64", "sent_user_ns": "int64", "received_user_ns": "int64",
    "busy_from_ns": "int64", "slot_wait_ns": "int64", "thread": "uint32", "request": "uint16",
    "used": "uint8",
}


#: What tailwise writes into a results directory (docs/results.md), as name patterns: run and
#: sweep results, `report`'s page and plots, `compare`'s, and its own hidden temporary entries.
RESULT_PATTERNS = (
    "summary.json", "config.json", "host.json", "samples.*", "*.hdr", "*.hgrm", "*.hlog", "packets.csv", "packets-hist.csv",
    "report.html", "compare.html", "compare.png", "compare.svg",
    "ccdf.*", "cdf.*", "send_lag.*", "intervals.*", "latency_load.*", "ccdf_points.*", "point-*",
    "points", "failed", "interrupted", "collected", ".*.tmp", ".tailwise-*",
)
#: Where a results directory is staged (export.ExportManager) or its old contents are put aside (sweep --force).
STAGE, STASH = ".tailwise-stage", ".tailwise-replaced"


def discard_stage(out_dir: str | Path) -> None:
    """A write that failed (the disk full): its half-written stage goes, and its space with it."""
    shutil.rmtree(Path(out_dir) / STAGE, ignore_errors=True)


#: packets.csv's header: per 100 ms interval of intended time (a packet run's, udp+flow://).
PACKETS_HEADER = "interval,start_s,sent,received,lost,reordered,duplicates"


#: packets-hist.csv's header: a packet run's every answered packet, one row per 100 ns bin counted
#: (stats/histogram.LinearHistogram), then one row for the answers above its range (high_ns empty).
PACKET_HIST_HEADER = "low_ns,high_ns,count"


def result_entries(out_dir: str | Path) -> list[Path]:
    """The entries of ``out_dir`` that tailwise wrote (none when it is new or holds other files only)."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if any(fnmatch.fnmatch(p.name, pat) for pat in RESULT_PATTERNS))


def remove_entry(p: Path) -> None:
    """Remove one entry tailwise wrote: a file, or a directory with what it holds."""
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def refuse_results(out_dir: str | Path, flag: str = "--out") -> None:
    """Refuse a directory that already holds results: a new summary must never stand beside an old
    report and plots. Its remedy names --force (replace them whole) or a new directory."""
    held = [p.name for p in result_entries(out_dir) if not p.name.startswith(".")]
    if held:
        shown = ", ".join(held[:4]) + (", …" if len(held) > 4 else "")
        raise InputError(f"{out_dir} already holds results ({shown})",
                         f"give --force to replace them whole, or a new {flag} directory")


def new_dirs(out_dir: str | Path) -> list[Path]:
    """``out_dir`` and those of its parents that do not exist yet, deepest first: what a command
    creates, and removes again when it fails before measuring anything."""
    made, p = [], Path(out_dir).absolute()
    while not p.exists() and p != p.parent:
        made.append(p)
        p = p.parent
    return made


def remove_new_dirs(made: list[Path]) -> None:
    """Remove the directories a command created (``new_dirs``) with what it wrote into them."""
    if made:
        shutil.rmtree(made[0], ignore_errors=True)
        for d in made[1:]:
            try:
                d.rmdir()
            except OSError:
                break


def stash_results(out_dir: Path) -> Path | None:
    """Put what tailwise wrote in ``out_dir`` aside (sweep --force), to drop once the new results
    exist or to put back if nothing is measured."""
    entries = [p for p in result_entries(out_dir) if p.name not in (STASH, STAGE)]
    stash = out_dir / STASH
    if stash.exists():
        remove_entry(stash)
    if not entries:
        return None
    stash.mkdir()
    for p in entries:
        p.replace(stash / p.name)
    return stash


def unstash_results(out_dir: Path, stash: Path | None) -> None:
    """Put the old results back (nothing new was measured): what was written since is removed."""
    for p in result_entries(out_dir):
        if p != stash:
            remove_entry(p)
    if stash is not None and stash.is_dir():
        for p in stash.iterdir():
            p.replace(out_dir / p.name)
        stash.rmdir()


def load_summary_json(directory: str | Path) -> dict:
    """summary.json of a run or sweep directory as JSON (``load_summary`` gives its model; the
    notebook API keeps the JSON); InputError (one line) when there is none."""
    d = Path(directory)
    path = d / "summary.json"
    if not path.is_file():
        raise InputError(f"{d} has no summary.json", "give the --out directory of a tailwise run or sweep")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{path} cannot be read ({e})", "give the --out directory of a complete tailwise run or sweep") from None
    if not isinstance(doc, dict) or doc.get("schema") not in (RUN_SCHEMA, SWEEP_SCHEMA):
        schema = doc.get("schema") if isinstance(doc, dict) else None
        if schema == COMPARE_SCHEMA:
            runs = [str(r.get("dir")) for r in doc.get("runs") or [] if isinstance(r, dict) and r.get("dir")]
            raise InputError(f"{d} is the output of tailwise compare ({COMPARE_SCHEMA}), not a run or sweep",
                             "give one of the run directories it compares"
                             + (f" ({', '.join(runs)})" if runs else ""))
        if schema == CALIBRATE_SCHEMA:
            raise InputError(f"{d} is the output of tailwise calibrate ({CALIBRATE_SCHEMA}), not a run or sweep",
                             "give the --out directory of a tailwise run or sweep")
        raise InputError(f"{path} is not a tailwise run or sweep summary (schema {schema!r})",
                         f"give the --out directory of a tailwise run ({RUN_SCHEMA}) or sweep ({SWEEP_SCHEMA})")
    return doc
