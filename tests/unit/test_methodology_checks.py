"""The checks of the methodology and the analysis' state machine, on synthetic arrays with known
answers (no sockets). The statistics behind them are tested in test_stats.py; the exclusion rule
in test_delays.py."""

import numpy as np
import pytest

from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.spec.precision import Precision
from tailwise.methodology.checks import confidence_check, errors_check, rate_check
from tailwise.methodology.words import remedy_words
from tailwise.stats.arrivals import arrival_fit
from tailwise.stats.histogram import Buckets
from tailwise.stats.quantiles import percentile_ci

RNG_SEED = 20261122


@pytest.fixture
def rng():
    return np.random.default_rng(RNG_SEED)


# --- every figure agrees with its mark --------------------------------------------------------

def test_arrivals_detail_agrees_with_its_verdict(rng):
    sent = np.cumsum(rng.exponential(50_000, 20_000)).astype(np.int64)
    good = arrival_fit(sent + rng.integers(0, 5_000, len(sent)), sent, process="exp", rate_rps=20_000,
                       late_fraction=0.0, rng=rng)
    assert good.ok and "passes" in good.detail and "fails" not in good.detail
    late = arrival_fit(sent, sent, process="exp", rate_rps=20_000, late_fraction=0.2, rng=rng)
    assert not late.ok and "fail" in late.detail


def test_errors_check_counts_agree_with_the_counters():
    c = {"intended": 1000, "sent": 990, "received": 950, "errors": 0, "timeouts": 0, "never_sent": 10,
         "unfinished": 40}
    chk = errors_check(c, [])
    assert chk.ok and "950 of 990 sent requests answered" in chk.detail
    assert "40 outstanding when the run was stopped" in chk.detail and "10 never sent" in chk.detail
    bad = errors_check(c | {"timeouts": 5, "received": 945}, [("no reply within 1000 ms", 5)])
    assert not bad.ok and "5 timeouts" in bad.detail and bad.remedy


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


def test_confidence_without_an_interval_says_why():
    """No interval for a cause other than too few samples: the detail names the cause, never a
    negative number of samples or seconds still needed."""
    from tailwise.stats.quantiles import Percentile
    correlated, need = confidence_check(Percentile(99, 50_000.0, None, None, None), 500_000, 0.95, 1e4, 1e5)
    assert not correlated.ok and need is None
    assert "correlated beyond every lag" in correlated.detail and "-" not in correlated.detail.split("µs")[1]
    censored, need = confidence_check(Percentile(99, 50_000.0, 40_000.0, None, 5_000.0, None, True), 500_000, 0.95,
                                      1e4, 1e5)
    assert not censored.ok and need is None and "no upper bound" in censored.detail
    assert "--timeout" in remedy_words(censored.remedy)


def test_closed_loop_shortfall_names_connections_needed():
    c = rate_check(50_000, 20_000, 20_000, 5.0, conns=1, outstanding=1, response_ns=40_000)
    assert not c.ok and "closed loop: too few connections" in c.detail
    assert "--conns 4" in remedy_words(c.remedy)  # 50k/s × 40 µs = 2 in flight, ×2 headroom / 1 outstanding
    assert rate_check(50_000, 50_000, 50_000, 5.0, conns=16, outstanding=4, response_ns=40_000).ok


def test_a_send_shortfall_the_requests_never_sent_explain_is_the_targets():
    """A target that held every slot past --timeout: the requests due meanwhile were never sent
    (they wait in the backlog only for a free slot). The rate check names the target, never the
    client (issue 32)."""
    from tailwise.methodology.remedies import Advice

    held = rate_check(10_000, 9_000, 9_000, 5.0, conns=16, outstanding=4, response_ns=30_000, never_sent=5_000)
    assert not held.ok and held.remedy is Advice.SERVER_BEHIND and "every slot" in held.detail
    behind = rate_check(10_000, 9_000, 9_000, 5.0, conns=16, outstanding=4, response_ns=30_000, never_sent=100)
    assert not behind.ok and behind.remedy is Advice.CLIENT_COULD_NOT_SEND


def test_analysis_names_the_first_failing_step(rng):
    n = 30_000
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(50_000, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + 300
    s["latency_ns"] = (20_000 + rng.exponential(10_000, n)).astype(np.uint64)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    t = s["intended_ns"].astype(np.int64)

    def run(samples, precision):
        lat = samples["latency_ns"].astype(np.int64)
        plan = RunPlan(precision, rate_rps=20_000, arrival="exp", conns=8, outstanding=4, sample_every=1)
        return analyse(AnalysisInput(
            plan, samples, c, elapsed_s=n / 20_000, received_in_window=n, rng=rng, end_ns=int(t[-1]) + 1,
            every_request=lambda f, l: Buckets.of_values(lat[(t >= f * 100_000_000) & (t < l * 100_000_000)])))

    good = run(s, Precision(ci_rel=0.2))
    assert good.state == "done", [ch.detail for ch in good.failed()]
    assert good.target.low <= good.target.value <= good.target.high
    tight = run(s, Precision(ci_ns=1.0))
    assert tight.state == "confidence" and tight.samples_needed > n
    s["latency_ns"][n // 2:] += 8_000
    shifted = run(s, Precision(ci_rel=0.2))
    assert shifted.state == "stationarity"
