"""The coordinator's state machine: load → arrivals → warm-up/stationarity → independence →
confidence → verdict.

Each round (``ROUND_S`` at first, then ``ROUND_GROWTH`` times longer each) it takes the samples the engine kept, re-runs ``analyse`` on everything
collected, and decides:

* every check passes → stop, verdict ok;
* the load or the arrivals fail for ``PATIENCE`` rounds in a row after the first → stop: the client
  cannot produce the workload, more time will not help;
* the confidence interval is too wide → keep going while the estimated time to reach the width fits
  in ``--max-time`` (with slack), else stop early;
* otherwise collect more, up to ``--max-time``; then the verdict names every failed check.

The coordinator's own work is masked: a round's analysis takes CPU (0.1–1.5 s) that, on a small
machine, a co-located server or engine thread pays for with stalls. The samples whose intended
time falls in a round's analysis (plus ``MASK_GUARD_NS``, or the analysis' own length if longer,
and as long after as the queue is visibly still draining: ``analysis.extend_masks``) are left out
of the statistics. The rounds are fixed in time, whatever the
system does, so leaving them out samples the undisturbed process without bias; they stay in the
raw samples file with ``used = 0``.

Stalls of tailwise's own threads — the engine's and the built-in server's, each a gap of ≥ 200 µs in
a spinning thread's clock reads (stall.rs) — are masked the same way: the samples intended from
1 ms before a stall to 1 ms (or twice its length) after it, and over the drain that follows. A
stall is the hypervisor's or another task's doing, independent of the requests in flight, so what
is left is the undisturbed process; ``--keep-stalls`` keeps them in. The ``stalls`` check reports
how many samples this left out and fails beyond ``MAX_STALL_MASKED`` of them.

Once a warm-up cut passes the stationarity tests it is frozen, so a later stall is judged rather
than trimmed away. Nothing here averages percentiles: every round uses the pooled samples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from tailwise import _core
from tailwise.agent import AgentResult, LoadSpec, Session
from tailwise.methodology.analysis import Analysis, Precision, analyse
from tailwise.methodology.checks import target_width_ns

ROUND_S = 1.0
#: Each round is this much longer than the one before: the analysis of everything collected costs
#: CPU (0.12 s at 100k samples, 1.5 s at 1M) that a co-located server or engine thread pays for,
#: so later rounds, which add relatively little, come less often.
ROUND_GROWTH = 1.25
PATIENCE = 3
MASK_GUARD_NS = 10_000_000
#: Give up early when reaching the CI width would take more than this multiple of the time left.
HOPELESS = 4.0


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

    def as_json(self) -> dict:
        return self.__dict__.copy()


class Controller:
    def __init__(self, spec: LoadSpec, precision: Precision, *, seed: int,
                 progress: Callable[[RoundInfo], None] | None = None, round_s: float = ROUND_S,
                 mask_stalls: bool = True):
        self.spec = replace(spec, duration_ns=int(precision.max_time_s * 1e9))
        self.precision = precision
        self.rng = np.random.default_rng(seed)
        self.progress = progress
        self.round_s = round_s
        self.history: list[RoundInfo] = []
        self.frozen_start_ns: int | None = None
        self.masked: list[tuple[int, int]] = []
        self.stalls: list[tuple[int, int]] = []
        self.mask_stalls = mask_stalls

    def _analyse(self, samples, counters, elapsed_s, received, reasons) -> Analysis:
        return analyse(samples, counters=counters, elapsed_s=elapsed_s, received_in_window=received,
                       reasons=reasons, rate_rps=self.spec.rate_rps, arrival=self.spec.arrival,
                       conns=self.spec.conns, outstanding=self.spec.outstanding,
                       sample_every=self.spec.sample_every, precision=self.precision, rng=self.rng,
                       fixed_start_ns=self.frozen_start_ns, masked=self.masked, late_ns=self.spec.late_ns,
                       stalls=self.stalls, mask_stalls=self.mask_stalls)

    def run(self, session: Session) -> tuple[AgentResult, Analysis, dict]:
        """Drive a started session to a verdict. Returns the result, the final analysis and the
        ``methodology`` block of the summary."""
        batches: list[np.ndarray] = []
        streaks = {"load": 0, "arrivals": 0}
        t0 = time.monotonic()
        interrupted = False
        stop_reason = "max-time"
        decided: tuple[Analysis, np.ndarray] | None = None
        try:
            round_s = self.round_s
            next_round = t0 + round_s
            while not session.is_finished():
                time.sleep(max(0.0, min(0.1, next_round - time.monotonic())))
                if time.monotonic() < next_round:
                    continue
                round_s *= ROUND_GROWTH
                next_round = time.monotonic() + round_s
                snap = session.snapshot()
                elapsed_s = snap["elapsed_ns"] / 1e9
                if elapsed_s <= 0:
                    continue
                engine_t0 = _core.now_ns() - snap["elapsed_ns"]
                busy_from = snap["elapsed_ns"]
                batches.append(session.take())
                self.stalls.extend(session.take_stalls())
                samples = np.concatenate(batches)
                samples.sort(order="intended_ns", kind="stable")
                counters = {k: snap[k] for k in ("intended", "sent", "late", "errors", "timeouts")}
                a = self._analyse(samples, counters, elapsed_s, snap["received"], [])
                busy_to = _core.now_ns() - engine_t0
                self.masked.append((busy_from - 1_000_000, busy_to + max(MASK_GUARD_NS, busy_to - busy_from)))
                self._record(a, elapsed_s, len(samples))
                if a.ok:
                    stop_reason = "precision reached"
                    decided = (a, samples)
                    break
                if self.frozen_start_ns is None and a.warmup_start_ns is not None and a.state in ("independence", "confidence"):
                    self.frozen_start_ns = a.warmup_start_ns
                for k in streaks:
                    streaks[k] = streaks[k] + 1 if a.state == k else 0
                if len(self.history) > 1 and any(v >= PATIENCE for v in streaks.values()):
                    stop_reason = f"{a.state} failed {PATIENCE} rounds in a row"
                    break
                if a.state == "confidence" and a.samples_needed and len(self.history) >= 3:
                    used_rate = a.details["samples_used"] / max(elapsed_s, 1e-9)
                    left = self.precision.max_time_s - elapsed_s
                    if used_rate > 0 and (a.samples_needed - a.details["samples_used"]) / used_rate > HOPELESS * left:
                        stop_reason = "precision out of reach within --max-time"
                        break
        except KeyboardInterrupt:
            interrupted = True
            stop_reason = "interrupted"
        session.stop()
        result = session.finish(interrupted)
        if result.error:
            stop_reason = "the engine stopped: " + result.error
        if decided is not None:
            # The verdict is the round's that reached the precision, on exactly its samples; the
            # few requests still in flight then are kept raw but not used.
            final, seen = decided
            used_intended = seen["intended_ns"][final.used_mask]
            final.used_mask = np.isin(result.samples["intended_ns"], used_intended)
        else:
            self.stalls = result.stall_intervals_ns
            final = self._analyse(result.samples, result.counters, result.elapsed_ns / 1e9,
                                  result.received_in_window, result.error_reasons)
        methodology = {
            "mode": "adaptive",
            "rounds": len(self.history),
            "round_s": self.round_s,
            "stopped": stop_reason,
            "sample_every": self.spec.sample_every,
            "effective_sample_every": self.spec.sample_every * final.thinning,
            "masked_s": sum(b - a for a, b in self.masked) / 1e9,
            "history": [h.as_json() for h in self.history],
        } | final.details
        return result, final, methodology

    def _record(self, a: Analysis, elapsed_s: float, n: int) -> None:
        width = None
        if a.target is not None and a.target.low is not None and a.target.high is not None:
            width = a.target.high - a.target.low
        info = RoundInfo(len(self.history) + 1, elapsed_s, a.state, n, a.details["samples_used"], width,
                         target_width_ns(a.target.value if a.target else None, self.precision.ci_ns, self.precision.ci_rel),
                         [c.name for c in a.failed()])
        self.history.append(info)
        if self.progress is not None:
            self.progress(info)


def fixed_methodology(result: AgentResult, spec: LoadSpec, precision: Precision, seed: int,
                      mask_stalls: bool = True) -> tuple[Analysis, dict]:
    """--duration mode: one analysis of the whole run, every check still reported (and stalls of
    tailwise's threads masked as in ``Controller``)."""
    a = analyse(result.samples, counters=result.counters, elapsed_s=result.elapsed_ns / 1e9,
                received_in_window=result.received_in_window, reasons=result.error_reasons,
                rate_rps=spec.rate_rps, arrival=spec.arrival, conns=spec.conns, outstanding=spec.outstanding,
                sample_every=spec.sample_every, precision=precision, rng=np.random.default_rng(seed),
                late_ns=spec.late_ns, stalls=result.stall_intervals_ns, mask_stalls=mask_stalls)
    return a, {"mode": "fixed", "rounds": 1, "stopped": "duration", "sample_every": spec.sample_every,
               "effective_sample_every": spec.sample_every * a.thinning} | a.details
