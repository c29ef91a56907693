"""The CLI run as users run it (`python -m tailwise`), bounded in time, and `tailwise serve` started
on a free port (the synthetic server, or a UDP reflector or forwarder); the ``serve``,
``udp_reflector`` and ``udp_forwarder`` fixtures (tests/support/plugin.py) stop what they start."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

CLI = [sys.executable, "-m", "tailwise"]
#: The exit statuses of a run or sweep that measured: ok, not-measurable, imprecise (README, "Exit status").
MEASURED = (0, 1, 4)
#: Every CLI invocation in the tests is bounded in time.
CLI_TIMEOUT_S = 120


def run_cli(*args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


@dataclass
class ServeProcess:
    proc: subprocess.Popen
    addr: str  # "127.0.0.1:PORT"

    @property
    def url(self) -> str:
        return f"synthetic://{self.addr}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return self.proc.returncode


def _start(args: tuple[str, ...], address: str, kind: type[ServeProcess], startup_s: float,
           cpu: int | None = None) -> ServeProcess:
    """`tailwise serve ARGS` on a free port (port 0), waiting for the line whose ``address``
    pattern names the address; ``cpu``: under `taskset -c CPU`, its workers not pinned."""
    where = ["taskset", "-c", str(cpu)] if cpu is not None else []
    args = (*args, "--no-pin") if cpu is not None else args
    proc = subprocess.Popen([*where, *CLI, "serve", "--listen", "127.0.0.1:0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + startup_s
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        m = re.search(address, line)
        if m:
            return kind(proc, m.group(1))
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"tailwise serve did not start: {line!r} {proc.stderr.read()!r}")


def start_serve(*args: str, startup_s: float = 30.0, address: str = r"listening on synthetic://(\S+)",
                cpu: int | None = None) -> ServeProcess:
    """`tailwise serve` (the synthetic server) on a free port (``address``: the pattern of the line
    naming it, another for --tls-cert's synthetic+tls://; ``cpu``: on that CPU only)."""
    return _start(args, address, ServeProcess, startup_s, cpu)

@dataclass
class UdpFunctionProcess(ServeProcess):
    """`tailwise serve --udp-reflect` or `--udp-forward TO` running; ``counters()`` after ``stop``."""

    @property
    def url(self) -> str:
        return f"udp+flow://{self.addr}"

    def counters(self) -> dict[str, int]:
        """The counters the command printed when it stopped (call ``stop`` first)."""
        rest = self.proc.stdout.read()
        m = re.search(r"tailwise serve: stopped: (.*)", rest)
        if m is None:
            raise RuntimeError(f"tailwise serve printed no counters: {rest!r} {self.proc.stderr.read()!r}")
        return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", m.group(1))}


def start_udp_function(*args: str, startup_s: float = 30.0, cpu: int | None = None) -> UdpFunctionProcess:
    """`tailwise serve --udp-…` on a free port (``cpu``: on that CPU only)."""
    return _start(args, r"(?:reflecting|forwarding) UDP on (\S+)", UdpFunctionProcess, startup_s, cpu)
