"""`tailwise deploy start|stop|status --ssh USER@HOST …`: agents on bare machines over SSH
(agents/deploy.py does it, render/deploy.py says it).

The commands and their flags are a contract (README "Deploying agents", deploy/README.md). The
agent's own flags are checked here as `tailwise agent` checks them, before any host is reached.
The token goes over SFTP only: never an argument, never printed."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from tailwise.cli.exits import EXIT_ERROR, EXIT_OK
from tailwise.cli.usage import Commands
from tailwise.errors import InputError
from tailwise.spec.fleet import AGENT_PORT

DEFAULT_PORT = AGENT_PORT
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"

deploy_app = typer.Typer(
    name="deploy", no_args_is_help=True, cls=Commands,
    help="Start `tailwise agent` on bare machines over SSH, ask how they are, and stop them again.")

Ssh = Annotated[list[str], typer.Option(
    "--ssh", metavar="USER@HOST[:PORT]",
    help="a host to deploy on (repeat --ssh, or separate hosts with commas); logs in with a key: "
         "ssh-agent's, ~/.ssh/id_*, or --identity; ~/.ssh/config applies")]
Port = Annotated[int, typer.Option(
    "--port", metavar="PORT", help="the agent's port on every host; agents on one host take ports of their own")]
Identity = Annotated[Optional[str], typer.Option(
    "--identity", metavar="KEY",
    help="the private key to log in with, and only it [default: ssh-agent's keys and ~/.ssh/id_*]")]
KnownHosts = Annotated[str, typer.Option(
    "--known-hosts", metavar="FILE",
    help="the hosts' keys, checked always (there is no way around it): connect once with ssh to record one")]
TokenFile = Annotated[str, typer.Option(
    "--token-file", metavar="FILE",
    help="the shared token (as for `tailwise agent` and `run --agents`): written to ~/.tailwise/agent-PORT.token "
         "(mode 0600) on each host over SFTP")]
StatusTokenFile = Annotated[str, typer.Option(
    "--token-file", metavar="FILE",
    help="the token the agents were started with (`deploy start --token-file`): read here to ask each agent for "
         "Health; nothing is copied to the hosts")]
AgentTlsCa = Annotated[Optional[str], typer.Option(
    "--agent-tls-ca", metavar="FILE",
    help="ask the agents over TLS, trusting this CA (PEM) [default: start: --tls-cert itself (self-signed)]")]
AgentTlsCert = Annotated[Optional[str], typer.Option(
    "--agent-tls-cert", metavar="FILE", help="this machine's certificate (PEM) for agents started with --tls-client-ca")]
AgentTlsKey = Annotated[Optional[str], typer.Option(
    "--agent-tls-key", metavar="FILE", help="the private key (PEM, mode 0600) of --agent-tls-cert")]
InsecurePlaintext = Annotated[bool, typer.Option(
    "--insecure-plaintext",
    help="agents without TLS: the token and the runs cross the network in the clear [default: refused]")]


def _targets(texts: list[str]):
    from tailwise.agents.deploy import SshTarget

    targets = [SshTarget.parse(t.strip()) for text in texts for t in text.split(",") if t.strip()]
    seen = set()
    for t in targets:
        if (t.host, t.port) in seen:
            raise InputError(f"--ssh {t} is given twice", "name each host once")
        seen.add((t.host, t.port))
    if not targets:
        raise InputError("no host given", "name one with --ssh USER@HOST")
    return targets


def _port(port: int) -> int:
    if not 0 < port < 65536:
        raise InputError(f"--port {port} is not a port", f"give 1-65535, e.g. --port {DEFAULT_PORT}")
    return port


def _existing(path: str, flag: str, fix: str) -> str:
    full = os.path.expanduser(path)
    if not Path(full).is_file():
        raise InputError(f"{flag} {path} does not exist", fix)
    return full


def _ssh(identity: str | None, known_hosts: str):
    from tailwise.agents.deploy import SshOptions

    kh = _existing(known_hosts, "--known-hosts", "connect once with ssh USER@HOST to check and record the host's key "
                                                 "there, or give --known-hosts FILE")
    key = _existing(identity, "--identity", "give the private key's file, e.g. --identity ~/.ssh/id_ed25519") \
        if identity is not None else None
    return SshOptions(known_hosts=kh, identity=key)


def _agent_args(allow_targets: str | None, max_rate: str | None, max_conns: int | None, max_duration: str | None,
                lease: str | None, cpus: str | None, max_memory: str | None = None) -> list[str]:
    """The agent's flags as given, once `tailwise agent`'s own checks accept them."""
    from tailwise.host.facts import cpu_list
    from tailwise.cli.agent import DEFAULT_LEASE, _limits

    _limits(allow_targets, max_rate, max_conns, max_duration, lease or DEFAULT_LEASE, max_memory)
    if cpus is not None:
        try:
            ok = bool(cpu_list(cpus))
        except ValueError:
            ok = False
        if not ok:
            raise InputError(f"--cpus {cpus} is not a CPU list", "write e.g. --cpus 2-5 or --cpus 0,2,4-6")
    given = {"--allow-targets": allow_targets, "--max-rate": max_rate, "--max-conns": max_conns,
             "--max-duration": max_duration, "--lease": lease, "--cpus": cpus, "--max-memory": max_memory}
    return [w for flag, value in given.items() if value is not None for w in (flag, str(value))]


def _client_tls(ca: str | None, cert: str | None, key: str | None, insecure: bool, targets, port: int):
    """How this machine asks the agents Health (agents/wire.ClientTls), or a one-line refusal to send
    the token in the clear to a host that is not this one."""
    from tailwise.agents.wire import client_tls
    from tailwise.spec.fleet import check_client_tls, refuse_plaintext

    check_client_tls(ca, cert, key, insecure)
    if ca is None and not insecure:
        for t in targets:
            refuse_plaintext(t.agent_address(port), f"--ssh {t}: its agent")
    return client_tls(ca, cert, key, insecure)


def _agent_tls(cert: str | None, key: str | None, client_ca: str | None, insecure: bool) -> dict[str, bytes]:
    """The agent's TLS files (checked as `tailwise agent` checks them), by flag; none with
    --insecure-plaintext. Neither: refused, as deploy's agents listen on every address."""
    from tailwise.cli.agent import _tls

    tls = _tls(cert, key, client_ca)
    if tls is None and not insecure:
        raise InputError("deploy starts agents that listen on every address: without TLS the token and the runs would "
                         "cross the network in the clear",
                         "give --tls-cert FILE --tls-key FILE (copied to each host), or --insecure-plaintext on a "
                         "network you trust")
    if tls is not None and insecure:
        raise InputError("--tls-cert with --insecure-plaintext: the agents are either TLS or not", "drop one of them")
    if tls is None:
        return {}
    return {"--tls-cert": tls[0], "--tls-key": tls[1], **({"--tls-client-ca": tls[2]} if tls[2] else {})}


def _command(text: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise InputError(f"--tailwise {text!r} is not a command ({e})", "quote it as a shell would") from None
    if not words:
        raise InputError("--tailwise is empty", "give the command that runs tailwise there, e.g. /opt/tailwise/bin/tailwise")
    return words


@deploy_app.command()
def start(
    ssh: Ssh,
    token_file: TokenFile,
    port: Port = DEFAULT_PORT,
    allow_targets: Annotated[Optional[str], typer.Option(
        "--allow-targets", metavar="CIDR,...",
        help="the agents' only target networks (tailwise agent --allow-targets) [default: the agent's: loopback "
             "only]")] = None,
    max_rate: Annotated[Optional[str], typer.Option(
        "--max-rate", metavar="RATE", help="the agents refuse runs above this rate [default: no limit]")] = None,
    max_conns: Annotated[Optional[int], typer.Option(
        "--max-conns", metavar="N", help="the agents refuse runs with more connections [default: no limit]")] = None,
    max_duration: Annotated[Optional[str], typer.Option(
        "--max-duration", metavar="TIME", help="the agents refuse longer runs [default: no limit]")] = None,
    lease: Annotated[Optional[str], typer.Option(
        "--lease", metavar="TIME",
        help="the agents stop a load whose coordinator is silent this long [default: the agent's, 5s]")] = None,
    cpus: Annotated[Optional[str], typer.Option(
        "--cpus", metavar="LIST", help="CPUs the agent may use on every host, e.g. 2-5 [default: all it may]")] = None,
    tls_cert: Annotated[Optional[str], typer.Option(
        "--tls-cert", metavar="FILE",
        help="the agents' TLS certificate (PEM, naming every host: subjectAltName), copied to each host as the "
             "token is")] = None,
    tls_key: Annotated[Optional[str], typer.Option(
        "--tls-key", metavar="FILE", help="its private key (PEM, mode 0600), copied to each host (mode 0600)")] = None,
    tls_client_ca: Annotated[Optional[str], typer.Option(
        "--tls-client-ca", metavar="FILE",
        help="mutual TLS: the agents admit only coordinators whose certificate chains to this CA (then give "
             "--agent-tls-cert/--agent-tls-key here and to run)")] = None,
    insecure_plaintext: InsecurePlaintext = False,
    agent_tls_ca: AgentTlsCa = None,
    agent_tls_cert: AgentTlsCert = None,
    agent_tls_key: AgentTlsKey = None,
    max_memory: Annotated[Optional[str], typer.Option(
        "--max-memory", metavar="SIZE",
        help="memory each agent keeps within, e.g. 2Gi (tailwise agent --max-memory) [default: the agent's: its "
             "cgroup's limit, else a fixed ceiling of rows]")] = None,
    identity: Identity = None,
    known_hosts: KnownHosts = DEFAULT_KNOWN_HOSTS,
    tailwise: Annotated[str, typer.Option(
        "--tailwise", metavar="CMD",
        help="the command that runs tailwise on the hosts, e.g. /opt/tailwise/bin/tailwise or "
             "'python3 -m tailwise'")] = "tailwise",
) -> int:
    """Start an agent on every host at once and wait until each answers; all or none. Prints `--agents H:PORT,…` for `run`."""
    from tailwise import __version__
    from tailwise.agents.deploy import AgentLaunch
    from tailwise.agents.deploy import start as start_agents
    from tailwise.agents.wire import read_token
    from tailwise.render.deploy import show_started

    targets, port = _targets(ssh), _port(port)
    files = _agent_tls(tls_cert, tls_key, tls_client_ca, insecure_plaintext)
    if tls_client_ca is not None and agent_tls_cert is None:
        raise InputError("--tls-client-ca without --agent-tls-cert/--agent-tls-key: the agents would refuse this "
                         "machine's own Health check",
                         "give --agent-tls-cert FILE --agent-tls-key FILE, signed by that CA")
    ca = agent_tls_ca or (tls_cert if files else None)
    run_flags = ([f"--agent-tls-ca {shlex.quote(os.path.abspath(ca))}"] if ca else ["--insecure-plaintext"]) + \
        [f"{flag} {shlex.quote(os.path.abspath(path))}" for flag, path in
         (("--agent-tls-cert", agent_tls_cert), ("--agent-tls-key", agent_tls_key)) if path]
    launch = AgentLaunch(port=port, tailwise=_command(tailwise),
                         args=_agent_args(allow_targets, max_rate, max_conns, max_duration, lease, cpus, max_memory),
                         tls_files=files,
                         tls=_client_tls(ca, agent_tls_cert, agent_tls_key, not files, targets, port))
    options, token = _ssh(identity, known_hosts), read_token(token_file)
    outcome = start_agents(targets, token, launch, options)
    show_started(outcome, __version__, run_flags)
    return EXIT_ERROR if outcome.failed else EXIT_OK


@deploy_app.command()
def stop(ssh: Ssh, port: Port = DEFAULT_PORT, identity: Identity = None,
         known_hosts: KnownHosts = DEFAULT_KNOWN_HOSTS) -> int:
    """Stop the agent `deploy start` left on every host (SIGTERM, then SIGKILL); remove its token and pid files."""
    from tailwise.agents.deploy import DeployError
    from tailwise.agents.deploy import stop as stop_agents
    from tailwise.render.deploy import show_stopped

    targets, port = _targets(ssh), _port(port)
    results = stop_agents(targets, port, _ssh(identity, known_hosts))
    show_stopped(results, port)
    return EXIT_ERROR if any(isinstance(r, DeployError) for r in results) else EXIT_OK


@deploy_app.command()
def status(ssh: Ssh, token_file: StatusTokenFile, port: Port = DEFAULT_PORT, agent_tls_ca: AgentTlsCa = None,
           agent_tls_cert: AgentTlsCert = None, agent_tls_key: AgentTlsKey = None,
           insecure_plaintext: InsecurePlaintext = False, identity: Identity = None,
           known_hosts: KnownHosts = DEFAULT_KNOWN_HOSTS) -> int:
    """For every host: whether the agent runs, and whether it answers Health (its state). Exit 0 only if all answer."""
    from tailwise.agents.deploy import Status
    from tailwise.agents.deploy import status as agents_status
    from tailwise.agents.wire import read_token
    from tailwise.render.deploy import show_status

    targets, port = _targets(ssh), _port(port)
    tls = _client_tls(agent_tls_ca, agent_tls_cert, agent_tls_key, insecure_plaintext, targets, port)
    options, token = _ssh(identity, known_hosts), read_token(token_file)
    results = agents_status(targets, port, token, options, tls)
    show_status(results, port)
    answering = all(isinstance(r, Status) and r.state is not None for r in results)
    return EXIT_OK if answering else EXIT_ERROR
