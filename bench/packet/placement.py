"""bench/packet/placement.py: where a loopback network function runs, and how clustered the tail is.

On a machine of two CPUs a packet run on loopback has three parties: the engine thread (pinned
to the highest CPU; with `--poll block`, the default, it sleeps between packets), the coordinator
(the rest of the tailwise process: snapshots, analyses — on the other CPU) and the network
function under test. `tailwise serve --udp-reflect` pins its worker to CPU 0 by default: the
coordinator's CPU. This script measures both placements, alternating, --pairs times:

* ``coordinator``: the reflector on CPU 0 (serve's default pin), with the coordinator;
* ``engine``: the reflector under `taskset -c N --no-pin` on the engine's CPU N.

Each run is `tailwise run udp+flow://… --rate R --duration S --arrival exp --timestamps kernel
--percentile 99.99` (fixed length, so that both get the same n). It prints, per run, p99.99's
effective samples and τ (stats/independence.py: how clustered the tail is; 36,887 effective
samples bound p99.99 at 95 %), and p50/p99/p99.9; and writes them as JSON (default
bench/out/packet-placement.json). Not a test: nothing here asserts. Every process is bounded by a
timeout.

    python bench/packet/placement.py [--pairs 2] [--rate 20k] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "packet"))

from run import TAILWISE, Reflector, Where, _free_port, cpus, pinned  # noqa: E402  (bench/packet/run.py)
#: A run may take this much longer than its --duration (start, analysis) before it is killed.
RUN_SLACK_S = 90.0


def one(placement: str, engine_cpu: int, rate: str, seconds: int) -> dict:
    # serve's own pin (worker 0 on CPU 0), or the engine's CPU under taskset, unpinned.
    on_engine = placement == "engine"
    path = Where("loopback", "127.0.0.1", _free_port(False),
                 server_prefix=pinned([], engine_cpu, []) if on_engine else [])
    with Reflector(path, path.port, pin=not on_engine):
        r = subprocess.run([*TAILWISE, "run", f"udp+flow://127.0.0.1:{path.port}", "--rate", rate, "--duration",
                            str(seconds), "--timeout", "1s", "--arrival", "exp", "--timestamps", "kernel",
                            "--percentile", "99.99", "--json"], capture_output=True, text=True,
                           timeout=seconds + RUN_SLACK_S)
    s = json.loads(r.stdout)
    p = {row["p"]: row for row in s["latency"]["percentiles"]}
    ind = next(c for c in s["checks"] if c["name"] == "independence")
    tau = re.findall(r"τ = ([\d.]+)", ind["detail"])
    return {"placement": placement, "verdict": s["verdict"], "samples": s["latency"]["samples"],
            "p99_99_n_effective": p[99.99]["n_effective"], "tau": float(tau[-1]) if tau else None,
            "p99_99_ns": p[99.99]["value_ns"], "p99_99_lower_bound_ns": p[99.99].get("lower_bound_ns"),
            **{f"p{v['p']:g}_every_ns": v["value_ns"] for v in s["latency"]["histogram"]["percentiles"]
               if v["p"] in (50.0, 99.0, 99.9)},
            "lost": s["counters"]["lost"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--rate", default="20k")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "out" / "packet-placement.json")
    a = ap.parse_args()
    engine_cpu = cpus()[1]  # the one engine thread's: the highest allowed CPU
    rows = []
    for pair in range(a.pairs):
        for placement in ("coordinator", "engine"):
            row = one(placement, engine_cpu, a.rate, a.seconds) | {"pair": pair}
            rows.append(row)
            p9999 = "—" if row["p99_99_ns"] is None else f"{row['p99_99_ns'] / 1e3:.1f} µs"
            print(f"{placement:12} n_eff(p99.99) {row['p99_99_n_effective'] or 0:>9,.0f}  τ {row['tau'] or 0:6.1f}  "
                  f"every packet: p50 {row['p50_every_ns'] / 1e3:7.1f} µs  p99 {row['p99_every_ns'] / 1e3:8.1f} µs  "
                  f"p99.9 {row['p99.9_every_ns'] / 1e3:9.1f} µs  p99.99 (CI) {p9999}  {row['verdict']}", flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"rate": a.rate, "seconds": a.seconds, "engine_cpu": engine_cpu,
                                  "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "runs": rows}, indent=1))
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
