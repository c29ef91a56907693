"""Targets: ``scheme://host:port[/path]``; the scheme names the protocol."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from tailwise.errors import InputError

#: Schemes the engine speaks; later protocols add theirs here.
SCHEMES = ("synthetic",)


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def socket_addr(self) -> str:
        """``ip:port`` for the data plane, resolving a host name once, here."""
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise InputError(
                f"cannot resolve host '{self.host}' ({e.strerror})", "check the spelling or give an IP address"
            ) from None
        family, _, _, _, addr = infos[0]
        return f"[{addr[0]}]:{addr[1]}" if family == socket.AF_INET6 else f"{addr[0]}:{addr[1]}"


def parse_target(text: str) -> Target:
    example = "synthetic://127.0.0.1:7000"
    if "://" not in text:
        raise InputError(f"target '{text}' has no scheme", f"write it as a URL, e.g. {example}")
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError as e:
        raise InputError(f"target '{text}' is malformed ({e})", f"write it as a URL, e.g. {example}") from None
    scheme = u.scheme.lower()
    if scheme not in SCHEMES:
        raise InputError(f"unknown protocol '{u.scheme}' in '{text}'", f"use one of: {', '.join(s + '://' for s in SCHEMES)}")
    if not u.hostname:
        raise InputError(f"target '{text}' names no host", f"write e.g. {example}")
    if port is None:
        raise InputError(f"target '{text}' names no port", f"write e.g. {example}")
    if port == 0:
        raise InputError(f"target '{text}' has port 0", "give the port the server listens on")
    return Target(scheme, u.hostname, port, u.path)
