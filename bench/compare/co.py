"""co: coordinated omission side by side — a 200 ms stop of the server mid-run.

memcached (one thread, server CPU), RATE req/s, 16 connections, SECONDS per run; the harness
stops the server (SIGSTOP of its pid) for STOP_S half-way into each client's run (counted from
when it starts sending), then SIGCONT. Each tool's p99/p99.9 next to the truth the stop
implies (parsers.co_truth: requests intended every 1/rate, none served during the stop, then the
backlog drained at 0 to 10 µs a get), and whether the tool flagged anything.
"""

from __future__ import annotations

import os
import signal

import parsers
import tools
from common import Ctx, aggregate, cell, md_table, noise_summary, noise_text, real_server, repeated

RATE = 10_000
CONNS = 16
STOP_S = 0.2
def _engine_started(pid: int) -> bool:
    """tailwise has started sending once its engine thread exists (tw-engine-N)."""
    try:
        return any(open(f"/proc/{pid}/task/{t}/comm").read().startswith("tw-engine")
                   for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False


class Freezer:
    """Stops the server once, ``after_s`` after the client started sending, for STOP_S. A peer
    sends at once; tailwise once its engine thread runs (Python's start-up takes 1-3 s here)."""

    def __init__(self, pid: int, after_s: float, wait_for_engine: bool):
        self.pid, self.after_s, self.state = pid, after_s, "before"
        self.started_at = None if wait_for_engine else 0.0

    def __call__(self, client_pid: int, t: float) -> None:
        if self.started_at is None:
            if _engine_started(client_pid):
                self.started_at = t
            return
        if self.state == "before" and t >= self.started_at + self.after_s:
            os.kill(self.pid, signal.SIGSTOP)
            self.state = "stopped"
        elif self.state == "stopped" and t >= self.started_at + self.after_s + STOP_S:
            os.kill(self.pid, signal.SIGCONT)
            self.state = "done"

    def release(self) -> None:
        if self.state == "stopped":
            os.kill(self.pid, signal.SIGCONT)
            self.state = "done"


def run(ctx: Ctx) -> dict:
    seconds = 3.0 if ctx.quick else max(ctx.seconds * 2, 4.0)
    # The drain after the stop depends on the server's speed: from instant to 10 µs a get.
    lo = parsers.co_truth(RATE, seconds, seconds / 2, STOP_S, service_s=1e-9)
    truth = parsers.co_truth(RATE, seconds, seconds / 2, STOP_S, service_s=10e-6)
    res: dict = {"rate_rps": RATE, "conns": CONNS, "seconds": seconds, "stop_s": STOP_S, "truth": truth,
                 "truth_instant_server": lo}
    with real_server("memcached") as srv:
        url = f"memcached://127.0.0.1:{srv.port}"

        def frozen(name, fn):
            def go():
                fr = Freezer(srv.pid, seconds / 2, wait_for_engine=name == "tailwise")
                try:
                    r = fn(fr)
                finally:
                    fr.release()
                r["stopped"] = fr.state == "done"
                return r
            return name, go

        cells = [
            frozen("tailwise", lambda fr: tools.tailwise(ctx, url, RATE, seconds, CONNS, during=fr)),
            frozen("mutilate", lambda fr: tools.mutilate(ctx, url, RATE, seconds, CONNS, during=fr)),
            frozen("memtier_benchmark", lambda fr: tools.memtier(ctx, url, RATE, seconds, CONNS, during=fr)),
        ]
        runs = repeated(ctx, cells, server_pids=lambda: [srv.pid])
    rows = [["truth the stop implies (drain at 0–10 µs a get)", f"{lo['p99_us'] / 1e3:.1f}–{truth['p99_us'] / 1e3:.1f}",
             f"{lo['p999_us'] / 1e3:.1f}–{truth['p999_us'] / 1e3:.1f}", "—",
             f"{truth['share_during_stop']:.1%} of requests intended during the stop"]]
    res["tools"] = {}
    all_cells = []
    for name, rs in runs.items():
        for r in rs:
            for k in ("p99_us", "p999_us"):
                if r.get(k) is not None:
                    r[k.replace("_us", "_ms")] = r[k] / 1e3
            if r.get("p99_us") is None:
                continue  # no figures: skipped or failed, its reason is in "why"
            flagged = r.get("failed_checks")
            r["flagged"] = ", ".join(flagged) if flagged else ("nothing" if name != "tailwise" else "no check failed")
        a = aggregate(rs, ("p99_ms", "p999_ms", "rps"))
        a["runs"] = rs
        res["tools"][name] = a
        all_cells += rs
        flags = sorted({r["flagged"] for r in rs if "flagged" in r})
        said = ("flagged: " + " | ".join(flags))[:160] if flags else "skipped"
        rows.append([name, cell(a["p99_ms"]), cell(a["p999_ms"]), cell(a["rps"], 0),
                     said + (f" ({a['why']})"[:120] if a.get("why") else "")])
    res["noise"] = noise_summary(all_cells)
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = md_table(["client", "p99 ms", "p99.9 ms", "completed req/s", "what it said"], rows)
    res["note"] = (f"memcached, {RATE:,} req/s, {CONNS} connections, {seconds:g} s, server stopped {STOP_S * 1e3:.0f} ms "
                   "half-way; tailwise's figures are its every-request histogram")
    return res
