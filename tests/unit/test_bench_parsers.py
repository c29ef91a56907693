"""bench/run's pure parts: each peer's output read right, median and spread, the truth a server
stop implies (bench/compare/parsers.py). The fixtures are captured outputs (bench_fixtures.py)."""

import importlib.util
from pathlib import Path

import pytest

from tests.unit import bench_fixtures as fx

_spec = importlib.util.spec_from_file_location(
    "bench_parsers", Path(__file__).resolve().parents[2] / "bench" / "compare" / "parsers.py")
parsers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parsers)


def test_mutilate_percentiles_come_from_its_saved_samples():
    r = parsers.parse_mutilate(fx.MUTILATE, fx.MUTILATE_SAVE)
    assert r["rps"] == 7809.3 and r["requests"] == 15663
    assert (r["p50_us"], r["p99_us"], r["p999_us"]) == (500.0, 990.0, 999.0)
    assert r["printed_p99_us"] == 43484.5


def test_mutilate_without_samples_keeps_only_its_printed_p99():
    r = parsers.parse_mutilate(fx.MUTILATE)
    assert r["p99_us"] == 43484.5 and "p50_us" not in r


def test_memtier_rate_is_its_count_over_the_seconds_asked():
    r = parsers.parse_memtier_json(fx.MEMTIER_JSON, 2)
    assert r["rps"] == pytest.approx(19235 / 2)
    assert (r["p50_us"], r["p99_us"], r["p999_us"]) == pytest.approx((87.0, 5439.0, 14399.0))


def test_wrk2_and_wrk_reports_in_their_units():
    r = parsers.parse_wrk(fx.WRK2)
    assert (r["p50_us"], r["p99_us"], r["p999_us"]) == pytest.approx((1200.0, 9090.0, 11490.0))
    assert r["rps"] == 4901.24 and r["requests"] == 9808
    w = parsers.parse_wrk(fx.WRK)
    assert w["p50_us"] == pytest.approx(276.0) and w["p99_us"] == pytest.approx(4490.0) and "p999_us" not in w
    assert w["mean_us"] == pytest.approx(649.28)


def test_redis_benchmark_h2load_memcslap():
    r = parsers.parse_redis_benchmark_csv(fx.REDIS_BENCHMARK)
    assert r["rps"] == 35087.72 and r["p50_us"] == pytest.approx(55.0) and r["p99_us"] == pytest.approx(167.0)
    h = parsers.parse_h2load(fx.H2LOAD)
    assert h == {"rps": 4792.0, "requests": 9584, "mean_us": 686.0}
    m = parsers.parse_memcslap(fx.MEMCSLAP)
    assert m["requests"] == 20000 and m["rps"] == pytest.approx(20000 / 1.864)


def test_vegeta_percentiles_over_the_successful_replies():
    r = parsers.parse_vegeta_csv(fx.VEGETA_CSV)
    assert r["requests"] == 1000 and r["errors"] == 1
    assert (r["p50_us"], r["p99_us"], r["p999_us"]) == (500.0, 990.0, 999.0)


def test_fortio_seconds_become_microseconds():
    r = parsers.parse_fortio_json(fx.FORTIO_JSON)
    assert r["p50_us"] == pytest.approx(3333.33, rel=1e-5) and r["p999_us"] == pytest.approx(11434.69, rel=1e-5)
    assert r["requests"] == 50


def test_median_and_spread_skip_runs_without_a_figure():
    assert parsers.median_spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert parsers.median_spread([None, float("nan")]) is None


def test_stop_truth_at_10k_for_15_s_matches_the_arithmetic():
    # 200 ms stop in 15 s at 10k req/s: 1.33 % of requests intended during it. With an instant
    # server they wait 200 ms down to 0: p99 = 200 − 1 % × 15 s = 50 ms, p99.9 = 200 − 15 = 185 ms.
    t = parsers.co_truth(10_000, 15, 7.5, 0.2, service_s=1e-9)
    assert t["share_during_stop"] == pytest.approx(0.2 / 15, rel=1e-3)
    assert t["p99_us"] == pytest.approx(50_000, rel=1e-3) and t["p999_us"] == pytest.approx(185_000, rel=1e-3)
    # At 10 µs a request the backlog drains 10 µs apart while new requests come 100 µs apart:
    # the k-th request of the stop waits 200 ms − k × 90 µs, so p99 (the 1,500th longest) = 65 ms.
    d = parsers.co_truth(10_000, 15, 7.5, 0.2, service_s=10e-6)
    assert d["p99_us"] == pytest.approx(65_010, rel=1e-3) and d["p50_us"] == pytest.approx(10.0)


def test_no_stop_means_the_service_time():
    t = parsers.co_truth(1_000, 2, 1, 0.0, service_s=10e-6)
    assert t["p99_us"] == pytest.approx(10.0) and t["share_during_stop"] == 0.0
