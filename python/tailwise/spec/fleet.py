"""`Fleet`: where a run's load comes from when it is not this process — the agents
(`run`/`sweep` `--agents h1:7100,h2:7100 [--probe-agent h3:7100] --token-file FILE [--tls-ca FILE]`).

Parsed once, like the other specs; the token itself is read where the agents are called
(agent/wire.py ``read_token``), never kept in a spec that could be printed or written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailwise.errors import InputError


def _address(text: str, flag: str) -> str:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"{flag} {text!r} is not HOST:PORT", f"write e.g. {flag} 10.0.0.2:7100")
    return f"{host}:{int(port)}"


@dataclass(frozen=True)
class Fleet:
    """The agents of a run: ``agents`` load (and measure, unless there is a ``probe_agent``)."""

    agents: tuple[str, ...]
    probe_agent: str | None
    token_file: str
    tls_ca: str | None = None

    @classmethod
    def from_flags(cls, agents: str | list[str] | None, probe_agent: str | None, token_file: str | None,
                   tls_ca: str | None) -> Fleet | None:
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
        if tls_ca is not None and not Path(tls_ca).is_file():
            raise InputError(f"--tls-ca {tls_ca} is not a file", "give the CA certificate (PEM) the agents' certificates chain to")
        return cls(addrs, probe, token_file, tls_ca)

    def ca_bytes(self) -> bytes | None:
        return Path(self.tls_ca).read_bytes() if self.tls_ca else None
