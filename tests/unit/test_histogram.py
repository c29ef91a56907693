"""Issue 20, item 6: the HDR histograms of the statistics are the ``hdrhistogram`` crate's
(``_core.Histogram``, stats/histogram.py): its buckets, addition and subtraction, and percentiles
read as Java HdrHistogram's ``getValueAtPercentile`` reads them — checked against exact
arithmetic on small histograms, against the crate's own bookkeeping and against Python's ``hdrh``
(an independent implementation of the same buckets)."""

from __future__ import annotations

import base64
import math
from fractions import Fraction

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from tailwise import _core
from tailwise.stats.histogram import Buckets, LinearHistogram, decode

LOWEST, HIGHEST = _core.HIST_LOWEST_NS, _core.HIST_MAX_NS
PS = [0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0]


def exact_value(values: list[int], p: float, h: _core.Histogram) -> int:
    """The highest value equivalent to the ⌈p/100 · N⌉-th smallest (at least the first), in exact
    decimal arithmetic."""
    ordered = sorted(values)
    rank = max(1, math.ceil(Fraction(str(p)) * len(ordered) / 100))
    return h.highest_equivalent(ordered[rank - 1])


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 101, 999, 1000, 1001, 10_000])
@pytest.mark.parametrize("digits", [2, 3])
def test_percentiles_are_the_exact_rank_of_java(n, digits):
    # Values far enough apart that each has a bucket of its own: the rank alone decides.
    values = [1_000 + 50 * i for i in range(n)]
    h = _core.Histogram(LOWEST, HIGHEST, digits)
    h.record_values(values)
    assert h.total == n
    got = h.values_at_percentiles(PS)
    for p, v in zip(PS, got):
        assert v == exact_value(values, p, h) == h.value_at_percentile(p), (n, p)


def test_p999_of_1000_is_the_999th_request_not_the_1000th():
    # (99.9 / 100) · 1000 is 1000.0000000000001 in floating point: the crate's value_at_quantile
    # would read the 1000th; Java's (and so tailwise's) the 999th.
    h = _core.Histogram(LOWEST, HIGHEST, 3)
    h.record(10_000, 999)
    h.record(5_000_000)
    assert h.value_at_percentile(99.9) == h.highest_equivalent(10_000)
    assert h.value_at_percentile(100.0) == h.max == h.highest_equivalent(5_000_000)
    assert h.value_at_percentile(0.0) == h.min == h.lowest_equivalent(10_000)


def test_empty_histograms_read_none_in_the_statistics():
    b = Buckets.of_values(np.array([], dtype=np.int64))
    assert b.total == 0 and b.value_at(99) is None
    assert _core.Histogram(LOWEST, HIGHEST, 2).value_at_percentile(50) == 0


def test_buckets_and_counts_are_hdrh_s():
    rng = np.random.default_rng(7)
    values = rng.lognormal(11, 1.5, 20_000).astype(np.int64)
    for digits in (2, 3):
        ours = _core.Histogram(LOWEST, HIGHEST, digits)
        ours.record_values(values.tolist())
        theirs = HdrHistogram(LOWEST, HIGHEST, digits)
        for v in values:
            theirs.record_value(int(v))
        assert ours.recorded() == [(it.value_iterated_to, it.count_at_value_iterated_to)
                                   for it in theirs.get_recorded_iterator()]
        assert (ours.total, ours.min, ours.max) == (theirs.get_total_count(), theirs.get_min_value(),
                                                    theirs.get_max_value())
        # The same histogram through either encoding.
        assert decode(base64.b64decode(theirs.encode())).recorded() == ours.recorded()
        back = HdrHistogram.decode(base64.b64encode(ours.encode()))
        assert back.get_total_count() == ours.total and back.get_max_value() == ours.max


def test_addition_and_subtraction_are_the_crates():
    a, b = _core.Histogram(LOWEST, HIGHEST, 2), _core.Histogram(LOWEST, HIGHEST, 2)
    a.record_values([10, 20, 20, 3_000, 70_000])
    b.record_values([20, 3_001, 9_000_000])
    both = a.copy()
    both.add(b)
    assert both.total == a.total + b.total and both.max == b.max
    # (a + b) − b is a, bucket by bucket.
    back = Buckets(both).minus(Buckets(b))
    assert back.hist.recorded() == a.recorded() and both.total == 8
    # More taken than there is: refused, and nothing taken.
    before = a.recorded()
    with pytest.raises(ValueError):
        a.subtract(b)
    assert a.recorded() == before


def test_of_values_records_what_the_engine_would():
    values = np.array([0, 1, 5, 1_000, 1_009, 1_010, HIGHEST * 2], dtype=np.int64)
    b = Buckets.of_values(values)
    assert b.total == len(values) and b.hist.digits == _core.INTERVAL_SIGFIG
    # Above the range counts at its top, as the engine's saturating record does.
    assert b.hist.max == b.hist.highest_equivalent(HIGHEST)
    assert b.value_at(50) == b.hist.highest_equivalent(1_000)


def test_decode_refuses_what_is_not_a_histogram():
    with pytest.raises(ValueError):
        decode(b"not a histogram")


# Packet mode's every-packet histogram at 100 ns (record/linear.rs, stats/histogram.LinearHistogram).

def _linear(values: list[int], bin_ns: int = 100, range_ns: int = 10_000_000) -> LinearHistogram:
    counts = np.zeros(range_ns // bin_ns, dtype="<u8")
    inside = [v for v in values if v < range_ns]
    np.add.at(counts, np.asarray(inside, dtype=np.int64) // bin_ns, 1)
    last = int(np.flatnonzero(counts)[-1]) + 1 if inside else 0
    raw = {"bin_ns": bin_ns, "range_ns": range_ns, "counts": counts[:last].tobytes(), "above": len(values) - len(inside)}
    return LinearHistogram.from_engine(raw)


def test_linear_percentiles_are_the_exact_answer_binned_at_100ns():
    rng = np.random.default_rng(7)
    values = (rng.lognormal(np.log(20_000), 0.8, 30_001)).astype(np.int64).tolist()
    values = [v for v in values if v < 10_000_000]
    h = _linear(values)
    assert h.total == len(values) and h.above == 0 and h.max_ns == (max(values) // 100 + 1) * 100 - 1
    ordered = sorted(values)
    for p, got in zip(PS + [99.999], h.values_at_percentiles(PS + [99.999])):
        exact = ordered[max(1, math.ceil(Fraction(str(p)) * len(ordered) / 100)) - 1]
        assert got == exact // 100 * 100 + 99, p  # its bin's highest value: never below, < 100 ns above
    assert sum(n for _, _, n in h.rows()) == len(values)


def test_linear_percentiles_above_the_range_are_not_given():
    h = _linear([1_000] * 98 + [20_000_000] * 2)
    assert h.values_at_percentiles([98.0, 98.5, 100.0]) == [1_099, None, None]
    assert (h.above, h.max_ns, h.total) == (2, None, 100)
    assert _linear([]).values_at_percentiles([50.0]) == [None]


def test_linear_histograms_of_several_agents_merge_into_the_pooled_one():
    rng = np.random.default_rng(11)
    parts = [rng.integers(0, 300_000, n).tolist() for n in (5_000, 17)] + [[20_000_000, 50]]
    merged = LinearHistogram.merged([_linear(v) for v in parts])
    pooled = _linear([v for vs in parts for v in vs])
    assert (merged.total, merged.above) == (pooled.total, pooled.above) == (5_019, 1)
    assert np.array_equal(merged.counts, pooled.counts)
    again = LinearHistogram.from_engine(merged.to_engine())
    assert np.array_equal(again.counts, pooled.counts) and again.above == 1
    assert LinearHistogram.merged([]) is None
    with pytest.raises(ValueError, match="different bins"):
        LinearHistogram.merged([_linear([1]), _linear([1], bin_ns=1_000)])
