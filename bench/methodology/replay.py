"""bench/methodology/replay: a fixed, seeded run replayed through the analysis and the summary, the
summary printed as JSON with its SHA-256 — the same bytes before and after a change that only moves
code (issue 35: "every figure stays the same").

The rows are made here, not measured: Poisson arrivals at 20k req/s over 10 s, latencies of an
exponential service with a stall of the client (requests flagged ENGINE_STALL and INFLATED, with
their busy periods) and a few unanswered ones, the every-request histograms recorded from the same
rows. They go through ``fixed_methodology`` (one analysis, every check) and ``build_summary`` as a
``--duration`` run does; the host is fixed, so the bytes do not depend on the machine.

    python bench/methodology/replay.py [--seed N] [--out FILE]

Runs on the layouts before and after issue 35 (it imports from whichever the tree has).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from tailwise import _core
from tailwise.methodology.controller import fixed_methodology
from tailwise.spec.runspec import RunSpec

try:  # the layout of issue 35
    from tailwise.methodology.summarize import build_summary
    from tailwise.results.measured import AgentResult
    from tailwise.results.rows import SAMPLE_DTYPE, Flag
except ImportError:  # the layout before it
    from tailwise.agent.local import SAMPLE_DTYPE, AgentResult, Flag
    from tailwise.results.summary import build_summary

RATE_RPS, SECONDS = 20_000, 10.0
HOST = {"hostname": "replay", "kernel": "6.18.0", "cpu_model": "replay", "cores": 2, "usable_cores": 2,
        "clocksource": "tsc", "python": "3.11.7"}


class Intervals:
    """The engine's every-request store, from the rows: what ``every_request`` reads of it."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.interval_ns, self.digits = _core.interval_params()

    def window(self, first: int, last: int, with_pending: bool) -> bytes:
        lowest, highest, digits = _core.histogram_params()
        h = _core.Histogram(lowest, highest, digits)
        t = self.rows["intended_ns"].astype(np.int64)
        inside = (t >= first * self.interval_ns) & (t < last * self.interval_ns)
        for v in self.rows["latency_ns"][inside].astype(np.int64):
            h.record(int(max(v, lowest)))
        return h.encode()


def rows(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(RATE_RPS * SECONDS)
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    intended = np.cumsum(rng.exponential(1e9 / RATE_RPS, n)).astype(np.int64) + 1_000_000
    latency = (12_000 + rng.exponential(8_000, n)).astype(np.int64)
    s["intended_ns"], s["latency_ns"] = intended, latency
    s["sent_ns"] = intended + rng.integers(200, 1_500, n)
    s["rx_user_ns"] = intended + latency
    s["busy_from_ns"] = intended
    # A 2 ms stall of the client at 4 s: what was due in it is sent late, what was out is inflated.
    stall = (intended >= 4_000_000_000) & (intended < 4_002_000_000)
    s["flags"][stall] |= int(Flag.ENGINE_STALL)
    s["latency_ns"][stall] += (4_002_000_000 - intended[stall]).astype(np.uint64)
    across = (intended >= 3_999_970_000) & (intended < 4_000_000_000)
    s["flags"][across] |= int(Flag.INFLATED)
    s["inflation_ns"][across] = 2_000_000
    s["latency_ns"][across] += np.uint64(2_000_000)
    # A few never answered: censored at the time they waited (the timeout).
    lost = rng.choice(n, 20, replace=False)
    s["flags"][lost] |= int(Flag.CENSORED | Flag.TIMEOUT)
    s["latency_ns"][lost] = 1_000_000_000
    return s


def hist(values: np.ndarray) -> bytes:
    lowest, highest, digits = _core.histogram_params()
    h = _core.Histogram(lowest, highest, digits)
    for v in values.astype(np.int64):
        h.record(int(max(v, lowest)))
    return h.encode()


def replay(seed: int) -> dict:
    s = rows(seed)
    n = len(s)
    lost = int(((s["flags"] & int(Flag.CENSORED)) != 0).sum())
    counters = {"intended": n, "sent": n, "received": n - lost, "late": int(((s["flags"] & int(Flag.ENGINE_STALL)) != 0).sum()),
                "never_sent": 0, "errors": 0, "timeouts": lost, "unfinished": 0, "rx_kernel": n - lost, "tx_kernel": n,
                "reconnects": 0, "resent": 0, "gets": 0, "sets": 0, "hits": 0, "misses": 0, "stored": 0}
    lag = (s["sent_ns"] - s["intended_ns"]).astype(np.int64)
    result = AgentResult(
        counters=counters, elapsed_ns=int(SECONDS * 1e9) + 1_000_000, received_in_window=n - lost,
        latency_hist=hist(s["latency_ns"]), send_lag_hist=hist(lag), send_lag_unstalled_hist=hist(lag[:n // 2]),
        stalls=1, stalled_ns=2_000_000, samples=s, error=None, error_reasons=[], pinned_cpus=[1], cpu_ns=10**9,
        wall_start_s=1_764_000_000.0, engine_stalls_ns=[(4_000_000_000, 4_002_000_000)], intervals=Intervals(s))
    rs = RunSpec.from_flags({"rate": RATE_RPS, "duration": f"{SECONDS:g}", "seed": seed, "timestamps": "kernel"}, None)
    config = rs.config("tailwise run (replay)")
    config["timestamps"], config["timestamps_note"] = "kernel", None
    spec = rs.load_spec(["127.0.0.1:1"], "kernel")
    analysis, methodology = fixed_methodology(result, spec, rs.precision(), rs.seed, bounds=rs.bounds)
    summary = build_summary(target="synthetic://127.0.0.1:1", config=config, host=HOST, result=result,
                            analysis=analysis, methodology=methodology)
    return summary if isinstance(summary, dict) else summary.to_json()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "replay.json"),
                    help="where the summary's JSON goes [default: bench/out/replay.json]")
    args = ap.parse_args()
    text = json.dumps(replay(args.seed), indent=2, sort_keys=True) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"{hashlib.sha256(text.encode()).hexdigest()}  {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
