"""bench/engine/replies.py: does leaving stamped replies for the next send's wake-up move what is measured?

`--poll lean` lets a reply whose kernel stamp is exact however late it is read wait for the margin
before the next send (engine/io.rs, `read_then_sleep`); `--poll block` reads each as it comes.
This runs the same build both ways, in
alternating runs, against `tailwise serve --service fixed:10us` at 20k req/s or memcached -t 1 at
10k (the server on the lowest CPU, the engine pinned to the highest), and reports the medians over
each run's samples (samples.csv) of the parts of a request's time:

* `send_us`: transmit stamp − intended time (the client's side of the send);
* `round_trip_us`: receive stamp − transmit stamp (the network and the server);
* `latency_us`: what tailwise reports;
* `read_late_us`: the user-space clock after the read − the receive stamp (how late it was read).

Not a test: nothing here asserts.

    python bench/engine/replies.py [--target serve|memcached] [--repeats 3] [--seconds 6] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from poll_block import Serve, spinner_noise  # noqa: E402

def one(srv: Serve, rate: int, seconds: float, poll: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "tailwise", "run", f"{srv.scheme}://{srv.addr}", "--rate", str(rate),
                        "--duration", f"{seconds:g}", "--poll", poll, "--quiet", "--json", "--out", f"{tmp}/out"],
                       env={**os.environ, "PYTHONPATH": str(HERE / "python")}, capture_output=True, timeout=seconds + 120)
        s = pd.read_csv(f"{tmp}/out/samples.csv")
    s = s[s["used"].astype(bool)] if "used" in s else s
    med = lambda v: float(np.median(v)) / 1e3  # noqa: E731
    return {"send_us": med(s.sent_ns - s.intended_ns), "round_trip_us": med(s.received_ns - s.sent_ns),
            "latency_us": med(s.latency_ns), "read_late_us": med(s.received_user_ns - s.received_ns), "n": len(s)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="serve", choices=["serve", "memcached"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--out", default=str(HERE / "bench" / "out" / "replies.json"))
    args = ap.parse_args()
    rate = 20_000 if args.target == "serve" else 10_000
    noise0, runs = spinner_noise(), {"lean": [], "block": []}
    with Serve(HERE, "fixed:10us" if args.target == "serve" else "memcached", spin=False) as srv:
        for i in range(args.repeats):
            for name in runs:
                runs[name].append(one(srv, rate, args.seconds, name))
                print(f"  round {i + 1} {name}: {runs[name][-1]}", flush=True)
    keys = ["send_us", "round_trip_us", "latency_us", "read_late_us"]
    print(f"\n{srv.scheme} at {rate} req/s: medians of each run's samples, median [min–max] of {args.repeats}")
    print("--poll".ljust(10) + "".join(k.rjust(24) for k in keys))
    for name, rs in runs.items():
        print(name.ljust(10) + "".join(
            f"{statistics.median(r[k] for r in rs):.2f} [{min(r[k] for r in rs):.2f}–{max(r[k] for r in rs):.2f}]".rjust(24)
            for k in keys))
    noise = {"before": noise0, "after": spinner_noise()}
    print(f"a pinned spinner's lost share of 1 s, before and after: {noise['before']}, {noise['after']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"target": args.target, "runs": runs, "noise": noise}, indent=1))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
