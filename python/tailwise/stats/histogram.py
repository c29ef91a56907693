"""HDR histograms as numpy arrays: bucket counts that can be added, subtracted and read.

The engine's every-request histograms (HdrHistogram V2, decoded with ``hdrh``) are turned into
``Buckets`` — each bucket's lowest and highest equivalent value and its count — so that the
coordinator can take the sampled excluded requests out of the every-request distribution
bucket by bucket (``hdrh`` has no subtraction) and read percentiles as HdrHistogram does: the
highest equivalent value of the bucket in which the cumulative count first reaches
⌈p/100 · N⌉ (Tene, HdrHistogram, ``getValueAtPercentile``).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from hdrh.histogram import HdrHistogram

from tailwise import _core


def decode(raw: bytes) -> HdrHistogram:
    """HdrHistogram V2 compressed bytes (from the engine) → an hdrh histogram."""
    return HdrHistogram.decode(base64.b64encode(raw))


@lru_cache(maxsize=8)
def _bounds(lowest: int, highest: int, digits: int) -> tuple[np.ndarray, np.ndarray]:
    h = HdrHistogram(lowest, highest, digits)
    values = [h.get_value_from_index(i) for i in range(h.counts_len)]
    low = np.array([h.get_lowest_equivalent_value(v) for v in values], dtype=np.int64)
    high = np.array([h.get_highest_equivalent_value(v) for v in values], dtype=np.int64)
    return low, high


@dataclass
class Buckets:
    low: np.ndarray  # lowest equivalent value of each bucket (ns), increasing
    high: np.ndarray  # highest equivalent value of each bucket (ns)
    counts: np.ndarray  # float: subtraction of estimated counts may leave fractions

    @classmethod
    def of(cls, h: HdrHistogram) -> Buckets:
        low, high = _bounds(h.lowest_trackable_value, h.highest_trackable_value, h.significant_figures)
        counts = np.array([h.get_count_at_index(i) for i in range(h.counts_len)], dtype=float)
        return cls(low, high, counts)

    @classmethod
    def of_values(cls, values_ns: np.ndarray, lowest: int = _core.HIST_LOWEST_NS, highest: int = _core.HIST_MAX_NS,
                  digits: int = _core.INTERVAL_SIGFIG) -> Buckets:
        """The interval histogram the engine would have recorded for these values (tests, replays)."""
        low, high = _bounds(lowest, highest, digits)
        b = cls(low, high, np.zeros(len(low)))
        b.counts = np.bincount(b.index(values_ns), minlength=len(low)).astype(float)
        return b

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    def index(self, values_ns: np.ndarray) -> np.ndarray:
        """The bucket of each value."""
        v = np.clip(np.asarray(values_ns, dtype=np.int64), self.low[0], self.high[-1])
        return np.searchsorted(self.low, v, side="right") - 1

    def minus(self, values_ns: np.ndarray, weight: float) -> Buckets:
        """These buckets less ``weight`` counts per value (clipped at zero)."""
        take = np.bincount(self.index(values_ns), minlength=len(self.counts)) * float(weight)
        return Buckets(self.low, self.high, np.clip(self.counts - take, 0.0, None))

    def value_at(self, p: float) -> float | None:
        """The p-th percentile (0–100), as HdrHistogram reads it; None when empty."""
        total = self.total
        if total <= 0:
            return None
        target = max(1.0, math.ceil(min(max(p, 0.0), 100.0) / 100.0 * total - 1e-9))
        i = int(np.searchsorted(np.cumsum(self.counts), target - 1e-9))
        return float(self.high[min(i, len(self.high) - 1)])
