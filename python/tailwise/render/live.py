"""The live line: one line on a terminal, redrawn once a second while a measurement runs — the
rates sent and completed over the last second, p50 and p99 of every request so far, and where the
asked percentile's CI stands against its target (from the coordinator's latest round).

Only on a terminal, and never with --quiet: off a terminal the round lines (render/point.round_line)
are the log. The line is drawn by its own thread from the engine's counters (a snapshot taken
without the interpreter, so it never waits on the coordinator) and the every-request interval
histograms; it asks nothing of the timing path.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from tailwise.render.output import fmt_ns

#: Seconds between redraws (the issue's "a live line per second").
REDRAW_S = 1.0


class LiveLine:
    """``with LiveLine(console, …) as live: live.attach(session); … live.round(info)``."""

    def __init__(self, console: Console, *, rate_rps: float, span_s: float, fixed: bool, percentile: float):
        self.console, self.rate_rps, self.span_s, self.fixed, self.percentile = console, rate_rps, span_s, fixed, percentile
        self._session = None
        self._round = None
        self._last: tuple[float, int, int] | None = None  # (monotonic s, sent, received) at the last redraw
        self._stop = threading.Event()
        self._live = Live(Text(""), console=console, transient=True, auto_refresh=False)
        self._thread = threading.Thread(target=self._loop, name="tailwise-live", daemon=True)

    def __enter__(self) -> LiveLine:
        self._live.start()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * REDRAW_S)
        self._live.stop()

    def attach(self, session) -> None:
        """The running session to read (agent.Session): from its start on."""
        self._session = session

    def round(self, info) -> None:
        """The coordinator's latest round (controller.RoundInfo): the CI against its target."""
        self._round = info

    def _loop(self) -> None:
        while not self._stop.wait(REDRAW_S):
            if self._session is None:
                continue
            try:
                line = self.text()
            except Exception:  # noqa: BLE001 — a display must never end a measurement
                continue
            self._live.update(Text(line, no_wrap=True, overflow="ellipsis"), refresh=True)

    def text(self) -> str:
        """The line, its parts in order of importance; the terminal's width cuts the least."""
        snap = self._session.snapshot()
        now = time.monotonic()
        sent, received = snap.get("sent", 0), snap.get("received", 0)
        elapsed_s = snap.get("elapsed_ns", 0) / 1e9
        parts = [f"measuring {elapsed_s:.0f} s {'of' if self.fixed else 'of ≤'} {self.span_s:g} s"]
        if self._last is not None and now > self._last[0]:
            dt = now - self._last[0]
            parts.append(f"sent {(sent - self._last[1]) / dt:,.0f}/s, done {(received - self._last[2]) / dt:,.0f}/s")
        self._last = (now, sent, received)
        so_far = self._so_far()
        if so_far:
            parts.append(so_far)
        r = self._round
        if r is not None and r.ci_width_ns is not None:
            target = f" (target {fmt_ns(r.ci_target_ns)})" if r.ci_target_ns is not None else ""
            parts.append(f"p{self.percentile:g} CI {fmt_ns(r.ci_width_ns)}{target}")
        failed = snap.get("errors", 0) + snap.get("timeouts", 0)
        if failed:
            parts.append(f"{failed:,} failed")
        width = self.console.width
        line = parts[0]
        for part in parts[1:]:
            if len(line) + 3 + len(part) > width:
                break
            line += " · " + part
        return line

    def _so_far(self) -> str | None:
        """p50 and p99 of every request handed over so far (warm-up included)."""
        from tailwise import _core
        from tailwise.stats.histogram import decode

        intervals = getattr(self._session, "intervals", None)
        if intervals is None:
            return None
        interval_ns, _ = _core.interval_params()
        last = int(self._session.elapsed_ns() // interval_ns) + 1
        h = decode(intervals.window(0, last, False))
        if h.total == 0:
            return None
        return f"p50 {fmt_ns(h.value_at_percentile(50))}, p99 {fmt_ns(h.value_at_percentile(99))} so far"
