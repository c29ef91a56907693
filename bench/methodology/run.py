"""bench/methodology: how fast the coordinator concludes, and what one round of analysis costs.

Prints its figures and writes them as JSON (default bench/out/methodology.json). Not a test.

    python bench/methodology/run.py [--quick | --reps N] [--out FILE]

Figures (issue 3):
* time to verdict of `tailwise run --percentile 99 --ci 10us --confidence 0.95` against the
  built-in server with exp:10us at 50 % load (target ≤ 30 s), median of 3 (or --reps), with the
  share of runs that reached ok, each run's verdict and the reason it stopped; the same at p90;
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

from tailwise.agent import SAMPLE_DTYPE
from tailwise.host import host_info
from tailwise.methodology.analysis import Precision, analyse


def round_cost(n: int, rng: np.random.Generator) -> float:
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(20_000, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + rng.integers(100, 2_000, n).astype(np.uint64)
    s["latency_ns"] = (15_000 + rng.exponential(10_000, n)).astype(np.uint64)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    t = time.process_time()
    analyse(s, counters=c, elapsed_s=n / 50_000, received_in_window=n, reasons=[], rate_rps=50_000, arrival="exp",
            conns=8, outstanding=4, sample_every=1, precision=Precision(ci_rel=0.1), rng=rng, late_ns=50_000)
    return time.process_time() - t


def time_to_verdict(percentile: str, ci: str) -> dict:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "tailwise", "run", "--rate", "50k", "--service", "exp:10us",
                        "--percentile", percentile, "--ci", ci, "--max-time", "60s", "--json"],
                       capture_output=True, text=True, timeout=180)
    wall = time.monotonic() - t
    s = json.loads(r.stdout)
    return {"wall_s": wall, "measured_s": s["rate"]["duration_s"], "verdict": s["verdict"],
            "stopped": s["methodology"]["stopped"], "rounds": s["methodology"]["rounds"],
            "failed": [c["name"] for c in s["checks"] if not c["ok"]]}


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
    for p, ci in (("99", "10us"), ("90", "10us")):
        runs = [time_to_verdict(p, ci) for _ in range(reps)]
        key = f"p{p}_ci_{ci}"
        ok = sum(r["verdict"] == "ok" for r in runs)
        res[key] = {"median_measured_s": statistics.median(r["measured_s"] for r in runs), "ok_runs": ok,
                    "runs": runs}
        for r in runs:
            print(f"time to verdict, p{p} ± {ci} at 95 %, exp:10us at 50 % load: {r['measured_s']:.1f} s measuring "
                  f"({r['wall_s']:.1f} s wall), verdict {r['verdict']} ({r['stopped']}; failed: {', '.join(r['failed']) or 'none'})")
        print(f"p{p} ± {ci}: {ok} of {len(runs)} runs ok; median {res[key]['median_measured_s']:.1f} s measuring")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
