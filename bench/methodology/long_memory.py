"""bench/methodology/long_memory: coverage of the percentile intervals when the samples' correlation
outlasts the lags the autocorrelation is summed over (stats/independence.py, batch means).

The series is a slow Gaussian AR(1) level (φ = 0.9995, correlation length ~2,000 samples) at a
tenth of unit i.i.d. noise — a level drifting with the host's noise under a fast service — of
300,000 samples, started in its stationary law; its true p-quantile is known. Each seed's 95 %
interval (``estimate_percentile``) either covers it or not. Prints the coverage at p50 and p90 and
how often batch means replaced Geyer's sum, and writes them as JSON (default
bench/out/long_memory.json). Not a test (~20 s).

    python bench/methodology/long_memory.py [--reps 100] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.signal import lfilter
from scipy.stats import norm

from tailwise.stats.quantiles import estimate_percentile

PHI = 0.9995
LEVEL = 0.1
N = 300_000
PERCENTILES = (50, 90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "long_memory.json"))
    args = ap.parse_args()
    s_ar = 1 / math.sqrt(1 - PHI**2)
    sd = math.sqrt((LEVEL * s_ar) ** 2 + 1)
    cover = {p: 0 for p in PERCENTILES}
    batch_means = 0
    for r in range(args.reps):
        rng = np.random.default_rng(1000 + r)
        ar = lfilter([1], [1, -PHI], rng.normal(size=N)) + rng.normal() * s_ar * PHI ** np.arange(N)
        x = LEVEL * ar + rng.normal(size=N)
        for p in PERCENTILES:
            pc, ind = estimate_percentile(x, p, 0.95)
            batch_means += "from the means of" in ind.detail
            truth = norm.ppf(p / 100) * sd
            cover[p] += pc.low is not None and pc.high is not None and pc.low <= truth <= pc.high
    result = {"phi": PHI, "level": LEVEL, "n": N, "reps": args.reps,
              "coverage": {f"p{p}": cover[p] / args.reps for p in PERCENTILES},
              "batch_means_used": batch_means, "intervals": args.reps * len(PERCENTILES)}
    print(f"slow AR(1) φ = {PHI} × {LEVEL} + N(0,1), {N:,} samples, {args.reps} seeds: coverage "
          + ", ".join(f"p{p} {cover[p] / args.reps:.0%}" for p in PERCENTILES)
          + f" (95 % asked); batch means used in {batch_means} of {args.reps * len(PERCENTILES)} intervals")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
