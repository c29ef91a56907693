"""The target server's own counters, read before and after a run, for the summary's ``target_stats``.

A load generator that takes a target rate must prove it delivered it. Its own counts can be wrong
in ways it cannot see (a client that miscounts, requests that never left a queue), so the summary
also carries what the *server* counted: memcached's ``stats`` and redis's ``INFO``, read once
before and once after the run, and their difference. Tools our users use today have been caught
reporting rates the server never saw, while memcached's ``cmd_get`` agreed with the true rate
(checked against memcached's own counters on this machine): this block is how a reader checks our counts against the server's.

What the queries themselves add to the counters:

* Each ``fetch`` opens one connection of its own, counted by the server at accept time, so the
  ``before`` reading already includes the ``before`` query's connection and the ``after`` reading
  includes the ``after`` query's: ``delta["connections"]`` is the run's connections **plus one**.
* memcached's ``stats`` does not touch ``cmd_get``/``cmd_set``/``get_hits``/``get_misses``.
* redis counts the ``INFO`` commands in ``total_commands_processed`` and ``cmdstat_info_calls``,
  but not in ``cmdstat_get_calls``/``cmdstat_set_calls`` nor in the keyspace hits/misses.

Any other client of the same server during the run shows up in the deltas too.

Standard library only; every network wait is bounded; ``fetch`` never raises.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tailwise.spec.tls import TlsSpec

MEMCACHED_SCHEMES = frozenset({"memcached", "memcached+binary", "memcached+udp"})
REDIS_SCHEMES = frozenset({"redis"})

#: Summary name → server field whose difference it is.
MEMCACHED_FIELDS = {"gets": "cmd_get", "sets": "cmd_set", "hits": "get_hits", "misses": "get_misses",
                    "connections": "total_connections"}
REDIS_FIELDS = {"gets": "cmdstat_get_calls", "sets": "cmdstat_set_calls", "hits": "keyspace_hits",
                "misses": "keyspace_misses", "connections": "total_connections_received"}
#: Also kept in before/after (not differenced): uptime shows a restart, the rest give context.
MEMCACHED_CONTEXT = ("uptime", "curr_connections", "curr_items", "pid")
REDIS_CONTEXT = ("uptime_in_seconds", "connected_clients", "total_commands_processed", "process_id")

#: A stats reply is a few kB; a reply far larger is not from the server we meant to ask.
MAX_REPLY_BYTES = 1 << 20

_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?\d+\.\d*(?:[eE][+-]?\d+)?")  # no "nan"/"inf": those are not counters
#: INFO lines whose value is ``k=v,k=v``, flattened to ``<key>_<k>``.
_REDIS_NESTED = re.compile(r"cmdstat_|errorstat_|latency_percentiles_usec_|db\d+$")


class _ProtocolError(Exception):
    """The server answered, but not as memcached/redis would."""


def kind_of(scheme: str) -> str | None:
    """'memcached', 'redis', or None for schemes without server statistics."""
    scheme = scheme.lower()
    if scheme in MEMCACHED_SCHEMES:
        return "memcached"
    if scheme in REDIS_SCHEMES:
        return "redis"
    return None


def fetch(scheme: str, host: str, port: int, timeout_s: float = 2.0, tls: TlsSpec | None = None,
          auth: tuple[str | None, str] | None = None) -> dict | None:
    """The server's counters as a dict; None for schemes without any; ``{"error": reason}`` on failure.

    memcached (any of its schemes, UDP included) is always asked over TCP at ``host:port``; over
    TLS as the run's own connections are (``tls``: the same CA, client certificate and name); redis
    after ``AUTH`` when ``auth`` (user or None, password) is given.
    """
    kind = kind_of(scheme)
    if kind is None:
        return None
    try:
        if kind == "memcached":
            return _memcached_stats(host, port, timeout_s, tls)
        return _redis_info(host, port, timeout_s, tls, auth)
    except TimeoutError:
        return {"error": f"{kind} at {host}:{port} did not answer within {timeout_s:g} s"}
    except ConnectionRefusedError:
        return {"error": f"connection to {kind} at {host}:{port} refused"}
    except _ProtocolError as e:
        return {"error": f"{kind} at {host}:{port}: {e}"}
    except OSError as e:
        return {"error": f"cannot read stats from {kind} at {host}:{port}: {e.strerror or e}"}
    except Exception as e:  # noqa: BLE001 - statistics are an extra: never fail a run for them
        return {"error": f"cannot read stats from {kind} at {host}:{port}: {type(e).__name__}: {e}"}


def delta(scheme: str, before: dict | None, after: dict | None) -> dict:
    """The ``target_stats`` block: source, the before/after subsets, and the differences.

    A difference is None when a reading failed, lacks the field, or went backwards (a restart);
    ``"error"`` then says why. ``delta["connections"]`` includes the ``after`` query's own
    connection (see the module docstring). Raises ValueError for a scheme without statistics.
    """
    kind = kind_of(scheme)
    if kind is None:
        raise ValueError(f"no server statistics for scheme '{scheme}'")
    fields = MEMCACHED_FIELDS if kind == "memcached" else REDIS_FIELDS
    context = MEMCACHED_CONTEXT if kind == "memcached" else REDIS_CONTEXT
    keep = (*fields.values(), *context)
    before, after = before or {}, after or {}
    problems = [f"{when}: {r['error']}" for when, r in (("before", before), ("after", after)) if "error" in r]
    diffs = {name: _difference(before.get(field), after.get(field)) for name, field in fields.items()}
    if _restarted(before, after, uptime_field=context[0], pid_field=context[-1]):
        # A restarted server's counters start again from zero: their differences mean nothing.
        problems.append("the server restarted between the readings (new pid or smaller uptime)")
        diffs = dict.fromkeys(fields)
    unusable = [fields[name] for name, d in diffs.items() if d is None]
    if unusable and not problems:  # a failed reading already explains the missing values
        problems.append(f"{', '.join(unusable)} missing or went backwards (server restarted?)")
    block = {
        "source": "memcached stats" if kind == "memcached" else "redis INFO",
        "before": {k: before[k] for k in keep if k in before},
        "after": {k: after[k] for k in keep if k in after},
        "delta": diffs,
    }
    if problems:
        block["error"] = "; ".join(problems)
    return block


def fetch_all(targets: Sequence, timeout_s: float = 2.0, tls: TlsSpec | None = None) -> list[dict | None]:
    """``fetch`` for each target (anything with ``.scheme``, ``.host``, ``.port``), in order.

    A server named by several targets (``memcached://h:p`` and ``memcached+udp://h:p``) is asked
    once; its entries are then the same dict.
    """
    readings: dict[tuple, dict | None] = {}
    for t in targets:
        key = _server_key(t)
        if key not in readings:
            readings[key] = fetch(t.scheme, t.host, t.port, timeout_s, tls, _auth(t))
    return [readings[_server_key(t)] for t in targets]


def compare_all(targets: Sequence, before: Sequence[dict | None], counters: Mapping | None = None,
                timeout_s: float = 2.0, tls: TlsSpec | None = None) -> dict | None:
    """Read the servers again and build the ``target_stats`` block; None when no target has stats.

    One server: the ``delta`` block, plus ``target``. Several: ``{"source", "targets": [blocks],
    "delta": sums}`` (a sum is None when one of its terms is). With ``counters`` (our own counts
    of the run), ``ours`` holds ours for the same names and ``agrees`` says whether gets, sets,
    hits and misses all equal the server's (None when a server value is unknown).
    """
    blocks, seen = [], set()
    for t, b in zip(targets, before):
        key = _server_key(t)
        if b is None or key in seen:
            continue
        seen.add(key)
        after = fetch(t.scheme, t.host, t.port, timeout_s, tls, _auth(t))
        url = getattr(t, "url", None) or f"{t.scheme}://{t.host}:{t.port}"
        blocks.append({"target": url, **delta(t.scheme, b, after)})
    if not blocks:
        return None
    combined = blocks[0] if len(blocks) == 1 else _combine(blocks)
    if counters is not None:
        _compare_with_ours(combined, counters)
    return combined


def _auth(target) -> tuple[str | None, str] | None:
    """A redis target's (user, password) for AUTH, None without a password."""
    password = getattr(target, "password", None)
    return None if password is None else (getattr(target, "user", None), password)


def _server_key(target) -> tuple:
    return (kind_of(target.scheme), target.host, target.port)


def _combine(blocks: list[dict]) -> dict:
    sources = {b["source"] for b in blocks}
    sums = {}
    for name in MEMCACHED_FIELDS:
        terms = [b["delta"][name] for b in blocks]
        sums[name] = None if any(v is None for v in terms) else sum(terms)
    combined = {"source": sources.pop() if len(sources) == 1 else " + ".join(sorted(sources)),
                "targets": blocks, "delta": sums}
    errors = [f"{b['target']}: {b['error']}" for b in blocks if "error" in b]
    if errors:
        combined["error"] = "; ".join(errors)
    return combined


def _compare_with_ours(block: dict, counters: Mapping) -> None:
    # connections are left out: the server's count includes our stats query's (module docstring).
    names = ("gets", "sets", "hits", "misses")
    block["ours"] = {n: counters.get(n) for n in names}
    pairs = [(block["delta"].get(n), block["ours"][n]) for n in names]
    block["agrees"] = None if any(theirs is None for theirs, _ in pairs) else all(t == o for t, o in pairs)


def _restarted(before: dict, after: dict, uptime_field: str, pid_field: str) -> bool:
    if before.get(pid_field) is not None and after.get(pid_field) is not None and before[pid_field] != after[pid_field]:
        return True
    both = uptime_field in before and uptime_field in after
    return both and _difference(before[uptime_field], after[uptime_field]) is None


def _difference(before: object, after: object) -> int | float | None:
    numbers = (int, float)
    if not (isinstance(before, numbers) and isinstance(after, numbers)) or after < before:
        return None
    return after - before


def _number(text: str) -> int | float | None:
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return None


# --------------------------------------------------------------------------- memcached

def _memcached_stats(host: str, port: int, timeout_s: float, tls: TlsSpec | None = None) -> dict:
    """``stats`` → its numeric STAT fields (strings such as ``version`` are left out)."""
    reply = _exchange(host, port, b"stats\r\n", _memcached_complete, timeout_s, tls)
    stats: dict = {}
    for line in reply.decode("latin-1").split("\r\n"):
        if line in ("END", ""):
            continue
        parts = line.split(" ", 2)
        if len(parts) != 3 or parts[0] != "STAT":
            raise _ProtocolError(f"unexpected reply to 'stats': {line[:80]!r}")
        value = _number(parts[2])
        if value is not None:
            stats[parts[1]] = value
    if not stats:
        raise _ProtocolError("'stats' returned no counters")
    return stats


def _memcached_complete(buf: bytes) -> bool:
    # Judge the first line as soon as it is there: a server that is not memcached may never send END.
    first_line, newline, _ = buf.partition(b"\r\n")
    if newline and not (first_line.startswith(b"STAT ") or first_line == b"END"):
        if first_line.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
            raise _ProtocolError(f"server refused 'stats': {first_line[:80]!r}")
        raise _ProtocolError(f"unexpected reply to 'stats': {first_line[:80]!r}")
    return buf == b"END\r\n" or buf.endswith(b"\r\nEND\r\n")


# --------------------------------------------------------------------------- redis

_INFO = b"*1\r\n$4\r\nINFO\r\n"
_INFO_COMMANDSTATS = b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n"


def _resp_command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _after_auth(buf: bytes) -> bytes | None:
    """What follows AUTH's reply (+OK), None while incomplete; a refusal in the server's words."""
    eol = buf.find(b"\r\n")
    if eol < 0:
        return None
    if buf.startswith(b"-"):
        raise _ProtocolError(f"server refused AUTH: {buf[1:min(eol, 81)].decode('latin-1')!r}")
    return buf[eol + 2:]


def _redis_info(host: str, port: int, timeout_s: float, tls: TlsSpec | None = None,
                auth: tuple[str | None, str] | None = None) -> dict:
    """``INFO`` and ``INFO commandstats`` (pipelined, one connection; after ``AUTH [user] password``
    when given) → one flat dict."""
    request, skip = _INFO + _INFO_COMMANDSTATS, (lambda b: b)
    if auth is not None:
        user, password = auth
        words = [b"AUTH", *([user.encode()] if user else []), password.encode()]
        request, skip = _resp_command(*words) + request, _after_auth

    def bulks(buf: bytes) -> list[str] | None:
        rest = skip(buf)
        return None if rest is None else _resp_bulks(rest, 2)

    reply = _exchange(host, port, request, lambda b: bulks(b) is not None, timeout_s, tls)
    info: dict = {}
    for text in bulks(reply) or ():
        info.update(_parse_info(text))
    # Redis lists a command only once it has been called: absent means zero calls.
    info.setdefault("cmdstat_get_calls", 0)
    info.setdefault("cmdstat_set_calls", 0)
    return info


def _resp_bulks(buf: bytes, count: int) -> list[str] | None:
    """The first ``count`` RESP bulk strings in ``buf``, or None while incomplete."""
    out, pos = [], 0
    while len(out) < count:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        header = buf[pos:eol]
        if header.startswith(b"-"):
            raise _ProtocolError(f"server replied {header[1:81].decode('latin-1')!r}")
        if not header.startswith(b"$") or not _INT.fullmatch(header[1:].decode("latin-1")):
            raise _ProtocolError(f"not a redis reply: {buf[pos:pos + 40]!r}")
        size = int(header[1:])
        if size < 0:
            raise _ProtocolError("INFO returned a null reply")
        end = eol + 2 + size
        if len(buf) < end + 2:
            return None
        out.append(buf[eol + 2:end].decode("utf-8", errors="replace"))
        pos = end + 2
    return out


def _parse_info(text: str) -> dict:
    """``key:value`` lines; numbers converted; ``cmdstat_get:calls=3,usec=9`` → ``cmdstat_get_calls``."""
    info: dict = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        if _REDIS_NESTED.match(key):
            for part in value.split(","):
                sub, _, v = part.partition("=")
                info[f"{key}_{sub}"] = _number_or_text(v)
        else:
            info[key] = _number_or_text(value)
    return info


def _number_or_text(text: str) -> int | float | str:
    number = _number(text)
    return text if number is None else number


# --------------------------------------------------------------------------- one request, bounded

def client_context(tls: TlsSpec) -> ssl.SSLContext:
    """Python's TLS client configured as the engine's (spec/tls.py): the CA (or the system's), no
    verification with --tls-insecure, the client certificate."""
    ctx = ssl.create_default_context(cafile=tls.ca_file)
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_file:
        ctx.load_cert_chain(tls.cert_file, tls.key_file)
    return ctx


def _exchange(host: str, port: int, request: bytes, complete, timeout_s: float, tls: TlsSpec | None = None) -> bytes:
    """Send ``request`` on a new TCP connection (over TLS with ``tls``); read until
    ``complete(reply)``; all within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = raw if tls is None else client_context(tls).wrap_socket(raw, server_hostname=tls.sni or host)
        sock.settimeout(_remaining_s(deadline))
        sock.sendall(request)
        reply = b""
        while not complete(reply):
            if len(reply) > MAX_REPLY_BYTES:
                raise _ProtocolError(f"reply longer than {MAX_REPLY_BYTES} bytes")
            sock.settimeout(_remaining_s(deadline))
            chunk = sock.recv(65536)
            if not chunk:
                raise _ProtocolError(f"connection closed after {len(reply)} bytes of reply: {reply[:40]!r}")
            reply += chunk
        return reply


def _remaining_s(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("timed out")
    return remaining
