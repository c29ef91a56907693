"""Issue 33, item 1: nothing a target's text holds goes into a request unless RFC 3986 allows it
there — refused in one line naming the character and its position, wherever a target is parsed
(the CLI here; an agent's configuration in the engine: tests/e2e/test_agent_server.py) — and
--allow-targets takes ports."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.target import MAX_HOST, MAX_PATH, parse_target

REFUSED = {
    "http://127.0.0.1:8080/x\r\nX-Injected: 1": "has a control character (\\r) at position 23",
    "http://x\r\nX-Injected: 1@127.0.0.1:80/": "has a control character (\\r) at position 8",
    "http://127.0.0.1:8080/a b": "has a space at position 23",
    "http://127.0.0.1:8080/\x00": "has a control character (\\x00) at position 22",
    "http://127.0.0.1:8080/caf\u00e9": "has a non-ASCII character (\\xe9) at position 25",
    "memcached://127.0.0.1:11211\t": "has a control character (\\t) at position 27",
    "http://127.0.0.1:8080/a%zz": "its path has a '%' not followed by two hex digits at position 2",
    "http://127.0.0.1:8080/a\"b": "its path has '\"' at position 2",
    "http://127.0.0.1:8080/" + "p" * MAX_PATH: f"its path is {MAX_PATH + 1:,} characters, over {MAX_PATH:,}",
}


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_a_target_with_what_a_request_may_not_hold_is_refused_in_one_line(text):
    with pytest.raises(InputError) as e:
        parse_target(text)
    problem = e.value.problem
    assert REFUSED[text] in problem
    # The line itself holds no control character: it is printed as escapes.
    assert "\n" not in problem and "\r" not in problem and "\t" not in problem
    assert e.value.remedy


def test_what_rfc_3986_allows_passes_as_written():
    t = parse_target("http://127.0.0.1:8080/a/b-c_d.e~f?q=1&r=%20x;y=(z)*+,:@!$'")
    assert t.path == "/a/b-c_d.e~f?q=1&r=%20x;y=(z)*+,:@!$'"
    assert parse_target("http://[::1]:8080/").netloc == "[::1]:8080"
    assert len(parse_target("http://h:80/" + "p" * (MAX_PATH - 1)).path) == MAX_PATH


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_no_control_character_ever_reaches_a_request(host, path):
    """Whatever a user types, a target the parser accepts holds no control character, space or
    non-ASCII byte in what goes into its requests (the Host header and the request line), and the
    engine's own check (protocol/http.rs) accepts it."""
    for text in (f"http://{host}:80/{path}", f"http://127.0.0.1:80/{path}", f"http://{host}/{path}"):
        try:
            t = parse_target(text)
        except InputError:
            continue
        sent = t.netloc + t.path
        assert all("!" <= c <= "~" for c in sent), repr(sent)
        assert len(t.netloc) <= MAX_HOST and len(t.path) <= MAX_PATH
        _core.check_engine_config(_http_config(t.netloc, t.path))


def _http_config(host: str, path: str) -> str:
    import json

    from tailwise.spec.load import LoadSpec

    config = json.loads(LoadSpec(targets=["127.0.0.1:80"], rate_rps=1000.0, duration_ns=10**9).to_json())
    config["protocol"] = {"scheme": "http", "host": host, "path": path}
    return json.dumps(config)


def test_the_engine_refuses_what_the_parser_would():
    from tailwise.errors import TailwiseError

    with pytest.raises(TailwiseError) as e:
        _core.check_engine_config(_http_config("127.0.0.1:80", "/x\r\nX: 1"))
    assert "path has a control character (0x0d) at position 2" in e.value.problem


# --- --allow-targets with ports ---------------------------------------------------------------

def test_allow_targets_take_ports_and_a_network_without_one_any():
    from tailwise.agents.limits import Allowed

    a = Allowed.parse("10.0.0.0/24:11211")
    assert (str(a), a.low_port, a.high_port) == ("10.0.0.0/24:11211", 11211, 11211)
    assert a.admits(ipaddress.ip_address("10.0.0.7"), 11211) and not a.admits(ipaddress.ip_address("10.0.0.7"), 22)
    r = Allowed.parse("192.168.1.7/32:8000-8099")
    assert r.admits(ipaddress.ip_address("192.168.1.7"), 8050) and not r.admits(ipaddress.ip_address("192.168.1.7"), 8100)
    v6 = Allowed.parse("[fd00::/64]:6379")
    assert str(v6) == "[fd00::/64]:6379" and v6.admits(ipaddress.ip_address("fd00::5"), 6379)
    anyport = Allowed.parse("10.1.0.0/16")
    assert str(anyport) == "10.1.0.0/16" and anyport.admits(ipaddress.ip_address("10.1.2.3"), 22)
    assert str(Allowed.parse("::1/128")) == "::1/128"
    for bad in ("10.0.0.0/24:0", "10.0.0.0/24:99999", "10.0.0.0/24:9-1", "10.0.0.0/24:x", "[fd00::/64]6379", "lan"):
        with pytest.raises(ValueError):
            Allowed.parse(bad)


def test_the_agents_flag_says_what_is_wrong_in_one_line():
    from tailwise.cli.agent import _networks

    with pytest.raises(InputError) as e:
        _networks("10.0.0.0/24:11211,10.0.1.0/24:70000")
    assert "'10.0.1.0/24:70000'" in e.value.problem and "CIDR[:PORT|:LOW-HIGH]" in e.value.remedy
    assert [str(a) for a in _networks("10.0.0.0/24:11211, 10.0.1.0/24")] == ["10.0.0.0/24:11211", "10.0.1.0/24"]
