"""What a run on agents has collected so far, written as it arrives (issue 21: a failure "keeps
everything already collected (written incrementally)").

The coordinator holds a run's records in memory and writes the results directory at the end. If
the coordinator itself dies (killed, out of memory, its host lost), that end never comes; the
agents stop on their lease, and without this journal everything they measured would be gone. So
each snapshot's rows, each finished interval's histogram and each agent's counters are appended to
``DIR/collected/`` as they reach the coordinator (docs/results.md, "collected/"):

* ``format.json``: what the files are — the run, its agents and their tags, the samples' row
  layout (numpy: ``np.fromfile(path, dtype=np.dtype(doc["sample_dtype"]))``);
* ``samples-TAG.bin``: each agent's sampled rows, 64-byte little-endian records as the engine
  writes them (driver/local.SAMPLE_DTYPE), in the order they arrived;
* ``latency-TAG.hlog``: each agent's every-request interval histograms, an HdrHistogram interval
  log tagged ``TAG`` (the same lines as the final tagged log), a line per finished 100 ms;
* ``counters.jsonl``: one JSON line per agent per snapshot (``t_s`` after the start, ``agent``,
  ``counters``), and a line ``{"agent", "error"}`` when an agent fails.

The writes are appends flushed to the kernel at each snapshot (a dead process loses nothing
written; a lost machine may lose what its page cache held). A disk that will not take more (full,
gone) ends the journal, not the run: its files are removed to leave the space to the results, and
``Journal.error`` says why (the run's ``AgentResult.journal_error``, a warning). The rows' files
are also what the results directory's samples file is written from (``sample_files``): the
coordinator keeps a bounded subsample of them in memory. When the run ends and its results
directory is written, ``collected/`` is replaced by it (export.install_results): it exists only while a run
is under way, or after a coordinator that died.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import time
from pathlib import Path
from typing import IO

import numpy as np

from tailwise import _core
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.results.files import write_json
from tailwise.results.export.intervals import agent_tag, interval_log_header, interval_log_line

COLLECTED = "collected"
#: A run in this process appends only its rows, here inside ``COLLECTED`` (driver/local.Session):
#: the results directory's samples file is written from it (results/export/samples.py).
LOCAL_SAMPLES = "samples-local.bin"
SCHEMA = "tailwise.collected/1"


def _guarded(write):
    """A journal write that the disk refuses gives the journal up (``Journal.give_up``)."""
    @functools.wraps(write)
    def guarded(self, *args, **kwargs):
        try:
            return write(self, *args, **kwargs)
        except OSError as e:
            self.give_up(e)
    return guarded


class Journal:
    """``DIR/collected/`` for one run on agents (``GroupSession``'s ``journal``)."""

    def __init__(self, directory: Path, config: dict):
        self.dir = Path(directory)
        self.config = config
        self._samples: list[IO[bytes]] = []
        self._logs: list[IO[str]] = []
        self._tags: list[str] = []
        self._written: set[tuple[int, int]] = set()
        self._counters: IO[str] | None = None
        self._start_s = time.monotonic()
        #: Why the journal was given up during the run (``give_up``); None: it was not.
        self.error: str | None = None

    def give_up(self, e: OSError) -> None:
        """The disk would not take more (full, gone): the run goes on without its journal, whose
        files are removed to leave the space to the results directory. Only a coordinator that
        died from here on would lose what it collected."""
        self.error = f"{self.dir}: {(e.strerror or str(e)).lower()}"
        for f in [*self._samples, *self._logs, *([self._counters] if self._counters else [])]:
            with contextlib.suppress(OSError):
                f.close()
        self._samples, self._logs, self._counters = [], [], None
        shutil.rmtree(self.dir, ignore_errors=True)

    @_guarded
    def begin(self, run_id: str, agents: list[tuple[str, str]], wall_start_s: float) -> None:
        """The run started on ``agents`` ((address, role) each): the files opened, format.json written."""
        shutil.rmtree(self.dir, ignore_errors=True)  # a journal left by a coordinator that died
        self.dir.mkdir(parents=True)
        self._tags = [agent_tag(a) for a, _ in agents]
        write_json(self.dir / "format.json", {
            "schema": SCHEMA, "run_id": run_id, "wall_start_s": wall_start_s,
            "agents": [{"address": a, "role": r, "tag": t, "samples": f"samples-{t}.bin",
                        "intervals": f"latency-{t}.hlog"} for (a, r), t in zip(agents, self._tags)],
            "sample_dtype": {"names": list(SAMPLE_DTYPE.names),
                             "formats": [SAMPLE_DTYPE.fields[n][0].str for n in SAMPLE_DTYPE.names],
                             "offsets": [SAMPLE_DTYPE.fields[n][1] for n in SAMPLE_DTYPE.names],
                             "itemsize": SAMPLE_DTYPE.itemsize},
            "config": self.config})
        self._samples = [open(self.dir / f"samples-{t}.bin", "ab") for t in self._tags]
        self._logs = [open(self.dir / f"latency-{t}.hlog", "a") for t in self._tags]
        for log, t in zip(self._logs, self._tags):
            log.write(interval_log_header(wall_start_s, t))
            log.flush()
        self._counters = open(self.dir / "counters.jsonl", "a")

    @_guarded
    def samples(self, member: int, rows: np.ndarray) -> None:
        if self._samples and len(rows):
            self._samples[member].write(rows.tobytes())
            self._samples[member].flush()

    @_guarded
    def intervals(self, member: int, done: dict[int, _core.Histogram]) -> None:
        """Finished intervals of one agent; each is written once."""
        if not self._logs:
            return
        for index in sorted(done):
            if (member, index) not in self._written:
                self._written.add((member, index))
                self._logs[member].write(interval_log_line(index, done[index], self._tags[member]))
        self._logs[member].flush()

    @_guarded
    def counters(self, address: str, counters: dict | None = None, error: str | None = None) -> None:
        if self._counters is None:
            return
        line = {"t_s": round(time.monotonic() - self._start_s, 3), "agent": address}
        line |= {"error": error} if error is not None else {"counters": counters}
        self._counters.write(json.dumps(line) + "\n")
        self._counters.flush()

    def sample_files(self) -> list[Path] | None:
        """Every agent's rows as they came (``samples-TAG.bin``): what the results directory's
        samples file is written from. None when the journal never began or was given up."""
        if self.error is not None or not self._tags:
            return None
        return [self.dir / f"samples-{t}.bin" for t in self._tags]

    @_guarded
    def close(self) -> None:
        for f in [*self._samples, *self._logs, *([self._counters] if self._counters else [])]:
            f.close()
        self._samples, self._logs, self._counters = [], [], None


def read_samples(directory: Path) -> dict[str, np.ndarray]:
    """A journal's rows by agent address (what a user does with one, and the tests)."""
    doc = json.loads((Path(directory) / "format.json").read_text())
    dtype = np.dtype(doc["sample_dtype"])
    return {a["address"]: np.fromfile(Path(directory) / a["samples"], dtype=dtype) for a in doc["agents"]}
