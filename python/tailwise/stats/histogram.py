"""HDR histograms for the statistics: the ``hdrhistogram`` crate's, through ``_core.Histogram``.

The engine's every-request histograms (HdrHistogram V2 compressed bytes) are decoded, added,
subtracted and read by the crate, so that nothing here re-implements HdrHistogram's buckets.
Percentiles are read as Java HdrHistogram's ``getValueAtPercentile`` reads them (the highest
value equivalent to the ⌈p/100 · N⌉-th smallest, Tene, HdrHistogram): ``_core`` walks the
crate's buckets with Java's rank, since the crate's own ``value_at_quantile`` can land one
request higher (crates/tailwise-py/src/hist.rs, ``java_rank``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise import _core


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
