"""`tailwise model`'s queueing model in process: against closed forms, its sequence in arrival
order, its input errors (the command line: tests/e2e/test_model.py).

Tolerances. A simulated queue's output is autocorrelated, so its estimates are much noisier than
n i.i.d. draws would be. Over 100 seeds, 2 M customers after 100 k warm-up (the default), the
relative standard deviation of the M/M/1 estimates at ρ = 0.5 is: mean 0.22 %, p50 0.21 %,
p90 0.26 %, p99 0.40 %, p99.9 1.0 %, p99.99 2.5 % (largest error seen 9.9 %); for the M/G/1 means
at ρ = 0.5 at most 0.43 % (lognormal σ = 1, 200 seeds), for the M/M/2 mean at ρ = 0.5 0.16 %. Each test
allows 4–5 of those standard deviations: a correct model passes whatever the seed, a wrong
formula (a factor 2 in P–K, λ off by k, E[S] for E[S²]) is off by 10 % or more.
"""

import math

import numpy as np
import pytest

from tailwise.errors import InputError
from tailwise.stats import DEFAULT_PERCENTILES
from tailwise.stats.model import (
    erlang_c_mean_ns,
    model_percentiles,
    pk_mean_ns,
    second_moment_ns2,
    sojourn_sequence,
)

#: The percentiles compared: those every summary reports.
PS = list(DEFAULT_PERCENTILES)


# uniform too: examples/workload.toml lists it for the built-in server, and `model` takes what `serve` takes.
@pytest.mark.parametrize("service", ["fixed:10us", "bimodal:10us", "uniform:5us:15us", "lognormal:10us:1.0"])
def test_mg1_mean_follows_pollaczek_khinchine(service):
    out = model_percentiles(service, 0.5, ps=[50, 99])
    assert out["mean_ns"] == pytest.approx(pk_mean_ns(service, 0.5), rel=0.02)
    assert out["analytic"]["formula"] == "Pollaczek–Khinchine"


def test_closed_forms():
    # E[S²]: fixed m², exp 2m², bimodal 10.9(m/1.9)², uniform on [a, b] (a² + ab + b²)/3, lognormal m²·e^{σ²}.
    m = 10_000.0
    assert second_moment_ns2("fixed:10us") == pytest.approx(m * m)
    assert second_moment_ns2("exp:10us") == pytest.approx(2 * m * m)
    assert second_moment_ns2("bimodal:19us") == pytest.approx(10.9 * 1e8)
    assert second_moment_ns2("lognormal:10us:1.0") == pytest.approx(m * m * math.e)
    assert second_moment_ns2("uniform:5us:15us") == pytest.approx((5**2 + 5 * 15 + 15**2) / 3 * 1e6)
    # M/D/1: E[T] = E[S] + ρE[S]/(2(1 − ρ)); M/M/1 through P–K: E[S]/(1 − ρ).
    assert pk_mean_ns("fixed:10us", 0.5) == pytest.approx(15_000)
    assert pk_mean_ns("exp:10us", 0.8) == pytest.approx(50_000)
    # Erlang C for one server is M/M/1; for two, C = 2ρ²/(1 + ρ).
    assert erlang_c_mean_ns(m, 0.8, 1) == pytest.approx(50_000)
    assert erlang_c_mean_ns(m, 0.5, 2) == pytest.approx(m + (2 * 0.25 / 1.5) * m / (2 * 0.5))


def test_sequence_is_the_same_path_in_arrival_order():
    kw = dict(service="lognormal:10us:1.0", load=0.7, workers=1, seed=5)
    x = sojourn_sequence(**kw, n=200_000, warmup=1_000)
    assert x.dtype == np.float64 and x.shape == (200_000,) and (x > 0).all()
    out = model_percentiles(**kw, n=200_000, warmup=1_000, ps=PS)
    want = np.percentile(x, PS, method="inverted_cdf")
    assert [p["value_ns"] for p in out["percentiles"]] == list(want)
    assert out["mean_ns"] == pytest.approx(x.mean(), rel=1e-12)
    # A queue's sojourn times are positively autocorrelated, unlike i.i.d. draws.
    assert np.corrcoef(x[:-1], x[1:])[0, 1] > 0.3
    # Two servers at the same arrival rate (per-server load halved) see the same arrivals and
    # service times (common random numbers): no customer stays longer than with one server.
    two = sojourn_sequence(**{**kw, "workers": 2, "load": 0.35}, n=200_000, warmup=1_000)
    assert (two <= x).all()


@pytest.mark.parametrize("kwargs", [
    dict(service="exp:10us", load=1.0), dict(service="exp:10us", load=float("nan")),
    dict(service="fixed:0", load=0.5), dict(service="exp:10us", load=0.5, workers=0),
    dict(service="exp:10us", load=0.5, n=0), dict(service="exp:10us", load=0.5, ps=[0]),
])
def test_api_bad_input_raises_input_error(kwargs):
    with pytest.raises(InputError):
        model_percentiles(**kwargs)
