"""A simulated tailwise client in front of a FIFO target, with the client's own stalls: what
stats/bounds.py's per-request bounds are checked on (tests/unit/test_bounds_coverage.py,
bench/methodology/bounds_coverage.py).

The system (times in integer ns, requests numbered in intended order):

* open-loop Poisson arrivals at rate λ = ρ/E[S] (``arrivals``);
* the client: ``conns × slots`` outstanding requests at most, a FIFO backlog in front of them —
  with replies read in order, round-robin over C connections of K slots each is the same as one
  pool of C·K: request n takes the slot that the read of n − C·K frees; a send stage costing
  ``send_ns`` a request (the request reaches the target at the send's end) and a read stage
  costing ``read_ns`` a reply, neither of which runs during a stall (an event due in a stall
  happens at its end: user-space receive times);
* the target: one FIFO server, service times fixed (M/D/1), exponential (M/M/1) or bimodal
  (tailwise's ``bimodal``: a = m/1.9 with probability 0.9, 10a with 0.1); optionally freezes
  (the server does no work in [f0, f1): a service under way stops and resumes);
* the client's stalls: given windows (``random_stalls``: Poisson starts, uniform lengths), or
  ``SlowMoments``: a stall starts when a request begins its service after a long wait (the
  server's queue was long) or a long service begins.

``simulate`` is the plain loop of the recursion in stats/bounds.py's module doc; ``undelayed``
the same system without stalls or freezes as vectorised Lindley recursions, iterated to the fixed
point of the slot constraint (the two agree: the unit test checks it). ``busy_from`` is the
engine's B_n, ``engine_flags`` the engine's flags for the floor rule. ``truth_quantiles`` is the
population quantile of the undelayed latency, from one long undelayed run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise.stats.bounds import stall_time, stall_union

SERVICE_NS = 100_000
CONNS, SLOTS = 8, 4
SEND_NS = 2_000
READ_NS = 1_000
KINDS = ("fixed", "exp", "bimodal")
NEVER = -(2**62)


def arrivals(rng: np.random.Generator, load: float, n: int, mean_service_ns: float = SERVICE_NS) -> np.ndarray:
    """Intended send times of a Poisson stream at load ``load`` on one server (int64 ns from 0)."""
    return np.cumsum(np.rint(rng.exponential(mean_service_ns / load, n))).astype(np.int64)


def service_times(rng: np.random.Generator, kind: str, n: int, mean_ns: float = SERVICE_NS) -> np.ndarray:
    """Service times (int64 ns, ≥ 1) of mean ``mean_ns``: fixed, exp or bimodal."""
    if kind == "fixed":
        s = np.full(n, float(mean_ns))
    elif kind == "exp":
        s = rng.exponential(mean_ns, n)
    elif kind == "bimodal":
        a = mean_ns / 1.9
        s = np.where(rng.random(n) < 0.1, 10 * a, a)
    else:
        raise ValueError(kind)
    return np.maximum(np.rint(s), 1).astype(np.int64)


def random_stalls(rng: np.random.Generator, span_ns: int, rate_per_s: float = 10.0, low_ns: int = 2_000_000,
                  high_ns: int = 5_000_000) -> np.ndarray:
    """Stall windows (k×2 int64) starting as a Poisson process over [0, span_ns), lengths uniform."""
    k = rng.poisson(rate_per_s * span_ns / 1e9)
    start = np.sort(rng.integers(0, span_ns, k))
    return np.column_stack([start, start + rng.integers(low_ns, high_ns + 1, k)]).astype(np.int64)


@dataclass(frozen=True)
class SlowMoments:
    """Stalls at the target's slow moments: when request n begins its service after waiting ≥
    ``wait_ns`` at the server, or with a service ≥ ``service_ns``, a stall of uniform length
    [low_ns, high_ns] starts at that instant with probability ``prob``, at most one per ``gap_ns``."""

    wait_ns: float
    service_ns: float
    prob: float
    gap_ns: int = 50_000_000
    low_ns: int = 2_000_000
    high_ns: int = 5_000_000


@dataclass
class ClientRun:
    intended: np.ndarray
    service: np.ndarray
    sent: np.ndarray
    departed: np.ndarray
    read: np.ndarray
    #: The client's stall windows, merged (stall_union).
    stalls: np.ndarray

    @property
    def latency(self) -> np.ndarray:
        return self.read - self.intended

    @property
    def busy_from(self) -> np.ndarray:
        return busy_from(self.intended, self.read)


def busy_from(intended: np.ndarray, read: np.ndarray) -> np.ndarray:
    """B_n: the last instant ≤ intended_n at which nothing was outstanding — the due time of the
    first request of n's busy period, the request k whose every predecessor was read by t_k."""
    before = np.r_[NEVER, np.maximum.accumulate(read)[:-1]]
    starts = before <= intended
    return intended[np.maximum.accumulate(np.where(starts, np.arange(len(intended)), 0))]


def _slow_draws(rng, slow: SlowMoments | None, n: int):
    if slow is None:
        return None, None
    return rng.random(n).tolist(), rng.integers(slow.low_ns, slow.high_ns + 1, n).tolist()


def simulate(intended: np.ndarray, service: np.ndarray, stalls=(), slow: SlowMoments | None = None,
             rng: np.random.Generator | None = None, freezes=(),
             slots: int = CONNS * SLOTS, send_ns: int = SEND_NS, read_ns: int = READ_NS) -> ClientRun:
    """The client and the target, request by request, with the client's stalls (``stalls``, or
    started by ``slow`` with draws from ``rng``) and the target's ``freezes`` (windows).

    Every stage's times increase with n, so each stage walks the merged stall windows with its own
    pointer. A read is computed when the slot it frees is needed (n − slots), always before the
    next stall can start: stalls started by ``slow`` begin at a service start, later than every
    send and read computed so far."""
    t, s, n = intended.tolist(), service.tolist(), len(intended)
    if slow is not None and len(stalls):
        raise ValueError("stalls are either given or started at slow moments")
    win = stall_union(stalls).tolist()
    u, length = _slow_draws(rng, slow, n)
    frozen = stall_union(freezes).tolist()
    x, d, r = [0] * n, [0] * n, [0] * n
    ps = pr = pf = 0
    xprev = dprev = rprev = last_stall = NEVER
    for i in range(n + slots):
        m = i - slots  # the read whose slot request i takes
        if m >= 0:
            y = max(d[m], rprev + read_ns)
            while pr < len(win) and win[pr][1] <= y:
                pr += 1
            if pr < len(win) and win[pr][0] <= y:
                y = win[pr][1]
            r[m] = rprev = y
        if i >= n:
            continue
        y = max(t[i], xprev + send_ns, r[m] if m >= 0 else NEVER)
        while ps < len(win) and win[ps][1] <= y:
            ps += 1
        if ps < len(win) and win[ps][0] <= y:
            y = win[ps][1]
        x[i] = xprev = y
        start = max(y + send_ns, dprev)
        while pf < len(frozen) and frozen[pf][1] <= start:
            pf += 1
        if pf < len(frozen) and frozen[pf][0] <= start:
            start = frozen[pf][1]
        if slow is not None and start >= last_stall + slow.gap_ns and u[i] < slow.prob and (
                start - y - send_ns >= slow.wait_ns or s[i] >= slow.service_ns):
            last_stall = start
            if win and start <= win[-1][1]:
                win[-1][1] = max(win[-1][1], start + length[i])
            else:
                win.append([start, start + length[i]])
        done, q = start + s[i], pf
        while q < len(frozen) and frozen[q][0] < done:  # frozen while under way
            done += frozen[q][1] - max(frozen[q][0], start)
            q += 1
        d[i] = dprev = done
    return ClientRun(intended, service, np.array(x, np.int64), np.array(d, np.int64), np.array(r, np.int64),
                     np.array(win, np.int64).reshape(-1, 2))


def _lindley(arrive: np.ndarray, cost) -> np.ndarray:
    """y_n = max(arrive_n, y_{n−1}) + cost_n for all n at once: y_n = C_n + max_{m≤n}(arrive_m − C_{m−1})."""
    c = np.cumsum(np.broadcast_to(cost, arrive.shape), dtype=np.int64)
    return c + np.maximum.accumulate(arrive - (c - cost))


def undelayed(intended: np.ndarray, service: np.ndarray, slots: int = CONNS * SLOTS, send_ns: int = SEND_NS,
              read_ns: int = READ_NS) -> ClientRun:
    """The same system without stalls or freeze, vectorised: send, serve and read are Lindley
    recursions; the slot constraint (send ≥ the read n − slots) is iterated from below to its
    fixed point, which the recursion's solution is (each pass is monotone and exact for one more
    link of every chain of binding slots)."""
    read = None
    for _ in range(10_000):
        due = intended if read is None else np.r_[intended[:slots], np.maximum(intended[slots:], read[:-slots])]
        sent = _lindley(due, send_ns) - send_ns
        departed = _lindley(sent + send_ns, service)
        new = _lindley(departed, read_ns) - read_ns
        if read is not None and np.array_equal(new, read):
            return ClientRun(intended, service, sent, departed, read, np.zeros((0, 2), np.int64))
        read = new
    raise RuntimeError("the slot constraint did not converge")


def engine_flags(run: ClientRun, send_ns: int = SEND_NS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The engine's flags for the floor rule (ARCHITECTURE.md, "Every request, as an interval"):
    sent late — due in a stall, in the guard after it (the requests due in it × the cost per
    send), or while a request so flagged still waits in the backlog; outstanding across — the
    rest whose [intended, read) spans stall or guard time, that time as ``inflation`` (u32)."""
    t, w = run.intended, run.stalls
    if not len(w):
        return np.zeros(len(t), bool), np.zeros(len(t), bool), np.zeros(len(t), np.uint32)
    due_in = np.searchsorted(t, w[:, 1]) - np.searchsorted(t, w[:, 0])
    g = stall_union(np.r_[w, np.column_stack([w[:, 1], w[:, 1] + due_in * send_ns])])
    j = np.searchsorted(g[:, 0], t, side="right") - 1
    base = ((j >= 0) & (t < g[np.maximum(j, 0), 1])).tolist()
    late = np.zeros(len(t), bool)
    waiting_until = NEVER  # the send time of the last request flagged late
    for i, (ti, xi) in enumerate(zip(t.tolist(), run.sent.tolist())):
        if base[i] or waiting_until > ti:
            late[i] = True
            waiting_until = xi
    inflation = np.minimum(stall_time(g, t, run.read), 2**32 - 1)
    across = ~late & (inflation > 0)
    return late, across, np.where(across, inflation, 0).astype(np.uint32)


def truth_quantiles(kind: str, load: float, ps, n: int = 2_000_000, seed: int = 7, warmup: int = 20_000) -> dict:
    """The population p-quantiles of the undelayed latency: one long undelayed run (the first
    ``warmup`` requests dropped), numpy's ``inverted_cdf`` (an order statistic)."""
    rng = np.random.default_rng(seed)
    run = undelayed(arrivals(rng, load, n + warmup), service_times(rng, kind, n + warmup))
    lat = run.latency[warmup:]
    return {p: float(np.quantile(lat, p / 100, method="inverted_cdf")) for p in ps}


def slow_moments(run: ClientRun, kind: str, rate_per_s: float = 10.0) -> SlowMoments:
    """Stalls at the slow moments of ``run`` (an undelayed run): a wait at the server above its 99th
    percentile, or a service above the law's 99.5th percentile (bimodal: the long mode; none for
    fixed), each starting a stall with the probability that makes ``rate_per_s`` of them."""
    wait = run.departed - run.service - run.sent - SEND_NS
    long_service = {"fixed": np.inf, "exp": -np.log(0.005) * SERVICE_NS, "bimodal": 5 * SERVICE_NS}[kind]
    wait_ns = float(np.quantile(wait, 0.99))
    candidates = np.count_nonzero((wait >= wait_ns) | (run.service >= long_service))
    span_s = (run.intended[-1] - run.intended[0]) / 1e9
    return SlowMoments(wait_ns, long_service, min(1.0, rate_per_s * span_s / max(candidates, 1)))


@dataclass
class Rep:
    """One repetition: the delayed run, each request's undelayed latency (``truth``) and the
    max-plus rule's lower bounds."""

    run: ClientRun
    truth: np.ndarray
    lower: np.ndarray

    @property
    def raw_lower(self) -> np.ndarray:
        """U − |Σ ∩ [B, R)|, without the floor: the bound the derivation proves."""
        return self.run.latency - stall_time(self.run.stalls, self.run.busy_from, self.run.read)

    def floor_rule(self) -> tuple[np.ndarray, int]:
        """The floor rule's lower bounds (the engine's flags), and how many requests it counts as
        exact that the client delayed (victims)."""
        from tailwise.stats.bounds import floor_ns, lower_bounds

        lat = self.run.latency
        late, across, inflation = engine_flags(self.run)
        lower = lower_bounds(lat, late, across, inflation, floor_ns(lat, ~late & ~across))
        return lower, int(np.count_nonzero(~late & ~across & (lat > self.truth)))


def bounds_of(run: ClientRun, truth: np.ndarray) -> Rep:
    """The max-plus rule on a run: busy_lower_bounds, the floor from the requests whose busy
    period saw no stall."""
    from tailwise.stats.bounds import busy_lower_bounds, floor_ns

    lat, busy = run.latency, run.busy_from
    exact = stall_time(run.stalls, busy, run.read) == 0
    return Rep(run, truth, busy_lower_bounds(lat, run.intended, busy, run.stalls, floor_ns(lat, exact)))


def repetition(kind: str, load: float, where: str, seed: int, span_s: float) -> Rep:
    """A run of ``span_s`` seconds at ``load`` with stalls ``where`` ("random": 10/s, 2–5 ms;
    "slow": at the target's slow moments, ~10/s), and its undelayed twin."""
    rng = np.random.default_rng(seed)
    n = int(span_s * 1e9 * load / SERVICE_NS)
    t, s = arrivals(rng, load, n), service_times(rng, kind, n)
    twin = undelayed(t, s)
    if where == "random":
        run = simulate(t, s, stalls=random_stalls(rng, int(t[-1])))
    else:
        run = simulate(t, s, slow=slow_moments(twin, kind), rng=rng)
    return bounds_of(run, twin.latency)


def judge(upper: np.ndarray, lower: np.ndarray, truth: dict, confidence: float = 0.95) -> dict:
    """Each percentile's reported interval (``bounded_percentile``) against the truth ``{p:
    value}``: ``{p: {"supported", "covered", "low", "high", "width"}}`` (covered None when the
    data support no interval)."""
    from tailwise.stats.bounds import bounded_percentile

    su, sl = np.sort(upper), np.sort(lower)
    out = {}
    for p, xi in truth.items():
        pc, _ = bounded_percentile(upper, lower, p, confidence, sorted_upper=su, sorted_lower=sl)
        ok = pc.low is not None and pc.high is not None
        out[p] = {"supported": ok, "covered": (pc.low <= xi <= pc.high) if ok else None,
                  "low": pc.low, "high": pc.high, "width": (pc.high - pc.low) if ok else None}
    return out
