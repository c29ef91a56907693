"""Did the server see the requested inter-arrival process?

Latency counts from each request's *intended* time (coordinated omission: Schroeder et al.,
NSDI'06; wrk2), so a send that leaves a few µs late is already charged to that request. What
remains to check is (a) that the intended schedule is the requested process, (b) that the sends
the server saw follow it closely enough that its queue was driven by that process, and (c) that
the client kept up. The arrays are the kept samples — a random 1-in-k subset of the requests
(independent Bernoulli draws).

(a) The schedule. Independent thinning of a Poisson process of rate λ is a Poisson process of
rate λ/k (Rényi's theorem; Kingman, *Poisson Processes*, 1993, §5.1), so for ``exp`` the gaps
between the kept requests' intended times are i.i.d. exponential. Anderson–Darling against the
exponential with its scale *estimated*, p-value from Stephens' tables for that case
(``scipy.stats.anderson(..., 'expon', method='interpolate')``; Stephens, JASA 69, 1974), on a
random subsample of at most ``MAX_GAPS`` gaps; it passes if ``p > ALPHA`` *or* the
Kolmogorov–Smirnov distance to the fitted exponential is at most ``D_MAX`` (a distance here, not
a test, the scale being estimated). This tests tailwise's own generator, so its false-alarm rate
must be tiny: at 2,000 gaps a true exponential has D ≈ 0.01–0.02, far below 0.05. A thinned
``fixed``, ``uniform`` or ``lognormal:S`` schedule is no longer that process (a random 1-in-k
subset of a fixed spacing has geometric gaps), so (a) is skipped for them, and said so.

(b) The sends against the schedule, by a transport distance: the 1-Wasserstein distance between
the distribution of the gaps between sends (in sent order) and that of the gaps between intended
times (in intended order) of the same requests (``scipy.stats.wasserstein_distance``; Villani,
*Optimal Transport*, 2009, ch. 6), divided by the mean intended gap. It is in units of time: the
average amount by which gaps must be stretched or shrunk to turn one distribution into the other.
Coupling each sent gap with the intended gap of the same pair bounds it by the mean change of the
send lag between consecutive requests, ``W₁ <= E|Δlag|``. Measured: independent send jitter on
50 µs gaps (memcached at 20k req/s: 15–18 % of sends ≥ 5 µs late, the engine being inside a
loopback syscall when they fall due; or uniform 0–10 µs) 0.002, a jitter charged to latency
already; a 2 µs loop grid at 100k req/s (10 % of gaps 0) 0.05; a single 4 ms engine stall in
50,000 sends (one long gap, ~80 sends at once) 0.003 — the distance weighs an event by the time
it displaces, unlike the KS distance, which counts 80 zero gaps as misplaced mass. A schedule the
sender did not follow: token-bucket bursts (the requests of each 20 ms leaving back to back at
the refill) 1.9, a fixed spacing against a Poisson schedule 2/e ≈ 0.74, four slots paced by a
near-constant 200 µs reply 0.2. ``DISTANCE_MAX = 0.1`` of the mean gap sits between. The send
lag (sent − intended, p50 and p99) is reported beside it.

(c) The client must keep up: at most ``LATE_LIMIT`` of the requests sent later than the late
threshold (``late_fraction``, counted by the caller). A sender paced by replies (a closed loop)
shows here: with a memoryless reply time its sends still form a Poisson process (a superposition
of Poisson processes, or the service starts of a saturated M/M/c queue), so no test on the sent
gaps alone can see it; only its lag behind the schedule does.

Masked intervals: ``segments`` labels runs of samples with no masked time between them; gaps
across a mask are not gaps of the process and are left out of (a) and (b).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_GAPS = 2_000
#: Gaps compared by the transport distance, at most (a random subsample of each).
MAX_W1_GAPS = 200_000
ALPHA = 0.01
D_MAX = 0.05
DISTANCE_MAX = 0.1
LATE_LIMIT = 0.05
MIN_SENDS = 50
#: The top of Stephens' table for the exponential (SciPy's interpolated p-values stop there).
P_TABLE_MAX = 0.15


@dataclass(frozen=True)
class ArrivalFit:
    ok: bool
    process: str
    gaps: int
    statistic: float | None  # the distance (W₁ / mean intended gap)
    pvalue: float | None  # Anderson–Darling p of the intended schedule ('exp'; None when not tested)
    cv: float | None  # coefficient of variation of the sent gaps (1 for Poisson)
    late_fraction: float
    detail: str
    distance: float | None = None  # W₁(sent gaps, intended gaps) / mean intended gap
    send_lag_p99_ns: float | None = None


def _gaps(times: np.ndarray, segments: np.ndarray | None) -> np.ndarray:
    """Gaps between consecutive times in time order, without those across a mask."""
    order = np.argsort(times, kind="stable")
    gaps = np.diff(times[order])
    if segments is not None:
        seg = segments[order]
        gaps = gaps[seg[1:] == seg[:-1]]
    return gaps


def exp_gap_test(gaps: np.ndarray, rng: np.random.Generator,
                 max_gaps: int = MAX_GAPS) -> tuple[float, float, float, int]:
    """(A², p-value, KS distance D, gaps tested) of gaps against an exponential with estimated
    scale, on a random subsample of at most ``max_gaps``. The interpolated p-value is clipped to
    Stephens' table, [0.01, 0.15] in SciPy 1.17: 0.01 means "0.01 or less"."""
    from scipy import stats
    gaps = np.asarray(gaps, dtype=float)
    sub = rng.choice(gaps, size=max_gaps, replace=False) if len(gaps) > max_gaps else gaps
    res = stats.anderson(sub, dist="expon", method="interpolate")
    d = stats.kstest(sub, "expon", args=(0.0, float(np.mean(sub)))).statistic
    return float(res.statistic), float(res.pvalue), float(d), len(sub)


def _schedule_fit(gaps: np.ndarray, rng: np.random.Generator) -> tuple[bool, float | None, float | None, str]:
    """(a) for a Poisson schedule: (passes, A², p, text)."""
    if len(gaps) < MIN_SENDS or not np.mean(gaps) > 0:
        return False, None, None, f"only {len(gaps):,} intended gaps: too few to test the schedule"
    try:
        a2, p, d, used = exp_gap_test(gaps, rng)
    except (ValueError, FloatingPointError) as e:
        return False, None, None, f"the schedule's fit to the exponential could not be computed ({e})"
    by_p, by_d = p > ALPHA, d <= D_MAX
    # Stephens' table ends at 0.15: report the clipped ends as such.
    p_txt = (f"p ≥ {P_TABLE_MAX}" if p >= P_TABLE_MAX else f"p = {p:.2f} > {ALPHA}") if by_p else f"p ≤ {ALPHA}"
    d_txt = f"KS D = {d:.3f} {'≤' if by_d else '>'} {D_MAX}"
    verdict = "fit" if by_p or by_d else "do not fit"
    return (by_p or by_d, a2, p,
            f"intended gaps {verdict} the exponential (A² = {a2:.2f}, {p_txt}; {d_txt}; either passes; "
            f"on {used:,} of {len(gaps):,} gaps)")


def arrival_fit(sent_ns: np.ndarray, intended_ns: np.ndarray, *, process: str, rate_rps: float,
                late_fraction: float, rng: np.random.Generator, segments: np.ndarray | None = None,
                measured_late: float | None = None) -> ArrivalFit:
    """Judge the kept requests' schedule and sends (module doc: criteria (a), (b), (c)).

    ``sent_ns``, ``intended_ns``: the kept samples' times, any order, paired by index;
    ``process``: the requested inter-arrival process ('exp', 'fixed', 'uniform', 'lognormal:S');
    ``rate_rps``: the requested rate (not used: the rate check judges it); ``late_fraction``: the
    share of requests sent later than the late threshold; ``segments``: optional labels of runs of
    samples between masks (gaps across a mask are left out). ``measured_late``: when ``sent_ns``
    are the sends as the client alone would have made them (its stalls' and a held window's delay
    taken out: methodology/analysis.py ``own_sent``), the late share as measured, said beside.
    Never raises on data: too few samples give ``ok=False`` with the reason.
    """
    from scipy import stats
    sent = np.asarray(sent_ns, dtype=np.int64).astype(float)
    intended = np.asarray(intended_ns, dtype=np.int64).astype(float)
    seg = None if segments is None else np.asarray(segments)
    n = len(sent)
    late_ok = late_fraction <= LATE_LIMIT
    late_txt = (f"{late_fraction:.1%} of requests sent late "
                f"({'≤' if late_ok else '>'} {LATE_LIMIT:.0%} {'passes' if late_ok else 'fails'})")
    if measured_late is not None:
        late_txt = (f"{late_txt} by the client's own doing ({measured_late:.1%} late as measured: the rest were its "
                    f"stalls, which the intervals carry, or a target that held every slot)")
    if len(intended) != n:
        return ArrivalFit(False, process, 0, None, None, None, late_fraction,
                          f"{n:,} send times for {len(intended):,} intended times: the arrivals cannot be paired")
    if n < MIN_SENDS:
        return ArrivalFit(False, process, max(n - 1, 0), None, None, None, late_fraction,
                          f"only {n:,} kept sends: too few to test the arrivals (needs {MIN_SENDS}); {late_txt}")
    g_int, g_sent = _gaps(intended, seg), _gaps(sent, seg)
    mean_gap = float(np.mean(g_int)) if len(g_int) else 0.0
    if len(g_int) < MIN_SENDS or len(g_sent) < MIN_SENDS or not mean_gap > 0:
        return ArrivalFit(False, process, len(g_sent), None, None, None, late_fraction,
                          f"only {min(len(g_int), len(g_sent)):,} gaps between kept sends outside masks "
                          f"(mean intended gap {mean_gap / 1e3:.1f} µs): too few to test the arrivals; {late_txt}")

    # (a) the schedule
    if process == "exp":
        sched_ok, _, pvalue, sched_txt = _schedule_fit(g_int, rng)
    else:
        sched_ok, pvalue = True, None
        sched_txt = f"the {process} schedule is not tested (a random subset of it is no longer {process})"

    # (b) the sends against the schedule; on a random subsample of the gaps when there are many
    # (the distance between two empirical distributions of 200k gaps each is estimated to a few
    # thousandths of the mean gap, far inside the 0.1 threshold, at a tenth of the cost at 2M).
    if len(g_sent) > MAX_W1_GAPS:
        g_sent = rng.choice(g_sent, MAX_W1_GAPS, replace=False)
        g_int = rng.choice(g_int, MAX_W1_GAPS, replace=False)
    distance = float(stats.wasserstein_distance(g_sent, g_int)) / mean_gap
    dist_ok = distance <= DISTANCE_MAX
    lag = sent - intended
    lag50, lag99 = (float(v) for v in np.percentile(lag, [50, 99]))
    sent_mean = float(np.mean(g_sent))
    cv = float(np.std(g_sent, ddof=1) / sent_mean) if sent_mean > 0 else None
    dist_txt = (f"sent gaps vs intended gaps: W₁ = {distance:.3f} of the {mean_gap / 1e3:,.1f} µs mean gap "
                f"({'≤' if dist_ok else '>'} {DISTANCE_MAX} {'passes' if dist_ok else 'fails'}), "
                f"send lag p50 {lag50 / 1e3:,.1f} µs, p99 {lag99 / 1e3:,.1f} µs")

    ok = sched_ok and dist_ok and late_ok
    failed = [name for name, good in (("the schedule", sched_ok), ("the sent gaps", dist_ok),
                                      ("late sends", late_ok)) if not good]
    lead = "arrivals follow the schedule" if ok else f"arrivals fail on {' and '.join(failed)}"
    detail = f"{lead}: {sched_txt}; {dist_txt}; {late_txt}"
    return ArrivalFit(ok, process, len(g_sent), distance, pvalue, cv, late_fraction, detail, distance, lag99)
