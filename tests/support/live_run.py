"""A `tailwise run` in the background whose stderr the test reads as it comes, and freezes of a
process (SIGSTOP … SIGCONT) timed by it: the freeze tests, the server killed mid-run, the 100 ms
stall of the validation.

"measuring …" on stderr means the schedule has started (the connections are open); "round N …"
follows each round of the coordinator; the test hook prints a line after its engine stall.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from support.cli import MEASURED, CLI

#: Checks that can see a freeze (a confidence failure alone does not say the freeze was seen).
SAW_IT = {"stationarity", "consistency", "exclusions", "stalls", "errors"}


class Run:
    """`tailwise run … --json` (or another ``command``) in the background, its stderr lines
    collected as they come."""

    def __init__(self, *args: str, env: dict | None = None, json_out: bool = True, command: str = "run"):
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen([*CLI, command, *args, *(["--json"] if json_out else [])],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "COLUMNS": "200", **(env or {})})
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

    def finish(self, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
        """Wait for the run to end (killed past ``timeout_s``): its exit status, stdout and stderr."""
        try:
            self.proc.wait(timeout=timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(5)
        self.out_reader.join(5)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "".join(self.out),
                                           "\n".join(line for _, line in self.lines))

    def summary(self, timeout_s: float = 120.0) -> dict:
        r = self.finish(timeout_s)
        out, stderr = r.stdout, r.stderr
        assert self.proc.returncode in MEASURED, (self.proc.returncode, stderr)
        assert "Traceback" not in stderr, stderr
        return json.loads(out)


def need_test_hook() -> None:
    """Skip the calling test when the engine was built without its test hook (cargo feature
    test-hooks: scripts/test builds with it); fail instead under CI=true."""
    from support import servers
    from tailwise import _core

    if _core.TEST_HOOKS:
        return
    msg = 'the engine has no test hook: build with MATURIN_PEP517_ARGS="--features test-hooks" (scripts/test does)'
    if servers.in_ci():
        pytest.fail(f"{msg} (CI=true: a missing test hook is a failure, not a skip)")
    pytest.skip(msg)


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
