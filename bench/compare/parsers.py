"""Pure parts of bench/run: each peer's output read into one shape, medians and spreads, and the
truth a server stop implies. No process is started here (tests/unit/test_bench_parsers.py).

Every parser returns a dict with any of: ``p50_us``, ``p99_us``, ``p999_us`` (latency
percentiles, µs), ``mean_us``, ``rps`` (requests completed per second), ``requests``; a figure
the tool does not print is absent, never guessed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics

#: The percentiles every table shows.
PS = (50.0, 99.0, 99.9)
KEYS = {50.0: "p50_us", 99.0: "p99_us", 99.9: "p999_us"}


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least p % at or below it)."""
    if not values:
        return None
    s = sorted(values)
    rank = max(math.ceil(p / 100.0 * len(s) - 1e-9), 1)  # 99.9 % of 1000 is 999, not 999.0000001
    return s[min(rank, len(s)) - 1]


def percentiles_us(values_us: list[float]) -> dict:
    return {KEYS[p]: percentile(values_us, p) for p in PS} if values_us else {}


def median_spread(values: list[float | None]) -> dict | None:
    """Median and the range of the repeats that gave a figure; None when none did."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


_UNIT_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6}


def _to_us(number: str, unit: str) -> float:
    return float(number) * _UNIT_US[unit]


# ------------------------------------------------------------------------------------ mutilate

def parse_mutilate(stdout: str, saved: str | None = None) -> dict:
    """mutilate's report; percentiles from ``--save`` (one "start latency_us" line per get) when
    given, since the report has no p50 or p99.9 (its columns: avg std min 5th 10th 90th 95th 99th)."""
    out: dict = {}
    m = re.search(r"^read\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+[\d.]+){4}\s+([\d.]+)\s*$", stdout, re.M)
    if m:
        out["mean_us"] = float(m.group(1))
        out["printed_p99_us"] = float(m.group(4))
    m = re.search(r"Total QPS = ([\d.]+) \((\d+) / ([\d.]+)s\)", stdout)
    if m:
        out["rps"] = float(m.group(1))
        out["requests"] = int(m.group(2))
    if saved is not None:
        lat = [float(line.split()[1]) for line in saved.splitlines() if len(line.split()) == 2]
        out.update(percentiles_us(lat))
    elif "printed_p99_us" in out:
        out["p99_us"] = out["printed_p99_us"]
    return out


# ---------------------------------------------------------------------------- memtier_benchmark

def parse_memtier_json(text: str, seconds: float) -> dict:
    """memtier's --json-out-file. Its "Ops/sec" divides by a "Total duration" that came out half
    the --test-time here (1003 ms for 2 s), so the rate is Count / the seconds asked."""
    totals = json.loads(text)["ALL STATS"]["Totals"]
    pl = totals.get("Percentile Latencies") or {}
    out = {"requests": int(totals["Count"]), "rps": totals["Count"] / seconds,
           "mean_us": totals.get("Average Latency", 0.0) * 1e3}
    for p, key in KEYS.items():
        v = pl.get(f"p{p:.2f}")
        if v is not None:
            out[key] = v * 1e3  # ms
    return out


# -------------------------------------------------------------------------------- wrk and wrk2

def parse_wrk(stdout: str) -> dict:
    """wrk's and wrk2's ``--latency`` report: "Latency Distribution" lines ("50.000%  1.20ms" in
    wrk2, "50%  276.00us" in wrk) and "Requests/sec:"."""
    out: dict = {}
    for m in re.finditer(r"^\s*([\d.]+)%\s+([\d.]+)(us|ms|s|m)\s*$", stdout, re.M):
        p = float(m.group(1))
        for want, key in KEYS.items():
            if abs(p - want) < 1e-9:
                out[key] = _to_us(m.group(2), m.group(3))
    m = re.search(r"Requests/sec:\s+([\d.]+)", stdout)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"^\s*(\d+) requests in", stdout, re.M)
    if m:
        out["requests"] = int(m.group(1))
    m = re.search(r"^\s*Latency\s+([\d.]+)(us|ms|s)", stdout, re.M)
    if m:
        out["mean_us"] = _to_us(m.group(1), m.group(2))
    return out


# ------------------------------------------------------------------------------ redis-benchmark

def parse_redis_benchmark_csv(stdout: str) -> dict:
    """``redis-benchmark --csv``: "test","rps","avg_latency_ms",…,"p50_latency_ms",…,"p99_latency_ms"."""
    rows = list(csv.DictReader(io.StringIO(stdout.strip())))
    if not rows:
        return {}
    r = rows[0]
    out = {"rps": float(r["rps"]), "mean_us": float(r["avg_latency_ms"]) * 1e3,
           "p50_us": float(r["p50_latency_ms"]) * 1e3, "p99_us": float(r["p99_latency_ms"]) * 1e3}
    return out


# --------------------------------------------------------------------------------------- h2load

def parse_h2load(stdout: str) -> dict:
    """h2load prints min/max/mean of "time for request", no percentiles."""
    out: dict = {}
    m = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", stdout)
    if m:
        out["rps"] = float(m.group(1))
    m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded", stdout)
    if m:
        out["requests"] = int(m.group(3))
    m = re.search(r"time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)", stdout)
    if m:
        out["mean_us"] = _to_us(m.group(5), m.group(6))
    return out


# --------------------------------------------------------------------------------------- vegeta

def parse_vegeta_csv(text: str) -> dict:
    """``vegeta encode --to csv``: timestamp_ns,code,latency_ns,bytes_out,bytes_in,error,… per
    request. Percentiles over the 2xx replies; the rate over the span of the send times."""
    lat, ts, errors = [], [], 0
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 3:
            continue
        ts.append(int(row[0]))
        if row[1].startswith("2"):
            lat.append(int(row[2]) / 1e3)
        else:
            errors += 1
    out = percentiles_us(lat)
    out["requests"] = len(lat)
    out["errors"] = errors
    if len(ts) > 1:
        out["rps"] = len(lat) / ((max(ts) - min(ts)) / 1e9)
    if lat:
        out["mean_us"] = statistics.fmean(lat)
    return out


# --------------------------------------------------------------------------------------- fortio

def parse_fortio_json(text: str) -> dict:
    """``fortio load -json FILE``: DurationHistogram.Percentiles (seconds), ActualQPS."""
    d = json.loads(text)
    h = d.get("DurationHistogram") or {}
    out = {"rps": float(d.get("ActualQPS", 0.0)), "requests": int(h.get("Count", 0)),
           "mean_us": float(h.get("Avg", 0.0)) * 1e6}
    for q in h.get("Percentiles") or []:
        for want, key in KEYS.items():
            if abs(float(q["Percentile"]) - want) < 1e-9:
                out[key] = float(q["Value"]) * 1e6
    return out


# ------------------------------------------------------------------------------------- memcslap

def parse_memcslap(stdout: str) -> dict:
    """libmemcached 1.1's memcslap prints only the time to get N keys (closed loop, no latencies)."""
    m = re.search(r"Time to get\s+(\d+) keys by\s+(\d+) threads:\s+([\d.]+) seconds", stdout)
    if not m or float(m.group(3)) <= 0:
        return {}
    return {"requests": int(m.group(1)), "rps": int(m.group(1)) / float(m.group(3))}


# -------------------------------------------------------------------------------- tailwise JSON

def _pct_ns(items: list[dict] | None, p: float) -> float | None:
    return next((q.get("value_ns") for q in items or [] if abs(q.get("p", -1) - p) < 1e-9), None)


def parse_tailwise(summary: dict) -> dict:
    """tailwise's summary (``--json``): every request's histogram (latency.histogram), the send lag,
    the rate achieved and the engine's own CPU per request."""
    hist = (summary.get("latency") or {}).get("histogram") or {}
    lag = summary.get("send_lag") or {}
    rate = summary.get("rate") or {}
    eng = summary.get("engine") or {}
    out: dict = {"rps": rate.get("completed_rps"), "sent_rps": rate.get("achieved_rps"),
                 "requests": hist.get("count"), "verdict": summary.get("verdict"),
                 "engine_cpu_us_per_req": (eng.get("cpu_ns_per_request") or 0) / 1e3 or None,
                 "engine_stalls": eng.get("stalls"), "steal_s": eng.get("host_steal_s"),
                 "failed_checks": [c["name"] for c in summary.get("checks") or [] if not c.get("ok")]}
    for p, key in KEYS.items():
        v = _pct_ns(hist.get("percentiles"), p)
        out[key] = None if v is None else v / 1e3
        lv = _pct_ns(lag.get("percentiles"), p)
        out["lag_" + key] = None if lv is None else lv / 1e3
    if hist.get("mean_ns") is not None:
        out["mean_us"] = hist["mean_ns"] / 1e3
    handshake = (summary.get("tls") or {}).get("handshake") or {}
    if handshake.get("p50_ns") is not None:
        out["handshake_p50_us"] = handshake["p50_ns"] / 1e3
    return out


# ------------------------------------------------------------------------ coordinated omission

def co_truth(rate_rps: float, seconds: float, stop_at_s: float, stop_s: float, service_s: float = 10e-6,
             base_s: float = 0.0, ps: tuple[float, ...] = PS) -> dict:
    """What a stop of the server implies, timed from each request's intended send.

    Requests are intended every 1/rate for ``seconds``; the server (FIFO, ``service_s`` per
    request, idle otherwise) serves nothing from ``stop_at_s`` for ``stop_s``, then drains the
    backlog. Each latency is its completion minus its intended time, plus ``base_s`` (the path).
    Returns {"pXX_us": …} over every request, and the share intended during the stop.
    """
    n = int(rate_rps * seconds)
    gap = 1.0 / rate_rps
    free = 0.0  # when the server can start the next request
    lat = []
    for i in range(n):
        t = i * gap
        start = max(t, free)
        if stop_at_s <= start < stop_at_s + stop_s:
            start = stop_at_s + stop_s
        free = start + service_s
        lat.append((free - t + base_s) * 1e6)
    during = sum(1 for i in range(n) if stop_at_s <= i * gap < stop_at_s + stop_s)
    out = {KEYS.get(p, f"p{p:g}_us"): percentile(lat, p) for p in ps}
    out["share_during_stop"] = during / n if n else 0.0
    return out
