"""redis://[[USER]:PASSWORD@]HOST:PORT[/DB]: the URL's parts as redis-cli -u reads them, the password
from --redis-password-file or TAILWISE_REDIS_PASSWORD when the URL gives none (URL > file >
environment), and the password never in a repr, a message, a written spec or a shown URL."""

from __future__ import annotations

import json

import pytest

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.load import LoadSpec, redacted
from tailwise.spec.runspec import RunSpec
from tailwise.spec.target import (PASSWORD_ENV, Target, command_line, parse_target, parse_targets, redact,
                                  with_password)

SECRET = "s3cr:t@x/y"
ENCODED = "s3cr%3At%40x%2Fy"


@pytest.fixture(autouse=True)
def no_env_password(monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)


@pytest.mark.parametrize("url,user,password,db,shown", [
    ("redis://h:1", None, None, None, "redis://h:1"),
    (f"redis://:{ENCODED}@h:1/3", None, SECRET, 3, "redis://:***@h:1/3"),
    (f"redis://{ENCODED}@h:1", None, SECRET, None, "redis://:***@h:1"),  # no colon: the password (redis-cli)
    (f"redis://app:{ENCODED}@h:1/0", "app", SECRET, 0, "redis://app:***@h:1/0"),
    ("redis://app:@h:1/", "app", None, None, "redis://app:***@h:1"),  # the password from elsewhere
    ("redis://:***@h:1/15", None, None, 15, "redis://h:1/15"),  # as written: from elsewhere
    ("redis://h:1/123456789012", None, None, 123456789012, "redis://h:1/123456789012"),  # the server decides
])
def test_the_parts_of_a_redis_url(url, user, password, db, shown):
    t = parse_target(url)
    assert (t.user, t.password, t.db) == (user, password, db)
    assert t.url == shown
    assert SECRET not in repr(t) and "s3cr" not in repr(t)


@pytest.mark.parametrize("url,says", [
    ("redis://h:1/x", "'/x' is not a database number"),
    ("redis://h:1/-1", "'/-1' is not a database number"),
    (f"redis://:{ENCODED}@h:1/3/4", "is not a database number"),
    (f"memcached://u:{ENCODED}@h:1", "has a user or password, which memcached:// does not use"),
    (f"http://u:{ENCODED}@h:1/", "has a user or password"),
    (f"redis://:{ENCODED}@h", "names no port"),
    (f"redis://:s3cr\nt@h:1", "has a control character"),
])
def test_a_bad_url_is_refused_and_the_message_hides_the_password(url, says):
    with pytest.raises(InputError) as e:
        parse_target(url)
    text = e.value.line()
    assert says in text, text
    assert "s3cr" not in text, text


def test_redact_and_the_command_line():
    assert redact(f"redis://app:{ENCODED}@h:1/2") == "redis://app:***@h:1/2"
    assert redact(f"redis://{ENCODED}@h:1") == "redis://:***@h:1"
    assert redact("memcached://h:1") == "memcached://h:1" and redact("--rate") == "--rate"
    # The user ends at the first colon; a password may hold more, and unencoded / ? # in a redis URL.
    assert redact("redis://app:a:b@h:1") == "redis://app:***@h:1"
    assert redact("redis://:pa/ss?x#y@h:1/2") == "redis://:***@h:1/2"
    assert redact("http://h:1/a@b") == "http://h:1/a@b"  # an @ in a path is no userinfo
    for malformed in ("redis://:pa/ss@h:1", "redis://u:pa?ss@h:1", "redis://u:pa:x/ss@h:1/2", "redis://:p[a@h:1",
                      "redis://u:12/pa@h:1", "redis://u:12?pa@h:1", "redis://u:12#pa@h:1"):
        with pytest.raises(InputError) as e:
            parse_target(malformed)
        assert "pa" not in e.value.problem and "percent-encode" in e.value.remedy, e.value.line()
    line = command_line(["run", f"redis://:{ENCODED}@h:1", "--rate", "1k"])
    assert line == "tailwise run 'redis://:***@h:1' --rate 1k"


def test_the_url_then_the_file_then_the_environment(tmp_path, monkeypatch):
    f = tmp_path / "pass"
    f.write_text("from-file\n")
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    url, bare = parse_target(f"redis://:{ENCODED}@h:1"), parse_target("redis://h:1")
    assert with_password([url], str(f))[0].password == SECRET
    assert with_password([bare], str(f))[0].password == "from-file"
    assert with_password([bare], None)[0].password == "from-env"
    monkeypatch.delenv(PASSWORD_ENV)
    assert with_password([bare], None)[0].password is None  # no AUTH
    with pytest.raises(InputError, match="names user 'app' but no password"):
        with_password([parse_target("redis://app:@h:1")], None)
    with pytest.raises(InputError, match="does not apply to memcached://"):
        with_password([parse_target("memcached://h:1")], str(f))


@pytest.mark.parametrize("text,says", [("", "is empty"), ("a\nb\n", "more than one line"), (None, "cannot read")])
def test_a_password_file_that_cannot_be_used_is_refused(tmp_path, text, says):
    f = tmp_path / "pass"
    if text is not None:
        f.write_text(text)
    with pytest.raises(InputError, match=says):
        with_password([parse_target("redis://h:1")], str(f))


def test_targets_with_different_credentials_are_refused():
    with pytest.raises(InputError, match="differ in user, password or database"):
        parse_targets(["redis://:a@h:1/1", "redis://:b@h:2/1"])


def test_the_spec_carries_the_password_to_the_engine_only():
    url = f"redis://app:{ENCODED}@127.0.0.1:6379/3"
    rs = RunSpec.from_flags({"targets": [url], "duration": "1s"}, None)
    assert "s3cr" not in repr(rs)
    assert rs.to_json()["targets"] == ["redis://app:***@127.0.0.1:6379/3"]
    cfg = rs.config("run")
    assert "s3cr" not in json.dumps(cfg) and cfg["target"] == "redis://app:***@127.0.0.1:6379/3"
    spec = rs.load_spec(["127.0.0.1:6379"], "user")
    assert spec.protocol == {"scheme": "redis", "auth": {"user": "app", "password": SECRET}, "db": 3}
    assert "s3cr" not in repr(spec) and "s3cr" not in repr(LoadSpec.from_engine_config(spec.engine_config()))
    canonical = json.loads(_core.check_engine_config(spec.to_json()))
    assert canonical["protocol"] == {"scheme": "redis", "auth": {"user": "app", "password": SECRET}, "db": 3}
    assert redacted(canonical)["protocol"]["auth"] == {"user": "app", "password": "***"}


def test_a_written_spec_runs_again_with_the_password_from_elsewhere(tmp_path, monkeypatch):
    rs = RunSpec.from_flags({"targets": [f"redis://:{ENCODED}@127.0.0.1:6379"], "duration": "1s"}, None)
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    again = RunSpec.from_json(rs.to_json())
    assert again.targets[0].password == "from-env"
    # In this process (a sweep's next point): the settings as given, the URL's password kept.
    assert RunSpec.parse(rs.settings | {"rate": "2k"}).targets[0].password == SECRET


def test_other_protocols_keep_their_configuration():
    t = Target("redis", "h", 1)
    assert t.protocol_auth() == {}
    assert parse_target("memcached://h:1").url == "memcached://h:1"
