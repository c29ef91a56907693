"""TLS to the target without the engine (issue 36, items 2 and 3): the schemes, the --tls-* flags
and their one-line refusals, the engine configuration's ``tls``, the summary's ``tls`` (handshake
percentiles, counts, how the server was verified) and its line on the first screen, the agents'
merge, and what ``latency.source_note`` says of kernel stamps over TLS."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tailwise.agents.merge import merged_tls
from tailwise.errors import InputError
from tailwise.methodology.summarize import tls_summary
from tailwise.render.output import print_summary
from tailwise.results.documents.base import STRICT
from tailwise.results.documents.run import Summary
from tailwise.spec.runspec import RunSpec
from tailwise.spec.target import parse_target, parse_targets
from tailwise.spec.tls import STAMPS_NOTE, source_note

SCREENS = Path(__file__).parent / "screens"


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    """A file to name: the flags check that it can be read, never its contents."""
    p = tmp_path / "ca.pem"
    p.write_text("-----BEGIN CERTIFICATE-----\n")
    return p


def tailwise(monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    """The command as users run it (its one-line errors and exit codes are main()'s)."""
    from tailwise.cli.main import main

    monkeypatch.setattr(sys, "argv", ["tailwise", *argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main()
    out, err = capsys.readouterr()
    return e.value.code, out, err


def spec(*targets: str, **flags) -> RunSpec:
    return RunSpec.from_flags({"targets": list(targets), "rate": "1k", "duration": "1s", **flags}, None)


@pytest.mark.parametrize(("url", "scheme", "port", "shown"), [
    ("https://localhost/", "http", 443, "https://localhost:443/"),
    ("https://127.0.0.1:8443/a?b=1", "http", 8443, "https://127.0.0.1:8443/a?b=1"),
    ("memcached+tls://127.0.0.1:11211", "memcached", 11211, "memcached+tls://127.0.0.1:11211"),
    ("REDIS+TLS://localhost:6380", "redis", 6380, "redis+tls://localhost:6380"),
    ("synthetic+tls://[::1]:7000", "synthetic", 7000, "synthetic+tls://[::1]:7000"),
])
def test_a_tls_scheme_names_its_protocol_and_tls_apart(url, scheme, port, shown):
    t = parse_target(url)
    assert (t.scheme, t.port, t.tls, t.url) == (scheme, port, True, shown)


def test_plaintext_schemes_are_unchanged_and_keep_their_port_required():
    t = parse_target("http://127.0.0.1:8080/x")
    assert (t.scheme, t.tls, t.url) == ("http", False, "http://127.0.0.1:8080/x")
    with pytest.raises(InputError, match="names no port"):
        parse_target("redis+tls://127.0.0.1")


@pytest.mark.parametrize("url", ["udp+tls://127.0.0.1:7", "memcached+udp+tls://127.0.0.1:11211",
                                 "udp+flow+tls://127.0.0.1:9"])
def test_tls_over_datagrams_is_refused_in_one_line(url):
    with pytest.raises(InputError) as e:
        parse_target(url)
    assert "datagram" in e.value.problem and "\n" not in e.value.line()


def test_http_plus_tls_is_written_https_and_an_unknown_tls_scheme_is_unknown():
    with pytest.raises(InputError, match="https://"):
        parse_target("http+tls://127.0.0.1:8443/")
    with pytest.raises(InputError, match="unknown protocol") as e:
        parse_target("gopher+tls://127.0.0.1:70")
    assert "https://" in e.value.remedy and "redis+tls://" in e.value.remedy


def test_targets_mixing_tls_and_plaintext_are_refused():
    with pytest.raises(InputError, match="mix TLS and plaintext"):
        spec("redis+tls://127.0.0.1:6380", "redis://127.0.0.1:6379")
    assert len(parse_targets(["redis+tls://127.0.0.1:6380", "redis+tls://127.0.0.1:6381"])) == 2


def test_the_engine_gets_sni_from_a_host_name_none_for_an_address_and_alpn_for_https(pem):
    name = spec("https://localhost:8443/").load_spec(["127.0.0.1:8443"], "user").engine_config()["tls"]
    assert name == {"ca_file": None, "insecure": False, "cert_file": None, "key_file": None, "sni": "localhost",
                    "alpn": ["http/1.1"], "resume": True}
    ip = spec("redis+tls://127.0.0.1:6380", tls_ca=str(pem), tls_no_resume=True).load_spec(["127.0.0.1:6380"], "user")
    assert ip.engine_config()["tls"] == {"ca_file": str(pem), "insecure": False, "cert_file": None, "key_file": None,
                                         "sni": None, "alpn": [], "resume": False}
    given = spec("memcached+tls://127.0.0.1:1", tls_sni="cache.example.com").tls
    assert given.sni == "cache.example.com" and given.alpn == ()


def test_plaintext_leaves_tls_out_of_the_engine_configuration():
    """Absent is plaintext (engine/config.rs): a plaintext configuration is what it always was."""
    load = spec("redis://127.0.0.1:6379").load_spec(["127.0.0.1:6379"], "user")
    assert "tls" not in load.engine_config() and json.loads(load.to_json()) == load.engine_config()


@pytest.mark.parametrize(("flags", "words"), [
    ({"tls_insecure": True}, "--tls-insecure with redis://"),
    ({"tls_sni": "x.example"}, "--tls-sni with redis://"),
    ({"tls_no_resume": True}, "--tls-no-resume with redis://"),
])
def test_a_tls_flag_with_a_plaintext_target_is_refused_in_one_line(flags, words):
    with pytest.raises(InputError) as e:
        spec("redis://127.0.0.1:6379", **flags)
    assert words in e.value.problem and "redis+tls://" in e.value.remedy and "\n" not in e.value.line()


def test_a_tls_flag_without_a_target_points_at_serve(pem):
    with pytest.raises(InputError) as e:
        RunSpec.from_flags({"rate": "1k", "duration": "1s", "tls_ca": str(pem)}, None)
    assert "built-in server" in e.value.problem and "serve --tls-cert" in e.value.remedy


def test_files_are_checked_and_named(tmp_path, pem):
    missing = tmp_path / "nope.pem"
    with pytest.raises(InputError) as e:
        spec("https://localhost:8443/", tls_ca=str(missing))
    assert "--tls-ca" in e.value.problem and "nope.pem" in e.value.problem and "does not exist" in e.value.problem
    with pytest.raises(InputError, match="is not a file"):
        spec("https://localhost:8443/", tls_cert=str(tmp_path), tls_key=str(pem))
    locked = tmp_path / "locked.key"
    locked.write_text("x")
    locked.chmod(0)
    try:
        import os
        if os.access(locked, os.R_OK):  # root reads anything: nothing to refuse
            return
        with pytest.raises(InputError, match="not readable"):
            spec("https://localhost:8443/", tls_cert=str(pem), tls_key=str(locked))
    finally:
        locked.chmod(0o600)


def test_a_client_certificate_needs_its_key_and_insecure_no_ca(pem):
    with pytest.raises(InputError, match="--tls-cert without --tls-key"):
        spec("https://localhost:8443/", tls_cert=str(pem))
    with pytest.raises(InputError, match="--tls-key without --tls-cert"):
        spec("https://localhost:8443/", tls_key=str(pem))
    with pytest.raises(InputError, match="nothing is verified"):
        spec("https://localhost:8443/", tls_ca=str(pem), tls_insecure=True)


@pytest.mark.parametrize("name", ["127.0.0.1", "::1", "a b", "host:443", ""])
def test_sni_is_a_dns_name(name):
    with pytest.raises(InputError, match="not a DNS name"):
        spec("https://localhost:8443/", tls_sni=name)


def test_the_spec_round_trips_and_config_records_file_names_only(tmp_path):
    key = tmp_path / "client.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nSECRET-MATERIAL\n-----END PRIVATE KEY-----\n")
    cert = tmp_path / "client.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    rs = spec("https://localhost:8443/", tls_cert=str(cert), tls_key=str(key))
    again = RunSpec.from_json(json.loads(json.dumps(rs.to_json())))
    assert again.tls == rs.tls
    config = json.dumps(rs.config("run"))
    assert str(key) in config and "SECRET-MATERIAL" not in config
    assert rs.config("run")["tls"]["key_file"] == str(key)


def test_a_workload_file_sets_tls_like_a_flag(tmp_path, pem):
    f = tmp_path / "w.toml"
    f.write_text(f'targets = ["redis+tls://127.0.0.1:6380"]\ntls_ca = "{pem}"\ntls_no_resume = true\n')
    rs = RunSpec.from_flags({}, str(f))
    assert rs.tls.ca_file == str(pem) and not rs.tls.resume
    f.write_text('tls_insecure = "yes"\n')
    with pytest.raises(InputError, match="tls_insecure"):
        RunSpec.from_flags({}, str(f))


def test_the_summary_gives_handshake_percentiles_counts_and_trust():
    rng = np.random.default_rng(7)
    times = rng.integers(200_000, 2_000_000, 500).tolist()
    settings = spec("https://localhost:8443/").tls.engine()
    got = tls_summary(settings, {"full": 8, "resumed": 492, "failed": 1, "handshake_ns": times})
    assert got["handshake"]["count"] == 500
    assert got["handshake"]["p50_ns"] == pytest.approx(np.percentile(times, 50))
    assert got["handshake"]["p99_ns"] == pytest.approx(np.percentile(times, 99))
    assert (got["full"], got["resumed"], got["failed"], got["resume"], got["insecure"], got["sni"], got["ca"]) == (
        8, 492, 1, True, False, "localhost", "system")
    assert tls_summary(settings | {"ca_file": "/etc/x/ca.pem"}, None)["ca"] == "ca.pem"
    assert tls_summary(settings | {"insecure": True}, None)["ca"] is None
    none = tls_summary(settings, {"full": 0, "resumed": 0, "failed": 3, "handshake_ns": []})
    assert none["handshake"] == {"count": 0, "p50_ns": None, "p99_ns": None}
    assert tls_summary(None, None) is None


def _with_tls(insecure: bool = False) -> dict:
    doc = copy.deepcopy(json.loads((SCREENS / "run-ok.json").read_text()))
    doc["tls"] = {"handshake": {"count": 40, "p50_ns": 412_000.0, "p99_ns": 1_250_000.0}, "full": 8, "resumed": 32,
                  "failed": 0, "resume": True, "insecure": insecure, "sni": "localhost",
                  "ca": None if insecure else "ca.pem"}
    return doc


def test_the_summary_model_takes_tls_strictly_and_old_summaries_still_load():
    assert Summary.model_validate(_with_tls(), context=STRICT).tls.resumed == 32
    old = json.loads((SCREENS / "run-ok.json").read_text())
    assert "tls" not in old and Summary.model_validate(old).tls is None


def test_the_first_screen_has_one_tls_line(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    print_summary(Summary.model_validate(_with_tls()))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tls:")]
    assert len(lines) == 1
    assert "40 handshakes (8 full, 32 resumed)" in lines[0] and "not in the latency" in lines[0]
    assert "verified against ca.pem" in lines[0] and "SNI localhost" in lines[0]
    print_summary(Summary.model_validate(_with_tls(insecure=True)))
    assert "certificate not verified (--tls-insecure)" in capsys.readouterr().out
    print_summary(Summary.model_validate(json.loads((SCREENS / "run-ok.json").read_text())))
    assert "tls:" not in capsys.readouterr().out


def test_agents_tls_parts_add_their_counts_and_pool_their_times():
    a = {"full": 2, "resumed": 5, "failed": 0, "handshake_ns": [1, 2, 3]}
    b = {"full": 1, "resumed": 1, "failed": 1, "handshake_ns": [4]}
    assert merged_tls([a, None, b]) == {"full": 3, "resumed": 6, "failed": 1, "handshake_ns": [1, 2, 3, 4]}
    assert merged_tls([None, None]) is None


def test_kernel_stamps_over_tls_say_what_they_stamp():
    assert source_note(None, "kernel", True).startswith("Over TLS the send stamp is the write of the request's last "
                                                        "encrypted byte")
    assert source_note("nic: no PHC; kernel software stamps used", "kernel", True).endswith(STAMPS_NOTE)
    assert "encryption comes before that write and is inside the latency" in STAMPS_NOTE
    assert "decryption comes after the receive stamp and is not" in STAMPS_NOTE
    assert source_note(None, "user", True) is None and source_note("x", "kernel", False) == "x"


@pytest.mark.parametrize("command", ["run", "sweep", "load"])
def test_run_sweep_and_load_take_the_tls_flags_beside_the_agents_own(monkeypatch, capsys, command):
    """--tls-ca is the target's now; the agents' CA is --agent-tls-ca only (its old alias is gone)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = tailwise(monkeypatch, capsys, command, "--help")
    assert code == 0
    for flag in ("--tls-ca", "--tls-insecure", "--tls-cert", "--tls-key", "--tls-sni", "--tls-no-resume"):
        assert flag in out, (command, flag)
    assert ("--agent-tls-ca" in out) == (command != "load")


def test_a_tls_flag_with_a_plaintext_target_exits_as_an_input_error(monkeypatch, capsys):
    from tailwise.cli.exits import EXIT_ERROR

    code, _, err = tailwise(monkeypatch, capsys, "run", "redis://127.0.0.1:6379", "--tls-insecure", "-d", "1")
    assert code == EXIT_ERROR and err.count("\n") == 1 and "--tls-insecure with redis://" in err


def test_serve_refuses_half_a_pair_and_tls_on_udp(monkeypatch, capsys, tmp_path, pem):
    code, _, err = tailwise(monkeypatch, capsys, "serve", "--tls-cert", str(pem))
    assert code == 2 and "--tls-cert without --tls-key" in err
    code, _, err = tailwise(monkeypatch, capsys, "serve", "--udp-reflect", "--tls-cert", str(pem), "--tls-key", str(pem))
    assert code == 2 and "UDP function" in err
    code, _, err = tailwise(monkeypatch, capsys, "serve", "--tls-cert", str(tmp_path / "no.pem"), "--tls-key", str(pem))
    assert code == 2 and "no.pem" in err
