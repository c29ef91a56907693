"""The results directory's samples file, written in bounded memory from the rows a run appended to
disk as they came (driver/local.Session's ``samples_file``; on agents, the journal's files).

The rows arrive in the order requests finished, not in intended order, and the file is sorted by
intended time (docs/results.md). So it is written by an external merge sort: the rows are read in
runs of ``RUN_ROWS``, each sorted and written to a scratch file beside the output, then the runs
are merged through a buffer each, ``RUN_ROWS`` rows held at most, and the merged rows go out
``GROUP_ROWS`` at a time as one Parquet row group (``pyarrow.parquet.ParquetWriter``) or
appended CSV rows (``pyarrow.csv.CSVWriter``). Memory: a few times ``RUN_ROWS`` rows whatever the
run's length.

``used`` is known only at the end, once the statistics have chosen their window: a row is used
when it is intended inside ``latency.window`` and its key is kept at the subsample's level
(stats/subsample.py, ``methodology.subsample.one_in``) — a function of the row alone, computed as
each piece is written, so the file is written once with every column.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np

from tailwise.stats.subsample import kept, source_of

#: Rows per sorted run, and held at most while merging (64 bytes each as rows, ~220 with the
#: file's columns as they are built).
RUN_ROWS = 1 << 19


def _read(f, dtype: np.dtype, rows: int) -> np.ndarray:
    return np.frombuffer(f.read(rows * dtype.itemsize), dtype=dtype)


def _chunks(paths: list[Path], dtype: np.dtype, rows: int) -> Iterator[np.ndarray]:
    """The files' records, file after file, at most ``rows`` at a time."""
    for path in paths:
        with open(path, "rb") as f:
            while len(chunk := _read(f, dtype, rows)):
                yield chunk


def sorted_rows(path: Path | list[Path], dtype: np.dtype, run_rows: int = RUN_ROWS) -> Iterator[np.ndarray]:
    """The rows of ``path`` (``dtype`` records, any order; or of several files, a run on agents'
    one per agent) as pieces in intended order, in bounded memory: one sorted run when they fit in
    ``run_rows``, else an external merge."""
    paths = [Path(p) for p in path] if isinstance(path, list) else [Path(path)]
    n = sum(os.path.getsize(p) // dtype.itemsize for p in paths)
    if n <= run_rows:
        rows = np.concatenate([c.copy() for c in _chunks(paths, dtype, run_rows)] or [np.zeros(0, dtype)])
        rows.sort(order="intended_ns", kind="stable")
        if n:
            yield rows
        return
    scratch = paths[0].with_name(paths[0].name + ".runs")
    runs = []
    try:
        with open(scratch, "wb") as dst:
            for chunk in _chunks(paths, dtype, run_rows):
                chunk = chunk[np.argsort(chunk["intended_ns"], kind="stable")]
                runs.append((dst.tell() // dtype.itemsize, len(chunk)))
                dst.write(chunk.tobytes())
        yield from _merge(scratch, dtype, runs, max(run_rows // len(runs), min(1024, run_rows // 8)))
    finally:
        scratch.unlink(missing_ok=True)


def _merge(scratch: Path, dtype: np.dtype, runs: list[tuple[int, int]], buffer_rows: int) -> Iterator[np.ndarray]:
    """k-way merge of sorted runs ((first row, rows) each in ``scratch``), a buffer per run."""
    with open(scratch, "rb") as f:
        left = [rows for _, rows in runs]
        start = [first for first, _ in runs]
        buffers: list[np.ndarray] = [np.zeros(0, dtype=dtype)] * len(runs)

        def refill(i: int) -> None:
            take = min(buffer_rows, left[i])
            f.seek(start[i] * dtype.itemsize)
            buffers[i] = _read(f, dtype, take).copy()
            start[i] += take
            left[i] -= take

        for i in range(len(runs)):
            refill(i)
        while any(len(b) for b in buffers):
            # Every row at or below the least of the buffers' last values is final: each run is
            # sorted, so what it has not read yet is at least its buffer's last value.
            unread = [int(b["intended_ns"][-1]) for i, b in enumerate(buffers) if left[i]]
            bound = min(unread) if unread else None  # None: every row is in the buffers
            out = []
            for i, b in enumerate(buffers):
                if not len(b):
                    continue
                cut = len(b) if bound is None else int(np.searchsorted(b["intended_ns"], bound, side="right"))
                if cut:
                    out.append(b[:cut])
                    buffers[i] = b[cut:]
                if not len(buffers[i]) and left[i]:
                    refill(i)
            piece = np.concatenate(out)
            yield piece[np.argsort(piece["intended_ns"], kind="stable")]


#: Rows per Parquet row group (and CSV batch) as written, whatever the merge's pieces. The
#: write's memory grows with it: writing 2M rows to Parquet peaked +201 MB over its start with
#: 2¹⁹-row groups, +121 MB with 2¹⁷, +46 MB with 2¹⁵ (BENCHMARKS.md, "Memory"). And the pieces
#: vary: one buffer's worth of a run when the runs barely overlap (rows come nearly in intended
#: order), ~4,600 rows in a 1-hour run's 115 runs, whose 13,000 row groups' metadata the writer
#: would keep until it closes.
GROUP_ROWS = 1 << 15


def regrouped(pieces: Iterator[np.ndarray], rows: int = GROUP_ROWS) -> Iterator[np.ndarray]:
    """The pieces' rows in the same order, cut again into pieces of ``rows`` (the last shorter)."""
    held: list[np.ndarray] = []
    count = 0
    for piece in pieces:
        while len(piece):
            take = piece[:rows - count]
            held.append(take)
            count += len(take)
            piece = piece[len(take):]
            if count == rows:
                yield np.concatenate(held)
                held, count = [], 0
    if count:
        yield np.concatenate(held)


def used_in_order(used: np.ndarray):
    """``used_of`` for rows written in the order of ``used`` (held in memory: none were on disk):
    each call takes the mask's next ``len(rows)``, as ``write_samples`` calls it once a piece, in
    order (its pieces are ``GROUP_ROWS`` long, not the run's)."""
    at = 0

    def used_of(rows: np.ndarray) -> np.ndarray:
        nonlocal at
        part = used[at:at + len(rows)]
        at += len(rows)
        return part
    return used_of


def write_samples(path: Path, fmt: str, pieces: Iterator[np.ndarray], columns_of, used_of, dtype: np.dtype) -> int:
    """The pieces' columns (``columns_of``: export/samples.sample_columns) with ``used`` (``used_of``:
    a piece → uint8 mask) appended to ``path`` as Parquet row groups or CSV rows, ``GROUP_ROWS``
    rows at a time. Returns the rows."""
    import pyarrow as pa

    writer = None
    rows = 0
    try:
        for piece in regrouped(pieces):
            cols = columns_of(piece)
            cols["used"] = used_of(piece).astype(np.uint8)
            table = pa.table(cols)
            if writer is None:
                writer = _writer(path, fmt, table.schema)
            writer.write_table(table)
            rows += len(piece)
        if writer is None:  # no row: the columns alone
            empty = pa.table(columns_of(np.zeros(0, dtype=dtype)) | {"used": np.zeros(0, np.uint8)})
            writer = _writer(path, fmt, empty.schema)
            writer.write_table(empty)
    finally:
        if writer is not None:
            writer.close()
    return rows


def _writer(path: Path, fmt: str, schema):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, schema)
    import pyarrow.csv as pacsv

    return pacsv.CSVWriter(path, schema)


def used_rule(start_ns: int, end_ns: int, one_in: int):
    """``used`` of a row: intended in [start_ns, end_ns) and kept by the subsample at 1 in ``one_in``."""
    level = max(int(one_in), 1).bit_length() - 1

    def used_of(rows: np.ndarray) -> np.ndarray:
        t = rows["intended_ns"].astype(np.int64)
        return (t >= start_ns) & (t < end_ns) & kept(rows["intended_ns"], level, source_of(rows))

    return used_of
