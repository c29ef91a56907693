"""HDR histograms for the statistics: the ``hdrhistogram`` crate's, through ``_core.Histogram``.

The engine's every-request histograms (HdrHistogram V2 compressed bytes) are decoded, added,
subtracted and read by the crate, so that nothing here re-implements HdrHistogram's buckets.
Percentiles are read as Java HdrHistogram's ``getValueAtPercentile`` reads them (the highest
value equivalent to the ⌈p/100 · N⌉-th smallest, Tene, HdrHistogram): ``_core`` walks the
crate's buckets with Java's rank, since the crate's own ``value_at_quantile`` can land one
request higher (crates/tailwise-py/src/hist.rs, ``java_rank``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tailwise import _core


def java_rank(p: float, n: int) -> int:
    """The rank (1-based) of the p-th percentile (0–100) of n values as Java HdrHistogram's
    ``getValueAtPercentile`` takes it: p one ulp less, then ⌈p/100 · n⌉, at least 1."""
    return max(1, math.ceil(min(max(math.nextafter(p, -math.inf), 0.0), 100.0) * n / 100.0))


def decode(raw: bytes) -> _core.Histogram:
    """HdrHistogram V2 compressed bytes (from the engine) → the crate's histogram."""
    return _core.Histogram.decode(raw)


@dataclass
class Buckets:
    """The every-request distribution of a window, as the statistics read it."""

    hist: _core.Histogram

    @classmethod
    def of(cls, h: _core.Histogram) -> Buckets:
        return cls(h)

    @classmethod
    def of_values(cls, values_ns: np.ndarray, lowest: int = _core.HIST_LOWEST_NS, highest: int = _core.HIST_MAX_NS,
                  digits: int = _core.INTERVAL_SIGFIG) -> Buckets:
        """The interval histogram the engine would have recorded for these values (tests, replays)."""
        h = _core.Histogram(lowest, highest, digits)
        h.record_values(np.clip(np.asarray(values_ns, dtype=np.int64), 0, None).tolist())
        return cls(h)

    @property
    def total(self) -> int:
        return self.hist.total

    def minus(self, other: Buckets) -> Buckets:
        """These counts less another histogram's (the crate's subtraction: ValueError when a bucket
        of ``other`` holds more than this one's)."""
        h = self.hist.copy()
        h.subtract(other.hist)
        return Buckets(h)

    def value_at(self, p: float) -> int | None:
        """The p-th percentile (0–100), as HdrHistogram reads it; None when empty."""
        return self.hist.value_at_percentile(p) if self.hist.total > 0 else None


@dataclass
class LinearHistogram:
    """Packet mode's every answered packet at ``bin_ns`` (100 ns: KBNets'17 §3's granularity,
    crates/tailwise-core/src/record/linear.rs): ``counts[i]`` answers in [i·bin_ns, (i+1)·bin_ns),
    ``above`` at or beyond ``range_ns`` (the HDR histogram has those at 0.1 %)."""

    bin_ns: int
    range_ns: int
    counts: np.ndarray
    above: int

    @classmethod
    def from_engine(cls, raw: dict | None) -> LinearHistogram | None:
        """The engine's ``packet_hist`` (its bins as little-endian u64 up to the last counted)."""
        if raw is None:
            return None
        return cls(int(raw["bin_ns"]), int(raw["range_ns"]), np.frombuffer(raw["counts"], dtype="<u8"), int(raw["above"]))

    @classmethod
    def merged(cls, hists: list[LinearHistogram]) -> LinearHistogram | None:
        """Several engines' histograms (a run's agents) as one: the same bins, their counts added
        bin by bin, ``above`` added; None when there is none."""
        if not hists:
            return None
        if len({(h.bin_ns, h.range_ns) for h in hists}) > 1:
            raise ValueError(f"packet histograms of different bins: {[(h.bin_ns, h.range_ns) for h in hists]}")
        counts = np.zeros(max(len(h.counts) for h in hists), dtype="<u8")
        for h in hists:
            counts[:len(h.counts)] += h.counts
        return cls(hists[0].bin_ns, hists[0].range_ns, counts, sum(h.above for h in hists))

    def to_engine(self) -> dict:
        """The engine's ``packet_hist`` form again (``from_engine``'s inverse)."""
        return {"bin_ns": self.bin_ns, "range_ns": self.range_ns, "counts": self.counts.astype("<u8").tobytes(),
                "above": self.above}

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.above

    @property
    def max_ns(self) -> int | None:
        """The top of the highest bin counted (None above the range or when empty)."""
        return None if self.above or not len(self.counts) else len(self.counts) * self.bin_ns - 1

    def values_at_percentiles(self, ps) -> list[int | None]:
        """The ⌈p/100 · N⌉-th smallest answer's bin, read as its highest value (as HDR reads a
        bucket, stats/histogram.py): never below the answer. None where that rank is above the
        range or nothing was answered."""
        n = self.total
        cum = np.cumsum(self.counts)
        out: list[int | None] = []
        for p in ps:
            i = int(np.searchsorted(cum, java_rank(p, n))) if n else len(cum)
            out.append((i + 1) * self.bin_ns - 1 if i < len(cum) else None)
        return out

    def rows(self) -> list[tuple[int, int, int]]:
        """(low_ns, high_ns, count) of each counted bin, ascending."""
        return [(int(i) * self.bin_ns, (int(i) + 1) * self.bin_ns - 1, int(self.counts[i]))
                for i in np.flatnonzero(self.counts)]
