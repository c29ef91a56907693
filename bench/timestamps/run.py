"""bench/timestamps: what each timestamp source reports, next to sockperf, and the Lancet Fig. 6 case.

Prints its figures and writes them as JSON (default bench/out/timestamps.json). Not a test:
nothing here asserts; the headline goes into BENCHMARKS.md.

    python bench/timestamps/run.py [--repeats 3] [--seconds 2] [--out FILE]

Figures (issue 11):
* minimum and p50/p99/p99.9 round trip of 32-byte-ish ping-pong at 2k req/s (one connection,
  one request outstanding) as each source reports it (`tailwise calibrate`: kernel and user
  stamps on the same requests), on loopback and across a veth pair between two network
  namespaces, next to sockperf 3.7's TCP ping-pong (32 bytes, same rate, --full-rtt) on the same
  path in the same run; each figure the median of ``--repeats`` runs, interleaved;
* `tailwise serve` fixed:10us at 20 % load with each source: measured minus the M/D/1 model at
  p50 and p99, with and without the built-in server's own stalls; the goal with kernel stamps:
  p50 within 12 µs, p99 within 30 µs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sockperf import sockperf_pingpong  # noqa: E402

from tailwise.measure import netns  # noqa: E402
from tailwise.measure.calibrate import calibrate  # noqa: E402
from tailwise.host.facts import host_info  # noqa: E402

FIGS = ("min", "p50", "p99", "p99.9")
RATE = 2_000
PORT = 11111


def _us(v: float | None) -> float | None:
    return None if v is None else v / 1e3


def _median(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def sockperf_on(path: str, seconds: float) -> dict:
    if path == "loopback":
        return sockperf_pingpong([], [], "127.0.0.1", PORT, True, seconds, RATE)
    with netns.veth_pair() as pair:
        return sockperf_pingpong(pair.argv(pair.server_ns, []), pair.argv(pair.client_ns, []), pair.server_ip,
                                 PORT, True, seconds, RATE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "timestamps.json"))
    args = ap.parse_args()

    paths = ["loopback"] + (["veth"] if netns.can_create() is None else [])
    ours: dict[str, dict[str, list[dict]]] = {p: {"kernel": [], "user": []} for p in paths}
    theirs: dict[str, list[dict]] = {p: [] for p in paths}
    for i in range(args.repeats):
        cal = calibrate(seconds=args.seconds, with_model=False).to_json()
        for p in cal["paths"]:
            if p["tried"]:
                for src in ("kernel", "user"):
                    r = p[src]["rtt"]
                    ours[p["path"]][src].append({f: _us(r.get(f"{f}_ns")) for f in FIGS})
        for path in paths:
            s = sockperf_on(path, args.seconds)
            theirs[path].append({"min": s["min_us"], "p50": s["p50_us"], "p99": s["p99_us"], "p99.9": s["p999_us"]})
        print(f"repeat {i + 1}/{args.repeats} done", file=sys.stderr)

    rtt = {}
    for path in paths:
        rtt[path] = {src: {f: _median(runs, f) for f in FIGS} for src, runs in ours[path].items()}
        rtt[path]["sockperf_tcp"] = {f: _median(theirs[path], f) for f in FIGS}
    model = calibrate(seconds=args.seconds, with_model=True).to_json()["model_bias"]

    print(f"round trip (µs), ping-pong at {RATE} req/s, median of {args.repeats} runs")
    print(f"{'path':9} {'source':13} " + " ".join(f"{f:>7}" for f in FIGS))
    for path, by in rtt.items():
        for src, figs in by.items():
            print(f"{path:9} {src:13} " + " ".join(f"{figs[f]:7.1f}" if figs[f] is not None else "      —" for f in FIGS))
    print(f"\ntailwise serve {model['service']} at {model['load']:.0%} load: measured − model (µs)")
    def signed(v: float | None) -> str:
        # A percentile the run could not bound is not a number (the verdict's state says why).
        return f"{_us(v):+6.1f}" if v is not None else "     —"

    for src, s in model["sources"].items():
        d, c = s["minus_model"], s["server_stalls_left_out"]["minus_model"]
        print(f"{src:7} p50 {signed(d['p50_ns'])}  p99 {signed(d['p99_ns'])}   "
              f"server stalls left out: p50 {signed(c['p50_ns'])}  p99 {signed(c['p99_ns'])}   "
              f"({s['samples']:,} samples, "
              f"{'every check passed' if s['verdict_state'] == 'done' else 'stopped at the ' + s['verdict_state'] + ' check'}; "
              f"{s['server_stalls_left_out']['server_stalls']} server stalls)")
    print(f"goal (kernel: p50 ≤ 12 µs, p99 ≤ 30 µs): {'met' if model['goal']['met'] else 'missed'}")

    sockperf_version = subprocess.run(["sockperf", "--version"], capture_output=True, text=True).stdout.strip()
    out = {"host": host_info(), "repeats": args.repeats, "seconds": args.seconds, "rate_rps": RATE,
           "rtt_us": rtt, "runs": {"tailwise": ours, "sockperf_tcp": theirs}, "model_bias": model,
           "sockperf": sockperf_version.splitlines()[0] if sockperf_version else None}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
