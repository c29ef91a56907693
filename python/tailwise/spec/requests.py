"""HTTP requests as users write them (issue 36, item 1): ``--method``, ``-H 'Name: value'``,
``--body``, ``--body-file``, and a requests file in vegeta's targets format, so that a file made
for ``vegeta attack -targets`` works as it is::

    # weight: 3
    POST http://127.0.0.1:8080/api?v=1
    Content-Type: application/json
    X-Trace: abc
    @body.json

    GET http://127.0.0.1:8080/health

A request is a line ``METHOD URL``, then its header lines ``Name: value`` (name and value trimmed
of spaces and tabs, as vegeta does; a name may repeat), then optionally ``@FILE``, whose bytes are
the body (relative to the requests file's directory; vegeta opens it relative to its working
directory: the same file when run from there). A blank line ends a request, and so does a line that
starts with an upper-case word and a space (vegeta's test for a request line). A line that starts
with ``#`` is a comment (vegeta skips those before a request line); ``# weight: N`` (N ≥ 1) weights
the request whose line follows it — tailwise's own, a comment to vegeta — and any weight makes the
requests drawn by weight, none in turn.

What this module checks is the file's syntax; what goes into each request (method, field names and
values as RFC 9110 allows them, the target as RFC 3986 does) is the engine's to check, once, for
the CLI and an agent alike (protocol/http.rs, ``Requests::new``): ``check_requests`` asks it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.target import Target, parse_target, shown

#: vegeta's test for a request line after a request's header lines: an upper-case word, a space.
_REQUEST_LINE = re.compile(r"^[A-Z]+\s")
_WEIGHT = re.compile(r"^#\s*weight\s*:\s*(\S*)\s*$", re.IGNORECASE)
#: Spaces and tabs around a name or value (RFC 9110 §5.6.3, OWS); vegeta trims them too.
_OWS = " \t"


@dataclass(frozen=True)
class HttpRequest:
    """One request: what the engine configuration's ``protocol.requests`` lists (RequestSpec in
    protocol/scheme.rs), and where it was written (``origin``: a file's line, or the flags)."""

    method: str = "GET"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    weight: int = 1
    origin: str = "the command line"

    def spec(self) -> dict[str, Any]:
        """Its form in the engine's configuration: a body as text when it is UTF-8, else its bytes."""
        d: dict[str, Any] = {"method": self.method, "path": self.path}
        if self.headers:
            d["headers"] = [list(h) for h in self.headers]
        if self.body:
            try:
                d["body"] = self.body.decode("utf-8")
            except UnicodeDecodeError:
                d["body"] = list(self.body)
        if self.weight != 1:
            d["weight"] = self.weight
        return d


def parse_header(text: str, where: str) -> tuple[str, str]:
    """``Name: value`` (``-H``, a requests file's header line): split at the first colon, both
    trimmed of spaces and tabs; the name may not be empty."""
    name, colon, value = text.partition(":")
    name, value = name.strip(_OWS), value.strip(_OWS)
    if not colon or not name:
        raise InputError(f"{where}: header '{shown(text)}' is not 'Name: value'",
                         "write a header as its name, a colon and its value, e.g. 'Content-Type: application/json'")
    return name, value


def draw(requests: list[HttpRequest]) -> str:
    """How the engine chooses each request (protocol/http.rs, ``Draw``): by weight when any is
    weighted, else in turn."""
    return "weight" if any(r.weight != 1 for r in requests) else "turn"


def body_file(name: str, where: str, base: Path | None = None) -> bytes:
    """The bytes of ``--body-file`` or of a requests file's ``@FILE`` (relative to ``base``)."""
    if (bad := next((i for i, c in enumerate(name) if c < " " or c == "\x7f"), None)) is not None:
        raise InputError(f"{where}: body file name '{shown(name)}' has a control character ({shown(name[bad])}) at "
                         f"position {bad}", "name the file without control characters")
    path = Path(name) if base is None else base / name
    try:
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"{where}: cannot read body file {path}: {e.strerror}",
                         "give a file that exists and can be read" + (
                             f" (a requests file's @FILE is relative to its directory, {base})" if base else "")) from None


def parse_requests_file(path: str) -> list[tuple[Target, HttpRequest]]:
    """Each request of a requests file in vegeta's format (the module's docstring), with the
    target its URL names (``parse_target``: an http:// URL, its host and path checked)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read requests file {path}: {e.strerror}", "give a file that exists and can be read") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})", "save the requests file as UTF-8") from None
    out: list[tuple[Target, HttpRequest]] = []
    # Only LF ends a line (and CR LF): str.splitlines would also split at a CR, FF or VT inside
    # one, which must reach the engine's checks and be refused there, not cut a header in two.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    weight: tuple[int, str] | None = None
    current: dict[str, Any] | None = None  # the request being read: its fields so far

    def end() -> None:
        nonlocal current
        if current is not None:
            current.pop("closed", None)
            out.append((current.pop("target"), HttpRequest(**current)))
        current = None

    for number, line in enumerate(lines, 1):
        where = f"{path}:{number}"
        stripped = line.strip(_OWS)
        if not stripped:
            end()
            continue
        if stripped.startswith("#"):
            if (m := _WEIGHT.match(stripped)) is not None:
                if weight is not None:
                    raise InputError(f"{where}: a second weight for one request (the first: {weight[1]})",
                                     "give one '# weight: N' line before each request line")
                if not m.group(1).isdigit() or int(m.group(1)) < 1:
                    raise InputError(f"{where}: weight '{shown(m.group(1))}' is not a whole number of 1 or more",
                                     "write '# weight: N' with N = 1, 2, 3, …")
                weight = (int(m.group(1)), where)
            continue
        if current is not None and current.get("closed") is None and not _REQUEST_LINE.match(stripped):
            if stripped.startswith("@"):
                current["body"] = body_file(stripped[1:], where, file.parent)
                current["closed"] = where
            else:
                current["headers"] += (parse_header(stripped, where),)
            continue
        if current is not None and current.get("closed") is not None and not _REQUEST_LINE.match(stripped):
            raise InputError(f"{where}: '{shown(stripped)}' after the body file of the request above ({current['closed']})",
                             "end a request with its @FILE line, then a blank line before the next request")
        end()
        method, _, url = stripped.partition(" ")
        url = url.strip(_OWS)
        if not url:
            raise InputError(f"{where}: '{shown(stripped)}' is not a request line 'METHOD URL'",
                             "write e.g. 'GET http://127.0.0.1:8080/path', then its headers, one per line")
        try:
            target = parse_target(url)
        except InputError as e:
            raise InputError(f"{where}: {e.problem}", e.remedy) from None
        if target.scheme != "http":
            raise InputError(f"{where}: '{shown(url)}' is not an http:// URL", "give each request an http://HOST:PORT/PATH URL")
        current = {"method": method, "path": target.path, "headers": (), "target": target, "origin": where}
        if weight is not None:
            current["weight"], weight = weight[0], None
    end()
    if weight is not None:
        raise InputError(f"{weight[1]}: a weight with no request line after it", "put '# weight: N' just before its request line")
    if not out:
        raise InputError(f"{path} holds no request", "write one request line 'METHOD URL' at least")
    return out


def check_requests(requests: list[HttpRequest], host: str) -> None:
    """The engine's checks of these requests (protocol/http.rs, ``Requests::new``: RFC 9110 for
    methods and fields, RFC 3986 for targets), before anything connects: its one-line refusal,
    naming ``requests[i]``, with where request i was written."""
    protocol = {"scheme": "http", "host": host, "requests": [r.spec() for r in requests], "draw": draw(requests)}
    try:
        _core.check_protocol(json.dumps(protocol))
    except InputError as e:
        # Which request: the first the engine refuses alone (it checks them in order).
        first = next((r for r in requests if not _accepted(r, host)), None)
        raise InputError(f"{first.origin}: {e.problem}" if first else e.problem, e.remedy) from None


def _accepted(request: HttpRequest, host: str) -> bool:
    try:
        _core.check_protocol(json.dumps({"scheme": "http", "host": host, "requests": [{**request.spec(), "weight": 1}]}))
    except InputError:
        return False
    return True


#: The settings that only apply to http:// targets, and their flags.
HTTP_FLAGS = {"method": "--method", "header": "--header", "body": "--body", "body_file": "--body-file",
              "requests_file": "--requests-file"}


def http_requests(st: dict[str, Any], targets: tuple[Target, ...], given: set[str] | frozenset[str]
                  ) -> tuple[tuple[Target, ...], tuple[HttpRequest, ...]]:
    """The targets and the requests of a run's settings (empty: ``GET path``, as without these
    settings). ``--requests-file FILE``: its URLs name one http://HOST:PORT, the target when no TARGET
    is given, else one of the TARGETs' (every request goes to every target); ``--header`` adds
    to each of its requests. Otherwise one request: ``--method``, ``--header``, ``--body`` or
    ``--body-file``, on the target's path. A flag given for another scheme is refused in one
    line; the same from a shared workload file is ignored, as key settings are."""
    present = [name for name in HTTP_FLAGS if st.get(name) not in (None, [], ())]
    file = st.get("requests_file")
    scheme = targets[0].scheme if targets else None
    if not present:
        return targets, ()
    if scheme != "http" and not (file and not targets):
        flag = next((HTTP_FLAGS[name] for name in present if name in given), None)
        if flag and scheme is None:
            raise InputError(f"{flag} needs an http://HOST:PORT target: the built-in server speaks synthetic://",
                             "give the http:// target (or --requests-file FILE, whose URLs name it)")
        if flag:
            raise InputError(f"{flag} does not apply to {scheme}://", "it is for http:// targets")
        return targets, ()
    one = [HTTP_FLAGS[name] for name in ("method", "body", "body_file") if st.get(name) is not None]
    if file and one:
        raise InputError(f"--requests-file with {one[0]}", "write each request's method and @BODY-FILE in the requests file "
                         "(--header adds to every request)")
    if st.get("body") is not None and st.get("body_file") is not None:
        raise InputError("--body and --body-file together", "give the body one way")
    headers = tuple(parse_header(h, "--header") for h in st.get("header") or ())
    if file:
        parsed = parse_requests_file(str(file))
        named = list(dict.fromkeys(t.netloc for t, _ in parsed))
        if len(named) > 1:
            raise InputError(f"{file}: its URLs name {len(named)} servers ({', '.join(named)})",
                             "measure one server per run: give each request a URL on the same HOST:PORT")
        if targets and named[0] not in {t.netloc for t in targets}:
            raise InputError(f"{file}: its URLs name {named[0]}, which is not a target "
                             f"({', '.join(t.netloc for t in targets)})", "give no TARGET (the URLs name it) or the same one")
        targets = targets or (parsed[0][0],)
        requests = tuple(replace(r, headers=headers + r.headers) for _, r in parsed)
    else:
        body = (str(st["body"]).encode() if st.get("body") is not None
                else body_file(str(st["body_file"]), "--body-file") if st.get("body_file") is not None else b"")
        requests = (HttpRequest(method=str(st.get("method") or "GET"), path=targets[0].path or "/", headers=headers,
                                body=body),)
    check_requests(list(requests), targets[0].netloc)
    return targets, requests
