"""Issue 36, item 1, end to end: the requests a user writes (methods, headers, bodies, weights),
as the engine's configuration carries them (protocol/scheme.rs ``RequestSpec``), sent to a real
nginx, which logs each one as it read it (tests/support/servers.py: ``/echo``'s requests.log).
The engine is driven here through its configuration (``LoadSpec``), as an agent drives it."""

from __future__ import annotations

import math
import os
from collections import Counter

from tailwise import _core
from tailwise.spec.load import LoadSpec, protocol
from tailwise.spec.requests import HttpRequest, draw


def test_methods_headers_bodies_and_weights_reach_nginx_as_written(nginx):
    requests = [
        HttpRequest("GET", "/echo?kind=get", (("X-Test", "get-1"),), weight=3),
        HttpRequest("POST", "/echo?kind=post", (("X-Test", "post-1"), ("Content-Type", "text/plain")), b"hello=world"),
        HttpRequest("PUT", "/echo?kind=put", (("X-Test", "put-1"),), b"\x00\xff\r\n\r\n"),
    ]
    proto = protocol("http", host=f"127.0.0.1:{nginx.port}", requests=[r.spec() for r in requests], draw=draw(requests))
    spec = LoadSpec(targets=[f"127.0.0.1:{nginx.port}"], rate_rps=3000.0, duration_ns=1_000_000_000, conns=2,
                    outstanding=2, pin=False, seed=5, protocol=proto)
    joined = _core.Engine(spec.to_json()).join()
    c = joined["counters"]
    assert c["errors"] == c["timeouts"] == c["never_sent"] == 0, c
    assert c["received"] == c["sent"] > 2000, c
    with open(os.path.join(nginx.tmpdir, "requests.log")) as f:
        lines = Counter(" ".join(line.split()[:4]) for line in f)
    # Each request as nginx read it: its method, URI and header, Content-Length where it has a body
    # (nginx reads and drops the body: a wrong length would break the next request on the connection).
    kinds = {"GET /echo?kind=get get-1 -": 3, "POST /echo?kind=post post-1 11": 1, "PUT /echo?kind=put put-1 6": 1}
    assert set(lines) == set(kinds), lines
    n = sum(lines.values())
    assert n == c["received"], (lines, c)
    for kind, weight in kinds.items():
        p = weight / 5
        sd = math.sqrt(n * p * (1 - p))
        assert abs(lines[kind] - n * p) < 4.5 * sd, (kind, lines[kind], n * p, sd)
