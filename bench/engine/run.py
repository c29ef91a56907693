"""bench/engine: speed and precision of the open-loop engine against the built-in server.

Prints its figures and writes them as JSON (default bench/out/engine.json). Each figure is the
median of 3 runs. Not a test: nothing here asserts; the headline goes into BENCHMARKS.md.

    python bench/engine/run.py [--quick] [--out FILE]

Figures (issue 2):
* machine stalls: what a lone pinned spinning thread loses to preemption (the floor);
* send lag (actual − intended) p50/p99 at 10k and 100k req/s, one engine thread;
* highest Poisson rate one engine thread sustains with 16 conns × 16 outstanding, sent and
  completed within 1 % of target;
* memory per kept raw sample, engine CPU seconds per million requests;
* bias: measured p50/p99 minus the service time at fixed:10us and 20 % load, and minus the M/D/1
  model's p50/p99 (`tailwise model`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


from tailwise import _core
from tailwise.host.facts import host_info
from tailwise.stats.model import model_percentiles
from tailwise.results.summary import decode_histogram
from tailwise.spec.load import LoadSpec


def one_run(rate: float, *, seconds: float, conns: int, outstanding: int, service: str = "fixed:0",
            sample_every: int = 1, server_spin: bool = True, engine_spin: bool = True) -> dict:
    srv = _core.Server("127.0.0.1:0", workers=1, service=service, pin=True, busy_poll=server_spin)
    try:
        spec = LoadSpec(targets=[srv.addr], rate_rps=rate, duration_ns=int(seconds * 1e9), conns=conns,
                        outstanding=outstanding, busy_poll=engine_spin, pin=True, sample_every=sample_every,
                        seed=int(time.time_ns() % 2**31))
        eng = _core.Engine(spec.to_json())
        r = eng.join()
    finally:
        srv.stop()
    c = r["counters"]
    el = r["elapsed_ns"] / 1e9
    lat, lag = decode_histogram(r["latency_hist"]), decode_histogram(r["send_lag_hist"])
    unst = decode_histogram(r["send_lag_unstalled_hist"])
    return {
        "rate": rate,
        "achieved_rps": c["sent"] / el,
        "completed_rps": r["received_in_window"] / el,
        "errors": c["errors"] + c["timeouts"],
        "lag_p50_ns": lag.get_value_at_percentile(50), "lag_p99_ns": lag.get_value_at_percentile(99),
        "unstalled_lag_p50_ns": unst.get_value_at_percentile(50), "unstalled_lag_p99_ns": unst.get_value_at_percentile(99),
        "unstalled_fraction": unst.get_total_count() / max(lag.get_total_count(), 1),
        "stalls_per_s": r["stalls"] / el,
        "lat_p50_ns": lat.get_value_at_percentile(50), "lat_p99_ns": lat.get_value_at_percentile(99),
        "cpu_s_per_million": r["cpu_ns"] / 1e9 / max(c["sent"], 1) * 1e6,
        "bytes_per_sample": r["sample_bytes"] / max(len(r["samples"]) // 32, 1),
        "samples": len(r["samples"]) // 24,
        "preemptions": r["preemptions"],
    }


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 run per figure, shorter runs")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "engine.json"))
    args = ap.parse_args()
    reps, secs = (1, 1.0) if args.quick else (3, 3.0)
    res: dict = {"host": host_info(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reps": reps}
    cpus = sorted(os.sched_getaffinity(0))

    stalls = [_core.measure_stalls(int(secs * 1e9), 5_000, cpus[-1]) for _ in range(reps)]
    res["stalls_5us"] = {
        "lost_fraction": statistics.median(s["lost_ns"] / s["duration_ns"] for s in stalls),
        "per_second": statistics.median(s["count"] / (s["duration_ns"] / 1e9) for s in stalls),
        "max_us": statistics.median(s["max_ns"] / 1e3 for s in stalls),
    }
    print(f"machine: a pinned spinning thread loses {res['stalls_5us']['lost_fraction']:.2%} of its time in "
          f"{res['stalls_5us']['per_second']:.0f} gaps/s > 5 µs (max {res['stalls_5us']['max_us']:.0f} µs)")

    res["send_lag"] = {}
    for rate in (10_000, 100_000):
        runs = [one_run(rate, seconds=secs, conns=16, outstanding=4) for _ in range(reps)]
        keys = ("lag_p50_ns", "lag_p99_ns", "unstalled_lag_p50_ns", "unstalled_lag_p99_ns", "unstalled_fraction",
                "stalls_per_s", "achieved_rps", "preemptions")
        res["send_lag"][str(rate)] = {k: median_of(runs, k) for k in keys}
        m = res["send_lag"][str(rate)]
        print(f"send lag at {rate:>7,} req/s: p50 {m['lag_p50_ns'] / 1e3:.2f} µs, p99 {m['lag_p99_ns'] / 1e3:.2f} µs; "
              f"not preempted ({m['unstalled_fraction']:.1%} of sends): p50 {m['unstalled_lag_p50_ns'] / 1e3:.2f} µs, "
              f"p99 {m['unstalled_lag_p99_ns'] / 1e3:.2f} µs ({m['stalls_per_s']:.0f} stalls/s > 20 µs)")

    best = None
    for rate in (250_000, 500_000, 750_000, 1_000_000, 1_500_000, 2_000_000, 2_500_000, 3_000_000):
        runs = [one_run(rate, seconds=min(secs, 2.0), conns=16, outstanding=16, sample_every=1000) for _ in range(reps)]
        ach, comp = median_of(runs, "achieved_rps"), median_of(runs, "completed_rps")
        ok = abs(ach / rate - 1) <= 0.01 and abs(comp / rate - 1) <= 0.01 and median_of(runs, "errors") == 0
        print(f"  pipelined 16×16 at {rate:>9,}: achieved {ach:>11,.0f} completed {comp:>11,.0f} "
              f"cpu {median_of(runs, 'cpu_s_per_million'):.2f} s/M {'ok' if ok else 'MISSED'}")
        if not ok:
            break
        best = {"rate": rate, "achieved_rps": ach, "cpu_s_per_million": median_of(runs, "cpu_s_per_million")}
    res["max_pipelined_rps"] = best
    print(f"highest sustained Poisson rate, one thread, 16×16: {best['rate'] if best else 0:,} req/s")

    # A spinning thread's CPU time is its wall time; CPU per request is read in blocking mode.
    mem = [one_run(100_000, seconds=secs, conns=16, outstanding=4, engine_spin=False) for _ in range(reps)]
    res["bytes_per_sample"] = median_of(mem, "bytes_per_sample")
    res["cpu_s_per_million_at_100k_blocking"] = median_of(mem, "cpu_s_per_million")
    print(f"memory per raw sample: {res['bytes_per_sample']:.1f} B; engine CPU at 100k req/s (--poll block): "
          f"{res['cpu_s_per_million_at_100k_blocking']:.2f} s per million requests; pipelined at "
          f"{best['rate'] if best else 0:,} req/s: {best['cpu_s_per_million'] if best else float('nan'):.2f} s per million")

    svc, rate = 10_000.0, 20_000.0  # fixed:10us at 20 % load
    model = {p["p"]: p["value_ns"] for p in model_percentiles("fixed:10us", 0.2, ps=(50.0, 99.0))["percentiles"]}
    for mode, spin in (("server busy-polls", True), ("server sleeps", False)):
        runs = [one_run(rate, seconds=secs, conns=8, outstanding=4, service="fixed:10us", server_spin=spin) for _ in range(reps)]
        p50, p99 = median_of(runs, "lat_p50_ns"), median_of(runs, "lat_p99_ns")
        res.setdefault("bias", {})[mode] = {
            "p50_ns": p50, "p99_ns": p99, "model_p50_ns": model[50], "model_p99_ns": model[99],
            "p50_minus_service_ns": p50 - svc, "p99_minus_service_ns": p99 - svc,
            "p50_minus_model_ns": p50 - model[50], "p99_minus_model_ns": p99 - model[99],
        }
        print(f"bias at fixed:10us, 20 % load ({mode}): p50 {p50 / 1e3:.1f} µs, p99 {p99 / 1e3:.1f} µs; "
              f"minus service {(p50 - svc) / 1e3:.1f} / {(p99 - svc) / 1e3:.1f} µs; "
              f"minus M/D/1 model ({model[50] / 1e3:.1f} / {model[99] / 1e3:.1f} µs) "
              f"{(p50 - model[50]) / 1e3:.1f} / {(p99 - model[99]) / 1e3:.1f} µs")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
