"""The coordinator's state machine: load → arrivals → stationarity → independence → confidence →
consistency → verdict.

Each round (``ROUND_S`` at first, then ``ROUND_GROWTH`` times longer each) it takes a snapshot of
the engine — every sampled request finished so far, and those outstanding at that instant,
censored at the time they have waited (so a freeze still going on is already in the tail) — runs
``analyse`` on it, and decides:

* every check passes → stop, verdict ok (the engine stops at once);
* the load or the arrivals fail for ``PATIENCE`` rounds in a row after the first, or a tenth of
  the requests could not even be sent → stop: the client cannot produce the workload — unless
  the target has answered nothing for ``SILENT_S``: then it is away, and the engine ends the run
  naming it (exit 2, as in --duration mode) if it stays unreachable; on datagrams, the slots that
  unanswered requests hold until --timeout are named as the cause (``held_slots``);
* the confidence interval is too wide → keep going while the estimated time to reach the width
  fits in ``--max-time`` (with slack), else stop early (so too when the client's own stalls alone
  keep it too wide);
* otherwise collect more, up to ``--max-time``; then the verdict names every failed check:
  ``imprecise`` when only the precision was not reached, ``not-measurable`` when a validity check
  failed (methodology/verdict.py).

Time budget: the engine's schedule ends at ``--max-time``; after it, the replies still in flight
are collected for at most ``--timeout`` and one last analysis runs (about 1.5 s per million
samples kept here: BENCHMARKS.md). A run ends within ``--max-time`` + ``--timeout`` + two analyses.

The coordinator's own CPU: when a CPU is free of the engine threads and the built-in server's
workers, the coordinator moves there. Otherwise each round *pauses the schedule*: no request
falls due while it computes, the few in flight are answered first (``DRAIN_S`` at most), and the
schedule goes on afterwards, every intended time moved by the pause — so the coordinator's CPU
delays no request and nothing has to be left out for it (on a 2-vCPU guest a round's analysis
otherwise took the built-in server's CPU and overloaded it for the whole round: send lag p99
74 ms at 50k req/s). The pauses are decided by the clock, independent of the target, and
reported; they count against --max-time. Stalls of the engine are handled per request by the
engine itself (time/stall.rs, thread.rs).

The verdict is the deciding round's analysis, re-run with the final counters so that every figure
on the screen agrees with the summary. Nothing here averages percentiles: every round uses the
pooled samples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import Callable

import numpy as np

from tailwise import signals
from tailwise.driver.local import Session, Taken
from tailwise.host.placement import Placement
from tailwise.results.measured import AgentResult
from tailwise.spec.load import LoadSpec
from tailwise.methodology.analysis import STEPS, Analysis, analyse
from tailwise.methodology.kinds import kinds_of
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.spec.precision import Precision
from tailwise.methodology.checks import Check, Setting, target_width_ns
from tailwise.methodology.verdict import PRECISION, VALIDITY
from tailwise.methodology.remedies import Advice, FreeHeldSlots, HeldSlots, RaiseMaxTime, Remedy, RunLonger, RunToEnd
from tailwise.methodology.words import held_words
from tailwise.stats.histogram import Buckets, decode
from tailwise.spec.target import DATAGRAM, PACKET

ROUND_S = 1.0
#: Each round is this much longer than the one before: the analysis of everything collected costs
#: CPU (0.1 s at 100k samples, 1.4 s at 1M) that a co-located server or engine thread pays for,
#: so later rounds, which add relatively little, come less often.
ROUND_GROWTH = 1.25
#: Between rounds the engines hand over what they finished this often (kept in the bounded
#: subsample, written to the samples file), so that nothing grows with a round's length in them.
COLLECT_S = 1.0
PATIENCE = 3
#: Give up early when reaching the CI width would take more than this multiple of the time left.
HOPELESS = 4.0
#: This share of the requests due never sent (they wait only for a free slot): the workload is not offered.
BEHIND = 0.10
#: Before a round's analysis, the requests in flight are given this long to be answered.
DRAIN_S = 0.02
#: A target that has answered nothing (no reply, no error reply) for this long is away, not slow:
#: the client's own stop rules wait for the engine, which ends the run naming the target once it
#: stays unreachable (or goes on when it comes back) — as in --duration mode.
SILENT_S = 0.5
#: Protocols whose unanswered requests hold their slot until --timeout: no connection closes to
#: free them.
DATAGRAM_SCHEMES = DATAGRAM
#: Packets one flow tracks at most (packet/flows.rs, MAX_RING).
PACKET_IN_FLIGHT = 1 << 20
#: Unanswered datagrams holding this share of the slots on average explain a rate shortfall.
HELD_SHARE = 0.5


@dataclass
class RoundInfo:
    round: int
    elapsed_s: float
    state: str
    samples: int
    used: int
    ci_width_ns: float | None
    ci_target_ns: float | None
    failed: list[str]
    percentile: float = 99.0
    #: Seconds until the coordinator concludes, at most: the time the target percentile's CI
    #: still needs (its width shrinks as 1/√n, so n_eff must reach the samples it needs) capped
    #: by --max-time; None when it has no estimate.
    eta_s: float | None = None

    def as_json(self) -> dict:
        return self.__dict__.copy()


def every_request(intervals, with_pending: bool) -> Callable[[int, int], Buckets | None]:
    """The every-request histogram of intervals first … last − 1, from the engine's store."""
    def window(first: int, last: int) -> Buckets | None:
        if intervals is None or last <= first:
            return None
        return Buckets.of(decode(intervals.window(first, last, with_pending)))
    return window


def held_slots(spec: LoadSpec, counters: dict, elapsed_s: float) -> HeldSlots | None:
    """Datagrams never answered keep their slot until --timeout: by Little's law they hold
    timeouts × timeout ÷ elapsed slots on average. When that is at least ``HELD_SHARE`` of the
    slots (--conns × --outstanding), what limited the rate, with the figures; None otherwise (and
    for stream protocols)."""
    lost = counters.get("timeouts", 0)
    # Packet mode holds no slots: a packet's place in its flow's ring is not a connection's.
    if spec.scheme not in DATAGRAM_SCHEMES or spec.scheme == PACKET or elapsed_s <= 0 or not lost:
        return None
    timeout_s = spec.timeout_ns / 1e9
    slots = spec.conns * spec.outstanding
    held = lost * min(timeout_s, elapsed_s) / elapsed_s
    if held < HELD_SHARE * slots:
        return None
    return HeldSlots(lost, timeout_s, held, slots, spec.conns, spec.outstanding)


@dataclass(frozen=True)
class RoundOutcome:
    """What the stop policy decides on after a round: the analysis and the counters reduced to
    the figures its rules read."""

    #: Rounds so far, this one included.
    n: int
    #: The analysis' first failing step (STEPS), or "done".
    state: str
    #: The failed checks of that step.
    failing: tuple[str, ...]
    #: Rounds in a row, this one included, that the load and the arrivals step failed (next_streaks).
    streaks: dict[str, int]
    #: The target has answered nothing for SILENT_S: it is away, not the client behind.
    silent: bool
    never_sent: int
    intended: int
    samples_used: int
    #: Samples the asked percentile's CI still needs (None: it has its width or no estimate).
    samples_needed: int | None
    elapsed_s: float
    max_time_s: float
    #: held_slots: unanswered datagrams held the slots.
    held: HeldSlots | None = None
    #: The asked precision is reached (the confidence and stalls checks pass), whatever the rest.
    precise: bool = False
    #: Validity checks that failed on what they saw, not for want of data (their remedy is not to
    #: run longer): more rounds would only dilute what they found.
    invalid: tuple[str, ...] = ()


def substantive_failures(checks: list[Check]) -> tuple[str, ...]:
    """The failed validity checks (methodology/verdict.py) whose remedy is not to run longer."""
    return tuple(c.name for c in checks if not c.ok and c.name in VALIDITY and not isinstance(c.remedy, RunLonger))


#: The client's stalls alone keep the precision out of reach this many rounds in a row: stop.
WIDENING_PATIENCE = 2 * PATIENCE


def next_streaks(streaks: dict[str, int], state: str, failing: tuple[str, ...] = ()) -> dict[str, int]:
    """Each client step's count of rounds in a row that it was the first to fail; ``widening``:
    rounds in a row that the stalls check failed the precision step (more samples do not narrow
    what the client's own stalls add)."""
    out = {k: v + 1 if state == k else 0 for k, v in streaks.items() if k != "widening"}
    if "widening" in streaks:
        out["widening"] = streaks["widening"] + 1 if state == "confidence" and "stalls" in failing else 0
    return out


def stop_policy(r: RoundOutcome) -> str | None:
    """Why the coordinator stops after this round, or None to go on (a pure function of the
    round's figures, tested on its own: tests/unit/test_stop_policy.py). In order:

    * every check passed → precision reached;
    * the target answers nothing → go on: the engine ends the run naming it if it stays away;
    * the precision is reached but a validity check failed on what it saw (not for want of data)
      → stop, not-measurable: the stop is decided by the precision and validity judged once there,
      never by waiting for a failed check to pass (optional stopping: each further look at the
      same, growing data gives a check that saw a transient or a drift another chance to miss it
      as it is diluted — a false ok);
    * the load or the arrivals failed ``PATIENCE`` rounds in a row (after the first) → the client
      cannot produce the workload;
    * more than ``BEHIND`` of the requests could not be sent → every slot was held by requests the
      target had not answered (unanswered datagrams, named as such), or the connections were down;
    * the client's own stalls alone kept the asked percentile wider than --ci for
      ``WIDENING_PATIENCE`` rounds in a row → out of reach (more samples do not narrow that part);
    * the CI needs more samples than ``HOPELESS`` times the time left would give → out of reach.

    Out of reach is not a failure: the run's verdict is then ``imprecise`` if every validity check
    passes (methodology/verdict.py), its intervals reported as they are.
    """
    if r.state == "done":
        return f"precision reached in round {r.n}"
    if r.silent:
        return None
    if r.precise and r.invalid and r.n > 1:
        # Validity is judged where the precision decides the stop, once: going on until a check
        # that saw a problem no longer sees it (diluted by more data) would be optional stopping.
        return f"precision reached in round {r.n}; {', '.join(r.invalid)} failed"
    if r.n > 1 and any(v >= PATIENCE for k, v in r.streaks.items() if k != "widening"):
        return f"{', '.join(r.failing)} failed in rounds {r.n - PATIENCE + 1}–{r.n}"
    if r.n > 1 and r.never_sent > BEHIND * max(r.intended, 1):
        what = f"{r.never_sent:,} of {r.intended:,} requests could not be sent within --timeout"
        # A request waits in the backlog only for a free slot: every connection's were held by
        # requests the target had not answered (or the connections were down) — the target's doing.
        return (f"{what}: {held_words(r.held)}" if r.held else
                f"{what}: every slot (--conns × --outstanding) was held by requests the target had not answered, or "
                "the connections were down")
    if r.streaks.get("widening", 0) >= WIDENING_PATIENCE:
        return (f"precision out of reach: the client's own stalls widen the interval beyond --ci in rounds "
                f"{r.n - r.streaks['widening'] + 1}–{r.n}")
    if r.state == "confidence" and r.samples_needed and r.n >= 3:
        used_rate = r.samples_used / max(r.elapsed_s, 1e-9)
        left_s = r.max_time_s - r.elapsed_s
        if used_rate > 0 and (r.samples_needed - r.samples_used) / used_rate > HOPELESS * left_s:
            return f"precision out of reach within --max-time (round {r.n})"
    return None


class Ending(Enum):
    """How a measurement ended, as far as its remedies care; the value is the summary's
    ``methodology.stopped`` where no sentence says more."""

    #: The stop policy concluded (its sentence is the stop reason).
    CONCLUDED = "concluded"
    #: The engine stopped with an error.
    ERROR = "error"
    #: The schedule ran to --max-time.
    MAX_TIME = "max-time"
    #: --duration mode: the schedule ran to its end.
    DURATION = "duration"
    INTERRUPTED = "interrupted"


def adjust_remedies(checks: list[Check], ending: Ending, measured_s: float, max_time_s: float,
                    held: HeldSlots | None = None, target_error: str | None = None) -> list[Check]:
    """No remedy may contradict what happened: running longer, after a run that used its whole
    --max-time, says by how much to raise it; after an interrupt, it says the run was interrupted.
    ``held`` (``held_slots``): lost datagrams, not the server's speed or the client's, limited the
    rate, and the rate and arrivals checks say so; ``target_error``: the target went away (the
    engine's error), which no client-side remedy can mend."""
    return [c if c.ok else replace(c, remedy=fitting_remedy(c, ending, measured_s, max_time_s, held, target_error))
            for c in checks]


def fitting_remedy(c: Check, ending: Ending, measured_s: float, max_time_s: float, held: HeldSlots | None,
                   target_error: str | None) -> Remedy | None:
    """A failed check's remedy in the light of how the run ended (adjust_remedies)."""
    client_side = c.name in ("rate", "agents", "arrivals")
    if target_error and client_side:
        return Advice.TARGET_GONE
    r = FreeHeldSlots(held) if held and client_side else c.remedy
    if isinstance(r, RunLonger):
        if ending is Ending.INTERRUPTED:
            return RunToEnd(measured_s)
        if ending is Ending.MAX_TIME:
            return RaiseMaxTime(max_time_s, r.or_higher_rate)
    return r


def run_plan(spec: LoadSpec, precision: Precision, bound_delays: bool = True,
             setting: Setting | None = None, fixed: bool = False, bounds: str = "busy") -> RunPlan:
    """What every analysis of a run reads from its spec."""
    # Packet mode: each flow holds as many packets in flight as its ring (packet/flows.rs), no
    # connection's slots: Little's law never limits it.
    conns, outstanding = ((spec.protocol["flows"], PACKET_IN_FLIGHT) if spec.scheme == PACKET
                          else (spec.conns, spec.outstanding))
    return RunPlan(precision, rate_rps=spec.offered_rps, arrival=spec.timed_arrival, conns=conns,
                   outstanding=outstanding, sample_every=spec.timed_sample_every, late_ns=spec.late_ns,
                   bound_delays=bound_delays, setting=setting, fixed=fixed, bounds=bounds, kinds=kinds_of(spec))


def run_input(plan: RunPlan, seed: int, result: AgentResult, elapsed_s: float, *, pauses=(),
              samples: np.ndarray | None = None, owner: np.ndarray | None = None, end_ns: int | None = None,
              every: Callable[[int, int], Buckets | None] | None = None) -> AnalysisInput:
    """The final analysis of a run: its result's counters, error reasons, stalls and agents (their
    final counters), over ``samples`` (with their agents, ``owner``) up to ``end_ns`` with
    ``every``'s every-request window (by default the whole run's)."""
    return AnalysisInput(
        plan, result.samples if samples is None else samples, result.counters, elapsed_s, result.received_in_window,
        np.random.default_rng(seed), reasons=result.error_reasons,
        end_ns=result.elapsed_ns if end_ns is None else end_ns, pauses=tuple(pauses),
        engine_stalls=result.engine_stalls_ns, target_stalls=result.target_stalls_ns,
        every_request=every_request(result.intervals, with_pending=False) if every is None else every,
        agents=tuple(result.agents or ()), owner=result.owner if samples is None else owner, per_kind=True)


@dataclass(frozen=True)
class Round:
    """One round: the snapshot, its analysis, the schedule's time then (pauses left out) and the
    every-request histogram of its window (what the final analysis reuses)."""

    taken: Taken
    analysis: Analysis
    elapsed_s: float
    every: Buckets | None


@dataclass(frozen=True)
class Stop:
    """The stop policy's decision: its reason and, when every check passed, the deciding round."""

    reason: str
    deciding: Round | None


class Silence:
    """When the target last answered (a reply or an error reply): silent for ``silent_s`` is away."""

    def __init__(self, silent_s: float):
        self.silent_s = silent_s
        self.answered, self.at = -1, time.monotonic()

    def see(self, snap: dict) -> None:
        answered = snap["received"] + snap["errors"]
        if answered != self.answered:
            self.answered, self.at = answered, time.monotonic()

    @property
    def silent(self) -> bool:
        return time.monotonic() - self.at >= self.silent_s


class Controller:
    def __init__(self, spec: LoadSpec, precision: Precision, *, seed: int,
                 progress: Callable[[RoundInfo], None] | None = None, round_s: float = ROUND_S,
                 bound_delays: bool = True, setting: Setting | None = None, bounds: str = "busy",
                 placement: Placement | None = None):
        self.spec = precision.open_ended(spec)
        self.precision = precision
        self.plan = run_plan(self.spec, precision, bound_delays, setting, bounds=bounds)
        self.seed = seed
        #: Called with each round's RoundInfo: the caller prints it or draws it.
        self.progress = progress
        self.round_s = round_s
        self.history: list[RoundInfo] = []
        self.pauses: list[tuple[int, int]] = []
        #: Where the coordinator runs (host/placement.py); without one, where the scheduler puts it.
        self.placement = placement or Placement(None, None, spinning=True)

    def _paused_ns(self, upto_ns: int) -> int:
        return sum(max(0, min(b, upto_ns) - a) for a, b in self.pauses)

    def run(self, session: Session, on_start: Callable[[Session], None] | None = None,
            on_end: Callable[[AgentResult], None] | None = None) -> tuple[AgentResult, Analysis, dict]:
        """Drive a started session to a verdict. Returns the result, the final analysis and the
        ``methodology`` block of the summary. ``on_start(session)`` once the coordinator is placed
        (a thread it starts, the live line's, is placed with it); ``on_end(result)`` once the engine
        has finished, before the final analysis."""
        interrupted, stop = False, None
        self.placement.take()
        if on_start is not None:
            on_start(session)
        try:
            stop = self._rounds(session)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            session.stop()
            self.placement.release()
        # A stop signal stops the engine from its handler (signals.py): the loop ends, the run is
        # interrupted, and what was measured is analysed and written as usual.
        # (A signal after the coordinator concluded cuts nothing short.)
        if signals.received() is not None and stop is None:
            interrupted = True
        result = session.finish(interrupted)
        if on_end is not None:
            on_end(result)
        return self._conclude(result, stop, interrupted)

    def _rounds(self, session: Session) -> Stop | None:
        """The rounds, until the stop policy stops (its decision) or the schedule ends (None)."""
        streaks = {"load": 0, "arrivals": 0, "widening": 0}
        silence = Silence(max(SILENT_S, 20.0 / max(self.spec.offered_rps, 1e-9)))
        live_every = every_request(session.intervals, with_pending=True)
        round_s = self.round_s
        next_round = time.monotonic() + round_s
        next_collect = time.monotonic() + COLLECT_S
        while not session.is_finished():
            time.sleep(max(0.0, min(0.05, next_round - time.monotonic())))
            silence.see(session.snapshot())
            if time.monotonic() < next_round:
                if time.monotonic() >= next_collect:
                    session.take(merge=False)
                    next_collect = time.monotonic() + COLLECT_S
                continue
            r = None  # the last round's pooled rows freed before the next round pools its own
            r = self._round(session, live_every)
            if r is None:
                next_round = time.monotonic() + round_s
                continue
            round_s *= ROUND_GROWTH
            next_round = time.monotonic() + round_s
            a = r.analysis
            self._record(a, r.elapsed_s, len(r.taken.finished) + len(r.taken.pending))
            failing = tuple(ch.name for ch in a.failed() if ch.name in STEPS.get(a.state, ()))
            streaks = next_streaks(streaks, a.state, failing)
            c = r.taken.counters
            outcome = RoundOutcome(
                n=len(self.history), state=a.state, failing=failing,
                streaks=streaks, silent=silence.silent, never_sent=c["never_sent"], intended=c["intended"],
                samples_used=a.samples_used, samples_needed=a.samples_needed, elapsed_s=r.elapsed_s,
                max_time_s=self.precision.max_time_s, held=held_slots(self.spec, c, r.elapsed_s),
                precise=all(ch.ok for ch in a.checks if ch.name in PRECISION),
                invalid=substantive_failures(a.checks))
            if (reason := stop_policy(outcome)) is not None:
                # The verdict rests on the round that decided it: all passed, or the precision was
                # reached with validity failed there.
                return Stop(reason, r if a.ok or (outcome.precise and outcome.invalid) else None)
        return None

    def _round(self, session: Session, live_every) -> Round | None:
        """A snapshot and its analysis — the schedule paused meanwhile unless the coordinator has a
        CPU of its own. None before the schedule has run."""
        pause_from = session.elapsed_ns()
        if not self.placement.own_core:
            self.placement.normal()
            session.pause()
            drain_until = time.monotonic() + DRAIN_S
            while session.in_flight() and time.monotonic() < drain_until:
                time.sleep(0.001)
        cached: dict = {}

        def every_once(first: int, last: int):
            # The deciding round's window is kept for the final analysis.
            cached["every"] = live_every(first, last)
            return cached["every"]

        try:
            taken = session.take()
            snap_ns = taken.counters.get("elapsed_ns", 0)
            elapsed_s = (snap_ns - self._paused_ns(snap_ns)) / 1e9
            if elapsed_s <= 0:
                return None
            a = analyse(AnalysisInput(
                self.plan, taken.samples(), taken.counters, elapsed_s, taken.counters["received_in_window"],
                np.random.default_rng(self.seed), end_ns=taken.snap_ns, pauses=tuple(self.pauses),
                engine_stalls=session.engine_stalls, target_stalls=session.target_stalls, every_request=every_once,
                agents=taken.agents, owner=taken.owners()))
        finally:
            if not self.placement.own_core:
                session.resume()
                self.pauses.append((pause_from, session.elapsed_ns()))
                self.placement.idle()
        return Round(taken, a, elapsed_s, cached.get("every"))

    def _conclude(self, result: AgentResult, stop: Stop | None,
                  interrupted: bool) -> tuple[AgentResult, Analysis, dict]:
        """The final analysis of the finished ``result``: the deciding round's samples and window
        with the final counters, or, when no round decided, the whole run; its remedies fitted to
        how the run ended."""
        ending = (Ending.INTERRUPTED if interrupted else Ending.ERROR if result.error else
                  Ending.MAX_TIME if stop is None else Ending.CONCLUDED)
        stopped = ("the engine stopped: " + result.error if result.error else
                   stop.reason if ending is Ending.CONCLUDED else ending.value)
        elapsed_s = (result.elapsed_ns - self._paused_ns(result.elapsed_ns)) / 1e9
        deciding = stop.deciding if stop is not None else None
        if deciding is not None:
            # The verdict rests on exactly the deciding round's samples and window; its counters
            # are the final ones, so that each check's figures agree with the summary's.
            samples, every = deciding.taken.samples(), deciding.every
            final = analyse(run_input(self.plan, self.seed, result, elapsed_s, pauses=self.pauses, samples=samples,
                                      owner=deciding.taken.owners(), end_ns=deciding.taken.snap_ns,
                                      every=lambda _a, _b: every))
            final = replace(final, used_mask=np.isin(result.samples["intended_ns"],
                                                     samples["intended_ns"][final.used_mask]))
            one_in = deciding.taken.one_in
        else:
            final = analyse(run_input(self.plan, self.seed, result, elapsed_s, pauses=self.pauses))
            one_in = (result.subsample or {}).get("one_in", 1)
        final = replace(final, checks=adjust_remedies(final.checks, ending, elapsed_s, self.precision.max_time_s,
                                                      held_slots(self.spec, result.counters, elapsed_s), result.error))
        methodology = {
            "mode": "adaptive",
            "rounds": len(self.history),
            "round_s": self.round_s,
            "stopped": stopped,
            "coordinator": self.placement.words(),
            "pauses_ns": self.pauses,
            "masked_s": 0.0,
            "sample_every": self.spec.timed_sample_every,
            "effective_sample_every": self.spec.timed_sample_every * one_in * final.thinning,
            "subsample": subsample_report(result, one_in),
            "history": [h.as_json() for h in self.history],
        } | final.to_dict()
        return result, final, methodology

    def _eta_s(self, a: Analysis, elapsed_s: float) -> float | None:
        left = max(0.0, self.precision.max_time_s - elapsed_s)
        if a.state == "done":
            return 0.0
        t = a.target
        if t is None or elapsed_s <= 0:
            return left
        if t.low is not None and t.high is not None:
            goal = target_width_ns(t.value, self.precision.ci_ns, self.precision.ci_rel)
            if not goal:
                return left
            grow = ((t.high - t.low) / goal) ** 2  # the width shrinks as 1/√n
        elif t.samples_needed and t.n_effective:
            grow = t.samples_needed / t.n_effective
        else:
            return left
        return min(left, max(0.0, elapsed_s * (grow - 1.0)))

    def _record(self, a: Analysis, elapsed_s: float, n: int) -> None:
        width = None
        if a.target is not None and a.target.low is not None and a.target.high is not None:
            width = a.target.high - a.target.low
        info = RoundInfo(len(self.history) + 1, elapsed_s, a.state, n, a.samples_used, width,
                         target_width_ns(a.target.value if a.target else None, self.precision.ci_ns, self.precision.ci_rel),
                         [c.name for c in a.failed()], self.precision.percentile,
                         self._eta_s(a, elapsed_s))
        self.history.append(info)
        if self.progress is not None:
            self.progress(info)


def fixed_methodology(result: AgentResult, spec: LoadSpec, precision: Precision, seed: int,
                      bound_delays: bool = True, setting: Setting | None = None,
                      bounds: str = "busy") -> tuple[Analysis, dict]:
    """--duration mode: one analysis of the whole run, every check still reported."""
    elapsed_s = result.elapsed_ns / 1e9
    a = analyse(run_input(run_plan(spec, precision, bound_delays, setting, fixed=True, bounds=bounds), seed, result,
                          elapsed_s))
    ending = Ending.INTERRUPTED if result.interrupted else Ending.DURATION
    a = replace(a, checks=adjust_remedies(a.checks, ending, elapsed_s, precision.max_time_s,
                                          held_slots(spec, result.counters, elapsed_s), result.error))
    one_in = (result.subsample or {}).get("one_in", 1)
    return a, {"mode": "fixed", "rounds": 1, "stopped": ending.value, "sample_every": spec.timed_sample_every,
               "effective_sample_every": spec.timed_sample_every * one_in * a.thinning,
               "subsample": subsample_report(result, one_in)} | a.to_dict()


def subsample_report(result: AgentResult, one_in: int) -> dict | None:
    """``methodology.subsample``: the bounded subsample the statistics used (stats/subsample.py),
    at the level of the samples analysed (a deciding round's may be below the run's last)."""
    return None if result.subsample is None else result.subsample | {"one_in": one_in}
