"""Does a transient hold the tail: one stretch of time, or a few short ones, holding far more than
their share of the samples above the run's p-th percentile? The tail half of the stationarity
check (stats/stationarity.py, ``stationarity``), on samples the caller has already cut.

Transients in the tail
----------------------
A stall (a server paused for 100 ms) is not a unit root and hardly moves a KPSS statistic, yet
it makes the tail of one run unrepeatable. The question is whether one stretch of time holds far
more than its share of the samples above the run's pooled p-th percentile (the *exceedances*).

* Windows: the samples, in intended-time order, are cut into ``TRANSIENT_BATCHES`` = 12 equal
  parts; the windows are every run of one part's length starting at a multiple of half a part
  (23 windows), so an event shorter than half a part lies wholly inside one window. The effect
  size is the largest window's exceedance count over its expected share, ``ratio``. It can reach
  12, so ``CONCENTRATION_MAX`` = 5 is reachable at every size (the former batches of 100 expected
  exceedances could not reach it below 50,000 samples at p99). An event holding a fraction f of
  all exceedances gives ``ratio ≈ 1 + 11f``: the test fires when one event holds ≳ 36 % of the tail.
* Significance, exact for small counts: under homogeneity a window of ``m`` of the ``N``
  samples holds a Binomial(m, E/N) count of the ``E`` exceedances. Exceedances of a queue come in
  clusters (a busy period), which inflates that variance by the integrated autocorrelation time
  ``τ`` of the tail's indicator (independence.py); so, as for percentile intervals, the count is
  taken on the effective scale: ``P(Binomial(m/τ, E/N) >= c/τ)`` (the regularised incomplete beta
  function ``I_π(c/τ, (m − c)/τ + 1)``, which extends the binomial tail to non-integer sizes),
  times 23 for the windows (Bonferroni). ``τ`` is that of the p-th percentile's indicator of the
  samples *outside* the candidate window and half a part either side — and on, half a part at a
  time, while the next half part's median latency lies above the run's p90 (``_stretch``: an
  outage longer than the window still holds it; in steady state a stretch's median is the run's)
  — so that the transient itself does not inflate it. Without that, a 0.3 s outage in a 4 s run
  (all of p99 in it, one cluster) measured its own remnant as the rest's clustering (τ ≈ 130) and
  passed as "too few samples above p99 to test"; with it, 0.1–0.6 s outages in 4 s and 8 s runs
  all fail, and steady queues fire no more than before (0 of 800 at E[S] = 10 µs; 6 and 4 of 100
  at E[S] = 80 µs, 80 % load, 3 s — the one-window test's own rate). A run fails when
  ``ratio >= 5`` and ``p < TRANSIENT_ALPHA`` (0.001).
* Power, found from the counts themselves: the p-value above is exact for any count, so the test
  needs no sample-count gate. It is *applied* when it can fire at all — when the most concentrated
  outcome the data allow, every exceedance (up to a window's size) inside one window, would be
  significant at ``TRANSIENT_ALPHA`` after the Bonferroni factor. Where even that is not
  significant (too few exceedances for their clustering τ), ``concentration`` is None and
  ``detail`` says how many it would take. So a 200 ms freeze holding all 1,484 exceedances of a
  15 s run is judged — the evidence is overwhelming whatever τ the host's noise gives the rest —
  where a gate of ``12 · 3 · τ`` exceedances (τ = 153 then: 5,510) had called the test
  inapplicable; and a loaded queue's own busy periods (M/M/1 at ρ = 0.8: τ ≈ 20–70 at p99) are
  held to the same exact p-value, which their modest concentration does not reach.

Calibration on synthetic data (tests/unit/test_stats.py; the window count 12 chosen among 10, 12 and
16 on 600 host-noise runs): a 100 ms freeze at 20k req/s fails in runs of 6 s (ratio 12) up to
≈ 30 s, and a 20 ms freeze at 10k req/s in 3 s (300 exceedances at p99: the test applies) fails
(ratio ≈ 9). Host noise — 1–4 ms stalls about once a second at 20k–50k req/s over 5–10 s —
passes: 1 of 900 such runs fired with 12 windows (7 with 16), where three or four stalls fell
within a few tens of ms. One such stall holds at most 4 ms/(1 % · 5 s) = 8 % of the p99
exceedances. i.i.d. data pass at 1k (not applied), 10k and 100k samples. At p99.9 the same
stalls hold ten times that share and may fire: there they are the tail. (Those figures are the
one-window test's; with the several-window test below, see its own.)

Several shorter transients
--------------------------
Three to five freezes of 20–50 ms in a 10 s run at 10k req/s hold most of p99's exceedances
between them, yet none holds the ≳ 36 % one window needs; and the freezes left outside the
busiest window make the one-window test's reference τ so large (≈ 250–320 at p99) that it is not
even applied: it caught 2 of 200 such runs. A second test looks for a few short windows that
together carry the percentile:

* Windows of ``WINDOW_NS`` = 100 ms of intended time, aligned to its multiples (the engine's own
  histogram interval, and the warm-up cut's), at least ``SPREAD_MIN_WINDOWS`` = 20 of them holding
  samples (else it is not run). The candidates are the busiest windows by exceedance count, each
  holding at least ``SPREAD_WINDOW_MIN`` = 3 times its share (the first ordinary window ends them:
  it and the rest only dilute), at most ``SPREAD_MAX_WINDOWS`` = 10 and a tenth of the windows.
* Effect size: the k busiest (k = 1 … K) hold at least ``SPREAD_SHARE_MIN`` = 60 % of the
  exceedances — they carry the percentile: without them the pooled p99 would be the rest's p99.6 —
  and at least ``CONCENTRATION_MAX`` = 5 times their share of the samples.
* Significance, the clustering accounted for: the exceedances of a stationary sequence come in
  clusters and, in the limit, form a compound Poisson process (Hsing, Hüsler & Leadbetter, Probab.
  Theory Relat. Fields 78, 1988). A set of windows holding a share ``w`` of the samples is then
  held to a compound Poisson count with geometric cluster sizes (Pólya–Aeppli) of mean ``E·w`` and
  variance ``τ·E·w`` — clusters of mean size ``(τ + 1)/2`` — ``τ`` the upper bound (independence.py)
  of the p-th percentile indicator's clustering outside the k windows and one window either side,
  and outside every window whose median latency lies above the run's p90 (``_elevated``).
  Its tail is bounded by Chernoff's bound (Ann. Math. Stat. 23, 1952), in closed form
  (``_ln_cluster_tail``), at the largest share of samples any k windows hold, times the ``C(W, k)``
  sets of k windows and the K sizes tried (Bonferroni). Not the one-window test's effective
  binomial: it has the clusters' variance but not their tail — with it, the busiest windows of
  steady runs at 80 % load (E[S] = 10 µs, 10 s) reached p ≈ 1e-10, only their share keeping them
  from firing; with the cluster bound, 1e-3 at the least. Only the k windows judged (and their
  neighbours) are left out of the reference: leaving out all ten candidates took the busy periods
  of slow steady queues with them (E[S] = 80 µs, 80 % load: τ of the rest 12–20 against 55–150
  for the whole run) and fired on 6–7 % of them; as done, with ``τ``'s upper bound, none, the least
  p 2.5e-3.
* It fires when some k meets both, ``p < TRANSIENT_ALPHA``; the windows of the most significant k
  are named in ``detail`` (seconds of intended time, adjacent windows merged) and returned as
  ``transient_windows`` (ns).

Calibration (issue 32; 100 seeds a case unless said; the generators of tests/unit/test_stats.py,
``model_run``, ``run`` and ``freeze``): steady model sequences (stats/model.py: M/M/1 and bimodal
M/G/1, E[S] = 10 µs, at 50 and 80 % load — 50k–80k req/s, Poisson intended times, every other
request kept as by the engine's sampler — for 3 s and 10 s):
0 of 800 fired, and 0 of 400 at E[S] = 80 µs and 80 % load (10k req/s, few clusters a window) —
where the one-window test, unchanged, fires on 4–6 % of the 3 s runs (15k samples) and 1 % of the
10 s ones, its reference τ taken without the busy period it judges.
3–5 freezes (uniform) of 20–50 ms (uniform) starting at random ≥ 200 ms apart in a 10 s run at
10k req/s (M/M/1, E[S] = 10 µs, ρ = 0.1): 197 of 200 fired, every freeze reaching above p99
named; three 20 ms freezes: 100 of 100; two: 0 (they hold ≈ 45 %). A
miss is a fifth freeze whose latencies stay below the pooled p99: left in the reference, it
inflates ``τ``. The same at higher load, where each freeze's backlog drains for ρ/(1 − ρ) times
its length and stays in the reference too: 71 of 100 at ρ = 0.5, 2 of 100 at ρ = 0.8. Host noise
(1–4 ms stalls once a second, as above) carries ≈ 30 % of p99's exceedances at 20k req/s and, at
50k req/s and 50 % load, where each stall's drain doubles its share, ≈ 50 % (up to 90 %): the
test fires in 0–1 % of such runs at 20k–35k req/s and 14–18 % at 50k req/s. The 60 % threshold
sits between the two: at 50 % those 50k req/s runs fire 39–46 % of the time; at two thirds 4–5 %,
but three 20 ms freezes (≈ 67 %) only half the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tailwise.stats.independence import independence

TRANSIENT_BATCHES = 12
CONCENTRATION_MAX = 5.0
TRANSIENT_ALPHA = 1e-3
#: Several windows (module doc, "Several shorter transients"): windows of this much intended time,
#: aligned to its multiples as the engine's histograms are; at least SPREAD_MIN_WINDOWS of them with
#: samples; at most SPREAD_MAX_WINDOWS (and a tenth of them) together; holding at least
#: SPREAD_SHARE_MIN of the exceedances.
WINDOW_NS = 100_000_000
SPREAD_MIN_WINDOWS = 20
SPREAD_MAX_WINDOWS = 10
SPREAD_SHARE_MIN = 0.6
#: ... each of them holding at least this many times its own share.
SPREAD_WINDOW_MIN = 3.0


@dataclass(frozen=True)
class Transient:
    applied: bool
    fired: bool
    ratio: float | None
    pvalue: float | None
    exceedances: int
    needed: int | None
    tau: float | None
    detail: str
    #: The several-window test (module doc): it fired, and the windows (ns spans) it named.
    spread: bool = False
    windows: tuple[tuple[int, int], ...] = ()


def in_time_order(intended: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both series sorted by intended time (stable). The analysis hands them sorted already
    (samples are kept in intended order): then they are returned as they are, which is what the
    stable sort would give, without its two copies and its index (24 MB at 2²⁰ samples, at the
    end of a run's memory peak: BENCHMARKS.md, "Memory")."""
    if len(intended) < 2 or bool(np.all(intended[1:] >= intended[:-1])):
        return intended, lat
    order = np.argsort(intended, kind="stable")
    return intended[order], lat[order]


def _window_counts(above: np.ndarray, starts: np.ndarray, m: int) -> np.ndarray:
    """How many of ``above`` are set in each window ``[start, start + m)``. Its own function so that
    the running sum (16 MB at 2²⁰ samples) is freed before the clustering's ACF is computed."""
    cum = np.r_[0, np.cumsum(above)]
    return cum[starts + m] - cum[starts]


def tail_concentration(intended_ns: np.ndarray, latency_ns: np.ndarray, p: float) -> Transient:
    """Is the tail held by one stretch of time, or by a few short ones? (module doc, "Transients in
    the tail" and "Several shorter transients")."""
    intended, lat = in_time_order(np.asarray(intended_ns), np.asarray(latency_ns, dtype=float))
    one = _one_stretch(lat, p)
    if one.exceedances == 0:
        return one
    several = _several_windows(np.asarray(intended, dtype=np.int64), lat, p)
    if several is None:
        return one
    fired, windows, pvalue, text = several
    if not fired:
        return Transient(one.applied, one.fired, one.ratio, one.pvalue, one.exceedances, one.needed, one.tau,
                         f"{one.detail}; {text}")
    if one.fired:
        return Transient(True, True, one.ratio, one.pvalue, one.exceedances, None, one.tau,
                         f"{one.detail}; {text}", True, windows)
    # Only the several-window test fired: its p-value is the run's (``ratio`` stays the one window's).
    return Transient(True, True, one.ratio, pvalue, one.exceedances, one.needed, one.tau,
                     f"a transient holds the tail — stalls or bursts, not steady state: {text}; {one.detail}",
                     True, windows)


def _one_stretch(lat: np.ndarray, p: float) -> Transient:
    """The one-window test on latencies in intended-time order (module doc, "Transients in the tail")."""
    n = len(lat)
    what = f"p{p:g}"
    if n < 2 * TRANSIENT_BATCHES:
        return Transient(False, False, None, None, 0, None, None,
                         f"only {n:,} samples: too few to test for transients in the tail")
    q = np.percentile(lat, p, method="inverted_cdf")
    above = lat > q
    e_total = int(np.count_nonzero(above))
    m = n // TRANSIENT_BATCHES
    half = max(m // 2, 1)
    starts = np.arange(0, n - m + 1, half)
    counts = _window_counts(above, starts, m)
    share = e_total * m / n
    if e_total == 0:
        return Transient(False, False, None, None, 0, None, None,
                         f"no sample above {what} (ties): nothing to test for transients")
    best = int(np.argmax(counts))
    c, s = int(counts[best]), int(starts[best])
    # The clustering of the tail away from the candidate window (and half a part either side, and
    # on across the stretch its transient still holds: ``_stretch``): τ of the indicator of the
    # rest's own p-th percentile, in time order.
    lo, hi = _stretch(lat, max(s - half, 0), min(s + m + half, n), half)
    rest = np.r_[lat[:lo], lat[hi:]]
    ind = independence(rest, p)
    if not ind.ok:
        return Transient(False, False, None, None, e_total, None, None,
                         f"the clustering of the samples above {what} could not be judged outside the busiest window "
                         f"({ind.detail}): no transient is tested for")
    tau = ind.tau
    windows = len(starts)
    rate = e_total / n
    # Could the test fire at all? Only if every exceedance (up to a window's size) in one window
    # would be significant and CONCENTRATION_MAX times the share (module doc, "Power").
    most = min(e_total, m)
    if most / share < CONCENTRATION_MAX or windows * _tail(most, m, tau, rate) >= TRANSIENT_ALPHA:
        needed = _exceedances_needed(rate, tau, windows)
        clus = f", clustered: τ = {tau:.1f}" if tau >= 1.05 else ""
        return Transient(False, False, None, None, e_total, needed, tau,
                         f"too few samples above {what} ({e_total:,}{clus}) to test for transients: even all of them "
                         f"in one window would not be significant; needs {needed:,}")
    needed = None
    ratio = c / share
    pvalue = min(1.0, windows * _tail(c, m, tau, rate))
    fired = ratio >= CONCENTRATION_MAX and pvalue < TRANSIENT_ALPHA
    clus = f", clustering of the tail τ = {tau:.1f}" if tau >= 1.05 else ""
    p_txt = f"p = {pvalue:.1e}" if pvalue >= 1e-99 else "p < 1e-99"
    body = (f"the busiest of {windows} windows (1/{TRANSIENT_BATCHES} of the run each) holds {c:,} of the "
            f"{e_total:,} samples above {what}, {ratio:.1f}× its share ({p_txt}{clus}; "
            f"≥ {CONCENTRATION_MAX:g}× with p < {TRANSIENT_ALPHA:g} fails)")
    if fired:
        return Transient(True, True, ratio, pvalue, e_total, needed, tau,
                         f"a transient holds the tail — a stall or burst, not steady state: {body}")
    return Transient(True, False, ratio, pvalue, e_total, needed, tau, body)


Spans = tuple[tuple[int, int], ...]


def _several_windows(intended: np.ndarray, lat: np.ndarray, p: float) -> tuple[bool, Spans, float, str] | None:
    """The several-window test (module doc, "Several shorter transients"): (fired, the windows it
    names as ns spans, its p-value when it fired (else NaN), the words), or None when the run has
    too few windows of ``WINDOW_NS``."""
    n = len(lat)
    what = f"p{p:g}"
    q = np.percentile(lat, p, method="inverted_cdf")
    above = lat > q
    e_total = int(np.count_nonzero(above))
    widx = intended // WINDOW_NS
    first = int(widx[0])
    widx -= first
    n_windows = int(widx[-1]) + 1
    size = np.bincount(widx, minlength=n_windows)
    count = np.bincount(widx[above], minlength=n_windows)
    occupied = np.nonzero(size)[0]
    w_occ = len(occupied)
    if w_occ < SPREAD_MIN_WINDOWS or e_total == 0:
        return None
    # The busiest windows first (ties: the larger, then the earlier).
    order = occupied[np.lexsort((occupied, -size[occupied], -count[occupied]))]
    hot = _elevated(widx, lat, n_windows)
    k_max = min(SPREAD_MAX_WINDOWS, w_occ // 10)
    largest = np.cumsum(np.sort(size[occupied])[::-1][:k_max]) / n  # the k largest windows' share of samples
    best: tuple[float, int, float, float] | None = None  # (ln p, k, τ, share)
    tried: tuple[int, float, float] | None = None  # (k, share, ln p): met the effect size, least p, not significant
    k_hot = 0
    for k in range(1, k_max + 1):
        w = order[k - 1]
        if count[w] * n < SPREAD_WINDOW_MIN * e_total * size[w]:
            break  # an ordinary window: it and those after it add their share, no transient
        k_hot = k
        c = int(count[order[:k]].sum())
        share = c / e_total
        expected = size[order[:k]].sum() / n
        if share < SPREAD_SHARE_MIN or share < CONCENTRATION_MAX * expected:
            continue
        # The clustering of the tail outside these windows and one either side (and on across
        # the stretch a transient still holds: ``_elevated``).
        out = np.ones(n_windows, bool)
        for v in order[:k]:
            out[max(v - 1, 0):v + 2] = False
        out &= ~hot
        ind = independence(lat[out[widx]], p)
        if not ind.ok:
            continue
        tau = ind.tau_upper
        ln_p = math.log(k_max) + _ln_choose(w_occ, k) + _ln_cluster_tail(c, e_total * largest[k - 1], tau)
        if ln_p < math.log(TRANSIENT_ALPHA):
            if best is None or ln_p < best[0]:
                best = (ln_p, k, tau, share)
        elif tried is None or ln_p < tried[2]:
            tried = (k, share, ln_p)
    if best is None:
        top = order[:max(k_hot, 1)]
        share = count[top].sum() / e_total
        if tried is not None:
            k, share, ln_p = tried
            text = (f"the {_windows_txt(k, True)} hold{'s' if k == 1 else ''} {share:.0%} of the samples above "
                    f"{what}, not significantly more than the tail's clustering gives ({_p_txt(ln_p)})")
        else:
            busiest = (f"the busiest holds {share:.0%}" if k_hot == 0 else
                       f"the {k_hot} at ≥ {SPREAD_WINDOW_MIN:g}× their share hold {share:.0%}")
            text = (f"no {k_max} windows of {WINDOW_NS / 1e6:g} ms hold {SPREAD_SHARE_MIN:.0%} of the samples "
                    f"above {what} ({busiest})")
        return False, (), math.nan, text
    ln_p, k, tau, share = best
    chosen = np.sort(order[:k])
    windows = _spans(chosen + first)
    c = int(count[chosen].sum())
    expected = size[chosen].sum() / n
    when = ", ".join(f"{a / 1e9:.2f}–{b / 1e9:.2f} s" for a, b in windows)
    clus = f", clustering of the rest τ ≤ {tau:.1f}" if tau >= 1.05 else ""
    text = (f"{_windows_txt(k)}, at {when}, hold{'s' if k == 1 else ''} {c:,} of the {e_total:,} samples above "
            f"{what} ({share:.0%}, {share / expected:.0f}× their share; {_p_txt(ln_p)}{clus}; "
            f"≥ {SPREAD_SHARE_MIN:.0%} in at most {k_max} windows with p < {TRANSIENT_ALPHA:g} fails)")
    return True, windows, math.exp(ln_p), text


#: A stretch of time whose median latency lies above this percentile of the whole run is still the
#: transient's: in steady state a stretch's median is the run's (a queue's busy periods at µs
#: service times are far shorter than a 100 ms window), never above its p90.
ELEVATED_P = 90.0


def _stretch(lat: np.ndarray, lo: int, hi: int, step: int) -> tuple[int, int]:
    """[lo, hi) widened by ``step`` samples at a time on each side while the next step's median lies
    above the run's ``ELEVATED_P``-th percentile: a transient longer than the window judged (an
    outage, a restart) stays out of the reference, whose clustering it would otherwise make its own
    (all of a lone outage's exceedances are one cluster: judged by itself it would never be
    significant)."""
    q = np.percentile(lat, ELEVATED_P)
    n = len(lat)
    while lo > 0 and np.median(lat[max(lo - step, 0):lo]) > q:
        lo = max(lo - step, 0)
    while hi < n and np.median(lat[hi:hi + step]) > q:
        hi = min(hi + step, n)
    return lo, hi


def _elevated(widx: np.ndarray, lat: np.ndarray, n_windows: int) -> np.ndarray:
    """The windows whose median latency lies above the run's ``ELEVATED_P``-th percentile (``_stretch``),
    by window index, to be kept out of the several-window test's reference."""
    q = np.percentile(lat, ELEVATED_P)
    hot = np.zeros(n_windows, bool)
    bounds = np.searchsorted(widx, np.arange(n_windows + 1))
    for w in range(n_windows):
        a, b = bounds[w], bounds[w + 1]
        hot[w] = b > a and np.median(lat[a:b]) > q
    return hot


def _spans(windows: np.ndarray) -> Spans:
    """Sorted window indices (multiples of WINDOW_NS) as [start, end) spans in ns, adjacent ones merged."""
    spans: list[list[int]] = []
    for v in windows:
        a, b = int(v) * WINDOW_NS, (int(v) + 1) * WINDOW_NS
        if spans and spans[-1][1] == a:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    return tuple((a, b) for a, b in spans)


def _windows_txt(k: int, busiest: bool = False) -> str:
    span = f"of {WINDOW_NS / 1e6:g} ms"
    if busiest:
        return f"busiest window {span}" if k == 1 else f"busiest {k} windows {span}"
    return f"{k} window{'' if k == 1 else 's'} {span}"


def _p_txt(ln_p: float) -> str:
    """A Bonferroni-multiplied p-value in words (capped at 1)."""
    if ln_p >= 0:
        return "p = 1"
    return f"p = {math.exp(ln_p):.1e}" if ln_p / math.log(10) >= -99 else "p < 1e-99"


def _ln_choose(n: int, k: int) -> float:
    from scipy.special import gammaln
    return float(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


def _ln_cluster_tail(s: float, mean: float, tau: float) -> float:
    """ln of Chernoff's bound on P(S ≥ s), S a count of exceedances arriving in clusters: compound
    Poisson with geometric cluster sizes (Pólya–Aeppli) of mean ``mean`` and variance ``τ·mean`` —
    clusters of mean size c = (τ + 1)/2, Λ = mean/c of them (module doc). The bound
    ``−sup_t [t·s − Λ(G(t) − 1)]``, G the geometric law's generating function at eᵗ, has its
    supremum in closed form."""
    if s <= mean:
        return 0.0
    if mean <= 0:
        return -math.inf
    c = (max(tau, 1.0) + 1.0) / 2.0
    theta = 1.0 / c
    lam = mean / c
    if theta >= 1.0 - 1e-9:  # τ = 1: Poisson
        return -(s * math.log(s / lam) - s + lam)
    a = lam * theta / (s * (1.0 - theta))
    v = (-a + math.sqrt(a * a + 4.0 * a)) / 2.0  # v = 1 − (1 − θ)eᵗ at the optimum: v² + a·v − a = 0
    u = (1.0 - v) / (1.0 - theta)
    return -(math.log(u) * s - lam * (theta * u / v - 1.0))


def _tail(c: float, m: float, tau: float, rate: float) -> float:
    """P(Binomial(m/τ, π) >= c/τ) = I_π(c/τ, m/τ − c/τ + 1): a window of ``m`` samples holding ``c``
    exceedances, on the effective scale (module doc)."""
    from scipy.special import betainc
    k_eff, m_eff = c / tau, m / tau
    return float(betainc(k_eff, max(m_eff - k_eff, 0.0) + 1.0, rate)) if k_eff > 0 else 1.0


def _exceedances_needed(rate: float, tau: float, windows: int) -> int:
    """The fewest exceedances at this rate and clustering for which all of them in one window would
    be significant: the test's reach, said when it does not apply."""
    def fires(e: int) -> bool:
        m = e / (rate * TRANSIENT_BATCHES)  # the window holding a twelfth of the samples
        return windows * _tail(min(e, m), m, tau, rate) < TRANSIENT_ALPHA
    hi = 1
    while not fires(hi) and hi < 1 << 40:
        hi *= 2
    lo = hi // 2
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fires(mid) else (mid, hi)
    return hi
