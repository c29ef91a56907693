"""What `tailwise agent` prints: one line when it listens (with its fences), the clear-text warning
without TLS, and one line per run event (agents/events.py). Never the token."""

from __future__ import annotations

import sys

from tailwise.agents.events import (Closing, Configured, Dropped, Event, Finished, LeaseExpired, Refused, Started,
                                   Stopped, Thinned)
from tailwise.spec.units import fmt_bytes, fmt_ns

PREFIX = "tailwise agent: "


def _say(line: str, stream=None) -> None:
    print(PREFIX + line, file=stream or sys.stdout, flush=True)


def _rate(rps: float) -> str:
    return f"{rps:,.0f} req/s"


def limits_text(allow_targets: list[str], max_rate_rps: float, max_conns: int, max_duration_ns: int,
                lease_ns: int, cpus: list[int], max_memory: int = 0, memory_from: str = "", max_rows: int = 0) -> str:
    unlimited = "no limit"
    memory = (f"{fmt_bytes(max_memory)}{' from the cgroup' if memory_from == 'cgroup' else ''}" if max_memory
              else unlimited)
    return (f"targets {','.join(allow_targets)}; max rate {_rate(max_rate_rps) if max_rate_rps else unlimited}, "
            f"max conns {max_conns or unlimited}, max duration {fmt_ns(max_duration_ns) if max_duration_ns else unlimited}, "
            f"max memory {memory} (rows held between snapshots ≤ {max_rows:,}); "
            f"lease {fmt_ns(lease_ns)}; CPUs {','.join(map(str, cpus))}")


def show_listening(address: str, tls: str, limits: str) -> None:
    """``tls``: "no TLS", "TLS" or "TLS, client certificates required"."""
    from tailwise.spec.fleet import is_loopback

    _say(f"listening on {address} ({tls}); {limits}")
    if tls == "no TLS" and not is_loopback(address):
        _say("warning: --insecure-plaintext: the token and all traffic cross the network in the clear; start the "
             "agent with --tls-cert FILE --tls-key FILE (and give the coordinator --agent-tls-ca FILE)", sys.stderr)


def show_stopped(address: str) -> None:
    _say(f"stopped listening on {address}")


def event_line(event: Event) -> str:
    """One line per event."""
    match event:
        case Configured():
            probe = f" + probe {_rate(event.probe_rps)}" if event.probe_rps else ""
            return (f"run {event.run_id} configured: role {event.role} at {_rate(event.rate_rps)}{probe} to "
                    f"{', '.join(event.targets)}, {event.conns} conns, for {fmt_ns(event.duration_ns)}")
        case Started():
            return f"run {event.run_id} started: its schedule begins in {fmt_ns(event.in_ns)}"
        case Stopped():
            return f"run {event.run_id} stopped early by its coordinator"
        case LeaseExpired():
            return (f"run {event.run_id}: no call from its coordinator for {fmt_ns(event.silent_ns)} (lease "
                    f"{fmt_ns(event.lease_ns)}): load stopped")
        case Thinned():
            bound = (f"{fmt_bytes(event.max_memory)}{' from the cgroup' if event.memory_from == 'cgroup' else ''}"
                     if event.max_memory else "no --max-memory: the fixed ceiling")
            return (f"run {event.run_id}: rows not collected for {fmt_ns(event.silent_ns)} passed this agent's ceiling "
                    f"of {event.max_rows:,} ({bound}): it keeps 1 in {event.one_in:,} of them (more if they pile up), "
                    f"by the coordinator's own keys, and tells it; the samples file will lack the rest")
        case Finished():
            how = "interrupted" if event.interrupted else "finished"
            error = f"; ended early: {event.error}" if event.error else ""
            return f"run {event.run_id} {how} and collected: {event.sent:,} sent, {event.received:,} received{error}"
        case Dropped():
            what = "never started" if event.state == "configured" else "never collected"
            return f"run {event.run_id} dropped: {what} within the lease ({fmt_ns(event.lease_ns)}); idle"
        case Refused():
            run = f" (run {event.run_id})" if event.run_id else ""
            peer = f" from {event.peer}" if event.peer else ""
            unsaid = f" ({event.unsaid:,} more from there since the last line)" if event.unsaid else ""
            return f"refused {event.call}{peer}{run}: {event.line}{unsaid}"
        case Closing():
            load = f"; stopping run {event.run_id} first" if event.run_id else ""
            return f"{event.signal}: shutting down{load}"
    return str(event)


def show_event(event: Event) -> None:
    _say(event_line(event))
