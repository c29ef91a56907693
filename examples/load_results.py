"""Reading tailwise results in Python (a notebook works the same way).

    tailwise sweep --rates 10k:60k:6 --service fixed:20us --duration 3 --out sweep1
    python3 examples/load_results.py sweep1

A run directory (`tailwise run --out DIR`) reads the same way: one point.
"""

import sys

import tailwise

results = tailwise.load_results(sys.argv[1] if len(sys.argv) > 1 else "sweep1")
print(f"{results.kind} of {len(results.points)} point(s), verdicts: {results.points['verdict'].tolist()}")

# One row per load: each reported percentile with its confidence interval, in ns.
print(results.points[["rate_rps", "achieved_rps", "p99_ns", "p99_low_ns", "p99_high_ns"]].to_string(index=False))

# The raw samples of every point; `used` marks those the statistics used (after the warm-up,
# thinned to independence), latency counts from the intended send time.
s = results.samples
used = s[s["used"] == 1]
print(used.groupby("rate_rps")["latency_ns"].describe(percentiles=[0.5, 0.99]).to_string())

# Send lag per load: how late the client itself was, from the user-space send time as the
# summary's send_lag (sent_ns is the kernel's transmit stamp when there is one: it adds the write).
lag_us = (s["sent_user_ns"].astype("int64") - s["intended_ns"].astype("int64")) / 1e3
print(lag_us.groupby(s["rate_rps"]).quantile(0.99).rename("send lag p99 (µs)").to_string())

# The sweep's own answers.
if results.kind == "sweep":
    print("knee:", results.summary["knee"], "capacity:", results.summary["capacity_rps"])
