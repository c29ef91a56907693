"""`tailwise agent`: the agent service (agents/server.py) on HOST:PORT until SIGINT/SIGTERM.

The command line is a contract: deploy/ (the image, the Kubernetes manifests, the systemd unit)
starts agents with these flags and tests/e2e/test_deploy.py holds them to --help. The token is
read from its file only: it is never an argument, never printed."""

from __future__ import annotations

import os
import signal
import threading
from typing import Annotated, Optional

import typer

from tailwise.cli.exits import EXIT_OK
from tailwise.errors import InputError
from tailwise.spec.fleet import AGENT_PORT

DEFAULT_LISTEN = f"0.0.0.0:{AGENT_PORT}"
#: agents/limits.py's DEFAULT_LEASE_NS and LOOPBACK as --help shows them (without importing gRPC for
#: every command); tests/e2e/test_agent_server.py holds them equal.
DEFAULT_LEASE = "5s"
LOOPBACK_TEXT = "127.0.0.0/8,::1/128"
#: A shorter lease would stop loads between a coordinator's calls.
MIN_LEASE_NS = 1_000_000_000


def _listen(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or int(port) > 65535:
        raise InputError(f"--listen {text} is not HOST:PORT",
                         f"write e.g. --listen {DEFAULT_LISTEN}, --listen [::]:7100 or --listen 10.0.0.2:7101")
    return text


def _networks(text: str | None):
    from tailwise.agents.limits import LOOPBACK, Allowed

    if text is None:
        return LOOPBACK
    nets = []
    for part in (p.strip() for p in text.split(",")):
        try:
            nets.append(Allowed.parse(part))
        except ValueError as e:
            raise InputError(f"--allow-targets: {part!r} is not a network with its ports ({e})",
                             "give CIDR[:PORT|:LOW-HIGH] separated by commas, e.g. --allow-targets "
                             "10.0.0.0/24:11211,192.168.1.7/32:8000-8099 (without a port: any)") from None
    return tuple(nets)


def _tls(cert: str | None, key: str | None, client_ca: str | None) -> tuple[bytes, bytes, bytes | None] | None:
    """(certificate chain, private key, the CA client certificates must chain to) PEM; None: no TLS."""
    from tailwise.agents.wire import read_pem

    if (cert is None) != (key is None):
        given, missing = ("--tls-cert", "--tls-key") if cert else ("--tls-key", "--tls-cert")
        raise InputError(f"{given} without {missing}", "give both --tls-cert FILE and --tls-key FILE (PEM), or neither")
    if cert is None or key is None:
        if client_ca is not None:
            raise InputError("--tls-client-ca without --tls-cert/--tls-key: client certificates are checked over "
                             "TLS only", "give --tls-cert FILE --tls-key FILE too")
        return None
    return (read_pem(cert, "--tls-cert", "certificate"), read_pem(key, "--tls-key", "private key"),
            read_pem(client_ca, "--tls-client-ca", "certificate") if client_ca else None)


def _plaintext(address: str, tls: object, insecure: bool) -> None:
    """Issue 33: an address other hosts can reach is served in the clear only when told so."""
    from tailwise.spec.fleet import is_loopback

    if tls is None and not insecure and not is_loopback(address):
        raise InputError(f"--listen {address} without TLS: the token and the runs would cross the network in the clear",
                         "give --tls-cert FILE --tls-key FILE, or --listen 127.0.0.1:PORT, or add --insecure-plaintext "
                         "on a network you trust")


def _cpus(text: str | None) -> list[int] | None:
    """--cpus: the CPUs this process (and so the engine's threads) may use, applied now."""
    from tailwise.host.facts import cpu_list, restrict_cpus

    if text is None:
        return None
    allowed = os.sched_getaffinity(0)
    try:
        cpus = cpu_list(text)
    except ValueError:
        cpus = set()
    if not cpus:
        raise InputError(f"--cpus {text} is not a CPU list", "write e.g. --cpus 2-5 or --cpus 0,2,4-6")
    if not cpus <= allowed:
        raise InputError(f"--cpus {text}: CPUs {','.join(map(str, sorted(cpus - allowed)))} are not this process's to use",
                         f"choose among {','.join(map(str, sorted(allowed)))}")
    restrict_cpus(cpus)
    return sorted(cpus)


def _limits(allow_targets: str | None, max_rate: str | None, max_conns: int | None, max_duration: str | None,
            lease: str, max_memory: str | None = None):
    from tailwise.agents.limits import Limits
    from tailwise.spec.runspec import positive
    from tailwise.spec.units import parse_rate, parse_size, parse_time_ns

    lease_ns = parse_time_ns(lease, what="--lease")
    if lease_ns < MIN_LEASE_NS:
        raise InputError(f"--lease {lease} is too short: a coordinator's calls are seconds apart at times",
                         "give --lease 1s or more (5s is the default)")
    memory = parse_size(max_memory, what="--max-memory") if max_memory is not None else 0
    if memory:
        _check_memory(memory, f"--max-memory {max_memory}", f"give --max-memory {{least}} or more")
    return Limits(allow_targets=_networks(allow_targets),
                  max_rate_rps=parse_rate(max_rate, what="--max-rate") if max_rate is not None else 0.0,
                  max_conns=positive("--max-conns", max_conns) if max_conns is not None else 0,
                  max_duration_ns=parse_time_ns(max_duration, what="--max-duration") if max_duration is not None else 0,
                  lease_ns=lease_ns, max_memory=memory, memory_from="--max-memory" if memory else "")


def _check_memory(memory: int, what: str, remedy: str) -> None:
    """Refuse a bound too small to run at all (agents/held.py, ``MIN_MEMORY``): ``remedy`` with
    the least one in it."""
    from tailwise.agents.held import MIN_MEMORY, MIN_ROWS
    from tailwise.spec.units import fmt_bytes

    if memory < MIN_MEMORY:
        least = fmt_bytes(MIN_MEMORY)
        raise InputError(f"{what} is too small for an agent: it needs {least} at least (the interpreter, gRPC "
                         f"and the engine, and {MIN_ROWS:,} sampled rows between a coordinator's snapshots)",
                         remedy.format(least=f"{MIN_MEMORY >> 20}Mi"))


def _memory_default(limits):
    """Without --max-memory: the cgroup's limit (a container's, a systemd unit's MemoryMax=), if any."""
    from dataclasses import replace

    from tailwise.host.facts import cgroup_memory_max
    from tailwise.spec.units import fmt_bytes

    if limits.max_memory or (memory := cgroup_memory_max()) is None:
        return limits
    _check_memory(memory, f"this agent's cgroup limit {fmt_bytes(memory)} (memory.max)",
                  "raise the container's memory limit (resources.limits.memory, systemd's MemoryMax=) to {least} or "
                  "more, or give --max-memory {least} if the limit is for more than the agent")
    return replace(limits, max_memory=memory, memory_from="cgroup")


def agent(
    token_file: Annotated[str, typer.Option(
        "--token-file", metavar="FILE",
        help="the shared token, one line (required: no token, no service); make one with "
             "umask 077; head -c 32 /dev/urandom | base64 > FILE, and give the coordinator the same file")],
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT",
        help="address and port to serve coordinators on (port 0: a free one); agents on one host take ports of "
             "their own")] = DEFAULT_LISTEN,
    tls_cert: Annotated[Optional[str], typer.Option(
        "--tls-cert", metavar="FILE", help="TLS certificate chain (PEM), with --tls-key: needed to listen on an "
                                           "address other than loopback, unless --insecure-plaintext "
                                           "[default: none, no TLS]")] = None,
    tls_key: Annotated[Optional[str], typer.Option(
        "--tls-key", metavar="FILE",
        help="TLS private key (PEM, mode 0600), with --tls-cert [default: none, no TLS]")] = None,
    tls_client_ca: Annotated[Optional[str], typer.Option(
        "--tls-client-ca", metavar="FILE",
        help="mutual TLS: admit only coordinators whose certificate chains to this CA (PEM; they give "
             "--agent-tls-cert/--agent-tls-key) [default: none, the token alone]")] = None,
    insecure_plaintext: Annotated[bool, typer.Option(
        "--insecure-plaintext",
        help="serve an address other hosts reach without TLS: the token and the runs cross the network in the clear "
             "[default: refused; loopback needs no flag]")] = False,
    allow_targets: Annotated[Optional[str], typer.Option(
        "--allow-targets", metavar="CIDR[:PORT|:LOW-HIGH],...",
        help="the only networks (and ports: all when none is given; an IPv6 network's in brackets, "
             "[fd00::/64]:11211) this agent sends to; any other target is refused [default: loopback only, any "
             f"port, {LOOPBACK_TEXT}]")] = None,
    max_rate: Annotated[Optional[str], typer.Option(
        "--max-rate", metavar="RATE", help="refuse runs above this rate, load and probe together [default: no limit]")] = None,
    max_conns: Annotated[Optional[int], typer.Option(
        "--max-conns", metavar="N", help="refuse runs with more sockets: connections, the probe's, and udp+flow's flows [default: no limit]")] = None,
    max_duration: Annotated[Optional[str], typer.Option(
        "--max-duration", metavar="TIME", help="refuse longer runs [default: no limit]")] = None,
    lease: Annotated[str, typer.Option(
        "--lease", metavar="TIME",
        help="stop the load when the coordinator made no call for this long; drop a run nobody collects within "
             "another lease")] = DEFAULT_LEASE,
    cpus: Annotated[Optional[str], typer.Option(
        "--cpus", metavar="LIST",
        help="CPUs the agent (and the engine's threads, pinned within them) may use, e.g. 2-5 [default: those it "
             "was started with]")] = None,
    max_memory: Annotated[Optional[str], typer.Option(
        "--max-memory", metavar="SIZE",
        help="memory to keep within, e.g. 512Mi or 2Gi: the sampled rows held for a coordinator that does not "
             "collect them are bounded by it and thinned past it, as the coordinator's subsample does "
             "[default: the cgroup's limit, else a fixed ceiling of rows]")] = None,
) -> int:
    """Serve coordinators (`run`/`sweep` --agents) over gRPC: run their load from this host, against the targets it allows, until SIGINT/SIGTERM."""
    # gRPC's own log lines would repeat our one-line errors (GRPC_VERBOSITY=debug shows them); it
    # reads the variable when it loads.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from tailwise.agents.wire import read_token

    address = _listen(listen)
    token = read_token(token_file)
    tls = _tls(tls_cert, tls_key, tls_client_ca)
    limits = _memory_default(_limits(allow_targets, max_rate, max_conns, max_duration, lease, max_memory))
    cpu_list = _cpus(cpus)
    _plaintext(address, tls, insecure_plaintext)
    return _serve(address, token, tls, limits, cpu_list)


def _serve(address: str, token: str, tls: tuple[bytes, bytes, bytes | None] | None, limits,
           cpus: list[int] | None) -> int:
    from tailwise.host.facts import fix_mmap_threshold
    from tailwise.agents.server import AgentServer
    from tailwise.agents.serving import serve
    from tailwise.render.agent import limits_text, show_event, show_listening, show_stopped

    # Freed batches of rows go back to the system, so that the agent stays within --max-memory.
    fix_mmap_threshold()

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    servicer = AgentServer(limits, cpus=cpus, on_event=show_event)
    try:
        server, port = serve(servicer, token, address, tls)
    except BaseException:
        servicer.close()
        raise
    bound = f"{address.rpartition(':')[0]}:{port}"
    show_listening(bound, "no TLS" if tls is None else "TLS, client certificates required" if tls[2] else "TLS",
                   limits_text([str(n) for n in limits.allow_targets], limits.max_rate_rps, limits.max_conns,
                               limits.max_duration_ns, limits.lease_ns, servicer.cpus, limits.max_memory,
                               limits.memory_from, limits.max_rows()))
    while not stop.wait(0.5):
        pass
    # The load stops first; a Finish under way may still deliver the result in the grace period.
    servicer.stop_load(signal.Signals(received[0]).name if received else "stop")
    server.stop(grace=2).wait()
    servicer.close()
    show_stopped(bound)
    return EXIT_OK
