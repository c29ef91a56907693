"""--threshold judged in process (threshold.py): on the whole confidence interval, and parsed with
one-line errors. The command line's exit codes, --quiet and the ETA: tests/e2e/test_threshold.py."""


import pytest

from tailwise.results.documents.latency import Percentile
from tailwise.errors import InputError
from tailwise.spec.threshold import FAIL, INCONCLUSIVE, PASS, Threshold, parse_all


@pytest.mark.parametrize("text,low,high,want", [
    ("p99<200us", 100_000, 199_999, PASS),
    ("p99<200us", 100_000, 200_000, INCONCLUSIVE),  # the upper bound must be below
    ("p99<=200us", 100_000, 200_000, PASS),
    ("p99<200us", 200_000, 300_000, FAIL),
    ("p99<200us", 150_000, 250_000, INCONCLUSIVE),
    ("p99<200us", None, None, INCONCLUSIVE),
    ("p99<200us", 100_000, None, INCONCLUSIVE),  # an unbounded CI cannot pass
    ("p99<200us", 250_000, None, FAIL),  # … but its lower bound can already miss
    ("p50>10us", 11_000, 20_000, PASS),
    ("p50>10us", 5_000, 9_000, FAIL),
    ("p50>=10us", 10_000, 20_000, PASS),
])
def test_a_threshold_is_judged_on_the_whole_interval(text, low, high, want):
    assert Threshold.parse(text).judge(low, high) == want


@pytest.mark.parametrize("text,want", [
    ("p99.99<1ms", FAIL),  # the samples show p99.99 ≥ 2 ms
    ("p99.99<5ms", INCONCLUSIVE),  # ≥ 2 ms says nothing against 5 ms
    ("p99.99>1ms", PASS),
])
def test_an_unsupported_percentile_is_judged_on_its_one_sided_bound(text, want):
    row = {"p": 99.99, "value_ns": None, "low_ns": None, "high_ns": None, "samples_needed": 36_887,
           "lower_bound_ns": 2_000_000}
    pct = Percentile.model_validate(row | {"n_effective": None, "censored": False})
    r = Threshold.parse(text).evaluate([pct]).to_json()
    assert r["status"] == want, r
    assert r["low_ns"] is None and r["value_ns"] is None  # the interval as reported: still none
    if want != INCONCLUSIVE:
        assert "p99.99 ≥ 2.00 ms (one-sided)" in r["detail"], r["detail"]


def test_threshold_parsing():
    t = Threshold.parse(" p99.9 <= 1.5ms ")
    assert (t.p, t.op, t.limit_ns) == (99.9, "<=", 1_500_000)
    for bad in ("99<1ms", "p99<", "p99~1ms", "p100<1ms", "p99<1", "p99<fast"):
        with pytest.raises(InputError):
            Threshold.parse(bad)
    with pytest.raises(InputError) as e:
        parse_all(["p95<1ms"], {50.0, 99.0})
    assert "--percentiles 50,95,99" in e.value.line()
