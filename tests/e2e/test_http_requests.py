"""Issue 36, item 1, end to end: the requests a user writes (methods, headers, bodies, weights),
as the engine's configuration carries them (protocol/scheme.rs ``RequestSpec``), sent to a real
nginx, which logs each one as it read it (tests/support/servers.py: ``/echo``'s requests.log).
The engine is driven here through its configuration (``LoadSpec``), as an agent drives it."""

from __future__ import annotations

import json
import math
import os
from collections import Counter

from support.cli import MEASURED, run_cli
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


def run_json(*args: str) -> dict:
    r = run_cli("run", *args)
    assert r.returncode in MEASURED and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def _logged(nginx) -> Counter:
    with open(os.path.join(nginx.tmpdir, "requests.log")) as f:
        return Counter(" ".join(line.split()[:4]) for line in f)


def test_the_cli_sends_method_headers_body_and_a_requests_file(nginx, tmp_path):
    """`tailwise run` with -X, -H and --body, then with --requests-file (its URLs name the target):
    nginx logs exactly the requests asked, and as many as the summary counts."""
    args = ("--duration", "1", "--rate", "2k", "--conns", "2", "--json", "--seed", "3")
    s = run_json(f"{nginx.base_url}/echo?one", "-X", "POST", "-H", "X-Test: cli", "--body", "hello", *args)
    assert s["error"] is None and s["counters"]["errors"] == 0, s["error_reasons"]
    assert _logged(nginx) == Counter({"POST /echo?one cli 5": s["counters"]["received"]})
    (tmp_path / "body.txt").write_bytes(b"a=1&b=2")
    requests = tmp_path / "targets.txt"
    requests.write_text(f"# weight: 2\nGET {nginx.base_url}/echo?a\nX-Test: file-a\n\n"
                        f"PUT {nginx.base_url}/echo?b\nX-Test: file-b\n@body.txt\n")
    s = run_json("--requests-file", str(requests), *args)
    assert s["error"] is None and s["counters"]["errors"] == 0, s["error_reasons"]
    got = _logged(nginx)
    del got["POST /echo?one cli 5"]
    assert set(got) == {"GET /echo?a file-a -", "PUT /echo?b file-b 7"}, got
    assert sum(got.values()) == s["counters"]["received"]
    assert got["GET /echo?a file-a -"] > got["PUT /echo?b file-b 7"]


def _binomial_ok(k: int, n: int, p: float) -> bool:
    """``k`` of ``n`` within 4.5 binomial standard deviations of ``n·p``."""
    return abs(k - n * p) < 4.5 * math.sqrt(n * p * (1 - p))


def test_a_requests_file_by_weight_gets_its_shares_and_per_request_percentiles(nginx, tmp_path):
    """Issue 36: a requests file in vegeta's format with three requests by weight — each sample says
    which request it was (the samples' ``request`` column, as nginx logged them), the shares are
    the weights' within binomial tolerance, and each request has its own percentiles with their
    intervals in summary.json (``by_request``), the verdict the whole run's."""
    import pyarrow.csv as pacsv

    (tmp_path / "body.txt").write_bytes(b"k=v")
    requests = tmp_path / "targets.txt"
    requests.write_text(f"# weight: 5\nGET {nginx.base_url}/echo?w=5\nX-Test: five\n\n"
                        f"# weight: 3\nPOST {nginx.base_url}/echo?w=3\nX-Test: three\n@body.txt\n\n"
                        f"# weight: 2\nGET {nginx.base_url}/echo?w=2\nX-Test: two\n")
    out = tmp_path / "out"
    s = run_json("--requests-file", str(requests), "--duration", "2", "--rate", "3k", "--conns", "2", "--seed", "4",
                 "--sample-every", "1", "--warmup", "0", "--out", str(out), "--json")
    assert s["error"] is None and s["counters"]["errors"] == 0, s["error_reasons"]
    kinds = s["by_request"]
    assert [k["name"] for k in kinds] == ["GET /echo?w=5", "POST /echo?w=3", "GET /echo?w=2"], kinds
    n = sum(k["count"] for k in kinds)
    assert n == s["latency"]["samples"] > 5000
    for k, weight in zip(kinds, (5, 3, 2)):
        assert _binomial_ok(k["count"], n, weight / 10), (k["name"], k["count"], n)
        assert abs(k["share"] - k["count"] / n) < 1e-9
        assert [p["p"] for p in k["percentiles"]] == [p["p"] for p in s["latency"]["percentiles"]]
        for p in k["percentiles"]:
            # Bounded, or unsupported as the whole run's would be (loopback latencies on a shared
            # host are correlated: a kind's n_eff may fall short of a high percentile's need).
            if p["value_ns"] is None:
                assert p["samples_needed"] and p["low_ns"] is None and p["high_ns"] is None, (k["name"], p)
            elif p["low_ns"] is not None and p["high_ns"] is not None:
                assert p["low_ns"] <= p["value_ns"] <= p["high_ns"], (k["name"], p)
        p50 = k["percentiles"][[p["p"] for p in k["percentiles"]].index(50.0)]
        assert p50["low_ns"] <= p50["value_ns"] <= p50["high_ns"], (k["name"], p50)
    # Each row's request index is the request nginx saw: every request sampled, each answered.
    table = pacsv.read_csv(out / "samples.csv").to_pydict()
    index = Counter(table["request"])
    logged = _logged(nginx)
    assert [index[i] for i in range(3)] == [logged["GET /echo?w=5 five -"], logged["POST /echo?w=3 three 3"],
                                            logged["GET /echo?w=2 two -"]], (index, logged)
    used = Counter(r for r, u in zip(table["request"], table["used"]) if u)
    assert [used[i] for i in range(3)] == [k["count"] for k in kinds]
    flags = Counter(f & _core.SAMPLE_FLAGS["SET"] for f in table["flags"])
    assert flags == Counter({0: len(table["flags"])}), "no sets over HTTP"
