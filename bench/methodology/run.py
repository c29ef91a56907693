"""bench/methodology: how fast the coordinator concludes, and what one round of analysis costs.

Prints its figures and writes them as JSON (default bench/out/methodology.json). Not a test.

    python bench/methodology/run.py [--quick | --reps N] [--out FILE]

Figures (issues 3 and 9):
* time to verdict of `tailwise run --percentile 99 --ci 10us --confidence 0.95 --max-time 60s`
  against the built-in server — fixed:10us at 20 % load (20k req/s) and exp:10us at 50 % load
  (50k req/s) — under the rule that nothing leaves the statistics for its value: how often the
  verdict is ok, the median time measuring, each run's verdict, why it stopped, what failed, its
  p99 with interval, and what was left out; the same at p90 ± 10 µs for exp:10us;
* the coordinator's CPU time for one methodology round (`analyse`, every check) on 10k, 100k and
  1M samples (target ≤ 2 s at 1M).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.host.facts import host_info
from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.spec.precision import Precision
from tailwise.stats.histogram import Buckets


def round_cost(n: int, rng: np.random.Generator) -> float:
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(20_000, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + rng.integers(100, 2_000, n).astype(np.uint64)
    s["latency_ns"] = (15_000 + rng.exponential(10_000, n)).astype(np.uint64)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    every = Buckets.of_values(s["latency_ns"].astype(np.int64))
    t = time.process_time()
    plan = RunPlan(Precision(ci_rel=0.1), rate_rps=50_000, arrival="exp", conns=8, outstanding=4, sample_every=1,
                   late_ns=50_000)
    analyse(AnalysisInput(plan, s, c, elapsed_s=n / 50_000, received_in_window=n, rng=rng,
                          every_request=lambda _a, _b: every))
    return time.process_time() - t


def time_to_verdict(service: str, rate: str, percentile: str, ci: str) -> dict:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "tailwise", "run", "--rate", rate, "--service", service,
                        "--percentile", percentile, "--ci", ci, "--max-time", "60s", "--json"],
                       capture_output=True, text=True, timeout=240)
    wall = time.monotonic() - t
    s = json.loads(r.stdout)
    m = s["methodology"]
    target = s["latency"]["target"] or {}
    return {"wall_s": wall, "measured_s": s["rate"]["duration_s"], "paused_s": s["rate"].get("paused_s"),
            "verdict": s["verdict"], "stopped": m["stopped"], "rounds": m["rounds"],
            "failed": [c["name"] for c in s["checks"] if not c["ok"]],
            "value_ns": target.get("value_ns"), "low_ns": target.get("low_ns"), "high_ns": target.get("high_ns"),
            "left_out_share": s["exclusions"]["share"], "engine_stalls": m["stalls"],
            "server_stalls": m["target_stalls"], "server_stall_longest_ns": m["target_stalls_longest_ns"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one repetition")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each time-to-verdict case [default: 3]")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "methodology.json"))
    args = ap.parse_args()
    reps = 1 if args.quick else args.reps
    res: dict = {"host": host_info(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reps": reps}
    rng = np.random.default_rng(1)
    res["round_cpu_s"] = {}
    for n in (10_000, 100_000, 1_000_000):
        cost = statistics.median(round_cost(n, rng) for _ in range(reps))
        res["round_cpu_s"][str(n)] = cost
        print(f"one methodology round on {n:>9,} samples: {cost:.3f} s CPU")
    cases = (("fixed:10us", "20k", "99", "10us"), ("exp:10us", "50k", "99", "10us"), ("exp:10us", "50k", "90", "10us"))
    for service, rate, p, ci in cases:
        runs = [time_to_verdict(service, rate, p, ci) for _ in range(reps)]
        key = f"{service}_{rate}_p{p}_ci_{ci}"
        ok = sum(r["verdict"] == "ok" for r in runs)
        res[key] = {"median_measured_s": statistics.median(r["measured_s"] for r in runs), "ok_runs": ok,
                    "runs": runs}
        for r in runs:
            ci_txt = (f"{r['value_ns'] / 1e3:.1f} µs [{r['low_ns'] / 1e3 if r['low_ns'] else float('nan'):.1f}, "
                      f"{r['high_ns'] / 1e3 if r['high_ns'] else float('nan'):.1f}]" if r["value_ns"] else "unsupported")
            print(f"p{p} ± {ci}, {service} at {rate} req/s: {r['measured_s']:.1f} s measuring ({r['wall_s']:.1f} s wall), "
                  f"verdict {r['verdict']} ({r['stopped']}; failed: {', '.join(r['failed']) or 'none'}); p{p} {ci_txt}; "
                  f"left out {r['left_out_share']:.1%}; stalls: engine {r['engine_stalls']}, server {r['server_stalls']} "
                  f"(longest {r['server_stall_longest_ns'] / 1e6:.1f} ms)")
        print(f"p{p} ± {ci}, {service} at {rate} req/s: {ok} of {len(runs)} runs ok; median "
              f"{res[key]['median_measured_s']:.1f} s measuring")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
