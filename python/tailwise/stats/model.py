"""Queueing-model ground truth: what an ideal FIFO server with a known service time would show.

A server with one worker spinning for service times drawn from ``D``, offered Poisson load, is
a FIFO M/G/1 queue — the built-in synthetic server with one worker (``tailwise serve --service
D``) is one. k workers that take requests from one common queue make an M/G/k queue. (The
built-in server with several workers is not: each connection belongs to one worker, so it is k
separate queues.) This module gives the sojourn-time (response-time) distribution of these
queues, so a measurement can be compared with it; the gap is the tool's bias plus the server's
real overheads.

* :func:`model_percentiles` simulates it in Rust (``tailwise._core``, the Lindley recursion for
  one worker, the Kiefer–Wolfowitz workload recursion for k; derivation and references in
  ``crates/tailwise-core/src/model.rs``) and returns percentiles and the mean.
* :func:`sojourn_sequence` returns the simulated sojourn times themselves, in arrival order —
  autocorrelated, like real queueing latencies, which the independence checks can be tried on.
* Closed forms: :func:`mm1_quantile_ns` (M/M/1 sojourn ~ Exp(μ − λ)), :func:`pk_mean_ns`
  (Pollaczek–Khinchine M/G/1 mean), :func:`erlang_c_mean_ns` (M/M/k mean).

Loads are ρ = λ·E[S]/k in (0, 1); percentiles are in percent (0–100), as everywhere in tailwise.
Precision of the default run (2 M customers after 100 k warm-up), one standard deviation over
seeds, M/M/1: mean ±0.2 % at ρ = 0.5 and ±0.7 % at ρ = 0.8; p99 ±0.4 % / ±1.5 %; p99.99
±2.5 % / ±4.7 %. The error grows quickly as ρ → 1: give more customers there.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from tailwise import _core
from tailwise.errors import InputError
from tailwise.stats import DEFAULT_PERCENTILES  # those of every `tailwise run` summary, by default

#: Customers simulated by default, after a warm-up of DEFAULT_WARMUP discarded ones: p99.99 has
#: 200 customers beyond it; the simulation takes ~0.05 s.
DEFAULT_CUSTOMERS = 2_000_000
DEFAULT_WARMUP = 100_000
#: The simulation's own bounds (crates/tailwise-py/src/model.rs).
MAX_CUSTOMERS: int = _core.MODEL_MAX_CUSTOMERS
MAX_WORKERS: int = _core.MODEL_MAX_WORKERS


def _service(spec: str) -> tuple[str, str, float, float | None]:
    """(canonical spec, kind, mean ns, lognormal σ or None); InputError unless valid with mean > 0."""
    try:
        canonical, mean = _core.parse_dist(spec)
    except InputError as e:
        raise InputError(f"--service {spec}: {e.problem}", e.remedy) from None
    if not mean > 0:
        raise InputError(f"--service {spec} has mean zero", "the model needs a service time above zero, e.g. fixed:10us")
    parts = canonical.split(":")
    sigma = float(parts[2]) if parts[0] == "lognormal" else None
    return canonical, parts[0], mean, sigma


def _load(load: float) -> float:
    try:
        rho = float(load)
    except (TypeError, ValueError):
        raise InputError(f"--load {load!r} is not a number", "give a load between 0 and 1, e.g. --load 0.5") from None
    if not 0.0 < rho < 1.0:  # also rejects NaN
        if rho >= 1.0:
            raise InputError(f"--load {load} is 1 or more: the queue grows without bound and has no steady state",
                             "give a load below 1, e.g. --load 0.8")
        raise InputError(f"--load {load} must be above 0 (ρ = λ·E[S]/k)", "give a load between 0 and 1, e.g. --load 0.5")
    return rho


def _workers(workers: int) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"--workers {workers} is outside 1..{MAX_WORKERS}", "give the server's worker count, e.g. --workers 1")
    return workers


def _customers(n: int, what: str = "--customers", low: int = 1, example: int = DEFAULT_CUSTOMERS) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= MAX_CUSTOMERS:
        raise InputError(f"{what} {n} is outside {low}..{MAX_CUSTOMERS:,}", f"give e.g. {what} {example}")
    return n


def _seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise InputError(f"--seed {seed} is not an integer in 0..2^64", "give e.g. --seed 1")
    return seed


def model_name(workers: int) -> str:
    return "M/G/1 (Lindley recursion)" if workers == 1 else f"M/G/k (event simulation, k={workers})"


def model_percentiles(
    service: str,
    load: float,
    workers: int = 1,
    ps: Iterable[float] = DEFAULT_PERCENTILES,
    n: int | None = None,
    seed: int = 1,
    warmup: int = DEFAULT_WARMUP,
) -> dict:
    """Sojourn-time percentiles and mean of the FIFO M/G/k queue (k = ``workers``) at load ρ.

    Returns ``{"model", "service", "load", "workers", "customers", "warmup", "seed", "rate_rps",
    "mean_service_ns", "mean_ns", "analytic", "percentiles": [{"p", "value_ns"}, ...]}``;
    ``rate_rps`` is the offered load that gives ρ (``tailwise run --rate``), ``analytic`` the
    closed-form mean where one exists ({"mean_ns", "formula"}) or None.
    """
    canonical, kind, mean_s, _ = _service(service)
    rho, k = _load(load), _workers(workers)
    n = _customers(DEFAULT_CUSTOMERS if n is None else n)
    warmup = _customers(warmup, "warmup", 0, DEFAULT_WARMUP)
    ps = [float(p) for p in ps]
    if not all(0.0 < p <= 100.0 for p in ps):
        raise InputError(f"percentiles {ps} must be in (0, 100]", "give percents, e.g. 99.9")
    r = _core.model_summary(service, rho, k, ps=ps, n=n, seed=_seed(seed), warmup=warmup)  # InputError as it is
    return {
        "model": model_name(k),
        "service": service,
        "service_canonical": canonical,
        "load": rho,
        "workers": k,
        "customers": n,
        "warmup": warmup,
        "seed": seed,
        "rate_rps": r["arrival_rate_per_ns"] * 1e9,
        "mean_service_ns": mean_s,
        "mean_ns": r["mean_ns"],
        "analytic": _analytic_mean(kind, service, rho, k, mean_s),
        "percentiles": [{"p": p, "value_ns": v} for p, v in zip(ps, r["percentiles"])],
    }


def _analytic_mean(kind: str, service: str, rho: float, k: int, mean_s: float) -> dict | None:
    if k == 1:
        return {"mean_ns": pk_mean_ns(service, rho), "formula": "Pollaczek–Khinchine"}
    if kind == "exp":
        return {"mean_ns": erlang_c_mean_ns(mean_s, rho, k), "formula": "Erlang C (M/M/k)"}
    return None


def sojourn_sequence(
    service: str,
    load: float,
    workers: int = 1,
    n: int = DEFAULT_CUSTOMERS,
    seed: int = 1,
    warmup: int = DEFAULT_WARMUP,
) -> np.ndarray:
    """The simulated sojourn times (float64 ns) of ``n`` customers in arrival order, after
    ``warmup`` discarded ones. The same path as :func:`model_percentiles` with the same
    arguments."""
    _service(service)
    rho, k = _load(load), _workers(workers)
    n, warmup = _customers(n, "n"), _customers(warmup, "warmup", 0, DEFAULT_WARMUP)
    raw = _core.model_sojourn(service, rho, k, n=n, seed=_seed(seed), warmup=warmup)  # InputError as it is
    return np.frombuffer(raw, dtype="<f8")


def mm1_quantile_ns(mean_service_ns: float, load: float, p: float) -> float:
    """The ``p``-th percentile (0 < p < 100) of the M/M/1 sojourn time: it is Exp(μ − λ), with
    μ − λ = (1 − ρ)/E[S], so the quantile is −ln(1 − p/100)·E[S]/(1 − ρ)."""
    rho = _load(load)
    if not 0.0 < p < 100.0:
        raise InputError(f"percentile {p} must be strictly between 0 and 100", "give percents, e.g. 99.9")
    if not mean_service_ns > 0:
        raise InputError(f"mean service time {mean_service_ns} ns must be above zero", "give e.g. 10000")
    return -math.log1p(-p / 100.0) * mean_service_ns / (1.0 - rho)


def second_moment_ns2(service: str) -> float:
    """E[S²] (ns²) of a service distribution: fixed m²; exp 2m²; bimodal 0.9a² + 0.1(10a)² =
    10.9a² with a = m/1.9; uniform on [a, b] (a² + ab + b²)/3; lognormal exp(2μ + 2σ²) = m²·exp(σ²)
    (μ = ln m − σ²/2)."""
    canonical, kind, m, sigma = _service(service)
    if kind == "fixed":
        return m * m
    if kind == "exp":
        return 2.0 * m * m
    if kind == "bimodal":
        a = m / 1.9
        return 10.9 * a * a
    if kind == "uniform":  # canonical: uniform:LOWns:HIGHns
        low, high = (float(x.removesuffix("ns")) for x in canonical.split(":")[1:])
        return (low * low + low * high + high * high) / 3.0
    if kind == "lognormal":
        mu = math.log(m) - sigma * sigma / 2.0
        return math.exp(2.0 * mu + 2.0 * sigma * sigma)
    raise InputError(f"--service {service}: no second moment known for '{kind}'", "use fixed, exp, bimodal, uniform or lognormal")


def pk_mean_ns(service: str, load: float) -> float:
    """Pollaczek–Khinchine mean sojourn time of M/G/1 at load ρ: E[S] + λE[S²]/(2(1 − ρ)), λ = ρ/E[S]."""
    _, _, m, _ = _service(service)
    rho = _load(load)
    return m + (rho / m) * second_moment_ns2(service) / (2.0 * (1.0 - rho))


def erlang_c(k: int, load: float) -> float:
    """Erlang C: the probability that an arrival waits in M/M/k at per-server load ρ (a = kρ)."""
    k, rho = _workers(k), _load(load)
    a = k * rho
    term, total = 1.0, 0.0  # a^i / i!, summed for i < k
    for i in range(k):
        if i:
            term *= a / i
        total += term
    last = term * a / k / (1.0 - rho)  # a^k / k! / (1 − ρ)
    return last / (total + last)


def erlang_c_mean_ns(mean_service_ns: float, load: float, k: int) -> float:
    """Mean M/M/k sojourn time: E[S] + C(k, kρ)·E[S]/(k(1 − ρ))."""
    return mean_service_ns + erlang_c(k, load) * mean_service_ns / (k * (1.0 - load))
