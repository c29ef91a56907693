"""Issue 36, item 1: HTTP requests as users write them — a requests file in vegeta's targets format
(spec/requests.py), ``-H`` headers, body files — parsed into what the engine's configuration lists,
and checked by the engine's own rules (protocol/http.rs, ``Requests::new``) before anything runs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.requests import HttpRequest, check_requests, draw, parse_header, parse_requests_file


def _file(tmp_path, text: str | bytes, name: str = "targets.txt"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(p)


def test_a_vegeta_targets_file_reads_as_its_requests(tmp_path):
    (tmp_path / "bodies").mkdir()
    (tmp_path / "bodies" / "thing.json").write_bytes(b'{"a": 1}\n')
    (tmp_path / "raw.bin").write_bytes(b"\x00\xff\r\n")
    path = _file(tmp_path, (
        "# vegeta's own example, with tailwise's weights\n"
        "GET http://goku:9090/path/to/dragon?item=ball\n"
        "X-Account-ID: 8675309\n"
        "\n"
        "# weight: 3\n"
        "DELETE http://goku:9090/path/to/remove\n"
        "Confirmation-Token: 90215\n"
        "Authorization :  Token DEADBEEF \t\n"
        "Authorization: second\n"
        "\n"
        "\n"
        "POST http://goku:9090/things\r\n"
        "@bodies/thing.json\r\n"
        "PATCH http://goku:9090/thing/71988591\n"
        "@raw.bin\n"
        "HEAD http://goku:9090/\n"
        "GET http://goku:9090/last"
    ))
    got = parse_requests_file(path)
    assert {t.netloc for t, _ in got} == {"goku:9090"}
    reqs = [r for _, r in got]
    assert [(r.method, r.path, r.weight) for r in reqs] == [
        ("GET", "/path/to/dragon?item=ball", 1), ("DELETE", "/path/to/remove", 3), ("POST", "/things", 1),
        ("PATCH", "/thing/71988591", 1), ("HEAD", "/", 1), ("GET", "/last", 1)]
    assert reqs[0].headers == (("X-Account-ID", "8675309"),)
    # Trimmed as vegeta trims them; a name may repeat, in its order.
    assert reqs[1].headers == (("Confirmation-Token", "90215"), ("Authorization", "Token DEADBEEF"),
                               ("Authorization", "second"))
    assert reqs[2].body == b'{"a": 1}\n' and reqs[3].body == b"\x00\xff\r\n"
    assert reqs[1].origin == f"{path}:6"
    assert draw(reqs) == "weight" and draw([reqs[0], reqs[2]]) == "turn"
    # The engine's form: a UTF-8 body as text, another as its bytes; the engine takes them.
    assert reqs[2].spec() == {"method": "POST", "path": "/things", "body": '{"a": 1}\n'}
    assert reqs[3].spec()["body"] == [0, 255, 13, 10]
    assert reqs[1].spec()["weight"] == 3
    check_requests(reqs, "goku:9090")
    engine = json.loads(_core.check_protocol(json.dumps(
        {"scheme": "http", "host": "goku:9090", "requests": [r.spec() for r in reqs], "draw": draw(reqs)})))
    assert engine["requests"] == [r.spec() for r in reqs] and engine["draw"] == "weight"


@pytest.mark.parametrize(("text", "problem"), [
    ("", "holds no request"),
    ("# only a comment\n\n", "holds no request"),
    ("GET\n", ":1: 'GET' is not a request line 'METHOD URL'"),
    ("GET http://h:80/\nNoColon\n", ":2: header 'NoColon' is not 'Name: value'"),
    ("GET http://h:80/\n: value\n", ":2: header ': value' is not 'Name: value'"),
    ("GET memcached://h:11211\n", ":1: 'memcached://h:11211' is not an http:// URL"),
    ("GET http://h:80/a b\n", ":1: target 'http://h:80/a b' has a space at position 13"),
    ("GET http://h:80/\n@body\nX: 1\n", ":3: 'X: 1' after the body file of the request above"),
    ("GET http://h:80/\n@missing\n", ":2: cannot read body file"),
    ("GET http://h:80/\n@a\rb\n", ":2: body file name 'a\\rb' has a control character (\\r) at position 1"),
    ("# weight: 0\nGET http://h:80/\n", ":1: weight '0' is not a whole number of 1 or more"),
    ("# weight: x\nGET http://h:80/\n", ":1: weight 'x' is not a whole number"),
    ("# weight: 2\n# weight: 3\nGET http://h:80/\n", ":2: a second weight for one request"),
    ("GET http://h:80/\n# weight: 2\n", ":2: a weight with no request line after it"),
    (b"GET http://h:80/\nX: \xff\n", "not UTF-8 text (byte 20)"),
])
def test_what_is_not_a_requests_file_is_refused_naming_the_line(tmp_path, text, problem):
    (tmp_path / "body").write_bytes(b"x")
    path = _file(tmp_path, text)
    with pytest.raises(InputError) as e:
        parse_requests_file(path)
    assert problem in e.value.problem
    assert e.value.remedy


def test_a_missing_requests_file_is_refused():
    with pytest.raises(InputError, match="cannot read requests file /nonexistent/t.txt"):
        parse_requests_file("/nonexistent/t.txt")


def test_headers_are_name_colon_value_trimmed():
    assert parse_header("Content-Type: application/json", "-H") == ("Content-Type", "application/json")
    assert parse_header("X-Empty:", "-H") == ("X-Empty", "")
    assert parse_header("X-Url: http://a:1/b", "-H") == ("X-Url", "http://a:1/b")
    with pytest.raises(InputError, match="-H: header 'X-No-Colon' is not 'Name: value'"):
        parse_header("X-No-Colon", "-H")


@pytest.mark.parametrize(("request_", "problem"), [
    (HttpRequest(headers=(("X-A", "a\r\nX-Injected: 1"),)), "requests[1].headers[0] (X-A): value has CR (0x0d) at position 1"),
    (HttpRequest(headers=(("X-A", "a\nb"),)), "value has LF (0x0a) at position 1"),
    (HttpRequest(headers=(("X-A", "a\0b"),)), "value has NUL (0x00) at position 1"),
    (HttpRequest(headers=(("X A", "1"),)), "requests[1].headers[0]: name has SP (0x20) at position 1"),
    (HttpRequest(method="GET\r\n"), "requests[1]: method has CR (0x0d) at position 3"),
    (HttpRequest(path="/a\r\nX: 1"), "requests[1]: path has a control character (0x0d) at position 2"),
    (HttpRequest(headers=(("Content-Length", "3"),)), "Content-Length is tailwise's to send"),
    (HttpRequest(headers=(("Expect", "100-continue"),)), "Expect is tailwise's to send"),
])
def test_what_rfc_9110_refuses_is_refused_by_the_engines_rules_naming_where_it_was_written(request_, problem):
    ok = HttpRequest(origin="targets.txt:1")
    bad = dataclasses.replace(request_, origin="targets.txt:5")
    with pytest.raises(InputError) as e:
        check_requests([ok, bad], "h:80")
    assert e.value.problem.startswith("targets.txt:5: protocol 'http': ")
    assert problem in e.value.problem
    assert e.value.remedy


def _spec(**given):
    from tailwise.spec.runspec import RunSpec
    from tailwise.spec.workload import DEFAULTS

    return RunSpec.from_flags({name: None for name in DEFAULTS} | {"rate": "1k", "duration": "1"} | given, None)


def test_the_flags_make_one_request_on_the_targets_path_and_reach_the_engine_configuration(tmp_path):
    from tailwise.spec.runspec import RunSpec

    (tmp_path / "b.bin").write_bytes(b"\x01\x02")
    url = "http://127.0.0.1:8080/api?v=1"
    rs = _spec(targets=[url], method="POST", header=["X-A: 1", "Content-Type:text/plain"], body="hi")
    proto = rs.load_spec(["127.0.0.1:8080"], "user").protocol
    assert proto == {"scheme": "http", "host": "127.0.0.1:8080", "requests": [
        {"method": "POST", "path": "/api?v=1", "headers": [["X-A", "1"], ["Content-Type", "text/plain"]], "body": "hi"}]}
    assert json.loads(_core.check_engine_config(rs.load_spec(["127.0.0.1:8080"], "user").to_json()))["protocol"] == proto
    # The settings parse back to the same requests (the summary's config.spec; sweep --resume).
    assert RunSpec.from_json(rs.to_json()).requests == rs.requests
    put = _spec(targets=[url], method="PUT", body_file=str(tmp_path / "b.bin")).requests
    assert put == (HttpRequest("PUT", "/api?v=1", (), b"\x01\x02"),)
    # Without them: GET path, the configuration as before.
    plain = _spec(targets=[url]).load_spec(["127.0.0.1:8080"], "user").protocol
    assert plain == {"scheme": "http", "host": "127.0.0.1:8080", "path": "/api?v=1"}


def test_a_requests_file_gives_the_requests_and_without_a_target_the_target(tmp_path):
    path = _file(tmp_path, "# weight: 4\nGET http://127.0.0.1:8080/a\n\nPOST http://127.0.0.1:8080/b\n@body\n")
    (tmp_path / "body").write_bytes(b"x=1")
    rs = _spec(requests_file=path, header=["X-Run: 7"])
    assert [t.url for t in rs.targets] == ["http://127.0.0.1:8080/a"] and rs.scheme == "http"
    assert [(r.method, r.path, r.headers, r.body, r.weight) for r in rs.requests] == [
        ("GET", "/a", (("X-Run", "7"),), b"", 4), ("POST", "/b", (("X-Run", "7"),), b"x=1", 1)]
    proto = rs.load_spec(["127.0.0.1:8080"], "user").protocol
    assert proto["draw"] == "weight" and [r["path"] for r in proto["requests"]] == ["/a", "/b"]
    # With a TARGET: the URLs name it.
    assert len(_spec(targets=["http://127.0.0.1:8080/"], requests_file=path).requests) == 2


@pytest.mark.parametrize(("given", "problem"), [
    ({"targets": ["memcached://127.0.0.1:11211"], "method": "POST"}, "--method does not apply to memcached://"),
    ({"header": ["X: 1"]}, "--header needs an http://HOST:PORT target"),
    ({"targets": ["http://h:80/"], "body": "a", "body_file": "f"}, "--body and --body-file together"),
    ({"targets": ["http://h:80/"], "requests_file": "REQ", "method": "PUT"}, "--requests-file with --method"),
    ({"targets": ["http://other:80/"], "requests_file": "REQ"}, "its URLs name 127.0.0.1:8080, which is not a target (other:80)"),
    ({"requests_file": "TWO"}, "its URLs name 2 servers (127.0.0.1:8080, 127.0.0.1:8081)"),
    ({"targets": ["http://h:80/"], "header": ["X-A: a\x0db"]},
     "the command line: protocol 'http': requests[0].headers[0] (X-A): value has CR (0x0d) at position 1"),
    ({"targets": ["http://h:80/"], "method": "GE T"}, "requests[0]: method has SP (0x20) at position 2"),
    ({"targets": ["http://h:80/"], "header": ["NoColon"]}, "--header: header 'NoColon' is not 'Name: value'"),
])
def test_the_http_flags_are_refused_in_one_line_where_they_cannot_apply(tmp_path, given, problem):
    files = {"REQ": "GET http://127.0.0.1:8080/\n", "TWO": "GET http://127.0.0.1:8080/\n\nGET http://127.0.0.1:8081/\n"}
    given = {k: _file(tmp_path, files[v]) if k == "requests_file" else v for k, v in given.items()}
    with pytest.raises(InputError) as e:
        _spec(**given)
    assert problem in e.value.problem, e.value.problem
    assert e.value.remedy
