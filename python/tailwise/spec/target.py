"""Targets: ``scheme://host:port[/path][?size=N]``; the scheme names the protocol.

| scheme | protocol |
|---|---|
| ``synthetic://`` | tailwise's own (``tailwise serve``) |
| ``memcached://`` | memcached text protocol, get/set |
| ``memcached+binary://`` | memcached binary protocol, GETK/SET |
| ``memcached+udp://`` | memcached text protocol over UDP (frame header) |
| ``redis://[[USER]:PASSWORD@]host:port[/DB]`` | Redis RESP, GET/SET; AUTH and SELECT DB first |
| ``http://host:port/path`` | HTTP/1.1 keep-alive GET of the path |
| ``udp://host:port?size=N`` | UDP datagrams of N bytes (default 64), echoed back |
| ``udp+flow://host:port`` | packet mode: --flows UDP flows of --size-byte frames through a reflector or forwarder |
| ``https://host[:port]/path`` | HTTP/1.1 over TLS (port 443 by default) |
| ``memcached+tls://``, ``redis+tls://``, ``synthetic+tls://`` | the protocol over TLS (any TCP one takes ``+tls``: spec/tls.py) |
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

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
#: Schemes that speak Redis: a URL's user, password and /DB are theirs (AUTH, SELECT).
REDIS: tuple[str, ...] = tuple(s for s in SCHEMES if s.split("+")[0] == "redis")
#: The environment variable a Redis password may come from (after the URL and --redis-password-file).
PASSWORD_ENV = "TAILWISE_REDIS_PASSWORD"
#: What a URL shows in place of a password; given as the password, it means "not in the URL": the
#: file or the environment gives it (so that a saved spec runs again).
HIDDEN = "***"
#: The remedy for a user or password that breaks the URL (RFC 3986 §3.2.1 userinfo).
ENCODE_USERINFO = "percent-encode / ? # @ [ ] in a user or password (%2F %3F %23 %40 %5B %5D)"


class Secret(str):
    """A password: the string itself where it is sent (JSON, the wire to the server), ``***`` in
    any ``repr`` (a dataclass's, a dict's, a log line's)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(HIDDEN)


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str = ""
    udp_size: int = UDP_SIZE
    #: Over TLS (``https://``, ``…+tls://``): ``scheme`` is still the protocol's.
    tls: bool = False
    #: Redis: the ACL user (None: the default user), the password (never shown), the database.
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    db: int | None = None

    @property
    def url(self) -> str:
        """The URL as shown and written anywhere: the password as ``***``, the user kept."""
        query = f"?size={self.udp_size}" if self.scheme == "udp" and self.udp_size != UDP_SIZE else ""
        userinfo = ""
        if self.user is not None or self.password is not None:
            userinfo = f"{quote(self.user or '', safe='')}:{HIDDEN}@"
        db = f"/{self.db}" if self.db is not None else ""
        return f"{url_scheme(self.scheme, self.tls)}://{userinfo}{self.netloc}{self.path}{db}{query}"

    def protocol_auth(self) -> dict:
        """Redis: the configuration's ``auth`` and ``db`` (engine: protocol/scheme.rs), those given."""
        out: dict = {}
        if self.password is not None:
            out["auth"] = {"password": Secret(self.password)} | ({"user": self.user} if self.user else {})
        if self.db is not None:
            out["db"] = self.db
        return out

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


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def redact(text: str) -> str:
    """A target as given, its password (if any) replaced by ``***``, the user kept: what an error
    or a recorded command may show. The userinfo ends at the authority's last ``@`` (RFC 3986
    §3.2); in a redis URL at the last ``@`` of all, so that a password holding an unencoded ``/``,
    ``?`` or ``#`` (a malformed URL) is hidden too."""
    m = _SCHEME.match(text)
    if m is None:
        return text
    rest = text[m.end():]
    end = len(rest)
    if m.group(1).lower().split("+")[0] != "redis":
        end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    at = rest.rfind("@", 0, end)
    if at < 0:
        return text
    user = rest[:at].partition(":")[0] if ":" in rest[:at] else ""
    return f"{m.group(0)}{user}:{HIDDEN}@{rest[at + 1:]}"


def command_line(argv: list[str]) -> str:
    """The command as a summary records it: ``tailwise`` and its arguments, a target's password ``***``."""
    return shlex.join(["tailwise", *(redact(a) for a in argv)])


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


def parse_target(given: str) -> Target:
    example = "synthetic://127.0.0.1:7000"
    text = redact(given)  # what the messages below show
    # Before any parsing: urlsplit drops a CR, an LF or a tab silently (and would send what is left).
    if (bad := unsafe_char(given)) is not None:
        raise InputError(f"target '{shown(text)}' has {bad}",
                         "remove it (a URL holds none); percent-encode what an HTTP server should receive (%20, %0D)")
    if "://" not in text:
        raise InputError(f"target '{text}' has no scheme", f"write it as a URL, e.g. {example}")
    try:
        u = urlsplit(given)
        port = u.port
    except ValueError as e:
        if "@" in given:  # urlsplit's words may quote a piece of a password
            raise InputError(f"target '{text}' is malformed", ENCODE_USERINFO) from None
        raise InputError(f"target '{text}' is malformed ({e})", f"write it as a URL, e.g. {example}") from None
    named = tls_scheme(u.scheme.lower(), SCHEMES, DATAGRAM)
    if named is None:
        tls = [url_scheme(s, True) for s in SCHEMES if s not in DATAGRAM]
        raise InputError(f"unknown protocol '{u.scheme}' in '{text}'",
                         f"use one of: {', '.join(s + '://' for s in (*SCHEMES, *tls))}")
    scheme, tls = named
    if scheme in REDIS and "@" in u.path + u.query + u.fragment:
        # A password holding an unencoded / ? or #: what urlsplit took for a path, a query or a
        # fragment holds a piece of it, and no message may show it.
        raise InputError(f"target '{text}' is malformed", ENCODE_USERINFO)
    if not u.hostname:
        raise InputError(f"target '{text}' names no host", f"write e.g. {example}")
    if port is None:
        port = DEFAULT_PORTS.get(url_scheme(scheme, tls))
    if port is None:
        raise InputError(f"target '{text}' names no port", f"write e.g. {example}")
    if port == 0:
        raise InputError(f"target '{text}' has port 0", "give the port the server listens on")
    netloc = u.netloc.rpartition("@")[2]
    user, password, db = None, None, None
    if "@" in u.netloc and scheme not in REDIS:
        raise InputError(f"target '{text}' has a user or password, which {scheme}:// does not use",
                         f"write {scheme}://{netloc}")
    if scheme in REDIS:
        user, password, db = redis_parts(text, u.netloc, u.path)
    path = u.path
    if scheme == "http":
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    elif scheme in REDIS:
        path = ""
    elif path not in ("", "/"):
        raise InputError(f"target '{text}' has a path, which {u.scheme}:// does not use", f"write {u.scheme}://{netloc}")
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
        raise InputError(f"target '{text}' has a query '{u.query}' that {u.scheme}:// does not use", f"write {u.scheme}://{netloc}")
    target = Target(scheme, u.hostname, port, path, udp_size, tls, user=user,
                    password=Secret(password) if password is not None else None, db=db)
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
    if len({(t.user, t.password, t.db) for t in targets}) > 1:
        raise InputError("targets differ in user, password or database",
                         "give every target the same (one AUTH and SELECT go to each connection)")
    return targets


def redis_parts(text: str, netloc: str, path: str) -> tuple[str | None, str | None, int | None]:
    """A redis:// URL's user, password and database: ``[[USER]:PASSWORD@]HOST:PORT[/DB]``, as
    redis-cli -u reads it (RFC 3986 userinfo, percent-decoded; without a colon the userinfo is the
    password; an empty user is the default one). A password left empty or written ``***`` is not
    in the URL (``with_password`` finds it)."""
    user = password = None
    if "@" in netloc:
        userinfo = netloc.rpartition("@")[0]
        if ":" in userinfo:
            name, _, password = userinfo.partition(":")
            user = unquote(name) or None
        else:
            password = userinfo
        password = unquote(password)
        if password in ("", HIDDEN):
            password = None
    db = None
    if path not in ("", "/"):
        digits = path[1:]
        if not digits.isascii() or not digits.isdigit():
            raise InputError(f"target '{text}': '{path}' is not a database number",
                             "write redis://HOST:PORT/N with N a database number (0 to 15 on a default redis-server)")
        db = int(digits)
    return user, password, db


def read_password(path: str) -> str:
    """--redis-password-file: the file's text, one line (a trailing newline dropped). Never echoed."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e.__class__.__name__
        raise InputError(f"cannot read --redis-password-file {path} ({why})", "check the path and its permissions") from None
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise InputError(f"--redis-password-file {path} is empty", "write the password to it, on one line")
    if "\n" in password:
        raise InputError(f"--redis-password-file {path} holds more than one line", "write the password alone, on one line")
    return password


def with_password(targets: list[Target], password_file: str | None) -> list[Target]:
    """Redis targets whose URL gives no password take it from ``password_file``, else from
    ``TAILWISE_REDIS_PASSWORD`` (URL > file > environment); a user without a password is refused."""
    if not targets or targets[0].scheme not in REDIS:
        if password_file is not None:
            scheme = targets[0].scheme if targets else "synthetic"
            raise InputError(f"--redis-password-file does not apply to {scheme}://", "it is for redis:// targets")
        return targets
    out = []
    for t in targets:
        if t.password is None:
            password = read_password(password_file) if password_file is not None else os.environ.get(PASSWORD_ENV) or None
            if password is None and t.user is not None:
                raise InputError(f"target '{t.url}' names user '{t.user}' but no password",
                                 f"give it in the URL, by --redis-password-file FILE or in {PASSWORD_ENV}")
            t = replace(t, password=Secret(password) if password is not None else None)
        out.append(t)
    return out
