"""TLS to real servers end to end (issue 36, items 2 and 3): `tailwise run` over HTTPS to nginx
(GET, POST with a body, custom headers as nginx logged them), redis-server on --tls-port and
memcached -Z (our counts agree with the servers' own), a wrong CA refused in one line naming the
certificate problem, --tls-insecure accepted, a client certificate nginx requires, session
resumption across nginx's keep-alive closes with nothing lost, synthetic+tls:// against
`tailwise serve --tls-cert/--tls-key`, `tailwise load` and `sweep` over TLS, and Redis AUTH and SELECT
over TLS (``redis+tls://:PASSWORD@H:P/N`` against a redis-server with --requirepass: at the start, on
reconnects, in `load`; the password nowhere in what is printed or written). Certificates: trustme
(the ``pki`` fixture). Each run is a second at 2–3k req/s."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from support.cli import CLI, MEASURED, run_cli
from support.live_run import Run
from support.plugin import skip_unless_installed
from support.tls_servers import client_context, memcached_stats, redis_call, redis_info, redis_tls_server
from tailwise.cli.exits import EXIT_ERROR
from tailwise.spec.tls import STAMPS_NOTE

SHORT = ("--duration", "1", "--rate", "2k", "--conns", "2", "--json", "--seed", "5")


def run_json(*args: str) -> dict:
    r = run_cli("run", *args)
    assert r.returncode in MEASURED and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def clean(s: dict) -> None:
    """Every request answered, none lost, no handshake failed."""
    c = s["counters"]
    assert s["error"] is None and c["errors"] == 0, s["error_reasons"]
    assert c["timeouts"] == c["never_sent"] == c["unfinished"] == 0, c
    assert c["received"] == c["sent"] > 0, c
    assert s["tls"]["failed"] == 0, s["tls"]


def test_https_get_and_post_with_custom_headers_reach_nginx(pki, nginx_tls, tmp_path):
    n = nginx_tls()
    before = len(n.requests())
    out = tmp_path / "run"
    s = run_json(f"{n.base_url}/fixed", "--tls-ca", str(pki.ca), "--out", str(out), *SHORT)
    clean(s)
    tls = s["tls"]
    assert (tls["sni"], tls["ca"], tls["insecure"], tls["resume"]) == ("localhost", "ca.pem", False, True)
    assert tls["handshake"]["count"] == tls["full"] + tls["resumed"] >= 2  # one per connection at least
    assert 0 < tls["handshake"]["p50_ns"] <= tls["handshake"]["p99_ns"]
    assert s["config"]["tls"]["alpn"] == ["http/1.1"] and s["config"]["target"].startswith("https://")
    # config.json names the files, never their contents.
    config = (out / "config.json").read_text()
    assert str(pki.ca) in config and "BEGIN" not in config
    logged = n.requests(at_least=before + s["counters"]["received"])[before:]
    assert len(logged) == s["counters"]["received"] and all(line.startswith("GET /fixed") for line in logged)
    # POST with a body and custom headers: nginx logs them as sent.
    before = len(n.requests())
    s = run_json(f"{n.base_url}/echo", "--tls-ca", str(pki.ca), "-X", "POST", "-H", "X-Test: over-tls",
                 "-H", "X-Tailwise: 36", "--body", "hello", *SHORT)
    clean(s)
    logged = n.requests(at_least=before + s["counters"]["received"])[before:]
    assert Counter(" ".join(line.split()[:5]) for line in logged) == Counter(
        {"POST /echo x_test=over-tls x_tailwise=36 body=5": s["counters"]["received"]})


def test_redis_over_tls_counts_agree_with_info(pki, redis_tls):
    ctx = client_context(pki)
    s = run_json(f"redis+tls://127.0.0.1:{redis_tls.port}", "--tls-ca", str(pki.ca), "--mix", "get=9,set=1",
                 "--keys", "1000", *SHORT)
    clean(s)
    assert s["tls"]["sni"] is None  # an IP target: no SNI, the certificate's IP address verified
    stats = redis_info(redis_tls.port, ctx)
    calls = {k.removeprefix("cmdstat_"): int(v.split("calls=")[1].split(",")[0]) for k, v in stats.items()
             if k.startswith("cmdstat_")}
    c = s["counters"]
    assert (calls.get("get", 0), calls.get("set", 0)) == (c["gets"], c["sets"]) and c["sets"] > 0
    assert s["target_stats"]["agrees"] is True, s["target_stats"]


def test_memcached_over_tls_counts_agree_with_stats(pki, memcached_tls):
    s = run_json(f"memcached+tls://127.0.0.1:{memcached_tls.port}", "--tls-ca", str(pki.ca), "--mix", "get=9,set=1",
                 "--keys", "1000", *SHORT)
    clean(s)
    stats = memcached_stats(memcached_tls.port, client_context(pki))
    c = s["counters"]
    # The target_stats readings' own `stats` commands are not gets or sets.
    assert (int(stats["cmd_get"]), int(stats["cmd_set"])) == (c["gets"], c["sets"])
    assert int(stats["get_hits"]) == c["hits"] and s["target_stats"]["agrees"] is True


def test_a_wrong_ca_is_refused_in_one_line_and_insecure_is_accepted(pki, redis_tls):
    url = f"redis+tls://127.0.0.1:{redis_tls.port}"
    r = run_cli("run", url, "--tls-ca", str(pki.stranger), *SHORT)
    assert r.returncode == EXIT_ERROR, (r.returncode, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.startswith("tailwise:")]  # warnings aside
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "certificate" in lines[0].lower() and "issuer" in lines[0].lower(), lines[0]
    s = run_json(url, "--tls-insecure", *SHORT)
    clean(s)
    assert (s["tls"]["insecure"], s["tls"]["ca"]) == (True, None)


def test_a_client_certificate_nginx_requires_is_refused_without_and_accepted_with(pki, nginx_tls):
    n = nginx_tls(verify_client=True)
    r = run_cli("run", f"{n.base_url}/fixed", "--tls-ca", str(pki.ca), *SHORT)
    # nginx answers 400 ("No required SSL certificate was sent") rather than end the handshake.
    assert r.returncode in (*MEASURED, EXIT_ERROR) and "Traceback" not in r.stderr, r.stderr
    if r.returncode == EXIT_ERROR:
        assert "certificate" in r.stderr.lower()
    else:
        s = json.loads(r.stdout)
        assert s["counters"]["errors"] > 0 and s["counters"]["received"] == 0  # no request served
        assert any("400" in e["reason"] for e in s["error_reasons"]), s["error_reasons"]
    s = run_json(f"{n.base_url}/fixed", "--tls-ca", str(pki.ca), "--tls-cert", str(pki.client_cert),
                 "--tls-key", str(pki.client_key), *SHORT)
    clean(s)
    assert n.requests(at_least=s["counters"]["received"])[-1].endswith("verify=SUCCESS")


def test_sessions_resume_across_nginx_keepalive_closes_and_nothing_is_lost(pki, nginx_tls):
    n = nginx_tls(keepalive_requests=100)
    args = (f"{n.base_url}/fixed", "--tls-ca", str(pki.ca), "--duration", "1", "--rate", "3k", "--conns", "2",
            "--json", "--seed", "9")
    s = run_json(*args)
    clean(s)
    assert s["counters"]["reconnects"] >= 10  # ~3,000 requests, 100 a connection
    assert s["tls"]["resumed"] > 0 and s["tls"]["full"] >= 1, s["tls"]
    assert s["tls"]["handshake"]["count"] == s["tls"]["full"] + s["tls"]["resumed"]
    s = run_json(*args, "--tls-no-resume")
    clean(s)
    assert s["tls"]["resumed"] == 0 and s["tls"]["full"] >= 10 and s["tls"]["resume"] is False


def test_synthetic_over_tls_against_serve(pki, serve_tls):
    port = serve_tls.addr.rsplit(":", 1)[1]
    s = run_json(f"synthetic+tls://localhost:{port}", "--tls-ca", str(pki.ca), "--timestamps", "kernel", *SHORT)
    clean(s)
    assert s["tls"]["handshake"]["count"] >= 2 and s["tls"]["sni"] == "localhost"
    # Kernel stamps over TLS: the note says what they stamp.
    assert STAMPS_NOTE.lower() in s["latency"]["source_note"].lower()  # it may open a sentence


def test_load_stores_keys_over_tls_that_a_run_then_hits(pki, redis_tls):
    url = f"redis+tls://127.0.0.1:{redis_tls.port}"
    r = run_cli("load", url, "--keys", "500", "--tls-ca", str(pki.ca), "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["stored"] == 500
    assert int(redis_info(redis_tls.port, client_context(pki), "keyspace")["db0"].split("keys=")[1].split(",")[0]) == 500
    s = run_json(url, "--tls-ca", str(pki.ca), "--keys", "500", *SHORT)
    clean(s)
    assert s["counters"]["hits"] == s["counters"]["gets"] > 0
    r = run_cli("load", "https://127.0.0.1:1/", "--keys", "5")
    assert r.returncode == EXIT_ERROR and "https:// has no keys to store" in r.stderr and "Traceback" not in r.stderr


def test_a_sweep_over_tls_measures_each_point_with_its_handshakes(pki, redis_tls, tmp_path):
    """Issue 36, item 5: `sweep` takes the --tls-* flags as `run` does; each point's summary has
    its own handshakes."""
    out = tmp_path / "sweep"
    r = run_cli("sweep", f"redis+tls://127.0.0.1:{redis_tls.port}", "--tls-ca", str(pki.ca), "--rates", "1k,2k",
                "--duration", "1", "--conns", "2", "--out", str(out), "--json", timeout=240)
    assert r.returncode in MEASURED and "Traceback" not in r.stderr, r.stderr
    assert len(json.loads(r.stdout)["points"]) == 2
    points = sorted((out / "points").glob("*/summary.json"))
    assert len(points) == 2
    for p in points:
        s = json.loads(p.read_text())
        clean(s)
        assert s["tls"]["handshake"]["count"] >= 2 and s["tls"]["ca"] is not None


PASSWORD = "pw-Tq4:s@cr/t"  # a colon, an at sign and a slash: percent-encoded in the URL
URL_PASSWORD = "pw-Tq4%3As%40cr%2Ft"


@pytest.fixture
def redis_tls_auth(pki):
    """redis-server on --tls-port only, with --requirepass PASSWORD."""
    skip_unless_installed("redis-server")
    with redis_tls_server(pki, password=PASSWORD) as s:
        yield s


def cli(*args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "TAILWISE_REDIS_PASSWORD"} | {"COLUMNS": "200"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=environ)


def nowhere(r: subprocess.CompletedProcess, out: Path | None = None) -> None:
    """The password (as given or percent-encoded) in none of stdout, stderr and the results' files."""
    for needle in (PASSWORD, URL_PASSWORD):
        assert needle not in r.stdout and needle not in r.stderr, "password printed"
        for f in (out.rglob("*") if out else ()):
            if f.is_file():
                assert needle.encode() not in f.read_bytes(), f"password written in {f}"


def dbsize(server, ctx, db: int) -> int:
    return int(redis_call(server.port, ctx, "DBSIZE", password=PASSWORD, db=db)[1:])


def test_redis_over_tls_says_auth_and_select_through_the_session(pki, redis_tls_auth, tmp_path):
    ctx, out = client_context(pki), tmp_path / "out"
    url = f"redis+tls://:{URL_PASSWORD}@127.0.0.1:{redis_tls_auth.port}/3"
    r = cli("run", url, "--tls-ca", str(pki.ca), "--mix", "1:1", "--keys", "200", "--out", str(out), *SHORT)
    assert r.returncode in MEASURED and "Traceback" not in r.stderr, r.stderr
    s = json.loads(r.stdout)
    clean(s)
    shown = f"redis+tls://:***@127.0.0.1:{redis_tls_auth.port}/3"
    assert s["config"]["target"] == shown and s["config"]["spec"]["targets"] == [shown], s["config"]
    # The sets landed in database 3, none in 0; the server's INFO (read after AUTH, over TLS) agrees.
    assert 0 < dbsize(redis_tls_auth, ctx, 3) <= 200 and dbsize(redis_tls_auth, ctx, 0) == 0
    d = s["target_stats"]["delta"]
    assert (d["gets"], d["sets"]) == (s["counters"]["gets"], s["counters"]["sets"]) and s["target_stats"]["agrees"]
    report = cli("report", str(out))
    assert report.returncode == 0, report.stderr
    nowhere(r, out)
    nowhere(report)
    # A wrong password: one line in the server's words, the password not in it.
    bad = cli("run", f"redis+tls://:wrong-password@127.0.0.1:{redis_tls_auth.port}/3", "--tls-ca", str(pki.ca), *SHORT)
    lines = [line for line in bad.stderr.splitlines() if line.startswith("tailwise:")]
    assert bad.returncode == EXIT_ERROR and len(lines) == 1 and "redis refused AUTH: WRONGPASS" in lines[0], bad.stderr
    assert "wrong-password" not in bad.stderr + bad.stdout


def test_redis_over_tls_reconnects_authenticate_and_select_again(pki, redis_tls_auth, tmp_path):
    ctx, out = client_context(pki), tmp_path / "out"
    calls = lambda: {k.removeprefix("cmdstat_"): int(v.split("calls=")[1].split(",")[0])  # noqa: E731
                     for k, v in redis_info_auth(redis_tls_auth, ctx).items() if k.startswith("cmdstat_")}
    before = calls()
    run = Run(f"redis+tls://:{URL_PASSWORD}@127.0.0.1:{redis_tls_auth.port}/4", "--tls-ca", str(pki.ca),
              "--duration", "3s", "--rate", "2k", "--conns", "4", "--outstanding", "2", "--mix", "1:1", "--seed", "3",
              "--out", str(out))
    run.wait_line("measuring")  # the schedule has started: every connection is open and authenticated
    killed = int(redis_call(redis_tls_auth.port, ctx, "CLIENT", "KILL", "TYPE", "normal", password=PASSWORD)[1:])
    assert killed >= 4, killed
    s = run.summary()
    c = s["counters"]
    assert c["reconnects"] >= 4 and c["errors"] == 0, (c, s["error_reasons"])
    assert s["tls"]["failed"] == 0 and s["tls"]["full"] + s["tls"]["resumed"] >= 4 + c["reconnects"], s["tls"]
    after = calls()
    assert after["auth"] - before.get("auth", 0) >= 8 and after["select"] - before.get("select", 0) >= 8
    assert dbsize(redis_tls_auth, ctx, 4) > 0 and dbsize(redis_tls_auth, ctx, 0) == 0
    nowhere(subprocess.CompletedProcess([], 0, json.dumps(s), "\n".join(x for _, x in run.lines)), out)


def redis_info_auth(server, ctx) -> dict[str, str]:
    text = redis_call(server.port, ctx, "INFO", "commandstats", password=PASSWORD).decode("latin-1")
    return {k: v for k, _, v in (line.partition(":") for line in text.split("\r\n")) if v}


def test_load_over_tls_authenticates_and_selects(pki, redis_tls_auth, tmp_path):
    secret = tmp_path / "redis.pass"
    secret.write_text(PASSWORD + "\n")
    url = f"redis+tls://127.0.0.1:{redis_tls_auth.port}/5"
    r = cli("load", url, "--keys", "300", "--tls-ca", str(pki.ca), "--redis-password-file", str(secret), "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["stored"] == 300 and dbsize(redis_tls_auth, client_context(pki), 5) == 300
    nowhere(r)
    bad = cli("load", url.replace("//", "//:nope@"), "--keys", "10", "--tls-ca", str(pki.ca))
    assert bad.returncode == EXIT_ERROR and "redis refused AUTH: WRONGPASS" in bad.stderr, bad.stderr
