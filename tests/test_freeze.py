"""The freeze matrix (issue 9): a target frozen (SIGSTOP … SIGCONT) at the worst moments must never
leave an ok verdict with the freeze gone from the tail.

The target is `tailwise serve` in a process of its own, stopped and continued by the test: for
20 ms, 200 ms and 1 s; at 10k and 50k req/s; in the warm-up, mid-run, right after a coordinator
round, right after a stall of the engine (caused by the test hook TAILWISE_TEST_ENGINE_STALL); in
fixed-length and adaptive runs; plus periodic 5 ms freezes every 100 ms. Each case must show the
freeze in every percentile it reaches — the every-request histogram of the same window says which
those are — or end not-measurable naming a check that saw it. A freeze of the engine's own
process is left out and reported instead.

Timing: the test reads the run's stderr as it comes — "measuring …" when the schedule starts,
"round N …" after each round of the coordinator, the test hook's line after the engine stall —
and freezes the server right after the line it waits for. Every run is bounded (--duration 4 or
--max-time 6, and a timeout on the process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import CLI

#: Checks that can see a freeze (a confidence failure alone does not say the freeze was seen).
SAW_IT = {"stationarity", "consistency", "exclusions", "stalls", "errors"}
FREEZES_S = (0.02, 0.2, 1.0)
RATES = ("10k", "50k")


class Run:
    """`tailwise run … --json` in the background, its stderr lines collected as they come."""

    def __init__(self, *args: str, env: dict | None = None):
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen([*CLI, "run", *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.out: list[str] = []
        self.out_reader = threading.Thread(target=lambda: self.out.append(self.proc.stdout.read()), daemon=True)
        self.out_reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()

    def wait_line(self, prefix: str, timeout_s: float = 60.0) -> float:
        """The time the first stderr line starting with ``prefix`` arrived."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while True:
                for t, line in self.lines:
                    if line.startswith(prefix):
                        return t
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self.reader.is_alive():
                    raise AssertionError(f"no stderr line starting {prefix!r}: {self.lines}")
                self.cond.wait(min(left, 0.5))

    def summary(self, timeout_s: float = 120.0) -> dict:
        try:
            self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(5)
        self.out_reader.join(5)
        out = "".join(self.out)
        stderr = "\n".join(line for _, line in self.lines)
        assert self.proc.returncode in (0, 1), (self.proc.returncode, stderr)
        assert "Traceback" not in stderr, stderr
        return json.loads(out)


def freeze(pid: int, seconds: float) -> float:
    """Stop a process for ``seconds``; returns when it was stopped (monotonic)."""
    t = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return t


def _values(s: dict) -> tuple[dict, dict]:
    lat = s["latency"]
    reported = {p["p"]: p for p in lat["percentiles"] if p["value_ns"] is not None}
    every = {p["p"]: p["value_ns"] for p in (lat.get("window") or {}).get("percentiles", [])}
    return reported, every


def assert_freeze_visible(s: dict, freeze_s: float, where: str) -> None:
    """Never ok with the freeze gone: each reported percentile that the every-request histogram of
    the same window puts inside the freeze shows it, or the run is not-measurable and a check that
    can see a freeze failed."""
    reported, every = _values(s)
    half, quarter = freeze_s * 0.5e9, freeze_s * 0.25e9
    reached = [p for p, v in every.items() if v is not None and v >= half]
    warm = (s.get("warmup") or {}).get("p99_ns") or 0
    # The freeze happened and the engine saw it: in the window or, if it was over by the end of
    # the warm-up, in the warm-up's own p99.
    seen_by_engine = bool(reached) or warm >= half or (s["latency"]["histogram"]["max_ns"] or 0) >= half
    assert seen_by_engine, f"{where}: the freeze is not in the every-request histogram at all: {s['latency']}"
    hidden = [p for p in reached if p in reported and reported[p]["value_ns"] < quarter]
    failed = {c["name"] for c in s["checks"] if not c["ok"]}
    note = (f"{where}: verdict {s['verdict']}, failed {sorted(failed)}, reported "
            f"{ {p: v['value_ns'] for p, v in reported.items()} }, every request {every}, warm-up p99 {warm}")
    print(note)
    if hidden:
        assert s["verdict"] == "not-measurable" and failed & SAW_IT, f"freeze hidden from p{hidden}: {note}"
    if s["verdict"] == "ok":
        assert not hidden, note


def _matrix():
    for mode in ("fixed", "adaptive"):
        for where in ("warmup", "mid-run", "after-round", "after-engine-stall"):
            if mode == "fixed" and where == "after-round":
                continue  # a fixed-length run has no rounds
            for rate in RATES:
                for f in FREEZES_S:
                    yield pytest.param(mode, where, rate, f, id=f"{mode}-{where}-{rate}-{int(f * 1000)}ms")


def _mode_args(mode: str) -> list[str]:
    if mode == "fixed":
        return ["--duration", "4"]
    return ["--max-time", "6", "--percentile", "99", "--ci", "5%"]


@pytest.mark.parametrize("mode,where,rate,freeze_s", list(_matrix()))
def test_freeze_matrix(serve, mode, where, rate, freeze_s):
    srv = serve("--service", "fixed:5us")
    env = {"TAILWISE_TEST_ENGINE_STALL": "1.5s:500us"} if where == "after-engine-stall" else None
    run = Run(srv.url, "--rate", rate, "--timeout", "3s", "--conns", "16", *_mode_args(mode), "--seed", "11", env=env)
    start = run.wait_line("measuring ")
    if where == "warmup":
        pass  # at once: the schedule starts within 5 ms of the line
    elif where == "mid-run":
        time.sleep(max(0.0, start + 2.0 - time.monotonic()))
    elif where == "after-round":
        run.wait_line("round 1 ")
    else:
        run.wait_line("tailwise test hook: engine thread")
    t = freeze(srv.proc.pid, freeze_s)
    s = run.summary()
    if mode == "adaptive" and s["rate"]["duration_s"] < t - start + freeze_s:
        # The coordinator concluded before the freeze ended: the run does not contain it all.
        # (--ci 5% keeps p99 open for several rounds; this guards the assertion, it is rare.)
        assert s["rate"]["duration_s"] > t - start, "the run ended before the freeze began"
    assert_freeze_visible(s, freeze_s, f"{mode} {where} {rate} {freeze_s * 1e3:.0f} ms")


@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_periodic_5ms_freezes_every_100ms(serve, mode):
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "20k", "--conns", "16", *_mode_args(mode), "--seed", "5")
    run.wait_line("measuring ")
    stop_at = time.monotonic() + 4.0
    while time.monotonic() < stop_at and run.proc.poll() is None:
        freeze(srv.proc.pid, 0.005)
        time.sleep(0.095)
    s = run.summary()
    # 5 % of the time frozen: p99 and beyond are in the freezes.
    assert_freeze_visible(s, 0.005, f"{mode} periodic")


def test_a_freeze_of_the_engines_own_process_is_left_out_and_reported(serve):
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "10k", "--duration", "6", "--seed", "3")
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 3.0 - time.monotonic()))
    freeze(run.proc.pid, 0.1)
    s = run.summary()
    m = s["methodology"]
    # The pause is the engine's: logged as its stall, the requests due in it left out and counted.
    assert m["stalls_longest_ns"] >= 80_000_000, m
    assert s["exclusions"]["causes"]["engine_stall"] >= 500, s["exclusions"]
    stalls = next(c for c in s["checks"] if c["name"] == "stalls")
    assert "left out" in stalls["detail"]
    # … and not taken for the target's latency: p99 stays far below the 100 ms pause.
    p99 = next(p for p in s["latency"]["percentiles"] if p["p"] == 99)
    assert p99["value_ns"] is not None and p99["value_ns"] < 10_000_000, p99


def test_a_2s_freeze_with_a_1s_timeout_is_in_the_tail_and_nothing_is_lost(serve):
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "10k", "--duration", "6", "--timeout", "1s", "--seed", "13")
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 2.0 - time.monotonic()))
    freeze(srv.proc.pid, 2.0)
    s = run.summary()
    c = s["counters"]
    # Requests that waited past the timeout (sent ones: timeouts; the rest: never sent) are in the
    # statistics at the time they waited, ≥ 1 s, never dropped.
    assert c["timeouts"] > 0 and c["never_sent"] > 1000, c
    assert c["intended"] == c["sent"] + c["never_sent"]
    assert c["sent"] == c["received"] + c["errors"] + c["timeouts"] + c["unfinished"]
    assert s["latency"]["histogram"]["count"] == c["intended"]
    p99 = next(p for p in s["latency"]["percentiles"] if p["p"] == 99)
    assert s["verdict"] == "not-measurable" or p99["value_ns"] >= 1_000_000_000, (s["verdict"], p99)
    assert p99["value_ns"] is None or p99["value_ns"] >= 1_000_000_000 or p99["censored"], p99


def test_the_time_budget_is_kept(serve):
    """A precision out of reach (p99.99 ± 1 %) with --max-time 20: the process ends within
    --max-time plus the bound it states when it starts."""
    t0 = time.monotonic()
    run = Run("--rate", "50k", "--service", "exp:10us", "--percentile", "99.99", "--ci", "1%", "--max-time", "20")
    run.wait_line("measuring ")
    started = time.monotonic() - t0
    line = next(ln for _, ln in run.lines if ln.startswith("measuring "))
    bound = float(line.rsplit("+ ", 1)[1].split(" s", 1)[0])  # "… at most 20 s (+ 6.2 s to conclude)"
    s = run.summary(timeout_s=120)
    took = time.monotonic() - t0
    print(f"ended after {took:.1f} s ({started:.1f} s to start, bound 20 + {bound:.1f} s): {s['methodology']['stopped']}")
    assert took <= started + 20 + bound, (took, started, bound)
