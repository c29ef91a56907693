"""`tailwise sweep`'s loop and directory: one self-correcting measurement per offered load, each
point written whole, the summary rewritten after each, a killed sweep resumed from what it wrote.

Which load comes next, saturation, the knee, capacity and the SLO answer are pure functions of the
points measured (search.py): a sweep that was killed resumes by reading its directory back and
asking the same question again — the same points come out, none twice. What happens is emitted as
events (events.py) to the caller's callback; nothing here prints.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tailwise.results.documents.run import Summary, ThresholdResult
from tailwise.errors import TailwiseError
from tailwise.results.documents.sweep import Point, SweepConfig, SweepSummary
from tailwise.results.export import jsonfiles
from tailwise.results.files import SWEEP_SCHEMA
from tailwise.results.summary import load_summary
from tailwise.spec.threshold import Threshold
from tailwise.sweep.events import Event, PointDone, Resuming, Warned
from tailwise.sweep.search import (ASSUMED_RESPONSE_NS, MAX_ATTEMPTS, client_limited, conclude, next_index, outcomes,
                                   point_row, points_left, response_ns, saturation, why_stopped, window_needed)

SCHEMA = SWEEP_SCHEMA


def clean_partial(points_dir: Path) -> None:
    """Remove what a killed sweep left half-written (points are written to a hidden temporary
    directory and renamed when complete)."""
    if points_dir.is_dir():
        for p in points_dir.glob(".*.tmp"):
            shutil.rmtree(p, ignore_errors=True)


def completed_points(points_dir: Path) -> dict[int, list[Path]]:
    """The points already measured in a sweep directory: grid index → its attempts' directories,
    in order (``NNN-RATErps``, then ``NNN-RATErps-2`` …)."""
    out: dict[int, list[tuple[int, Path]]] = {}
    if points_dir.is_dir():
        for p in points_dir.iterdir():
            head, _, rest = p.name.partition("-")
            tail = rest.rpartition("-")[2] if rest.count("-") else ""
            if head.isdigit() and (p / "summary.json").is_file():
                out.setdefault(int(head), []).append((int(tail) if tail.isdigit() else 1, p))
    return {i: [p for _, p in sorted(v)] for i, v in sorted(out.items())}


def point_dir_name(index: int, rate_rps: float, attempt: int = 1) -> str:
    return f"{index:03d}-{rate_rps:.0f}rps" + (f"-{attempt}" if attempt > 1 else "")


@dataclass(frozen=True)
class Plan:
    """A sweep's own settings (beside the RunSpec every point shares), as written to config.json."""

    rates_rps: list[float]
    rates: str
    steps: str
    slo: str | None
    thresholds: list[str]
    samples_format: str
    #: The client's window was sized for the top load (size_window), not given.
    window_sized: bool = False

    @property
    def slo_threshold(self) -> Threshold | None:
        return Threshold.parse(self.slo, what="--slo") if self.slo else None

    def as_json(self) -> dict:
        return dict(self.__dict__)


class Sweep:
    """One sweep in its directory: the points measured so far (read back when resuming), the
    next point the search asks for, and the summary rewritten after each. ``on_event``: told what
    happens (events.py); None: nothing is told."""

    def __init__(self, base, plan: Plan, out: Path, command: str, *, resumed: bool,
                 on_event: Callable[[Event], None] | None = None, fleet=None):
        from tailwise.measure.point import prepare
        from tailwise.spec.threshold import Threshold as T

        self.base, self.plan, self.out, self.command, self.on_event = base, plan, out, command, on_event
        self.points_dir = out / "points"
        self.points_dir.mkdir(parents=True, exist_ok=True)
        clean_partial(self.points_dir)
        self.slo, self.gates = plan.slo_threshold, [T.parse(t) for t in plan.thresholds]
        self.grid = plan.rates_rps
        self.setup = prepare(base, lambda warning: on_event and on_event(Warned(warning)), fleet)
        self.started, self.wall_start = time.monotonic(), time.time()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall_start))
        # The command that started the sweep stays; each resume is added to its history.
        self.first_command, self.history = command, [{"command": command, "started_at": now}]
        if resumed:
            saved = SweepConfig.model_validate(json.loads((out / "config.json").read_text()))
            self.first_command = saved.command
            earlier = [h.to_json() for h in saved.history or ()]
            if not earlier:  # a sweep written before histories were kept
                try:
                    at = load_summary(out).started_at
                except TailwiseError:
                    at = None
                earlier = [{"command": saved.command, "started_at": at}]
            self.history = earlier + self.history
        try:
            jsonfiles.CONFIG.write_doc(out, self.config())
            jsonfiles.HOST.write_doc(out, self.setup.host)
        except OSError as e:  # before any point: nothing measured is lost
            from tailwise.errors import HostError

            raise HostError(f"{out} cannot hold the sweep ({_why(e)})",
                             "free space there or give --out another directory") from None
        self.rows: list[Point] = []
        self.responses: dict[int, float | None] = {}
        for index, paths in completed_points(self.points_dir).items():
            if index < len(self.grid):
                for path in paths:
                    s = load_summary(path)
                    self.add(index, path.name, s, s.thresholds or self.judge(s))
        if resumed and on_event is not None:
            on_event(Resuming(out, len(self.rows)))
        self.stopped: str | None = None
        self.interrupted, self.error = False, None
        #: Set when a resumed sweep was already complete: nothing was measured.
        self.nothing_to_do = False

    def config(self) -> dict:
        return {"command": self.first_command, "spec": self.base.to_json(), "sweep": self.plan.as_json(),
                "history": self.history}

    def judge(self, s: Summary) -> list[ThresholdResult]:
        return [g.evaluate(s.latency.percentiles) for g in self.gates]

    def add(self, index: int, dirname: str, s: Summary, thresholds: list[ThresholdResult]) -> Point:
        """A measured point (or a new attempt at one), into the rows the search and the summary use."""
        lower = [r for r in self.rows if r.index < index]
        base = min(lower, key=lambda r: r.index) if lower else None
        base_p50 = base.p50_every_ns if base else None
        limited = client_limited(s, self.responses.get(base.index) if base else None)
        earlier = next((r for r in self.rows if r.index == index), None)
        row = point_row(index, self.grid[index], dirname, s, self.base.percentile, saturation(s, base_p50, limited),
                        self.slo, thresholds, limited, earlier.attempts if earlier else None)
        if earlier is not None:
            self.rows.remove(earlier)
        self.rows.append(row)
        self.responses[index] = response_ns(s)
        return row

    def window(self) -> dict:
        """The client's window every point shares, and what the top load needs of it."""
        return {"conns": self.base.conns, "outstanding": self.base.outstanding,
                "slots": self.base.conns * self.base.outstanding, "needed_slots": window_needed(self.grid[-1]),
                "assumed_response_ns": ASSUMED_RESPONSE_NS, "sized": self.plan.window_sized}

    def summary(self) -> SweepSummary:
        """The sweep's summary, written through its model (results/documents/sweep.SweepSummary)."""
        from tailwise import __version__

        found = conclude(self.rows, self.grid, self.slo, self.base.percentile)
        return SweepSummary.model_validate({
            "schema": SCHEMA,
            "tool": {"name": "tailwise", "version": __version__},
            "target": self.base.targets[0].url if self.base.targets else f"synthetic (built-in server, {self.base.service})",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall_start)),
            "mode": "slo" if self.slo else "knee",
            "complete": self.stopped not in (None, "interrupted", "error"),
            "stopped": self.stopped,
            "interrupted": self.interrupted,
            "error": self.error,
            "percentile": self.base.percentile,
            "rates_rps": self.grid,
            "steps": self.plan.steps,
            "client_window": self.window(),
            "max_attempts": MAX_ATTEMPTS if self.slo else 1,
            "points": sorted(self.rows, key=lambda r: r.rate_rps),
            "knee": found.knee,
            "saturation": found.saturation,
            "capacity_rps": found.capacity_rps,
            "capacity_lower_bound": found.capacity_lower_bound,
            "slo": found.slo,
            "config": self.config(),
            "host": self.setup.host,
        })

    def save(self) -> SweepSummary:
        """The summary, written to summary.json; a disk that refuses it stops the sweep with an
        error, and the summary is returned all the same (the points written stay resumable)."""
        doc = self.summary()
        try:
            jsonfiles.SUMMARY.write_doc(self.out, doc)
        except OSError as e:
            if self.error is None:
                self.stopped, self.error = "error", f"{self.out / 'summary.json'} could not be written ({_why(e)})"
                doc = self.summary()
        return doc

    def run(self) -> SweepSummary:
        """Measure until the search is over, interrupted, or the target fails; the summary."""
        self.nothing_to_do = bool(self.rows) and self._next() is None
        try:
            while (index := self._next()) is not None:
                if not self.point(index) or self.error:
                    break
            else:
                self.stopped = why_stopped(self.rows, self.slo, self.grid)
        except KeyboardInterrupt:
            self.stopped, self.interrupted = "interrupted", True
        return self.save()

    def _next(self) -> int | None:
        return next_index(len(self.grid), outcomes(self.rows), self.slo is not None)

    def point(self, index: int) -> bool:
        """Measure one point (or a load again) and write it whole (a hidden temporary directory,
        then renamed); False when the sweep must stop (interrupted, or the target failed)."""
        from tailwise.measure.point import longest_s, measure
        from tailwise.results.journal import COLLECTED
        from tailwise.results.export import write_run
        from tailwise.results.summary import amend
        from tailwise.spec.runspec import RunSpec

        rate = self.grid[index]
        attempt = 1 + len(next((r.attempts for r in self.rows if r.index == index), []))
        # A new attempt draws new schedules and samples.
        seed = self.base.seed + index + (attempt - 1) * len(self.grid)
        spec = RunSpec.parse(self.base.settings | {"rate": rate, "seed": seed})  # as given: a password too
        collected = self.out / COLLECTED
        m = measure(spec, self.setup, self.command, collected=collected)
        s = m.summary
        amend(s, thresholds=self.judge(s),
              sweep={"index": index, "rate_rps": rate, "grid_size": len(self.grid), "attempt": attempt})
        name = point_dir_name(index, rate, attempt)
        if self.on_event is not None:
            for problem in m.file_problems(self.out):
                self.on_event(Warned(problem))

        def write(where: Path, failure: str = "") -> bool:
            """The point's directory written whole; or, the disk refusing it, the sweep stopped
            with an error that carries ``failure`` and the point's figures (nothing measured is
            lost)."""
            try:
                write_run(where, s, m.result, m.analysis.used_mask, self.plan.samples_format)
                return True
            except OSError as e:
                shutil.rmtree(where, ignore_errors=True)
                self.stopped, self.error = "error", (
                    f"at {rate:,.0f} req/s: {failure}the point was measured ({_figures(s)}) but {self.out} could not "
                    f"hold it ({_why(e)}): free space there")
                return False
            finally:
                shutil.rmtree(collected, ignore_errors=True)  # the point is written whole, or not at all

        if m.result.interrupted:
            # What was measured is kept, apart from the complete points: --resume measures it again.
            if write(self.out / "interrupted" / name):
                self.stopped, self.interrupted = "interrupted", True
            return False
        if s.error:
            # The target failed mid-point (not a saturation: it stopped answering). The point is
            # kept for inspection outside points/, so that --resume measures it again.
            if write(self.out / "failed" / name, failure=f"{s.error}; "):
                self.stopped, self.error = "error", f"at {rate:,.0f} req/s: {s.error} (that point: failed/{name}/)"
            return False
        tmp = self.points_dir / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if not write(tmp):
            return False
        tmp.rename(self.points_dir / name)
        row = self.add(index, name, s, s.thresholds)
        self.save()
        if self.on_event is not None:
            done = outcomes(self.rows)
            left = points_left(len(self.grid), done, self.slo is not None)
            eta_s = left * longest_s(spec) if left else None
            measured = sum(len(r.attempts) for r in self.rows)
            self.on_event(PointDone(row, measured, time.monotonic() - self.started,
                                    attempt + 1 if done[index].retry else None, eta_s))
        return True


def _why(e: OSError) -> str:
    return " ".join((e.strerror or str(e)).lower().split())


def _figures(s: Summary) -> str:
    """A point's percentiles in a line (what an error keeps of a point that could not be written)."""
    from tailwise.spec.units import fmt_ns

    return ", ".join(f"p{p.p:g} {fmt_ns(p.value_ns)}" for p in s.latency.percentiles)


def execute(base, plan: Plan, out: Path, command: str, *, resumed: bool = False,
            on_event: Callable[[Event], None] | None = None) -> SweepSummary:
    """Measure the sweep's points into ``out`` (resuming what is there), rewriting ``out``/summary.json
    after every point; return the sweep's summary. ``base``: the RunSpec every point shares."""
    return Sweep(base, plan, out, command, resumed=resumed, on_event=on_event).run()
