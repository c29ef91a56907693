"""One measurement: a RunSpec measured against its target (or the built-in server, started for it)
until the methodology concludes — what `run` does once, and `sweep` once per load.

`prepare` decides, once per command, what depends on the machine and not on the load (the host
facts, whether the built-in server may spin, the CPUs the coordinator must leave alone) and gives
the warnings that go with it; `measure` runs one point and returns the summary with the agent's
result and the analysis, from which `results.export.write_run` writes the point's directory.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from tailwise import signals
from tailwise.driver.local import LocalAgent
from tailwise.results.measured import AgentResult
from tailwise.errors import InputError
from tailwise.host.facts import host_info, isolated_cpus, listener_cpus, pinned_cpus
from tailwise.host.placement import Placement
from tailwise.methodology.remedies import Setting
from tailwise.measure.server import builtin_server, server_stats
from tailwise.spec.fleet import Fleet
from tailwise.spec.load import TestStall
from tailwise.spec.tls import source_note as tls_source_note
from tailwise.spec.runspec import RunSpec, timestamp_source
from tailwise.spec.target import DATAGRAM
from tailwise.spec.units import fmt_ns, parse_dist, parse_time_ns
from tailwise.warning import HostKnob, JournalGivenUp, SamplesNotKept, ServerShares, SpinnersShare, Warn, AnyWarning

if TYPE_CHECKING:
    from tailwise.results.documents.run import Summary

#: CPU seconds one analysis takes per million samples kept, with room for a busy machine
#: (BENCHMARKS.md: ~2 s per million on this machine kind), for the stated time budget.
ANALYSIS_S_PER_MILLION = 4.0


@dataclass(frozen=True)
class Setup:
    """What a command decides once for all its points."""

    host: dict
    #: The built-in server busy-polls (every spinning thread has a CPU of its own).
    server_spin: bool
    #: CPUs the coordinator must not take (None: not pinned).
    busy_cpus: set[int] | None
    #: How the client runs, for the remedies of the checks.
    setting: Setting
    #: The agents that load and measure (--agents); None: this process does.
    fleet: Fleet | None = None
    #: The agents' shared token, read once from --token-file (never printed or written).
    token: str = field(default="", repr=False)
    #: How to talk to the agents (agents/wire.ClientTls; None: in the clear, to loopback agents).
    tls: object = field(default=None, repr=False)


@dataclass
class Measurement:
    summary: Summary
    result: AgentResult
    analysis: object  # methodology.analysis.Analysis

    def amend(self, **fields) -> None:
        """Validate ``fields`` onto the summary (results/summary.amend)."""
        from tailwise.results.summary import amend  # pydantic's models: loaded after the run

        amend(self.summary, **fields)

    def file_problems(self, out: Path | str) -> list[AnyWarning]:
        """What the disk refused while the run went on, as warnings for ``out``, the results
        directory: the run's figures are whole either way."""
        problems: list[AnyWarning] = []
        if self.result.samples_file_error:
            problems.append(SamplesNotKept(str(out), self.result.samples_file_error))
        if self.result.journal_error:
            problems.append(JournalGivenUp(str(out), self.result.journal_error))
        return problems


class Display(Protocol):
    """What shows a measurement while it runs (render/point.py): this module only tells it what
    happens — the measurement starting, the engine's session, each methodology round."""

    def __enter__(self) -> Display: ...
    def __exit__(self, *exc) -> None: ...
    def measuring(self, target_url: str, rate_rps: float, goal: str) -> None: ...
    def started(self, session) -> None: ...
    #: Called with each methodology round (`controller.RoundInfo`); None: not wanted.
    round: Callable[[object], None] | None


class Silent:
    """A measurement nobody watches (a sweep's points: the sweep shows its own lines)."""

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def measuring(self, target_url: str, rate_rps: float, goal: str) -> None:
        pass

    def started(self, session) -> None:
        pass

    round = None


def prepare(rs: RunSpec, warn: Warn = lambda warning: None, fleet: Fleet | None = None) -> Setup:
    """The machine-dependent decisions, with their warnings (given once, before any request, to
    ``warn``)."""
    if fleet is not None:
        return _prepare_fleet(rs, fleet)
    host = host_info()
    threads, workers = rs.threads, rs.workers
    # The probe thread always spins, on a CPU of its own when there is one.
    busy = (threads if rs.busy_poll else 0) + (1 if rs.probe_conns else 0)
    cores = host["usable_cores"] or 1
    # The built-in server busy-polls when every spinning thread still has a CPU of its own: a
    # sleeping worker adds a vCPU wake-up (~30 µs here) to every request it serves.
    server_spin = rs.builtin and busy + workers <= cores
    if rs.builtin and busy + workers > cores:
        warn(ServerShares(busy, workers, cores))
    elif not rs.builtin and busy > cores:
        warn(SpinnersShare(busy, cores))
    # The CPUs the coordinator must not take: the engine's and the built-in server's; with a target
    # on this machine (loopback), its process's too — all of them when they cannot be read.
    local = any(ipaddress.ip_address(t.socket_addr().rsplit(":", 1)[0].strip("[]")).is_loopback for t in rs.targets)
    engine_threads = threads + (1 if rs.probe_conns else 0)
    host["knobs"] = host_knobs(rs, local, server_spin, warn)
    theirs = _local_target_cpus(rs) if local and rs.pin else []
    busy_cpus = None
    if rs.pin:
        busy_cpus = _busy_cpus(engine_threads, 0 if rs.targets else workers)
        busy_cpus = set(os.sched_getaffinity(0)) if None in theirs else busy_cpus.union(*theirs)
    own = busy + workers <= cores if rs.builtin else busy <= cores
    return Setup(host=host, server_spin=server_spin, busy_cpus=busy_cpus,
                 setting=_setting(rs, engine_threads, local, own, theirs))


def _prepare_fleet(rs: RunSpec, fleet: Fleet) -> Setup:
    """The agents load and measure: nothing of this machine's CPUs is the engine's; the built-in
    server (no target) workers take this machine's, sleeping between requests."""
    # gRPC (~22 MB resident) only for a run on agents.
    from tailwise.agents.wire import client_tls, read_token

    token = read_token(fleet.token_file)
    tls = client_tls(fleet.tls_ca, fleet.tls_cert, fleet.tls_key, fleet.insecure_plaintext)
    setting = Setting(poll=rs.settings["poll"], engine_cpus=None, own_cpus=False, isolated=False,
                      local_target=rs.builtin, builtin=rs.builtin)
    host = host_info() | {"knobs": host_knobs(rs, False, False, None)}
    return Setup(host=host, server_spin=False, busy_cpus=None, setting=setting, fleet=fleet, token=token, tls=tls)


#: How long a run's preparation samples /proc/stat for the doctor's knobs (steal, other load):
#: 10 ticks a CPU at USER_HZ 100, enough to see one ≥ 10 % busy (BUSY_SHARE); the first request
#: waits for it (issue 37: ≤ 0.5 s from the command), `tailwise doctor` samples 0.5 s.
KNOB_SAMPLE_S = 0.1


def host_knobs(rs: RunSpec, local: bool, server_spin: bool, warn: Warn | None) -> list[dict]:
    """The host's sources of jitter (host/doctor.py) for the summary's host, and with ``warn`` one
    line for each knob in warn state that matters for this run (``Knob.matters``)."""
    from tailwise.host.doctor import Doctor, RunShape, route_interface

    iface, note = ("lo", None) if rs.builtin else route_interface(rs.targets[0].socket_addr())
    engine = rs.threads + (1 if rs.probe_conns else 0)
    cpus = _busy_cpus(engine, rs.workers if rs.builtin else 0) if rs.pin else set()
    doctor = Doctor(iface=iface, cpus=cpus, sample_s=KNOB_SAMPLE_S, iface_note=note)
    shape = RunShape(spinning=rs.busy_poll, sleeping=not rs.busy_poll or (rs.builtin and not server_spin),
                     nic=not (rs.builtin or local))
    for f in doctor.warnings(shape) if warn else ():
        warn(HostKnob(f.name, f.detail, f.fix))
    return [f.as_json() for f in doctor.facts()]


def facing(address: str) -> str:
    """This machine's address on the route to ``address`` (HOST:PORT): where the agents reach the
    built-in server (no packet is sent: a UDP socket's connect only picks the route)."""
    host = address.rpartition(":")[0].strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return s.getsockname()[0]


def _setting(rs: RunSpec, engine_threads: int, local: bool, own: bool, theirs: list[set[int] | None]) -> Setting:
    """How the client runs (checks.Setting), read from the machine: the engine's CPUs, whether the
    kernel isolates them, and for a target on this host whether its process shares them (``theirs``:
    ``_local_target_cpus``, read once by ``prepare``)."""
    engine = _busy_cpus(engine_threads, 0) if rs.pin else None
    if own and engine and local and not rs.builtin:
        # A server on this host: own CPUs only if its process is pinned away from the engine's.
        own = all(c is not None and not (c & engine) for c in theirs)
    return Setting(poll=rs.settings["poll"], engine_cpus=tuple(sorted(engine)) if engine else None,
                   own_cpus=bool(own and engine), isolated=bool(engine) and engine <= isolated_cpus(),
                   local_target=rs.builtin or local, builtin=rs.builtin)


def _local_target_cpus(rs: RunSpec) -> list[set[int] | None]:
    """The CPUs each process serving a target on this host may run on (None: not found or not
    readable), found by its listening TCP or bound UDP socket (host/facts.listener_cpus)."""
    ports = {(int(t.socket_addr().rsplit(":", 1)[1]), "udp" if t.scheme in DATAGRAM else "tcp") for t in rs.targets}
    return [listener_cpus(port, proto) for port, proto in sorted(ports)]


def _busy_cpus(threads: int, workers: int) -> set[int]:
    """The CPUs the engine threads and the built-in server's workers pin themselves to."""
    return pinned_cpus(threads, workers)


def conclude_s(rs: RunSpec) -> float:
    """What comes after the schedule, bounded: the drain (≤ --timeout) and the analyses (the last
    round's, which may be running when the schedule ends, and the final one)."""
    span_s = (rs.duration_ns or rs.max_time_ns) / 1e9
    analyses = 1 if rs.duration_ns else 2
    return rs.timeout_ns / 1e9 + 2.0 + analyses * ANALYSIS_S_PER_MILLION * rs.rate_rps / rs.sample_every * span_s / 1e6


def longest_s(rs: RunSpec) -> float:
    """The longest one measurement of this spec can take: its schedule and its conclusion."""
    return (rs.duration_ns or rs.max_time_ns) / 1e9 + conclude_s(rs)


def measure(rs: RunSpec, setup: Setup, command: str, display: Display | None = None,
            collected: Path | None = None) -> Measurement:
    """Measure ``rs`` once, telling ``display`` what happens (render/point.py; none: `Silent`). On
    agents, what the coordinator collects is also written to ``collected`` as it arrives
    (results/journal.py), so that it outlives a coordinator that dies."""
    from tailwise.measure import serverstats
    from tailwise.results.files import release_freed_memory
    from tailwise.results.journal import LOCAL_SAMPLES, Journal

    signals.check()  # a stop signal between measurements (a sweep's points) ends here
    config = rs.config(command)
    if rs.builtin:
        config["builtin_server"]["busy_poll"] = setup.server_spin
    shown = display or Silent()

    def one(addrs: list[str], target_url: str, ended: Callable[[AgentResult], dict], stall_sources=()) -> Measurement:
        """Measure, then analyse; ``ended`` gives the target's side (``target_stats``) as the engine ends."""
        source, note = timestamp_source(rs.timestamps, addrs[0])
        config["timestamps"], config["timestamps_note"] = source, tls_source_note(note, source, rs.tls is not None)
        spec = rs.load_spec(addrs, source, test_stall=_test_stall())
        if setup.fleet is None:
            agent = LocalAgent()
        else:
            from tailwise.agents.group import AgentGroup

            agent = AgentGroup(list(setup.fleet.agents), setup.token, setup.fleet.probe_agent, setup.tls)
        journal = {} if setup.fleet is None or collected is None else {"journal": Journal(collected, config)}
        if setup.fleet is None and collected is not None:
            # Every kept row goes to disk as it comes; memory holds a bounded subsample (stats/subsample.py).
            journal = {"samples_file": collected / LOCAL_SAMPLES}
        span_s = (rs.duration_ns or rs.max_time_ns) / 1e9
        goal = (f"for {span_s:g} s" if rs.duration_ns else
                f"until p{rs.percentile:g} ± {fmt_ns(rs.ci_ns) if rs.ci_ns else f'{rs.ci_rel:.0%}'}, at most {span_s:g} s")
        goal += f" (+ {conclude_s(rs):.1f} s to conclude)"

        def started(session) -> None:
            shown.measuring(target_url, rs.rate_rps, goal)
            shown.started(session)

        with shown:
            result, analysis, methodology, target_stats = _drive(rs, setup, agent, spec, stall_sources, journal,
                                                                 started, ended, shown.round)
        release_freed_memory()  # the analysis's arrays, before the summary and the files (files.py)
        from tailwise.methodology.summarize import build_summary  # the result's models (pydantic): after the run

        m = Measurement(build_summary(target=target_url, config=config, host=setup.host, result=result,
                                      analysis=analysis, methodology=methodology), result, analysis)
        if result.agents is not None:
            duration_s = m.summary.rate.duration_s
            m.amend(agents=[a.report(duration_s) for a in result.agents], barrier=result.barrier)
        m.amend(target_stats=target_stats)
        return m

    if rs.builtin:
        # With agents, the built-in server listens where they reach this machine.
        listen = f"{facing(setup.fleet.agents[0])}:0" if setup.fleet else "127.0.0.1:0"
        with builtin_server(service=rs.service, workers=rs.workers, seed=rs.seed, pin=rs.pin,
                            busy_poll=setup.server_spin, listen=listen) as srv:

            def served(result: AgentResult) -> dict:
                stats = server_stats(srv, parse_dist(rs.service)[1], result.elapsed_ns, rs.workers,
                                     result.target_stalls_ns)
                srv.stop()  # the engine has finished: a spinning worker must not share a CPU with the analysis
                return stats

            m = one([srv.addr], f"synthetic://{srv.addr}", served, (srv.take_stalls,))
    else:
        tgts = list(rs.targets)
        before = serverstats.fetch_all(tgts, tls=rs.tls)
        m = one([t.socket_addr() for t in tgts], tgts[0].url if len(tgts) == 1 else ", ".join(t.url for t in tgts),
                lambda result: serverstats.compare_all(tgts, before, result.counters, tls=rs.tls))
    if m.result.interrupted and not m.result.counters["sent"]:
        raise signals.Interrupted(signals.received() or signal.SIGINT)  # stopped before its first request
    return m


def _drive(rs: RunSpec, setup: Setup, agent, spec, stall_sources, journal: dict, started: Callable[[object], None],
           ended: Callable[[AgentResult], dict], progress) -> tuple[AgentResult, object, dict, dict]:
    """Start the engine on ``agent`` and drive it to its analysis: to the end of --duration, or by the
    methodology's rounds (``progress`` sees each); ``ended(result)`` as the engine ends, before the
    final analysis. The methodology, and with it scipy and statsmodels (~1 s to load), is imported
    once the first request is out: the first round or the run's end loads it."""
    precision = rs.precision()
    if rs.duration_ns:
        placement = _placement(setup)
        try:
            result = agent.run(spec, stall_sources=stall_sources, on_start=lambda s: (placement.take(), started(s)),
                               **journal)
        finally:
            placement.release()
        target = ended(result)
        from tailwise.methodology.controller import fixed_methodology

        return (result, *fixed_methodology(result, spec, precision, rs.seed, bound_delays=not rs.keep_stalls,
                                           setting=setup.setting, bounds=rs.bounds), target)
    session = agent.start(precision.open_ended(spec), stall_sources, **journal)
    from tailwise.methodology.controller import Controller

    controller = Controller(spec, precision, seed=rs.seed, progress=progress, bound_delays=not rs.keep_stalls,
                            bounds=rs.bounds, setting=setup.setting, placement=_placement(setup))
    target: dict = {}
    result, analysis, methodology = controller.run(session, on_start=started,
                                                   on_end=lambda r: target.update(stats=ended(r)))
    return result, analysis, methodology, target["stats"]


def _placement(setup: Setup) -> Placement:
    """The coordinator keeps off the engine's CPU while the schedule runs, or yields to it."""
    return Placement(setup.busy_cpus, setup.setting.engine_cpus,
                     spinning=setup.setting.poll == "spin" or setup.server_spin)


def _test_stall() -> TestStall | None:
    """Tests only: TAILWISE_TEST_ENGINE_STALL=AT:FOR[:EVERY:COUNT] (e.g. 1.5s:2ms, or 1s:5ms:500ms:4)
    stops each engine thread for FOR at AT, then every EVERY, COUNT times in all (once by default)."""
    hook = os.environ.get("TAILWISE_TEST_ENGINE_STALL")
    if not hook:
        return None
    parts = hook.split(":")
    if len(parts) not in (2, 4) or (len(parts) == 4 and not parts[3].isdigit()):
        raise InputError(f"TAILWISE_TEST_ENGINE_STALL={hook} is not AT:FOR or AT:FOR:EVERY:COUNT",
                         "give e.g. 1.5s:2ms or 1s:5ms:500ms:4")
    at, dur = (parse_time_ns(x, what="TAILWISE_TEST_ENGINE_STALL") for x in parts[:2])
    every, count = (parse_time_ns(parts[2], what="TAILWISE_TEST_ENGINE_STALL"), int(parts[3])) if len(parts) == 4 else (0, 1)
    return TestStall(at, dur, every, count)
