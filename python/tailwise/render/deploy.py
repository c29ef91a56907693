"""What `tailwise deploy` prints: one line per host (agents/deploy.py's results), an agent's log
tail under its error, and for `start` the `--agents` value alone on stdout, for `run` to take.
Never the token."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from tailwise.agents.deploy import AGENT_DIR, TERM_S, DeployError, StartOutcome, Status, Stopped

PREFIX = "tailwise deploy: "
T = TypeVar("T")


def _say(line: str, stream=None) -> None:
    print(line, file=stream or sys.stdout, flush=True)


def error_lines(e: DeployError) -> list[str]:
    """The one-line error, and the agent's log tail under it (indented) when there is one."""
    return [f"tailwise: {e.line()}", *(f"    | {line}" for line in e.log_tail.splitlines())]


def show_error(e: DeployError) -> None:
    for line in error_lines(e):
        _say(line, sys.stderr)


def stopped_line(s: Stopped, port: int) -> str:
    if s.pid is None:
        return f"{s.target}: no agent of deploy's on port {port}: nothing to stop"
    how = f"SIGKILL after {TERM_S:g} s of SIGTERM" if s.killed else "SIGTERM"
    return f"{s.target}: agent on port {port} stopped (pid {s.pid}, {how}); token and pid files removed"


def show_started(outcome: StartOutcome, version: str, run_flags: Sequence[str] = ()) -> None:
    """Each host on stderr; then either the flags `run` needs on stdout (`--agents`, and how to
    talk to them: ``run_flags``), or the failures and what was stopped again."""
    for s in outcome.started:
        other = f" (not this tailwise's {version}: run the same version on both sides)" if s.version != version else ""
        _say(f"{PREFIX}{s.target}: agent {s.address} answers (pid {s.pid}, host {s.hostname}, tailwise "
             f"{s.version}{other})", sys.stderr)
    for e in outcome.failed:
        show_error(e)
    if outcome.failed:
        for r in outcome.rolled_back:
            if isinstance(r, DeployError):
                show_error(r)
            else:
                _say(f"{PREFIX}{r.target}: stopped again, as start is all or none (pid {r.pid})", sys.stderr)
        return
    _say(" ".join(["--agents " + ",".join(s.address for s in outcome.started), *run_flags]))


def _show(results: Sequence[T | DeployError], line: Callable[[T], str]) -> None:
    """One line per host on stdout; a host that failed, its error on stderr."""
    for r in results:
        if isinstance(r, DeployError):
            show_error(r)
        else:
            _say(line(r))


def show_stopped(results: Sequence[Stopped | DeployError], port: int) -> None:
    _show(results, lambda s: stopped_line(s, port))


def status_line(s: Status, port: int) -> str:
    where = f"{s.target}: {s.address}"
    if s.pid is None:
        return f"{where} not running"
    if s.stale:
        return f"{where} not running (the agent of pid {s.pid} has ended; its log: ~/{AGENT_DIR}/agent-{port}.log there)"
    if s.problem is not None:
        return f"{where} running (pid {s.pid}) but not answering Health: {s.problem.line()}"
    return f"{where} running (pid {s.pid}), answers Health: {s.state}, tailwise {s.version}"


def show_status(results: Sequence[Status | DeployError], port: int) -> None:
    _show(results, lambda s: status_line(s, port))
