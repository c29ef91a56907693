"""Redis AUTH and SELECT against a real redis-server with ``--requirepass`` and an ACL user: the
password from the URL, --redis-password-file or TAILWISE_REDIS_PASSWORD (in that order); ``/N``
selects database N on every connection, reconnects included; a refusal is one line; and the
password is nowhere in what a run prints or writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.cli import CLI, MEASURED
from support.live_run import Run
from support.plugin import skip_unless_installed
from support.servers import redis_server
from support.tls_servers import redis_call

PASSWORD = "pw-Xq7:s@cr/t"  # a colon, an at sign and a slash: percent-encoded in a URL
URL_PASSWORD = "pw-Xq7%3As%40cr%2Ft"
USER, USER_PASSWORD = "app", "app-Zk9-secret"
RUN = ("--duration", "1500ms", "--rate", "2k", "--conns", "4", "--outstanding", "2", "--seed", "7")
ENV = "TAILWISE_REDIS_PASSWORD"


@pytest.fixture
def server():
    skip_unless_installed("redis-server")
    with redis_server(password=PASSWORD, users=((USER, USER_PASSWORD),)) as s:
        yield s


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != ENV} | {"COLUMNS": "200"} | (env or {})
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=environ)


def call(server, *words: str, db: int | None = None) -> bytes:
    """One command on a connection of the test's own (AUTH, and SELECT db, first): its reply."""
    return redis_call(server.port, None, *words, password=PASSWORD, db=db)


def dbsize(server, db: int) -> int:
    return int(call(server, "DBSIZE", db=db)[1:])


def commandstats(server) -> dict[str, int]:
    text = call(server, "INFO", "commandstats").decode()
    return {m[1]: int(m[2]) for m in re.finditer(r"cmdstat_(\w+):calls=(\d+)", text)}


def assert_nowhere(secret: str, r: subprocess.CompletedProcess, out: Path | None) -> None:
    """The password in none of stdout, stderr and the results directory's files (nor percent-encoded)."""
    needles = {secret, URL_PASSWORD} if secret == PASSWORD else {secret}
    for needle in needles:
        assert needle not in r.stdout and needle not in r.stderr, "password printed"
        for f in (out.rglob("*") if out else ()):
            if f.is_file():
                assert needle.encode() not in f.read_bytes(), f"password written in {f}"


def url(server, userinfo: str = "", db: int | None = None) -> str:
    return f"redis://{userinfo}{server.host}:{server.port}" + (f"/{db}" if db is not None else "")


def test_a_password_in_the_url_and_a_database_are_used_and_never_shown(server, tmp_path):
    out = tmp_path / "out"
    r = cli("run", url(server, f":{URL_PASSWORD}@", db=3), *RUN, "--mix", "1:1", "--keys", "200", "--out", str(out))
    assert r.returncode in MEASURED, r.stderr
    assert "Traceback" not in r.stderr
    s = json.loads((out / "summary.json").read_text())
    c = s["counters"]
    assert c["errors"] == 0 and c["received"] == c["sent"] > 1000, s["error_reasons"]
    shown = url(server, ":***@", db=3)
    assert s["config"]["target"] == shown and s["config"]["spec"]["targets"] == [shown], s["config"]
    assert shown in r.stderr  # the first screen
    # The sets landed in database 3, none in 0; the server counted our gets and sets.
    assert 0 < dbsize(server, 3) <= 200 and dbsize(server, 0) == 0
    d = s["target_stats"]["delta"]
    assert (d["gets"], d["sets"]) == (c["gets"], c["sets"]) and s["target_stats"]["agrees"], s["target_stats"]
    report = cli("report", str(out))
    assert report.returncode == 0, report.stderr
    assert_nowhere(PASSWORD, r, out)
    assert_nowhere(PASSWORD, report, None)


@pytest.mark.parametrize("source", ["file", "env", "file-over-env"])
def test_the_password_from_a_file_or_the_environment(server, tmp_path, source):
    out, secret_file = tmp_path / "out", tmp_path / "redis.pass"
    secret_file.write_text(PASSWORD + "\n")
    args, env = [url(server, db=1), *RUN, "--out", str(out), "--json"], {}
    if source in ("file", "file-over-env"):
        args += ["--redis-password-file", str(secret_file)]
    if source == "env":
        env[ENV] = PASSWORD
    if source == "file-over-env":
        env[ENV] = "a-wrong-one"  # the file wins
    r = cli("run", *args, env=env)
    assert r.returncode in MEASURED, r.stderr
    s = json.loads(r.stdout)
    assert s["counters"]["errors"] == 0 and s["counters"]["received"] == s["counters"]["sent"] > 1000
    # A password was used, from elsewhere: the target shows it hidden; the spec keeps the URL given.
    assert s["config"]["target"] == url(server, ":***@", db=1)
    assert s["config"]["spec"]["targets"] == [url(server, db=1)]
    if source != "env":
        assert s["config"]["spec"]["redis_password_file"] == str(secret_file)
    assert_nowhere(PASSWORD, r, out)


def test_the_url_wins_over_the_file(server, tmp_path):
    wrong = tmp_path / "wrong.pass"
    wrong.write_text("not-the-password\n")
    r = cli("run", url(server, f":{URL_PASSWORD}@"), *RUN, "--redis-password-file", str(wrong), "--json")
    assert r.returncode in MEASURED, r.stderr


def test_an_acl_user(server, tmp_path):
    out = tmp_path / "out"
    before = commandstats(server)
    r = cli("run", url(server, f"{USER}:{USER_PASSWORD}@", db=2), *RUN, "--mix", "1:1", "--out", str(out))
    assert r.returncode in MEASURED, r.stderr
    s = json.loads((out / "summary.json").read_text())
    c = s["counters"]
    assert c["errors"] == 0 and c["received"] == c["sent"] > 1000
    assert s["config"]["target"] == url(server, f"{USER}:***@", db=2)
    after = commandstats(server)
    assert after.get("auth", 0) - before.get("auth", 0) >= 4  # one per connection (and the INFO readings')
    assert after["get"] - before.get("get", 0) == c["gets"] and after["set"] - before.get("set", 0) == c["sets"]
    assert dbsize(server, 2) > 0
    assert_nowhere(USER_PASSWORD, r, out)


@pytest.mark.parametrize("userinfo,db,said", [
    (":wrong-password@", None, "redis refused AUTH: WRONGPASS"),
    (f"{USER}:wrong-password@", None, "redis refused AUTH: WRONGPASS"),
    ("", 1, "redis refused SELECT: NOAUTH"),
    (f":{URL_PASSWORD}@", 99, "redis refused SELECT: ERR DB index is out of range"),
])
def test_a_refusal_is_one_line_and_exits_as_a_target_error(server, userinfo, db, said):
    r = cli("run", url(server, userinfo, db), *RUN)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("tailwise:")]
    assert len(lines) == 1 and said in lines[0], r.stderr
    assert_nowhere("wrong-password", r, None)
    assert_nowhere(PASSWORD, r, None)


def test_a_user_without_a_password_is_refused_before_connecting(server):
    r = cli("run", url(server, f"{USER}:@"), *RUN)
    assert r.returncode == 2 and f"names user '{USER}' but no password" in r.stderr, r.stderr


def test_load_authenticates_and_selects(server, tmp_path):
    secret_file = tmp_path / "redis.pass"
    secret_file.write_text(PASSWORD)
    r = cli("load", url(server, db=5), "--keys", "300", "--redis-password-file", str(secret_file), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stored"] == 300 and dbsize(server, 5) == 300
    bad = cli("load", url(server, ":nope@", db=5), "--keys", "10")
    assert bad.returncode == 2 and "redis refused AUTH: WRONGPASS" in bad.stderr, bad.stderr
    assert_nowhere(PASSWORD, r, None)


def test_reconnects_authenticate_and_select_again(server, tmp_path):
    """Every connection killed by the server mid-run: the new ones say AUTH and SELECT first, their
    replies are not counted, and the run goes on without an error reply."""
    out = tmp_path / "out"
    before = commandstats(server)
    run = Run(url(server, f":{URL_PASSWORD}@", db=4), "--duration", "4s", "--rate", "2k", "--conns", "4",
              "--outstanding", "2", "--mix", "1:1", "--seed", "3", "--out", str(out))
    run.wait_line("measuring")  # the schedule has started: every connection is open and authenticated
    killed = int(call(server, "CLIENT", "KILL", "TYPE", "normal")[1:])
    assert killed >= 4, killed
    s = run.summary()
    c = s["counters"]
    assert c["reconnects"] >= 4 and c["errors"] == 0, (c, s["error_reasons"])
    assert c["received"] == c["sent"] - c["timeouts"] - c["unfinished"]
    after = commandstats(server)
    # The server may have run a request whose reply the kill lost, then run it again when resent:
    # at most the requests in flight then (conns × outstanding).
    gets, sets = after["get"] - before.get("get", 0), after["set"] - before.get("set", 0)
    assert 0 <= gets + sets - (c["gets"] + c["sets"]) <= 4 * 2, (gets, sets, c)
    assert after["auth"] - before.get("auth", 0) >= 8 and after["select"] - before.get("select", 0) >= 8
    assert dbsize(server, 4) > 0 and dbsize(server, 0) == 0
    assert_nowhere(PASSWORD, subprocess.CompletedProcess([], 0, json.dumps(s), "\n".join(x for _, x in run.lines)), out)


def test_through_an_agent_the_password_reaches_the_engine_and_nothing_else(server, tmp_path):
    """The engine configuration an agent receives holds the password (its engine says AUTH); the
    agent's log, its reply to Configure, and the coordinator's output and files do not."""
    import signal

    from support.agents import TOKEN, agent_process, token_file

    out, token = tmp_path / "out", token_file(tmp_path)
    with agent_process("--token-file", str(token)) as (proc, port, lines):
        # Configure's reply (the canonical configuration) hides the password it was sent.
        import grpc

        from tailwise.agents import wire
        from tailwise.agents.proto import agent_pb2 as pb, agent_pb2_grpc
        from tailwise.spec.load import LoadSpec

        spec = LoadSpec(targets=[f"{server.host}:{server.port}"], rate_rps=100.0, duration_ns=10**9, conns=1, pin=False,
                        protocol={"scheme": "redis", "auth": {"password": PASSWORD}})
        assert PASSWORD not in repr(spec) and PASSWORD in spec.to_json()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = agent_pb2_grpc.AgentStub(channel).Configure(
                pb.ConfigureRequest(run_id="peek", role="symmetric", engine_config=spec.to_json()),
                metadata=wire.bearer(TOKEN), timeout=10)
        assert json.loads(reply.engine_config)["protocol"]["auth"] == {"password": "***"}
        assert PASSWORD not in reply.engine_config
        r = cli("run", url(server, f":{URL_PASSWORD}@", db=6), "--agents", f"127.0.0.1:{port}", "--token-file",
                str(token), *RUN, "--mix", "1:1", "--out", str(out), "--json")
        proc.send_signal(signal.SIGTERM)
        agent_out, agent_err = proc.communicate(timeout=30)
    assert r.returncode in MEASURED, r.stderr
    s = json.loads(r.stdout)
    assert s["counters"]["errors"] == 0 and s["counters"]["received"] == s["counters"]["sent"] > 1000
    assert dbsize(server, 6) > 0 and s["config"]["target"] == url(server, ":***@", db=6)
    assert "run " in "".join(lines) + agent_out  # the agent logged the run
    assert_nowhere(PASSWORD, subprocess.CompletedProcess([], 0, "".join(lines) + agent_out, agent_err), None)
    assert_nowhere(PASSWORD, r, out)
