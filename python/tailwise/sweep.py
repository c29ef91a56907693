"""Sweeps: one self-correcting measurement per offered load, the knee of the latency–load curve,
and the highest load that meets an SLO.

The plan and the search are pure functions of the points measured so far (`next_index`), so a
sweep that was killed resumes by reading its directory back and asking the same question again:
the same points come out, none twice.

**Knee mode** (no ``--slo``) measures the loads in increasing order and stops at the first point
where the target saturates: the rate check fails (the load was not sent or not completed on time;
against the built-in server, not where its own stalls explain the missing replies while it was
not busy — `host_shortfall`),
requests time out or fail, or the latency diverges — the median above ``DIVERGE`` times the lowest
load's, which an M/M/1 queue reaches at ρ = 0.95 (its mean sojourn is S/(1−ρ)). The knee of the
curve of the chosen percentile against load is found with Kneedle (Satopää, Albrecht, Irwin and
Raghavan, "Finding a 'Kneedle' in a Haystack", ICDCS Workshops 2011): on the unsaturated points and
the first saturated one (the every-request figure where the samples support no percentile), both axes scaled to [0, 1], the point farthest
from the curve's chord — for a convex rising curve the largest x − y. The server's capacity is the highest completed rate at a saturated point: an
open-loop client beyond capacity measures exactly the server's throughput — a lower bound only,
said so, where that point completed what it was offered (its latency diverged first).

**SLO mode** (``--slo 'p99<200us'``) bisects the load grid. A point meets the SLO only when the
percentile's whole confidence interval does (threshold.py); a point that fails, is inconclusive or
saturates does not. The lowest load is measured first (if it misses, no load meets), then the
highest (if it meets, every load does), then the middle of the bracket until it is one grid step
wide: ⌈log₂ N⌉ + 1 points for N loads. The answer is the highest load measured to meet the SLO,
with its CI; the point above it, measured, shows it does not.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailwise.errors import InputError
from tailwise.threshold import PASS, Threshold
from tailwise.units import parse_rate

SCHEMA = "tailwise.sweep/1"
STEPS = ("linear", "log")
#: Latency diverges when the median exceeds this multiple of the lowest load's median.
DIVERGE = 20.0
#: Achieved or completed rate this far below the target saturates a point even when the rate
#: check's own tolerance (shorter runs: wider) would let it pass.
SHORTFALL = 0.05
#: A sweep measures at most this many loads.
MAX_POINTS = 200


def parse_rates(text: str, steps: str = "linear") -> list[float]:
    """``10k:400k:12`` → 12 loads from 10k to 400k, linear or log-spaced; ``10k,20k,50k`` → those."""
    if steps not in STEPS:
        raise InputError(f"--steps {steps} is unknown", "use --steps linear or --steps log")
    t = text.strip()
    if "," in t or ":" not in t:
        rates = [parse_rate(x.strip(), what="--rates") for x in t.split(",") if x.strip()]
        if not rates:
            raise InputError(f"--rates {text!r} gives no load", "write START:STOP:N, e.g. --rates 10k:400k:12")
        return sorted(set(rates))
    parts = t.split(":")
    if len(parts) != 3 or not parts[2].strip().isdigit():
        raise InputError(f"--rates {text!r} is not START:STOP:N",
                         "write e.g. --rates 10k:400k:12 (12 loads) or a list, --rates 10k,20k,50k")
    start, stop, n = parse_rate(parts[0], what="--rates"), parse_rate(parts[1], what="--rates"), int(parts[2])
    if not 2 <= n <= MAX_POINTS:
        raise InputError(f"--rates {text!r}: {n} loads", f"give between 2 and {MAX_POINTS} loads")
    if stop <= start:
        raise InputError(f"--rates {text!r}: the last load is not above the first", "write START:STOP:N with START < STOP")
    grid = np.geomspace(start, stop, n) if steps == "log" else np.linspace(start, stop, n)
    return [float(round(r, 3)) for r in grid]


@dataclass(frozen=True)
class Outcome:
    """What the search needs to know of a measured point."""

    saturated: bool
    meets: bool  # SLO mode: the whole CI meets the SLO (and the point did not saturate)


def next_index(n: int, done: dict[int, Outcome], slo: bool) -> int | None:
    """The next grid index to measure, or None when the sweep is over."""
    if not slo:
        if any(o.saturated for o in done.values()):
            return None
        return next((i for i in range(n) if i not in done), None)
    if 0 not in done:
        return 0
    if not done[0].meets:
        return None
    if n - 1 not in done:
        return n - 1
    lo, hi = 0, n - 1
    if done[hi].meets:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid not in done:
            return mid
        lo, hi = (mid, hi) if done[mid].meets else (lo, mid)
    return None


def points_left(n: int, done: dict[int, Outcome], slo: bool) -> int:
    """At most how many points the sweep still measures."""
    if next_index(n, done, slo) is None:
        return 0
    if not slo:
        return n - len(done)
    return max(1, math.ceil(math.log2(max(n - len(done), 2)))) + (0 if 0 in done else 1)


def host_shortfall(point: dict) -> str | None:
    """Why a point's completed rate fell short because the host stalled the built-in server, not
    because the server ran out of capacity; None otherwise (and for any other target).

    The client sent its load (within the rate check's tolerance) and the server was busy less than
    1 − SHORTFALL of the time, yet fewer replies came back within the window than were offered:
    a stall near the window's end pushes the replies to the requests it and its backlog delayed
    past the end, and those are at most ``host_stall_share`` of them. A saturated server is busy
    all the time; this one was not."""
    from tailwise.methodology.checks import rate_tolerance

    r, share = point["rate"], host_stall_share(point)
    rho = (point.get("target_stats") or {}).get("utilisation")
    target, sent, done = r["target_rps"], r["achieved_rps"], r["completed_rps"]
    if share is None or rho is None or rho >= 1 - SHORTFALL or not sent or done is None or not target:
        return None
    if abs(sent / target - 1) > rate_tolerance(target, r["duration_s"]):
        return None
    short = 1 - done / target
    # Nothing to explain (neither `saturation` test fires: the rate check's tolerance is at least
    # RATE_TOLERANCE = SHORTFALL), or more than the stalls can.
    if short <= SHORTFALL or short > share:
        return None
    return (f"completed {short:.1%} short of the load, within the {share:.0%} of requests the host's stalls of the "
            f"built-in server can have delayed past the window; the server was busy {rho:.0%} of the time: not saturated by "
            "its rate")


def saturation(point: dict, base_p50_ns: float | None) -> str | None:
    """Why a point's summary shows the target saturated, or None."""
    r, target = point["rate"], point["rate"]["target_rps"]
    rate = next((c for c in point["checks"] if c["name"] == "rate"), None)
    host = host_shortfall(point)
    if rate is not None and not rate["ok"] and host is None:
        return f"rate: {rate['detail']}"
    for what in ("achieved_rps", "completed_rps"):
        if r[what] is not None and r[what] < (1 - SHORTFALL) * target and not (what == "completed_rps" and host):
            return f"{what.split('_')[0]} {r[what]:,.0f} req/s of {target:,.0f}"
    c = point["counters"]
    if c.get("timeouts", 0) or c.get("errors", 0):
        return f"{c.get('timeouts', 0):,} timeouts and {c.get('errors', 0):,} errors of {c['sent']:,} requests"
    p50 = _p50(point)
    if base_p50_ns and p50 and p50 > DIVERGE * base_p50_ns:
        return f"latency diverges: p50 {p50 / 1e3:,.1f} µs > {DIVERGE:g} × {base_p50_ns / 1e3:,.1f} µs at the lowest load"
    return None


def _p50(point: dict) -> float | None:
    """The median of every request in the window (never null, unlike a reported figure)."""
    return next((p["value_ns"] for p in point["latency"]["window"]["percentiles"] if p["p"] == 50.0), None)


def _every(point: dict, p: float) -> float | None:
    """Percentile ``p`` (or the nearest one reported) over every request of the window."""
    rows = point["latency"]["window"]["percentiles"]
    near = min(rows, key=lambda r: abs(r["p"] - p), default=None)
    return near["value_ns"] if near else None


def kneedle(x: list[float], y: list[float]) -> int | None:
    """Index of the knee of a rising convex curve (Kneedle): the largest x̂ − ŷ, both scaled to
    [0, 1]; None with fewer than three points or a flat curve."""
    if len(x) < 3:
        return None
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(xs) <= 0 or np.ptp(ys) <= 0:
        return None
    d = (xs - xs.min()) / np.ptp(xs) - (ys - ys.min()) / np.ptp(ys)
    i = int(np.argmax(d))
    return i if d[i] > 0 else None


def host_stall_share(s: dict) -> float | None:
    """The share of a point's requests that stalls of the built-in server (the host took a
    worker's CPU for ≥ 200 µs) can have delayed; None where the server's own stalls are not seen
    (any other target).

    A stall of D seconds at utilisation ρ delays the requests that arrive during it and while the
    backlog it left drains: the server clears ρ·D of work at a net rate of 1 − ρ, so the
    disturbance lasts D + ρ·D/(1 − ρ) = D/(1 − ρ). Over a run of T worker-seconds that is a share
    ΣD / ((1 − ρ)·T) of the arrivals (ρ capped at 0.95: beyond, the point saturates anyway). Where
    the share reaches 1 − p/100, the point's p-th percentile can be the host's rather than the
    load's."""
    ts = s.get("target_stats") or {}
    rho, busy, stalled = ts.get("utilisation"), ts.get("busy_s"), ts.get("stalled_s")
    if ts.get("source") != "builtin-server" or not rho or not busy or stalled is None:
        return None
    worker_s = busy / rho
    return min(1.0, stalled / ((1 - min(rho, 0.95)) * worker_s))


def point_dir_name(index: int, rate_rps: float) -> str:
    return f"{index:03d}-{rate_rps:.0f}rps"


def point_row(index: int, rate_rps: float, dirname: str, s: dict, percentile: float, reason: str | None,
              slo: Threshold | None, thresholds: list[dict]) -> dict:
    """One point as the sweep's summary lists it."""
    target = next((p for p in s["latency"]["percentiles"] if abs(p["p"] - percentile) < 1e-9), None)
    judged = slo.evaluate(s["latency"]["percentiles"]) if slo else None
    return {
        "index": index,
        "rate_rps": rate_rps,
        "dir": f"points/{dirname}",
        "verdict": s["verdict"],
        "achieved_rps": s["rate"]["achieved_rps"],
        "completed_rps": s["rate"]["completed_rps"],
        "duration_s": s["rate"]["duration_s"],
        "percentiles": s["latency"]["percentiles"],
        "target": target,
        "p50_every_ns": _p50(s),
        # The sweep's percentile over every request of the window (never null, even saturated).
        "every_ns": _every(s, percentile),
        "saturated": reason is not None,
        "saturation_reason": reason,
        "slo": judged,
        "meets_slo": None if judged is None else (judged["status"] == PASS and reason is None),
        "thresholds": thresholds,
        "failed_checks": [c["name"] for c in s["checks"] if not c["ok"]],
        "host_stall_share": host_stall_share(s),
        "host_shortfall": host_shortfall(s),
    }


def _y(row: dict) -> float | None:
    """A point's height on the latency–load curve: its percentile, or where the samples cannot
    support one, the same percentile over every request of its window."""
    t = row["target"]
    return t["value_ns"] if t and t["value_ns"] is not None else row["every_ns"]


def outcomes(rows: list[dict]) -> dict[int, Outcome]:
    return {r["index"]: Outcome(r["saturated"], bool(r["meets_slo"])) for r in rows}


def capacity_of(rows: list[dict]) -> tuple[float | None, bool]:
    """The highest completed rate at a saturated point, and whether it is only a lower bound.

    Beyond capacity an open-loop client measures the server's throughput — where the server fell
    behind. A point that saturated by its latency (or by timeouts) while it completed what it was
    offered, within ``SHORTFALL``, shows only that the throughput is at least that much: a host
    that takes the server's CPU now and then makes the queue diverge below capacity."""
    top = max((r for r in rows if r["saturated"] and r["completed_rps"]), key=lambda r: r["completed_rps"],
              default=None)
    if top is None:
        return None, False
    return top["completed_rps"], top["completed_rps"] >= (1 - SHORTFALL) * top["rate_rps"]


def capacity_text(doc: dict) -> str | None:
    """The capacity line of a sweep's summary, or None without a saturated point."""
    if not doc.get("capacity_rps"):
        return None
    if doc.get("capacity_lower_bound"):
        return (f"capacity: ≥ {doc['capacity_rps']:,.0f} req/s (the saturated point completed what it was offered: "
                "it saturated before the server fell behind, so the throughput is at least this)")
    return f"capacity: {doc['capacity_rps']:,.0f} req/s completed at saturation"


def knee_text(doc: dict) -> str | None:
    """The knee line of a sweep's summary, with the points after it the host disturbed; None without a knee."""
    k = doc.get("knee")
    if not k:
        return None
    line = f"knee: {k['rate_rps']:,.0f} req/s ({k['method']})"
    if k.get("disturbed"):
        loads = ", ".join(f"{d['rate_rps']:,.0f} ({d['host_stall_share']:.0%})" for d in k["disturbed"])
        line += (f" — uncertain: above it, the host's stalls of the built-in server can have delayed at least "
                 f"{100 - doc['percentile']:g} % of the requests at {loads} req/s (each with its share): the "
                 f"p{doc['percentile']:g} there may be the host's rather than the load's, and the load's knee higher; "
                 "re-run the sweep on a quieter host, or with a lower --percentile")
    return line


def conclude(rows: list[dict], grid: list[float], slo: Threshold | None, percentile: float) -> dict:
    """The sweep's answers from its points: knee, saturation, capacity, and the SLO result."""
    rows = sorted(rows, key=lambda r: r["index"])
    sat = next((r for r in rows if r["saturated"]), None)
    ok = [r for r in rows if not r["saturated"] and (sat is None or r["index"] < sat["index"])
          and _y(r) is not None]
    knee = None
    # The curve runs up to the first saturated point (its every-request figure: the statistics
    # may not support one), so that the knee is where latency leaves the low-load level for the
    # blow-up; the endpoints are never the knee (Kneedle's difference is 0 there).
    xs, ys = [r["rate_rps"] for r in ok], [_y(r) for r in ok]
    if sat is not None and sat["every_ns"] is not None:
        xs, ys = xs + [sat["rate_rps"]], ys + [sat["every_ns"]]
    k = kneedle(xs, ys)
    if k is not None and k < len(ok):
        knee = {"rate_rps": ok[k]["rate_rps"], "index": ok[k]["index"], "method": "kneedle",
                "percentile": ok[k]["target"]}
    elif ok and sat is not None:
        knee = {"rate_rps": ok[-1]["rate_rps"], "index": ok[-1]["index"], "method": "last load before saturation",
                "percentile": ok[-1]["target"]}
    if knee is not None:
        # The rise after the knee is what places it: where the host's stalls of the server can own
        # the percentile at those loads, the knee may be the host's and earlier than the load's.
        knee["disturbed"] = [{"rate_rps": r["rate_rps"], "host_stall_share": r["host_stall_share"]}
                             for r in ok if r["rate_rps"] > knee["rate_rps"]
                             and (r["host_stall_share"] or 0) >= 1 - percentile / 100]
    capacity, lower_bound = capacity_of(rows)
    out = {
        "knee": knee,
        "saturation": None if sat is None else {"rate_rps": sat["rate_rps"], "index": sat["index"],
                                                 "reason": sat["saturation_reason"]},
        "capacity_rps": capacity,
        "capacity_lower_bound": lower_bound,
        "slo": None,
    }
    if slo is not None:
        meeting = [r for r in rows if r["meets_slo"]]
        best = max(meeting, key=lambda r: r["rate_rps"], default=None)
        above = min((r for r in rows if not r["meets_slo"] and (best is None or r["rate_rps"] > best["rate_rps"])),
                    key=lambda r: r["rate_rps"], default=None)
        if best is None:
            detail = (f"no load meets {slo.text}: the lowest, {grid[0]:,.0f} req/s, does not"
                      if 0 in {r["index"] for r in rows} else "not searched yet")
        elif above is None:
            detail = f"every load up to {best['rate_rps']:,.0f} req/s meets {slo.text}: give higher --rates to find the limit"
        else:
            detail = (f"{best['rate_rps']:,.0f} req/s meets {slo.text} ({best['slo']['detail']}); "
                      f"{above['rate_rps']:,.0f} req/s does not ({above['slo']['status']}: {above['slo']['detail']})")
        out["slo"] = {
            "threshold": slo.text,
            "rate_rps": best["rate_rps"] if best else None,
            "percentile": best["slo"] if best else None,
            "next_rate_rps": above["rate_rps"] if above else None,
            "next": above["slo"] if above else None,
            "resolution_rps": (above["rate_rps"] - best["rate_rps"]) if best and above else None,
            "detail": detail,
        }
    return out


def clean_partial(points_dir: Path) -> None:
    """Remove what a killed sweep left half-written (points are written to a hidden temporary
    directory and renamed when complete)."""
    if points_dir.is_dir():
        for p in points_dir.glob(".*.tmp"):
            shutil.rmtree(p, ignore_errors=True)


def completed_points(points_dir: Path) -> dict[int, Path]:
    """The points already measured in a sweep directory: grid index → directory."""
    out = {}
    if points_dir.is_dir():
        for p in sorted(points_dir.iterdir()):
            head = p.name.split("-", 1)[0]
            if head.isdigit() and (p / "summary.json").is_file():
                out[int(head)] = p
    return out


@dataclass(frozen=True)
class Plan:
    """A sweep's own settings (beside the RunSpec every point shares), as written to config.json."""

    rates_rps: list[float]
    rates: str
    steps: str
    slo: str | None
    thresholds: list[str]
    samples_format: str

    @property
    def slo_threshold(self) -> Threshold | None:
        return Threshold.parse(self.slo, what="--slo") if self.slo else None

    def as_json(self) -> dict:
        return dict(self.__dict__)


class Sweep:
    """One sweep in its directory: the points measured so far (read back when resuming), the
    next point the search asks for, and the summary rewritten after each."""

    def __init__(self, base, plan: Plan, out: Path, command: str, *, quiet: bool, resumed: bool):
        from tailwise.files import write_json
        from tailwise.measurement import prepare
        from tailwise.threshold import Threshold as T

        self.base, self.plan, self.out, self.command, self.quiet = base, plan, out, command, quiet
        self.points_dir = out / "points"
        self.points_dir.mkdir(parents=True, exist_ok=True)
        clean_partial(self.points_dir)
        self.slo, self.gates = plan.slo_threshold, [T.parse(t) for t in plan.thresholds]
        self.grid = plan.rates_rps
        self.setup = prepare(base)
        if not resumed:  # a resumed sweep keeps the command that started it
            write_json(out / "config.json", self.config())
        write_json(out / "host.json", self.setup.host)
        self.rows: list[dict] = []
        for index, path in completed_points(self.points_dir).items():
            if index < len(self.grid):
                s = json.loads((path / "summary.json").read_text())
                self.add(index, path.name, s, s.get("thresholds") or self.judge(s))
        if resumed and not quiet:
            print(f"resuming {out}: {len(self.rows)} point(s) already measured", file=sys.stderr, flush=True)
        self.started, self.wall_start = time.monotonic(), time.time()
        self.stopped: str | None = None
        self.interrupted, self.error = False, None

    def config(self) -> dict:
        return {"command": self.command, "spec": self.base.to_json(), "sweep": self.plan.as_json()}

    def judge(self, s: dict) -> list[dict]:
        return [g.evaluate(s["latency"]["percentiles"]) for g in self.gates]

    def add(self, index: int, dirname: str, s: dict, thresholds: list[dict]) -> dict:
        """A measured point, into the rows the search and the summary use."""
        lower = [r for r in self.rows if r["index"] < index]
        base_p50 = min(lower, key=lambda r: r["index"])["p50_every_ns"] if lower else None
        row = point_row(index, self.grid[index], dirname, s, self.base.percentile, saturation(s, base_p50), self.slo,
                        thresholds)
        self.rows.append(row)
        return row

    def summary(self) -> dict:
        from tailwise import __version__

        return {
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
            "points": sorted(self.rows, key=lambda r: r["rate_rps"]),
        } | conclude(self.rows, self.grid, self.slo, self.base.percentile) | {
            "config": self.config(),
            "host": self.setup.host,
        }

    def save(self) -> dict:
        from tailwise.files import write_json

        doc = self.summary()
        write_json(self.out / "summary.json", doc)
        return doc

    def run(self) -> dict:
        """Measure until the search is over, interrupted, or the target fails; the summary."""
        try:
            while (index := next_index(len(self.grid), outcomes(self.rows), self.slo is not None)) is not None:
                if not self.point(index):
                    break
            else:
                self.stopped = _why_stopped(self.rows, self.slo, self.grid)
        except KeyboardInterrupt:
            self.stopped, self.interrupted = "interrupted", True
        return self.save()

    def point(self, index: int) -> bool:
        """Measure one point and write it whole (a hidden temporary directory, then renamed);
        False when the sweep must stop (interrupted, or the target failed)."""
        from tailwise.measurement import longest_s, measure
        from tailwise.results import write_out
        from tailwise.spec import RunSpec

        rate = self.grid[index]
        spec = RunSpec.parse(self.base.to_json() | {"rate": rate, "seed": self.base.seed + index})
        m = measure(spec, self.setup, self.command, quiet=True)
        s = m.summary
        s["thresholds"] = self.judge(s)
        s["sweep"] = {"index": index, "rate_rps": rate, "grid_size": len(self.grid)}
        name = point_dir_name(index, rate)
        if m.result.interrupted:
            # What was measured is kept, apart from the complete points: --resume measures it again.
            write_out(self.out / "interrupted" / name, s, m.result, m.analysis.used_mask, self.plan.samples_format)
            self.stopped, self.interrupted = "interrupted", True
            return False
        if s["error"]:
            # The target failed mid-point (not a saturation: it stopped answering). The point is
            # kept for inspection outside points/, so that --resume measures it again.
            write_out(self.out / "failed" / name, s, m.result, m.analysis.used_mask, self.plan.samples_format)
            self.stopped, self.error = "error", f"at {rate:,.0f} req/s: {s['error']} (that point: failed/{name}/)"
            return False
        tmp = self.points_dir / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        write_out(tmp, s, m.result, m.analysis.used_mask, self.plan.samples_format)
        tmp.rename(self.points_dir / name)
        row = self.add(index, name, s, s["thresholds"])
        self.save()
        if not self.quiet:
            left = points_left(len(self.grid), outcomes(self.rows), self.slo is not None)
            eta = f" · ETA ≤ {_fmt_s(left * longest_s(spec))}" if left else ""
            print(point_line(row, len(self.rows), time.monotonic() - self.started) + eta, file=sys.stderr, flush=True)
        return True


def execute(base, plan: Plan, out: Path, command: str, *, quiet: bool = False, resumed: bool = False) -> dict:
    """Measure the sweep's points into ``out`` (resuming what is there), rewriting ``out``/summary.json
    after every point; return the sweep's summary. ``base``: the RunSpec every point shares."""
    return Sweep(base, plan, out, command, quiet=quiet, resumed=resumed).run()


def _why_stopped(rows: list[dict], slo: Threshold | None, grid: list[float]) -> str:
    if slo is not None:
        return "slo-found" if conclude(rows, grid, slo, slo.p)["slo"]["rate_rps"] is not None else "slo-not-met"
    return "saturated" if any(r["saturated"] for r in rows) else "end-of-rates"


def _fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def point_line(row: dict, n_done: int, elapsed_s: float) -> str:
    """One line per completed point."""
    from tailwise.output import fmt_ns

    t = row["target"] or {}
    fig = (f"p{t['p']:g} {fmt_ns(t['value_ns'])} [{fmt_ns(t['low_ns'])}, {fmt_ns(t['high_ns'])}]"
           if t else "—")
    achieved = f"{row['achieved_rps']:,.0f}" if row["achieved_rps"] is not None else "—"
    state = f"saturated ({row['saturation_reason']})" if row["saturated"] else row["verdict"]
    if row.get("host_shortfall") and not row["saturated"]:
        state += f" ({row['host_shortfall']})"
    slo = f" · SLO {row['slo']['status']}" if row["slo"] else ""
    return (f"point {n_done} · {row['rate_rps']:,.0f} req/s (sent {achieved}) · {fig} · {state}{slo} · "
            f"elapsed {_fmt_s(elapsed_s)}")
