"""`tailwise model` from the command line: the queueing-model ground truth against closed forms,
and its errors (the model in process: tests/unit/test_model_closed_forms.py).

Tolerances: derived in tests/unit/test_model_closed_forms.py (4–5 standard deviations of the
simulated estimates over 100 seeds).
"""

import json
import math

import pytest
from support.cli import run_cli

from tailwise.stats.model import mm1_quantile_ns
from tailwise.stats import DEFAULT_PERCENTILES

#: The percentiles `tailwise model` reports.
PS = list(DEFAULT_PERCENTILES)
#: Relative tolerance per percentile for M/M/1 at ρ = 0.5 with the default 2 M customers.
MM1_TOL = {50: 0.01, 90: 0.012, 95: 0.015, 99: 0.02, 99.9: 0.05, 99.99: 0.12}


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert r.stdout == ""


def test_cli_json_is_mm1_within_tolerance_of_the_closed_form():
    r = run_cli("model", "--service", "exp:10us", "--load", "0.5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"percentiles", "mean_ns", "model", "load"} <= set(out)
    assert out["model"] == "M/G/1 (Lindley recursion)"
    assert out["load"] == 0.5 and out["workers"] == 1 and out["customers"] == 2_000_000
    assert out["rate_rps"] == pytest.approx(50_000)
    assert [p["p"] for p in out["percentiles"]] == PS
    for p in out["percentiles"]:
        assert set(p) == {"p", "value_ns"}
    values = [p["value_ns"] for p in out["percentiles"]]
    assert values == sorted(values)
    # M/M/1: the sojourn time is Exp(μ − λ), mean E[S]/(1 − ρ) = 20 µs.
    assert out["mean_ns"] == pytest.approx(20_000, rel=0.01)
    assert out["analytic"]["mean_ns"] == pytest.approx(20_000, rel=1e-12)
    for p in out["percentiles"]:
        want = -math.log(1 - p["p"] / 100) * 10_000 / (1 - 0.5)
        assert mm1_quantile_ns(10_000, 0.5, p["p"]) == pytest.approx(want, rel=1e-12)
        assert p["value_ns"] == pytest.approx(want, rel=MM1_TOL[p["p"]]), p


def test_cli_mm2_mean_follows_erlang_c():
    r = run_cli("model", "--service", "exp:10us", "--load", "0.5", "--workers", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model"] == "M/G/k (event simulation, k=2)" and out["workers"] == 2
    assert out["rate_rps"] == pytest.approx(100_000)
    rho, es = 0.5, 10_000.0
    c = 2 * rho**2 / (1 + rho)  # Erlang C, k = 2
    want = es + c * es / (2 * (1 - rho))  # 13.33 µs
    assert out["mean_ns"] == pytest.approx(want, rel=0.008)
    assert out["analytic"]["mean_ns"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("args,needles", [
    (["--service", "exp:10us", "--load", "1.2"], ["--load 1.2", "1 or more", "below 1"]),
    (["--service", "exp:10us", "--load", "0"], ["--load 0", "above 0"]),
    (["--service", "pareto:10us", "--load", "0.5"], ["unknown distribution 'pareto'", "fixed:10us"]),
    (["--service", "exp:10us", "--load", "0.5", "--workers", "0"], ["--workers 0", "worker"]),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, needles):
    _one_line_error(run_cli("model", *args), *needles)
