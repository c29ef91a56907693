"""Latency per kind of request (issue 36; methodology/kinds.py): on synthetic rows, each kind's
percentiles are the whole run's computation on its samples — numpy's exact percentile of the
subset, inside its interval — unsupported where the subset is too small, with censored and
delayed requests treated as the whole run treats them; the verdict stays the whole run's; and the
names a run's configuration gives its kinds."""

from __future__ import annotations

import numpy as np
import pytest

from tailwise.methodology.analysis import analyse
from tailwise.methodology.kinds import BY_REQUEST, BY_SET, Kinds, kinds_of
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.results.rows import SAMPLE_DTYPE, Flag
from tailwise.spec.load import LoadSpec, protocol
from tailwise.spec.precision import Precision
from tailwise.spec.workload import Workload

RATE = 20_000
GAP_NS = 1e9 / RATE


def rows(rng, n: int, kind: np.ndarray, *, base_ns: np.ndarray, set_flag: bool) -> np.ndarray:
    """``n`` requests at RATE, every one sampled; ``kind`` the kind of each, whose latency is
    ``base_ns[kind]`` plus an exponential tail (kinds differ, so a wrong subset shows)."""
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    t = np.cumsum(rng.exponential(GAP_NS, n)).astype(np.int64)
    lat = (base_ns[kind] + rng.exponential(10_000, n)).astype(np.int64)
    s["intended_ns"], s["sent_ns"], s["latency_ns"] = t, t + 300, lat
    s["rx_user_ns"], s["busy_from_ns"] = t + lat, t
    if set_flag:
        s["flags"] = np.where(kind == 1, int(Flag.SET), 0)
    else:
        s["request"] = kind
    return s


def analysis(s: np.ndarray, kinds: Kinds | None, *, per_kind: bool = True, stalls=(), bounds: str = "busy"):
    n = len(s)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    end = int(s["intended_ns"][-1]) + 1
    plan = RunPlan(Precision(ci_rel=0.5, warmup_ns=0), rate_rps=RATE, arrival="exp", conns=16, outstanding=4,
                   sample_every=1, late_ns=50_000, kinds=kinds, bounds=bounds)
    return analyse(AnalysisInput(plan, s, c, elapsed_s=end / 1e9, received_in_window=n, rng=np.random.default_rng(1),
                                 end_ns=end, engine_stalls=list(stalls), per_kind=per_kind))


def assert_exact_and_inside(k, lat: np.ndarray) -> None:
    """Each supported percentile of a kind is numpy's of its subset (the point estimate
    ``x(⌈np⌉)``: ``inverted_cdf``), inside its interval."""
    assert k.count == len(lat)
    for p in k.percentiles:
        if p.value is None:
            continue
        want = float(np.percentile(lat, p.p, method="inverted_cdf"))
        assert p.value == want, (k.name, p.p)
        if p.low is not None:
            assert p.low <= p.value, (k.name, p)
        if p.high is not None:
            assert p.value <= p.high, (k.name, p)


def test_gets_and_sets_each_get_the_whole_run_s_percentiles_of_their_own_samples():
    rng = np.random.default_rng(7)
    n = 40_000
    kind = (rng.random(n) < 0.1).astype(np.int64)  # one in ten a set
    s = rows(rng, n, kind, base_ns=np.array([20_000, 60_000]), set_flag=True)
    a = analysis(s, Kinds(("get", "set"), BY_SET))
    assert [k.name for k in a.by_request] == ["get", "set"]
    used = a.used_mask
    lat = s["latency_ns"].astype(np.int64)
    for k, mine in zip(a.by_request, (kind == 0, kind == 1)):
        assert_exact_and_inside(k, lat[used & mine])
    get, set_ = a.by_request
    assert get.count + set_.count == a.samples_used
    assert abs(get.share + set_.share - 1.0) < 1e-12 and abs(set_.share - 0.1) < 0.01
    # Sets are 40 µs slower here: their median says so, the whole run's lies between.
    med = {k.name: next(p.value for p in k.percentiles if p.p == 50.0) for k in a.by_request}
    whole = next(p.value for p in a.percentiles if p.p == 50.0)
    assert med["get"] < whole < med["set"]
    # ~4,000 sets bound p99.9 (3,688 needed at 95 %) but not p99.99: unsupported, as the whole run's
    # would be — no value, the samples it needs, and its one-sided lower bound.
    p9999 = next(p for p in set_.percentiles if p.p == 99.99)
    assert p9999.value is None and p9999.low is None and p9999.high is None
    assert p9999.samples_needed and p9999.samples_needed > set_.count
    assert p9999.lower_bound is not None


def test_the_verdict_and_the_whole_run_s_figures_do_not_change_with_kinds():
    rng = np.random.default_rng(8)
    n = 20_000
    kind = rng.integers(0, 3, n)
    s = rows(rng, n, kind, base_ns=np.array([20_000, 30_000, 90_000]), set_flag=False)
    names = ("GET /a", "POST /b", "GET /c")
    with_kinds = analysis(s, Kinds(names, BY_REQUEST))
    without = analysis(s, None)
    assert without.by_request is None
    assert with_kinds.verdict() == without.verdict()
    assert [c.as_json() for c in with_kinds.checks] == [c.as_json() for c in without.checks]
    assert with_kinds.percentiles == without.percentiles
    lat = s["latency_ns"].astype(np.int64)
    for i, k in enumerate(with_kinds.by_request):
        assert k.name == names[i]
        assert_exact_and_inside(k, lat[with_kinds.used_mask & (kind == i)])
    # A round's analysis only decides: no per-kind figures.
    assert analysis(s, Kinds(names, BY_REQUEST), per_kind=False).by_request is None


def test_a_kind_too_small_is_unsupported_and_an_absent_one_is_counted_zero():
    rng = np.random.default_rng(9)
    n = 20_000
    kind = np.where(rng.random(n) < 0.01, 1, 0)  # ~200 of the second request
    s = rows(rng, n, kind, base_ns=np.array([20_000, 40_000]), set_flag=False)
    a = analysis(s, Kinds(("GET /", "GET / #1", "DELETE /x"), BY_REQUEST))
    small, absent = a.by_request[1], a.by_request[2]
    p99 = next(p for p in small.percentiles if p.p == 99.0)
    assert small.count < 368 and p99.value is None and p99.samples_needed == 368  # ln(0.025)/ln(0.99)
    p50 = next(p for p in small.percentiles if p.p == 50.0)
    assert p50.value == float(np.percentile(s["latency_ns"][a.used_mask & (kind == 1)], 50, method="inverted_cdf"))
    assert absent.count == 0 and absent.share == 0.0
    assert all(p.value is None and p.samples_needed for p in absent.percentiles)


def test_censored_and_delayed_requests_of_a_kind_are_bounded_as_the_whole_run_s():
    rng = np.random.default_rng(10)
    n = 40_000
    kind = (rng.random(n) < 0.5).astype(np.int64)
    s = rows(rng, n, kind, base_ns=np.array([20_000, 20_000]), set_flag=True)
    t = s["intended_ns"].astype(np.int64)
    # Sets only: 300 unanswered after 1 µs (censored there: below the percentiles, so their true
    # values may lie above them), and a 2 ms engine stall sends late every request due in it
    # (ENGINE_STALL), as the engine flags them.
    sets = np.flatnonzero(kind == 1)
    cens = rng.choice(sets, 300, replace=False)
    s["flags"][cens] |= int(Flag.CENSORED | Flag.PENDING)
    s["latency_ns"][cens] = 1_000
    a0, b0 = int(t[n // 2]), int(t[n // 2]) + 2_000_000
    due = (t >= a0) & (t < b0)
    s["flags"][due] |= int(Flag.ENGINE_STALL)
    s["latency_ns"][due] += (b0 - t[due]).astype(np.uint64)
    a = analysis(s, Kinds(("get", "set"), BY_SET), stalls=[(a0, b0)], bounds="floor")
    get, set_ = a.by_request
    p99 = next(p for p in set_.percentiles if p.p == 99.0)
    assert p99.at_least, "censored sets can carry p99 of the sets past its interval: a lower bound"
    assert not any(p.at_least for p in get.percentiles), "the gets have none"
    for k in (get, set_):
        p99 = next(p for p in k.percentiles if p.p == 99.0)
        # The delayed requests widen the interval down to their lower bounds, never above sampling's.
        assert p99.value_low is not None and p99.value_low <= p99.value
        assert p99.low is not None and p99.low <= p99.sampling_low


def test_rows_of_an_engine_before_the_request_field_are_all_the_first_request():
    old = np.zeros(3, dtype=[("intended_ns", "<u8"), ("flags", "<u4")])
    masks = Kinds(("GET /a", "GET /b"), BY_REQUEST).masks(old)
    assert masks[0].all() and not masks[1].any()


@pytest.mark.parametrize(("scheme", "set_fraction", "requests", "want"), [
    ("memcached", 0.1, None, ("get", "set")),
    ("redis", 0.5, None, ("get", "set")),
    ("memcached", 0.0, None, None),
    ("redis", 1.0, None, None),
    ("http", 0.0, [{"method": "GET", "path": "/a"}], None),
    ("http", 0.0, [{"method": "GET", "path": "/a"}, {"method": "POST", "path": "/b"}, {"method": "GET", "path": "/a"}],
     ("GET /a #0", "POST /b", "GET /a #2")),
    ("synthetic", 0.5, None, None),
])
def test_a_run_s_kinds_are_named_from_its_configuration(scheme, set_fraction, requests, want):
    proto = (protocol("http", host="h", requests=requests) if scheme == "http" else
             protocol(scheme, service_ns=0) if scheme == "synthetic" else protocol(scheme))
    spec = LoadSpec(targets=["127.0.0.1:1"], rate_rps=1000.0, duration_ns=1, protocol=proto,
                    workload=Workload(set_fraction=set_fraction))
    kinds = kinds_of(spec)
    assert (kinds.names if kinds else None) == want
    if kinds:
        assert kinds.by == (BY_REQUEST if scheme == "http" else BY_SET)


def test_the_report_page_has_a_table_per_kind_when_there_are_several():
    """report.html's per-kind table (render/report/page.kinds_table): a row per kind and percentile."""
    import json
    from pathlib import Path

    from tailwise.render.report.page import _templates, kinds_table
    from tailwise.results.documents.run import Summary

    doc = json.loads((Path(__file__).parent / "screens" / "run-ok.json").read_text())  # a real run's
    assert kinds_table(Summary.model_validate(doc))["rows"] == []
    ps = doc["latency"]["percentiles"]
    doc["by_request"] = [{"name": "GET /a", "share": 0.75, "count": 1_500, "percentiles": ps},
                         {"name": "POST /b <x>", "share": 0.25, "count": 500, "percentiles": ps}]
    t = kinds_table(Summary.model_validate(doc))
    assert len(t["rows"]) == 2 * len(ps) and t["rows"][0][:4] == ["GET /a", "75.0%", "1,500", "p50"]
    html = _templates().from_string('{% from "macros.html.j2" import table %}{{ table(t) }}').render(t=t)
    assert "POST /b &lt;x&gt;" in html and 'id="by-request"' in html
