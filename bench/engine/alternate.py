"""bench/engine/alternate.py: two builds of the engine, in alternating runs on one machine.

A refactor of the engine must not cost speed or precision (issue 20, "Done when"): this runs
bench/engine/run.py of each installation in turn — A, B, A, B … — so that the machine's noise
falls on both alike, and prints each headline figure per run and its median per build: highest
sustained pipelined rate, send lag p50/p99 at 10k and 100k req/s (all sends, and those no engine
stall delayed). Not a test: nothing here asserts.

    python bench/engine/alternate.py --a BEFORE_ROOT --b AFTER_ROOT [--rounds 2] [--out FILE]

Each ROOT is a checkout whose python/ holds a built tailwise (its _core extension); its own
bench/engine/run.py runs with PYTHONPATH=ROOT/python.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIGURES = {
    "max pipelined rps": lambda r: (r.get("max_pipelined_rps") or {}).get("rate", 0),
    "lag p50 µs @10k": lambda r: r["send_lag"]["10000"]["lag_p50_ns"] / 1e3,
    "lag p99 µs @10k": lambda r: r["send_lag"]["10000"]["lag_p99_ns"] / 1e3,
    "unstalled p99 µs @10k": lambda r: r["send_lag"]["10000"]["unstalled_lag_p99_ns"] / 1e3,
    "lag p50 µs @100k": lambda r: r["send_lag"]["100000"]["lag_p50_ns"] / 1e3,
    "lag p99 µs @100k": lambda r: r["send_lag"]["100000"]["lag_p99_ns"] / 1e3,
    "unstalled p99 µs @100k": lambda r: r["send_lag"]["100000"]["unstalled_lag_p99_ns"] / 1e3,
    "machine stalls lost %": lambda r: r["stalls_5us"]["lost_fraction"] * 100,
}


def one(root: Path, quick: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "engine.json"
        cmd = [sys.executable, str(root / "bench" / "engine" / "run.py"), "--out", str(out)] + (["--quick"] if quick else [])
        env = {**os.environ, "PYTHONPATH": str(root / "python")}
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, type=Path, help="the first checkout (e.g. before the change)")
    ap.add_argument("--b", required=True, type=Path, help="the second checkout (e.g. after it)")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each, alternating [2]")
    ap.add_argument("--quick", action="store_true", help="bench/engine/run.py --quick (1 repetition, 1 s runs)")
    ap.add_argument("--out", default="bench/out/engine-alternate.json")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    started = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    for i in range(args.rounds):
        for name in ("a", "b"):
            r = one(getattr(args, name), args.quick)
            runs[name].append({k: f(r) for k, f in FIGURES.items()})
            print(f"round {i + 1} {name}: " + ", ".join(f"{k} {v:,.1f}" for k, v in runs[name][-1].items()), flush=True)
    print(f"\nmedians over {args.rounds} alternating runs each (started {started}):")
    print(f"{'figure':<26}{'a: ' + args.a.name:>18}{'b: ' + args.b.name:>18}")
    medians = {}
    for k in FIGURES:
        a, b = (statistics.median(r[k] for r in runs[n]) for n in ("a", "b"))
        medians[k] = {"a": a, "b": b}
        print(f"{k:<26}{a:>18,.1f}{b:>18,.1f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"started": started, "a": str(args.a), "b": str(args.b), "runs": runs, "medians": medians},
                              indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
