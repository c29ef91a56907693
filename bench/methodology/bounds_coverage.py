"""bench/methodology/bounds_coverage: coverage of the percentile intervals when the client itself
delayed requests — the busy-period (max-plus) rule against the floor rule (stats/bounds.py, issue 32).

The simulation of tests/unit/test_bounds_coverage.py with more repetitions (tests/support/clientsim.py:
a client of 8 × 4 slots, send 2 µs and read 1 µs a request, in front of one FIFO server of mean
service 100 µs). Cells: M/D/1, M/M/1 and bimodal at 20, 50 and 80 % load, the client stalling
2–5 ms at random 10 times a second ("random") or at the target's slow moments ("slow"). Each
repetition's 95 % interval of p50, p90 and p99 (``bounded_percentile``, upper = the measured
latency) is judged against the population quantile of the undelayed system (one undelayed run of
4 M requests), with lower = ``busy_lower_bounds`` (new) and with the floor rule on the engine's
flags (floor). Coverage is over the repetitions whose data support an interval (the others are
counted, as unsupported).

Then the target's freezes (10 × 200 ms, 4 s apart, 50 % load), per service, with a 3 ms client
stall 20 ms into each ("freeze, stall inside") and with one ending just at each freeze's start
("freeze edge": outside the rule's assumptions, a target whose speed depends on the clock):
requests whose lower bound exceeds their undelayed latency, by how much, and whether p99's
identified set (value_low … value) holds the undelayed run's own p99.

Prints a table and writes everything as JSON (default bench/out/bounds_coverage.json). Not a test:
~3.5 min here with the default 100 repetitions.

    python bench/methodology/bounds_coverage.py [--reps 100] [--freeze-seeds 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # support.clientsim: the tests' simulated client

from support import clientsim as cs  # noqa: E402
from tailwise.stats.bounds import bounded_percentile  # noqa: E402

PS = (50.0, 90.0, 99.0)
LOADS = (0.2, 0.5, 0.8)
WHERE = ("random", "slow")
SPAN_S = {0.2: 5.0, 0.5: 5.0, 0.8: 12.0}
RULES = ("new", "floor")
MS = 1_000_000


def cell(kind: str, load: float, where: str, reps: int, truth: dict, index: int) -> dict:
    """One cell's repetitions, both rules: coverage, supported counts, interval widths, shares."""
    cov = {r: {p: 0 for p in PS} for r in RULES}
    sup = {r: {p: 0 for p in PS} for r in RULES}
    width = {r: {p: [] for p in PS} for r in RULES}
    n = bounded = flagged = victims = exceptions = stalls = 0
    for i in range(reps):
        rep = cs.repetition(kind, load, where, 500_000 + 1_000 * index + i, SPAN_S[load])
        lat = rep.run.latency
        floor_rule, vic = rep.floor_rule()
        assert (rep.raw_lower <= rep.truth).all() and (rep.truth <= lat).all()
        n, stalls, victims = n + len(lat), stalls + len(rep.run.stalls), victims + vic
        bounded += int(np.count_nonzero(rep.lower < lat))
        flagged += int(np.count_nonzero(floor_rule < lat))
        exceptions += int(np.count_nonzero(rep.lower > rep.truth))
        for rule, lower in (("new", rep.lower), ("floor", floor_rule)):
            for p, j in cs.judge(lat, lower, truth).items():
                sup[rule][p] += j["supported"]
                cov[rule][p] += bool(j["covered"])
                if j["supported"]:
                    width[rule][p].append(j["width"])
    return {
        "service": kind, "load": load, "stalls": where, "reps": reps, "requests": n,
        "truth_ns": {str(p): v for p, v in truth.items()},
        "stalls_per_s": stalls / reps / SPAN_S[load], "bounded_share": bounded / n, "flagged_share": flagged / n,
        "victims_share": victims / n, "floor_exceptions": exceptions,
        "rules": {r: {str(p): {"supported": sup[r][p], "covered": cov[r][p],
                               "coverage": cov[r][p] / sup[r][p] if sup[r][p] else None,
                               "median_width_ns": float(np.median(width[r][p])) if width[r][p] else None}
                      for p in PS} for r in RULES},
    }


def freeze_case(kind: str, edge: bool, seed: int) -> dict:
    """Ten freezes with a client stall inside each (or ending at each one's start, ``edge``)."""
    rng = np.random.default_rng(seed)
    t, s = cs.arrivals(rng, 0.5, 200_000), cs.service_times(rng, kind, 200_000)
    start = np.arange(10) * 4_000 * MS + 2_000 * MS
    freezes = np.column_stack([start, start + 200 * MS])
    stall = np.column_stack([start - 4 * MS, start]) if edge else np.column_stack([start + 20 * MS, start + 23 * MS])
    run = cs.simulate(t, s, stalls=stall, freezes=freezes)
    rep = cs.bounds_of(run, cs.simulate(t, s, freezes=freezes).latency)
    lat, over = run.latency, rep.lower - rep.truth
    truth = float(np.quantile(rep.truth, 0.99, method="inverted_cdf"))
    new, _ = bounded_percentile(lat, rep.lower, 99.0)
    old, _ = bounded_percentile(lat, rep.floor_rule()[0], 99.0)
    return {"service": kind, "case": "freeze edge" if edge else "freeze, stall inside", "seed": seed,
            "above_truth": int(np.count_nonzero(over > 0)), "above_truth_share": float(np.mean(over > 0)),
            "max_excess_ns": float(max(over.max(), 0)), "p99_truth_ns": truth,
            "new": {"low": new.low, "value_low": new.value_low, "value": new.value, "high": new.high},
            "floor": {"low": old.low, "value_low": old.value_low, "value": old.value, "high": old.high},
            "identified_set_holds_truth": bool(new.value_low <= truth <= new.value),
            "floor_identified_set_holds_truth": bool(old.value_low <= truth <= old.value),
            "interval_holds_truth": bool(new.low is not None and new.low <= truth <= new.high)}


def _pct(c: dict, rule: str) -> str:
    return " ".join(f"{c['rules'][rule][str(p)]['coverage']:6.1%}" if c["rules"][rule][str(p)]["coverage"] is not None
                    else "     —" for p in PS)


def print_table(cells: list[dict], freezes: list[dict]) -> None:
    print(f"\n{'cell':22} {'stall/s':>7} {'bounded':>8} {'flagged':>8} {'victims':>8} | {'new: p50    p90    p99':>21} | "
          f"{'floor: p50   p90    p99':>22} | {'p99 width µs new/floor':>22} | unsupp p99")
    for c in cells:
        w = [f"{x / 1e3:,.0f}" if x is not None else "—" for x in (c["rules"][r]["99.0"]["median_width_ns"] for r in RULES)]
        print(f"{c['service']:8} {c['load']:.1f} {c['stalls']:7} {c['stalls_per_s']:7.1f} {c['bounded_share']:8.2%} "
              f"{c['flagged_share']:8.2%} {c['victims_share']:8.2%} | {_pct(c, 'new'):>21} | {_pct(c, 'floor'):>22} | "
              f"{w[0]:>10} /{w[1]:>9} | {c['reps'] - c['rules']['new']['99.0']['supported']:3}")
    print(f"\n{'freezes':32} {'L > truth':>10} {'max excess ms':>14} {'p99 truth':>10} "
          f"{'new [low, value_low, value, high] ms':>38} {'floor low ms':>13}")
    for f in freezes:
        nw = f["new"]
        print(f"{f['service']:8} {f['case']:21} s{f['seed']} {f['above_truth']:10} {f['max_excess_ns'] / MS:14.1f} "
              f"{f['p99_truth_ns'] / MS:10.1f} [{nw['low'] / MS:7.1f} {nw['value_low'] / MS:7.1f} {nw['value'] / MS:7.1f} "
              f"{nw['high'] / MS:7.1f}] {f['floor']['low'] / MS:13.3f}"
              + ("" if f["identified_set_holds_truth"] else "  identified set misses the truth"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100, help="repetitions per cell")
    ap.add_argument("--freeze-seeds", type=int, default=5, help="seeds per freeze case")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "bounds_coverage.json"))
    args = ap.parse_args()
    t0 = time.monotonic()
    cells = []
    for index, (kind, load, where) in enumerate((k, ld, w) for k in cs.KINDS for ld in LOADS for w in WHERE):
        if where == WHERE[0]:
            truth = cs.truth_quantiles(kind, load, PS, n=4_000_000)
        cells.append(cell(kind, load, where, args.reps, truth, index))
        print(f"{kind} {load} {where}: done at {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    freezes = [freeze_case(kind, edge, 900 + i) for kind in cs.KINDS for edge in (False, True)
               for i in range(args.freeze_seeds)]
    print_table(cells, freezes)
    res = {"reps": args.reps, "percentiles": PS, "span_s": {str(k): v for k, v in SPAN_S.items()},
           "wall_s": time.monotonic() - t0, "cells": cells, "freezes": freezes}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
