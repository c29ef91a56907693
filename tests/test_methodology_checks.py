"""Every check of the methodology on synthetic arrays with known answers (no sockets)."""

import math

import numpy as np
import pytest

from tailwise.agent import SAMPLE_DTYPE
from tailwise.methodology.analysis import Precision, analyse
from tailwise.methodology.checks import confidence_check, rate_check
from tailwise.stats.arrivals import arrival_fit
from tailwise.stats.independence import independence, thin
from tailwise.stats.quantiles import percentile_ci
from tailwise.stats.stationarity import stationarity

RNG_SEED = 20261122


@pytest.fixture
def rng():
    return np.random.default_rng(RNG_SEED)


# --- arrivals ---------------------------------------------------------------------------------

def test_poisson_sends_pass_and_thinned_poisson_too(rng):
    sent = np.cumsum(rng.exponential(50_000, 50_000)).astype(np.int64)
    assert arrival_fit(sent, sent, process="exp", rate_rps=20_000, late_fraction=0.0, rng=rng).ok
    # A random 1-in-5 subset of a Poisson process is Poisson (the engine's sampling).
    kept = sent[rng.random(len(sent)) < 0.2]
    fit = arrival_fit(kept, kept, process="exp", rate_rps=20_000, late_fraction=0.0, rng=rng)
    assert fit.ok and abs(fit.cv - 1) < 0.05


@pytest.mark.parametrize("gaps", ["fixed", "lognormal"])
def test_non_poisson_sends_fail(rng, gaps):
    g = np.full(20_000, 50_000.0) if gaps == "fixed" else rng.lognormal(10, 1.5, 20_000)
    sent = np.cumsum(g).astype(np.int64)
    fit = arrival_fit(sent, sent, process="exp", rate_rps=20_000, late_fraction=0.0, rng=rng)
    assert not fit.ok and fit.pvalue <= 0.01 and abs(fit.cv - 1) > 0.05


def test_one_long_stall_does_not_fail_poisson(rng):
    g = rng.exponential(50_000, 50_000)
    g[25_000] = 4_000_000  # a 4 ms preemption: one long gap, then a burst of zero gaps
    g[25_001:25_080] = 0.0
    sent = np.cumsum(g).astype(np.int64)
    assert arrival_fit(sent, sent, process="exp", rate_rps=20_000, late_fraction=0.0, rng=rng).ok


def test_timer_granularity_at_large_n_does_not_fail_poisson(rng):
    # 200k sends, 10 % of them leaving in the same loop iteration as the previous one (gap 0):
    # an exact test on all gaps would reject; the left-truncation and the subsample keep it.
    g = rng.exponential(10_000, 200_000)
    g[rng.random(len(g)) < 0.1] = 0.0
    sent = np.cumsum(g).astype(np.int64)
    assert arrival_fit(sent, sent, process="exp", rate_rps=100_000, late_fraction=0.0, rng=rng).ok


def test_a_client_that_falls_behind_fails_arrivals(rng):
    sent = np.cumsum(rng.exponential(50_000, 20_000)).astype(np.int64)
    fit = arrival_fit(sent, sent, process="exp", rate_rps=20_000, late_fraction=0.2, rng=rng)
    assert not fit.ok and "20.0% of requests sent late" in fit.detail


def test_fixed_arrivals_judged_by_send_lag(rng):
    intended = np.arange(10_000, dtype=np.int64) * 100_000
    assert arrival_fit(intended + 500, intended, process="fixed", rate_rps=10_000, late_fraction=0, rng=rng).ok
    assert not arrival_fit(intended + 50_000, intended, process="fixed", rate_rps=10_000, late_fraction=0, rng=rng).ok


# --- stationarity -----------------------------------------------------------------------------

def _times(n):
    return np.arange(n, dtype=np.int64) * 50_000


def test_iid_latencies_are_stationary(rng):
    st = stationarity(_times(40_000), 20_000 + rng.exponential(10_000, 40_000))
    assert st.ok and st.warmup_windows == 0


def test_level_shift_is_not_stationary(rng):
    lat = 20_000 + rng.exponential(10_000, 40_000)
    lat[20_000:] += 5_000  # +25 % of the mean halfway
    st = stationarity(_times(40_000), lat)
    assert not st.ok and "level shifts" in st.detail


def test_a_drift_too_small_to_matter_passes_with_its_size(rng):
    # 400k samples: KPSS rejects a 2 % drift of the level, which no precision asked would notice.
    n = 400_000
    lat = 20_000 + rng.exponential(10_000, n) + np.linspace(0, 600, n)
    st = stationarity(_times(n), lat)
    assert st.kpss_p < 0.05 and st.ok, st.detail
    assert "drifts by" in st.detail and "only" in st.detail


def test_warm_up_is_trimmed_and_reported(rng):
    lat = 20_000 + rng.exponential(10_000, 40_000)
    lat[:3_000] += np.linspace(60_000, 0, 3_000)  # cold start
    st = stationarity(_times(40_000), lat)
    assert st.ok and st.warmup_windows > 0 and st.warmup_ns > 0


def test_a_stall_mid_run_is_a_transient(rng):
    lat = 20_000 + rng.exponential(10_000, 60_000)
    lat[30_000:32_000] += np.linspace(100_000_000, 0, 2_000)  # a 100 ms pause, then drain
    st = stationarity(_times(60_000), lat)
    assert not st.ok and st.concentration >= 5 and "transient" in st.detail


def test_frozen_warm_up_is_not_re_trimmed(rng):
    lat = 20_000 + rng.exponential(10_000, 40_000)
    lat[8_000:12_000] += 50_000
    assert not stationarity(_times(40_000), lat, fixed_start_ns=0).ok


# --- independence -----------------------------------------------------------------------------

def test_iid_needs_no_thinning(rng):
    ind = independence(rng.exponential(size=50_000), 99)
    assert ind.ok and ind.step == 1


def test_ar1_is_thinned_until_the_indicator_decorrelates(rng):
    n, phi = 200_000, 0.95
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    ind = independence(x, 50)
    # The median indicator of a Gaussian AR(1) has correlation (2/π)·asin(φ^ℓ) at lag ℓ.
    lag_theory = next(l for l in range(1, 1000) if 2 / math.pi * math.asin(phi ** l) < 0.05)
    assert ind.ok and abs(ind.step - lag_theory) <= 0.25 * lag_theory, (ind.step, lag_theory)
    kept = x[thin(n, ind.step, rng)]
    assert independence(kept, 50).step == 1


def test_correlation_beyond_reach_fails(rng):
    x = np.repeat(rng.normal(size=20), 500)  # 20 long plateaus
    assert not independence(x, 90).ok


# --- confidence and rate ----------------------------------------------------------------------

def test_confidence_width_and_samples_needed(rng):
    x = np.sort(rng.exponential(10_000, 10_000))
    pc = percentile_ci(x, 99)
    width = pc.high - pc.low
    ok, _ = confidence_check(pc, len(x), 0.95, width * 1.01)
    bad, need = confidence_check(pc, len(x), 0.95, width / 2)
    assert ok.ok and not bad.ok
    assert 3.5 * len(x) < need < 5 * len(x)  # half the width needs ~4× the samples
    few, need_few = confidence_check(percentile_ci(x[:100], 99), 100, 0.95, 1e9)
    assert not few.ok and "368" in few.detail and need_few >= 368


def test_closed_loop_shortfall_names_connections_needed():
    c = rate_check(50_000, 20_000, 20_000, 5.0, conns=1, outstanding=1, response_ns=40_000)
    assert not c.ok and "closed loop: too few connections" in c.detail
    assert "--conns 4" in c.remedy  # 50k/s × 40 µs = 2 in flight, ×2 headroom / 1 outstanding
    assert rate_check(50_000, 50_000, 50_000, 5.0, conns=16, outstanding=4, response_ns=40_000).ok


def test_analysis_names_the_first_failing_step(rng):
    n = 30_000
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(50_000, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + 300
    s["latency_ns"] = (20_000 + rng.exponential(10_000, n)).astype(np.uint64)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    kw = dict(counters=c, elapsed_s=n / 20_000, received_in_window=n, reasons=[], rate_rps=20_000, arrival="exp",
              conns=8, outstanding=4, sample_every=1, rng=rng)
    good = analyse(s, precision=Precision(ci_rel=0.2), **kw)
    assert good.state == "done", [ch.detail for ch in good.failed()]
    assert good.target.low <= good.target.value <= good.target.high
    tight = analyse(s, precision=Precision(ci_ns=1.0), **kw)
    assert tight.state == "confidence" and tight.samples_needed > n
    s["latency_ns"][n // 2:] += 8_000
    shifted = analyse(s, precision=Precision(ci_rel=0.2), **kw)
    assert shifted.state == "stationarity"


# --- stalls of tailwise's own threads ---------------------------------------------------------

def _run_with_stalls(rng, n=40_000, stalls=(), gap_ns=50_000):
    """Samples of a steady M/M/1-like response, plus a ms-scale delay on every request intended
    within each stall (as a stalled engine or server would add)."""
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(gap_ns, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + 300
    lat = 20_000 + rng.exponential(10_000, n)
    t = s["intended_ns"].astype(np.int64)
    for a, b in stalls:
        hit = (t >= a - 30_000) & (t < b)
        lat[hit] += (b - t[hit]).clip(0)  # waits out the rest of the stall
    s["latency_ns"] = lat.astype(np.uint64)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    kw = dict(counters=c, elapsed_s=n * gap_ns / 1e9, received_in_window=n, reasons=[], rate_rps=1e9 / gap_ns,
              arrival="exp", conns=8, outstanding=4, sample_every=1, rng=rng, precision=Precision(ci_rel=0.2))
    return s, kw


def test_stalls_are_masked_and_reported(rng):
    # 20 stalls of 3 ms, one every 100 ms: ~1.5 % of requests delayed by up to 3 ms.
    stalls = [(int(k * 1e8), int(k * 1e8 + 3e6)) for k in range(1, 21)]
    s, kw = _run_with_stalls(rng, stalls=stalls)
    kept = analyse(s, stalls=stalls, mask_stalls=False, **kw)
    masked = analyse(s, stalls=stalls, **kw)
    clean = analyse(*_run_with_stalls(np.random.default_rng(RNG_SEED), stalls=())[:1], **kw)
    p99 = {name: next(p for p in a.percentiles if p.p == 99.0).value for name, a in
           (("kept", kept), ("masked", masked), ("clean", clean))}
    # Kept, the stalls own the tail; masked, p99 is the undisturbed process's again.
    assert p99["kept"] > 2 * p99["clean"]
    assert abs(p99["masked"] - p99["clean"]) < 0.1 * p99["clean"], p99
    chk = next(c for c in masked.checks if c.name == "stalls")
    assert chk.ok and "20 stalls" in chk.detail and "left out" in chk.detail
    assert masked.details["stalls"] == 20 and masked.details["stall_masked_samples"] > 0
    # Each window: 1 ms before, 6 ms (twice the stall) after: ~10 ms of 100 ms.
    assert 0.05 < masked.details["stall_masked_samples"] / len(s) < 0.15
    assert "kept in the statistics" in next(c for c in kept.checks if c.name == "stalls").detail


def test_a_machine_that_stalls_all_the_time_fails_the_stalls_check(rng):
    stalls = [(int(k * 5e6), int(k * 5e6 + 1e6)) for k in range(1, 400)]
    s, kw = _run_with_stalls(rng, stalls=stalls)
    a = analyse(s, stalls=stalls, **kw)
    chk = next(c for c in a.checks if c.name == "stalls")
    assert not chk.ok and chk.remedy and a.state == "load"
