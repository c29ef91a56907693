"""What several agents collected, as one (agents/group.py's ``GroupSession`` merges with these).

* Histograms merged bucket by bucket, never percentiles averaged (``_merge_hist``); the
  every-request interval histograms kept as each agent sent them and every finished one added as
  it comes (``MergedIntervals``), each agent's own still readable (``MergedIntervals.member``).
* Counters added, times and maxima the largest agent's (``_add``, ``_counters``); error reasons
  added (``_add_reasons``); packet mode's per-interval counts and 100 ns bins added
  (``_packet_intervals``, ``_packet_hist``).
* The sampled rows pooled with their agent beside each one (``OWNED_DTYPE``: ``_owned``, split
  back by ``_unowned``), each agent's engine threads numbered apart from the others'
  (``_numbered``) so that the subsample's keys (stats/subsample.py) tell them apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise import _core
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.stats.histogram import LinearHistogram
from tailwise.stats.subsample import AGENT_THREADS

class MergedIntervals:
    """The every-request interval histograms of all agents, as ``_core.Intervals`` reads.

    Each agent's intervals are kept as they came, HdrHistogram V2 bytes (~200 B for 100 ms), not
    decoded (~36 KB each: a 1-hour run on two agents would hold 2.6 GB). Every finished interval
    is also added, as it comes, into one histogram of them all, so that the window asked most —
    the whole run so far: the live line, the rounds — decodes nothing more."""

    def __init__(self):
        self.done: dict[tuple[int, int], bytes] = {}
        self.pending: dict[tuple[int, int], bytes] = {}
        #: Every finished interval added; None when one came again changed (summed again when asked).
        self._all: _core.Histogram | None = _interval_histogram()
        self._indices: tuple[int, int] | None = None  # the lowest and highest finished index

    def update(self, member: int, meta: dict, parts: dict[str, bytes]) -> dict[int, _core.Histogram]:
        """One agent's snapshot: its finished intervals and those still open. Returns the finished
        intervals new or changed in it, decoded (what the journal writes)."""
        new = {}
        for i in meta.get("done", []):
            raw, before = parts[f"done:{i}"], self.done.get((member, i))
            if raw == before:
                continue
            new[i] = h = _core.Histogram.decode(raw)
            if before is not None:
                self._all = None
            elif self._all is not None:
                self._all.add(h)
            self.done[member, i] = raw
            lo, hi = self._indices or (i, i)
            self._indices = (min(lo, i), max(hi, i))
        if "pending" in meta:
            for key in [k for k in self.pending if k[0] == member]:
                del self.pending[key]
            for i in meta["pending"]:
                self.pending[member, i] = parts[f"pending:{i}"]
        return new

    def _merged(self, first: int, last: int, with_pending: bool) -> _core.Histogram:
        out = _interval_histogram()
        lo, hi = self._indices or (0, -1)
        if first <= lo and hi < last:
            if self._all is None:
                self._all = _interval_histogram()
                for raw in self.done.values():
                    self._all.add(_core.Histogram.decode(raw))
            out.add(self._all)
        else:
            for (_, i), raw in self.done.items():
                if first <= i < last:
                    out.add(_core.Histogram.decode(raw))
        for (_, i), raw in self.pending.items() if with_pending else ():
            if first <= i < last:
                out.add(_core.Histogram.decode(raw))
        return out

    def window(self, first: int, last: int, with_pending: bool = True) -> bytes:
        return self._merged(first, last, with_pending).encode()

    def log(self) -> list[tuple[int, bytes]]:
        """Each finished interval, every agent's requests in it added, in index order."""
        by_index: dict[int, list[bytes]] = {}
        for (_, i), raw in self.done.items():
            by_index.setdefault(i, []).append(raw)
        out = []
        for i in sorted(by_index):
            if len(raws := by_index[i]) == 1:
                out.append((i, raws[0]))
                continue
            h = _interval_histogram()
            for raw in raws:
                h.add(_core.Histogram.decode(raw))
            out.append((i, h.encode()))
        return out

    def member(self, member: int) -> MemberIntervals:
        """One agent's own interval histograms (its tagged interval log: results/summary.py)."""
        return MemberIntervals(self, member)


def _interval_histogram() -> _core.Histogram:
    return _core.Histogram(_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.INTERVAL_SIGFIG)


@dataclass(frozen=True)
class MemberIntervals:
    """One agent's finished interval histograms, read as ``Intervals.log()`` reads them."""

    merged: MergedIntervals
    member: int

    def log(self) -> list[tuple[int, bytes]]:
        return [(i, raw) for (m, i), raw in sorted(self.merged.done.items()) if m == self.member]


#: An agent's index beside each pooled row (``owner``): a run has a few agents, never 2¹⁶.
OWNER_DTYPE = np.uint16


def _concat(batches: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(batches) if batches else np.zeros(0, dtype=SAMPLE_DTYPE)


#: An engine row with its agent's index after it: what the group's subsample keeps.
OWNED_DTYPE = np.dtype({"names": [*SAMPLE_DTYPE.names, "owner"],
                        "formats": [*(SAMPLE_DTYPE.fields[n][0] for n in SAMPLE_DTYPE.names), OWNER_DTYPE],
                        "offsets": [*(SAMPLE_DTYPE.fields[n][1] for n in SAMPLE_DTYPE.names), SAMPLE_DTYPE.itemsize],
                        "itemsize": SAMPLE_DTYPE.itemsize + np.dtype(OWNER_DTYPE).itemsize})


def _numbered(rows: np.ndarray, member: int) -> np.ndarray:
    """An agent's rows with their engine threads numbered apart from the other agents' (its index
    × ``AGENT_THREADS`` + its thread): the subsample's key (stats/subsample.py) then tells two
    agents on the same schedule apart in every copy of the rows."""
    if not len(rows) or "thread" not in (rows.dtype.names or ()):
        return rows
    rows = rows.copy()
    rows["thread"] += np.uint32(member * AGENT_THREADS)
    return rows


def _owned(rows: np.ndarray, member: int) -> np.ndarray:
    """Engine rows of agent ``member``, each with its index (``OWNED_DTYPE``)."""
    out = np.zeros(len(rows), dtype=OWNED_DTYPE)
    for name in SAMPLE_DTYPE.names:
        out[name] = rows[name]
    out["owner"] = member
    return out


def _unowned(owned: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``OWNED_DTYPE`` rows split back into engine rows (``SAMPLE_DTYPE``, 64 bytes) and owners."""
    rows = np.zeros(len(owned), dtype=SAMPLE_DTYPE)
    for name in SAMPLE_DTYPE.names:
        rows[name] = owned[name]
    return rows, owned["owner"].copy()


#: Counters that are times or maxima, not counts: the group's is the largest agent's.
_LARGEST = ("elapsed_ns", "snap_ns", "reorder_max")


def _add(dicts: list[dict]) -> dict:
    """Counters of several agents as one: counts added, times the largest."""
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = max(out.get(k, 0), v) if k in _LARGEST else out.get(k, 0) + v
    return out


def _add_reasons(lists: list[list]) -> list[tuple[str, int]]:
    out: dict[str, int] = {}
    for reasons in lists:
        for reason, n in reasons:
            out[reason] = out.get(reason, 0) + n
    return list(out.items())


#: The engine's counters (join()'s): the run's are theirs added, every one present (an agent that
#: failed left only its last live counters, a subset).
COUNTERS = ("intended", "sent", "received", "late", "never_sent", "errors", "timeouts", "unfinished", "rx_kernel",
            "tx_kernel", "reconnects", "resent", "gets", "sets", "hits", "misses", "stored",
            "lost", "reordered", "reorder_max", "duplicates")


def _counters(dicts: list[dict]) -> dict:
    added = _add(dicts)
    return {k: added.get(k, 0) for k in COUNTERS}


def _merge_hist(raws: list[bytes | None]) -> bytes:
    out = _core.Histogram(_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.HIST_SIGFIG)
    for raw in raws:
        if raw:
            out.add(_core.Histogram.decode(raw))
    return out.encode()


def _packet_intervals(lists: list[list]) -> list[tuple[int, int, int, int, int, int]]:
    """Packet mode: the agents' counts per 100 ms interval of intended time, added interval by
    interval (their schedules start together, at the barrier)."""
    rows: dict[int, list[int]] = {}
    for agent_rows in lists:
        for index, *counts in agent_rows:
            rows[index] = [a + b for a, b in zip(rows.get(index, [0] * len(counts)), counts)]
    return [(i, *rows[i]) for i in sorted(rows)]


def _packet_hist(raws: list[tuple[dict | None, bytes | None]]) -> dict | None:
    """Packet mode: the agents' 100 ns histograms (each one's shape in its meta, its bins a part)
    added into one; None when no agent sent one (not packet mode), or when agents of different
    versions binned differently: the summary then reads the HDR histogram alone, and the measured
    run is not lost to a merge that cannot be made."""
    hists = [LinearHistogram.from_engine({**shape, "counts": counts or b""}) for shape, counts in raws if shape]
    if len({(h.bin_ns, h.range_ns) for h in hists}) > 1:
        return None
    merged = LinearHistogram.merged(hists)
    return None if merged is None else merged.to_engine()


def merged_tls(parts: list[dict | None]) -> dict | None:
    """Several agents' TLS handshakes as one (``AgentResult.tls``): the counts added, the
    handshake times pooled (their percentiles are taken over every agent's); None when no agent
    spoke TLS."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    return {"full": sum(p.get("full", 0) for p in parts), "resumed": sum(p.get("resumed", 0) for p in parts),
            "failed": sum(p.get("failed", 0) for p in parts),
            "handshake_ns": [int(v) for p in parts for v in p.get("handshake_ns") or ()]}
