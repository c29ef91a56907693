"""Targets: ``scheme://host:port[/path][?size=N]``; the scheme names the protocol.

| scheme | protocol |
|---|---|
| ``synthetic://`` | tailwise's own (``tailwise serve``) |
| ``memcached://`` | memcached text protocol, get/set |
| ``memcached+binary://`` | memcached binary protocol, GETK/SET |
| ``memcached+udp://`` | memcached text protocol over UDP (frame header) |
| ``redis://`` | Redis RESP, GET/SET |
| ``http://host:port/path`` | HTTP/1.1 keep-alive GET of the path |
| ``udp://host:port?size=N`` | UDP datagrams of N bytes (default 64), echoed back |
| ``udp+flow://host:port`` | packet mode: --flows UDP flows of --size-byte frames through a reflector or forwarder |
| ``https://host[:port]/path`` | HTTP/1.1 over TLS (port 443 by default) |
| ``memcached+tls://``, ``redis+tls://``, ``synthetic+tls://`` | the protocol over TLS (any TCP one takes ``+tls``: spec/tls.py) |
"""

from __future__ import annotations

import socket
import string
from dataclasses import dataclass
from urllib.parse import urlsplit

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.tls import DEFAULT_PORTS, tls_scheme, url_scheme

#: Schemes the engine speaks (its own list: protocol/mod.rs, ``Protocol::each``).
SCHEMES: tuple[str, ...] = tuple(_core.PROTOCOLS)
#: Schemes whose requests carry keys, so that --keys, --value, --mix and `tailwise load` apply.
KEYED: tuple[str, ...] = tuple(name for name, p in _core.PROTOCOLS.items() if p["keys"])
#: Schemes that send one request per datagram.
DATAGRAM: tuple[str, ...] = tuple(name for name, p in _core.PROTOCOLS.items() if p["datagram"])
#: Default UDP echo datagram size (bytes): the engine's own.
UDP_SIZE: int = _core.UDP_SIZE
#: Packet mode's scheme (crates/tailwise-core/src/packet/): --size and --flows are its own.
PACKET: str = "udp+flow"


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str = ""
    udp_size: int = UDP_SIZE
    #: Over TLS (``https://``, ``…+tls://``): ``scheme`` is still the protocol's.
    tls: bool = False

    @property
    def url(self) -> str:
        query = f"?size={self.udp_size}" if self.scheme == "udp" and self.udp_size != UDP_SIZE else ""
        return f"{url_scheme(self.scheme, self.tls)}://{self.netloc}{self.path}{query}"

    @property
    def netloc(self) -> str:
        """host:port as written in a Host header."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def keyed(self) -> bool:
        return self.scheme in KEYED

    def socket_addr(self) -> str:
        """``ip:port`` for the data plane, resolving a host name once, here."""
        kind = socket.SOCK_DGRAM if self.scheme in DATAGRAM else socket.SOCK_STREAM
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=kind)
        except socket.gaierror as e:
            raise InputError(
                f"cannot resolve host '{self.host}' ({e.strerror})", "check the spelling or give an IP address"
            ) from None
        family, _, _, _, addr = infos[0]
        return f"[{addr[0]}]:{addr[1]}" if family == socket.AF_INET6 else f"{addr[0]}:{addr[1]}"


#: The longest host (with its port) and request target accepted: the engine's own limits
#: (protocol/http.rs: ``MAX_HOST``, ``MAX_PATH``), checked again there for what an agent receives.
MAX_HOST, MAX_PATH = 261, 8_000
_HOST_CHARS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:[]%")
#: RFC 3986's path and query characters (pchar, "/" and "?"), "%" only before two hex digits.
_PATH_CHARS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/?%")


def shown(text: str) -> str:
    """A target as an error may print it: control characters escaped (\\r, \\n, \\x07), never sent
    to the terminal as they are."""
    return "".join(c if " " <= c < "\x7f" else c.encode("unicode_escape").decode("ascii") for c in text)


def unsafe_char(text: str, allowed: frozenset[str] | None = None) -> str | None:
    """What makes ``text`` unfit to go into a request as written — a control character, a space,
    a non-ASCII character, or (with ``allowed``) one RFC 3986 does not allow there — named with its
    position; None when it is fit."""
    for i, c in enumerate(text):
        if c < " " or c == "\x7f":
            return f"a control character ({shown(c)}) at position {i}"
        if c == " ":
            return f"a space at position {i}"
        if c > "\x7f":
            return f"a non-ASCII character ({shown(c)}) at position {i}"
        if allowed is not None and c not in allowed:
            return f"'{c}' at position {i}"
    return None


def check_http(text: str, host: str, path: str) -> None:
    """An http:// target's host and request target, as the engine checks them (protocol/http.rs:
    ``check_host``, ``check_path``): they go into every request as written."""
    fix = "percent-encode what the server should receive (%20, %0D), and nothing else"
    for what, value, allowed, longest in (("host", host, _HOST_CHARS, MAX_HOST), ("path", path, _PATH_CHARS, MAX_PATH)):
        if len(value) > longest:
            raise InputError(f"target '{shown(text)[:80]}…': its {what} is {len(value):,} characters, over {longest:,}",
                             f"give a {what} of at most {longest:,}")
        if (bad := unsafe_char(value, allowed)) is not None:
            raise InputError(f"target '{shown(text)}': its {what} has {bad}", fix)
    for i in (k for k, c in enumerate(path) if c == "%"):
        if not all(c in string.hexdigits for c in path[i + 1:i + 3]) or len(path) < i + 3:
            raise InputError(f"target '{shown(text)}': its path has a '%' not followed by two hex digits at position {i}",
                             "write a percent sign as %25")


def parse_target(text: str) -> Target:
    example = "synthetic://127.0.0.1:7000"
    # Before any parsing: urlsplit drops a CR, an LF or a tab silently (and would send what is left).
    if (bad := unsafe_char(text)) is not None:
        raise InputError(f"target '{shown(text)}' has {bad}",
                         "remove it (a URL holds none); percent-encode what an HTTP server should receive (%20, %0D)")
    if "://" not in text:
        raise InputError(f"target '{text}' has no scheme", f"write it as a URL, e.g. {example}")
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError as e:
        raise InputError(f"target '{text}' is malformed ({e})", f"write it as a URL, e.g. {example}") from None
    named = tls_scheme(u.scheme.lower(), SCHEMES, DATAGRAM)
    if named is None:
        tls = [url_scheme(s, True) for s in SCHEMES if s not in DATAGRAM]
        raise InputError(f"unknown protocol '{u.scheme}' in '{text}'",
                         f"use one of: {', '.join(s + '://' for s in (*SCHEMES, *tls))}")
    scheme, tls = named
    if not u.hostname:
        raise InputError(f"target '{text}' names no host", f"write e.g. {example}")
    if port is None:
        port = DEFAULT_PORTS.get(url_scheme(scheme, tls))
    if port is None:
        raise InputError(f"target '{text}' names no port", f"write e.g. {example}")
    if port == 0:
        raise InputError(f"target '{text}' has port 0", "give the port the server listens on")
    path = u.path
    if scheme == "http":
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    elif path not in ("", "/"):
        raise InputError(f"target '{text}' has a path, which {u.scheme}:// does not use", f"write {u.scheme}://{u.netloc}")
    else:
        path = ""
    udp_size = UDP_SIZE
    if scheme == "udp" and u.query:
        key, _, value = u.query.partition("=")
        low, high = _core.ECHO_MIN_DATAGRAM, _core.ECHO_MAX_DATAGRAM
        if key != "size" or not value.isdigit() or not low <= int(value) <= high:
            raise InputError(f"target '{text}': '{u.query}' is not a datagram size",
                             f"write udp://HOST:PORT?size=N with N from {low} to {high} bytes")
        udp_size = int(value)
    elif u.query and scheme != "http":
        raise InputError(f"target '{text}' has a query '{u.query}' that {u.scheme}:// does not use", f"write {u.scheme}://{u.netloc}")
    target = Target(scheme, u.hostname, port, path, udp_size, tls)
    if scheme == "http":
        check_http(text, target.netloc, path)
    return target


def parse_targets(texts: list[str]) -> list[Target]:
    """Several targets of one protocol: connections are spread over them in turn."""
    targets = [parse_target(t) for t in texts]
    schemes = sorted({t.scheme for t in targets})
    if len(schemes) > 1:
        raise InputError(f"targets mix protocols ({', '.join(schemes)})", "measure one protocol per run")
    if len({(t.path, t.udp_size) for t in targets}) > 1:
        raise InputError("targets differ in path or datagram size", "give every target the same path and size")
    return targets
