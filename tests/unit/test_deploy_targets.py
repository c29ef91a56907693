"""`tailwise deploy`'s input, checked before any host is reached: `--ssh USER@HOST[:PORT]` as
agents/deploy.py's SshTarget reads it (and the `--agents` address it makes), the agent's flags as
`tailwise agent` checks them. The SSH side itself: tests/e2e/test_deploy_ssh.py."""

from __future__ import annotations

import pytest

from tailwise.agents.deploy import SshTarget
from tailwise.cli.deploy import _agent_args, _command, _targets
from tailwise.errors import InputError


@pytest.mark.parametrize("text, host, user, port, shown, agent", [
    ("alice@10.1.0.2", "10.1.0.2", "alice", None, "alice@10.1.0.2", "10.1.0.2:7100"),
    ("alice@node3:2222", "node3", "alice", 2222, "alice@node3:2222", "node3:7100"),
    ("node3", "node3", None, None, "node3", "node3:7100"),
    ("bob@[fd00::2]:22", "fd00::2", "bob", 22, "bob@[fd00::2]:22", "[fd00::2]:7100"),
    ("bob@fd00::2", "fd00::2", "bob", None, "bob@fd00::2", "[fd00::2]:7100"),
    ("a.b@c@host", "host", "a.b@c", None, "a.b@c@host", "host:7100"),
])
def test_ssh_targets_parse(text, host, user, port, shown, agent):
    t = SshTarget.parse(text)
    assert (t.host, t.user, t.port) == (host, user, port)
    assert str(t) == shown and t.agent_address(7100) == agent


@pytest.mark.parametrize("text", ["", "alice@", "@host", "alice@host:0", "alice@host:65536", "alice@host:ssh",
                                  "alice@[fd00::2", "alice@[fd00::2]x"])
def test_bad_ssh_targets_say_the_form(text):
    with pytest.raises(InputError, match="is not USER@HOST"):
        SshTarget.parse(text)


def test_hosts_by_repeat_or_comma_each_once():
    assert [str(t) for t in _targets(["a@h1,a@h2", "b@h3:2222"])] == ["a@h1", "a@h2", "b@h3:2222"]
    with pytest.raises(InputError, match="given twice"):
        _targets(["a@h1", "b@h1"])


def test_agent_flags_are_checked_here_and_passed_as_given():
    assert _agent_args("10.1.0.0/16", "500k", 64, "10m", None, "2-5") == [
        "--allow-targets", "10.1.0.0/16", "--max-rate", "500k", "--max-conns", "64", "--max-duration", "10m",
        "--cpus", "2-5"]
    assert _agent_args(None, None, None, None, None, None) == []
    assert _agent_args(None, None, None, None, None, None, "2Gi") == ["--max-memory", "2Gi"]
    for bad in [("10.1.0.0/99", None, None, None, None, None), (None, "fast", None, None, None, None),
                (None, None, 0, None, None, None), (None, None, None, None, "10ms", None),
                (None, None, None, None, None, "two"), (None, None, None, None, None, None, "64Mi")]:
        with pytest.raises(InputError):
            _agent_args(*bad)


def test_the_remote_command_splits_as_a_shell_would():
    assert _command("/opt/tw/bin/python3 -m tailwise") == ["/opt/tw/bin/python3", "-m", "tailwise"]
    for bad in ["", "'unclosed"]:
        with pytest.raises(InputError, match="--tailwise"):
            _command(bad)
