"""`Fleet`: where a run's load comes from when it is not this process — the agents
(`run`/`sweep` `--agents h1:7100,h2:7100 [--probe-agent h3:7100] --token-file FILE
[--agent-tls-ca FILE [--agent-tls-cert FILE --agent-tls-key FILE]] [--insecure-plaintext]`).

The token never crosses a network in the clear unless the user said so: an agent that is not on
loopback needs TLS (``--agent-tls-ca``) or ``--insecure-plaintext`` (issue 33).

Parsed once, like the other specs; the token itself is read where the agents are called
(agents/wire.py ``read_token``), never kept in a spec that could be printed or written.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from tailwise.errors import InputError

#: The agent's port unless told otherwise (`tailwise agent --listen`, `deploy --port`, the image's
#: EXPOSE and the manifests): one definition, light enough for every command's --help.
AGENT_PORT = 7100


def _address(text: str, flag: str) -> str:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"{flag} {text!r} is not HOST:PORT", f"write e.g. {flag} 10.0.0.2:7100")
    return f"{host}:{int(port)}"


def is_loopback(address: str) -> bool:
    """Whether HOST[:PORT] names this host only (127.0.0.0/8, ::1, localhost): what is sent there
    never crosses a network. A name other than localhost counts as remote (it is not resolved:
    what it resolves to may change)."""
    host = address.rpartition(":")[0] if address.count(":") == 1 or address.startswith("[") else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_plaintext(address: str, flag: str) -> None:
    """The token goes in the clear to a loopback agent only, unless --insecure-plaintext said so."""
    if not is_loopback(address):
        raise InputError(f"{flag} {address}: without TLS the token and the run would cross the network in the clear",
                         "start the agents with --tls-cert/--tls-key and give --agent-tls-ca FILE, or add "
                         "--insecure-plaintext on a network you trust")


def check_client_tls(ca: str | None, cert: str | None, key: str | None, insecure_plaintext: bool) -> None:
    """The coordinator's TLS flags agree with each other (the files are read later, agents/wire.py)."""
    if ca is not None and not Path(ca).is_file():
        raise InputError(f"--agent-tls-ca {ca} is not a file",
                         "give the CA certificate (PEM) the agents' certificates chain to")
    if (cert is None) != (key is None):
        given, missing = ("--agent-tls-cert", "--agent-tls-key") if cert else ("--agent-tls-key", "--agent-tls-cert")
        raise InputError(f"{given} without {missing}",
                         "give both (the coordinator's client certificate and key, PEM), or neither")
    if cert is not None and ca is None:
        raise InputError("--agent-tls-cert without --agent-tls-ca: a client certificate is sent over TLS only",
                         "give --agent-tls-ca FILE, the CA the agents' certificates chain to")
    if ca is not None and insecure_plaintext:
        raise InputError("--agent-tls-ca with --insecure-plaintext: the agents are either TLS or not",
                         "drop --insecure-plaintext")


@dataclass(frozen=True)
class Fleet:
    """The agents of a run: ``agents`` load (and measure, unless there is a ``probe_agent``)."""

    agents: tuple[str, ...]
    probe_agent: str | None
    token_file: str
    #: The CA the agents' certificates chain to (PEM): TLS to the agents.
    tls_ca: str | None = None
    #: The coordinator's own certificate and key, for agents started with --tls-client-ca.
    tls_cert: str | None = None
    tls_key: str | None = None
    #: --insecure-plaintext: the token may cross the network in the clear.
    insecure_plaintext: bool = False

    @classmethod
    def from_flags(cls, agents: str | list[str] | None, probe_agent: str | None, token_file: str | None,
                   tls_ca: str | None, tls_cert: str | None = None, tls_key: str | None = None,
                   insecure_plaintext: bool = False) -> Fleet | None:
        """None without --agents (the in-process agent); else checked, one InputError each."""
        if not agents:
            if probe_agent:
                raise InputError("--probe-agent needs --agents: the agents that load beside it",
                                 "give --agents HOST:PORT,… too, or drop --probe-agent and use --probe")
            return None
        names = [a for part in ([agents] if isinstance(agents, str) else agents) for a in part.split(",") if a.strip()]
        addrs = tuple(_address(a, "--agents") for a in names)
        probe = _address(probe_agent, "--probe-agent") if probe_agent else None
        if len(set(addrs) | ({probe} if probe else set())) != len(addrs) + (1 if probe else 0):
            raise InputError("an agent is named twice in --agents/--probe-agent", "name each agent once")
        if not token_file:
            raise InputError("--agents needs --token-file FILE: the token the agents were started with",
                             "give the same file as each `tailwise agent --token-file`")
        check_client_tls(tls_ca, tls_cert, tls_key, insecure_plaintext)
        if tls_ca is None and not insecure_plaintext:
            for address, flag in [*((a, "--agents") for a in addrs), *([(probe, "--probe-agent")] if probe else [])]:
                refuse_plaintext(address, flag)
        return cls(addrs, probe, token_file, tls_ca, tls_cert, tls_key, bool(insecure_plaintext))
