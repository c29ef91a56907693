"""Issue 21, item 6: `tailwise deploy start|status|stop --ssh` over real SSH, no mocks.

The "remote host" is an asyncssh server in this process on a free 127.0.0.1 port: a host key and a
client key generated here, a known_hosts file written here, SFTP on the real filesystem rooted at a
temporary HOME (as OpenSSH's sftp-server starts in the home directory), and every command run
with /bin/sh here with HOME set to it. So the remote `tailwise` is this machine's
(``--tailwise "<python> -m tailwise"``) and the agent it starts is a real process, checked
through /proc and over gRPC.

* start → the agent answers Health with the token; the token file there is 0600 (its directory
  0700); the token is in no process's command line and not in the command's output; the
  `--agents` value alone on stdout. status says it runs and answers; stop → the process is gone,
  the token and pid files removed; status then says not running; stop again is no error; a second
  start on a running agent's port is refused.
* stop of an agent deaf to SIGTERM: SIGKILL after the bound; a pid file naming a process that is
  not ours, or one that has ended: nothing signalled, status says not running.
* one line naming the host, the problem and the fix: a client key the server refuses, a host key
  not in known_hosts (nothing is started), a port nobody listens on, a `--tailwise` that does not
  exist there; an agent that exits at start (the log's tail shown, nothing left behind).
* start on two hosts of which one fails: all or none, the other's agent is stopped again.

Every command is bounded in time; every agent started is stopped (fixtures with finally).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

import tailwise
from support.cli import run_cli
from support.servers import free_port
from support.tls import write_pair
from tailwise.agents.client import RemoteAgent
from tailwise.agents.wire import ClientTls
from tailwise.errors import TailwiseError

TOKEN = "deploy-test-token-0123456789abcdef"
USER = "tester"
#: Bound on one remote command in the test's SSH server, and on one CLI call.
COMMAND_S = 60.0
CLI_S = 150.0
PYTHONPATH = str(Path(tailwise.__file__).resolve().parents[1])
REMOTE_TAILWISE = f"{sys.executable} -m tailwise"


# --------------------------------------------------------------------------- the SSH server

@dataclass
class SshHost:
    """An SSH server in this process standing for a remote machine."""

    port: int
    home: Path
    host_key: asyncssh.SSHKey
    client_key: Path
    known_hosts: Path

    @property
    def target(self) -> str:
        return f"{USER}@127.0.0.1:{self.port}"

    def known_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"

    def agent_dir(self) -> Path:
        return self.home / ".tailwise"


async def _run_command(process: asyncssh.SSHServerProcess, home: Path) -> None:
    """The client's command with /bin/sh here, HOME the "remote" home; its output and status back."""
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": PYTHONPATH}
    proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", process.command or "", cwd=home, env=env,
                                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), COMMAND_S)
    except asyncio.TimeoutError:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        process.exit(124)
        return
    process.stdout.write(out.decode())
    process.stderr.write(err.decode())
    process.exit(proc.returncode)


class _Loop:
    """An event loop on a thread of its own, for the servers."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def ssh_loop() -> Iterator[_Loop]:
    loop = _Loop()
    try:
        yield loop
    finally:
        loop.close()


def _start_server(loop: _Loop, home: Path, authorized: asyncssh.SSHKey, host_key: asyncssh.SSHKey):
    async def listen():
        return await asyncssh.listen(
            "127.0.0.1", 0, server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(authorized.export_public_key().decode()),
            process_factory=lambda p: _run_command(p, home),
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(home).encode()),
            allow_scp=False, password_auth=False, kbdint_auth=False)

    return loop.run(listen())


def _stop_server(loop: _Loop, server) -> None:
    async def close():
        server.close()
        await server.wait_closed()

    loop.run(close())


def _our_agents(home: Path) -> list[int]:
    """The agents started under ``home`` that still run: by their pid files, checked through /proc."""
    pids = []
    for pidf in (home / ".tailwise").glob("agent-*.pid"):
        text = pidf.read_text().strip()
        token_file = str(pidf.with_suffix(".token"))
        if text.isdigit() and token_file.encode() in _cmdline(int(text)):
            pids.append(int(text))
    return pids


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _gone(pid: int) -> bool:
    """The process has exited (or is a zombie nobody reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


@pytest.fixture
def ssh_host(tmp_path, ssh_loop) -> Iterator[SshHost]:
    """One "remote host"; every agent started under its home is killed at the end, whatever happened."""
    home = tmp_path / "home"
    home.mkdir()
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client = asyncssh.generate_private_key("ssh-ed25519")
    key_file = tmp_path / "id_ed25519"
    client.write_private_key(str(key_file))
    key_file.chmod(0o600)
    server = _start_server(ssh_loop, home, client, host_key)
    host = SshHost(server.sockets[0].getsockname()[1], home, host_key, key_file, tmp_path / "known_hosts")
    host.known_hosts.write_text(host.known_line())
    try:
        yield host
    finally:
        for pid in _our_agents(home):
            os.kill(pid, signal.SIGKILL)
        _stop_server(ssh_loop, server)


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def deploy(verb: str, host: SshHost, *args: str, token: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--token-file", str(token)] if token is not None else []
    r = run_cli("deploy", verb, "--ssh", host.target, "--identity", str(host.client_key),
                "--known-hosts", str(host.known_hosts), *extra, *args, timeout=CLI_S)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def start_args(port: int, *more: str, tls: tuple[Path, Path] | None = None) -> list[str]:
    """A start's flags: TLS with ``tls`` (certificate, key), else --insecure-plaintext."""
    secure = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else ["--insecure-plaintext"]
    return ["--port", str(port), "--tailwise", REMOTE_TAILWISE, *secure, *more]


def one_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stdout, r.stderr)
    return lines[0]


# --------------------------------------------------------------------------- start, status, stop

def test_start_status_stop(ssh_host, token_file, tmp_path):
    port = free_port()
    cert, key = write_pair(tmp_path / "tls")
    r = deploy("start", ssh_host, *start_args(port, tls=(cert, key)), token=token_file)
    assert r.returncode == 0, r.stderr
    # What run needs: the agents and the CA to check them with (the self-signed certificate).
    assert r.stdout == f"--agents 127.0.0.1:{port} --agent-tls-ca {cert}\n", r.stdout
    assert f"{ssh_host.target}: agent 127.0.0.1:{port} answers (pid " in r.stderr, r.stderr
    assert TOKEN not in r.stdout + r.stderr

    # The agent answers Health with the token, over TLS only: idle, this tailwise.
    with pytest.raises(TailwiseError):
        plain = RemoteAgent(f"127.0.0.1:{port}", TOKEN, call_s=5.0)
        try:
            plain.health()
        finally:
            plain.close()
    agent = RemoteAgent(f"127.0.0.1:{port}", TOKEN, ClientTls(ca=cert.read_bytes()))
    try:
        health = agent.health()
    finally:
        agent.close()
    assert health.state == "idle" and health.version == tailwise.__version__

    # Its files on the "remote": the token 0600 in a 0700 directory, the pid that of the process
    # whose command line names the token file, never the token.
    d = ssh_host.agent_dir()
    token_path = d / f"agent-{port}.token"
    assert token_path.read_text().strip() == TOKEN
    assert token_path.stat().st_mode & 0o777 == 0o600 and d.stat().st_mode & 0o777 == 0o700
    # The key material beside it, copied as the token is: 0600, the same bytes.
    tls_files = {d / f"agent-{port}.crt": cert, d / f"agent-{port}.key": key}
    for there, here in tls_files.items():
        assert there.read_bytes() == here.read_bytes() and there.stat().st_mode & 0o777 == 0o600, there
    pid = int((d / f"agent-{port}.pid").read_text())
    assert _our_agents(ssh_host.home) == [pid]
    cmdlines = [_cmdline(int(p.name)) for p in Path("/proc").glob("[0-9]*")]
    assert not [c for c in cmdlines if TOKEN.encode() in c], "the token is on a process's command line"
    assert f"listening on 0.0.0.0:{port} (TLS)" in (d / f"agent-{port}.log").read_text()

    r = deploy("status", ssh_host, "--port", str(port), "--agent-tls-ca", str(cert), token=token_file)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (f"{ssh_host.target}: 127.0.0.1:{port} running (pid {pid}), answers Health: idle, "
                        f"tailwise {tailwise.__version__}\n"), r.stdout

    r = deploy("stop", ssh_host, "--port", str(port))
    assert r.returncode == 0, r.stderr
    assert f"{ssh_host.target}: agent on port {port} stopped (pid {pid}, SIGTERM)" in r.stdout, r.stdout
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid), "the agent still runs after stop"
    assert not token_path.exists() and not (d / f"agent-{port}.pid").exists()
    assert not [f for f in tls_files if f.exists()], "stop leaves no key material behind"

    r = deploy("status", ssh_host, "--port", str(port), "--agent-tls-ca", str(cert), token=token_file)
    assert r.returncode == 2 and r.stdout == f"{ssh_host.target}: 127.0.0.1:{port} not running\n", (r.stdout, r.stderr)
    r = deploy("stop", ssh_host, "--port", str(port))
    assert r.returncode == 0 and "nothing to stop" in r.stdout, (r.stdout, r.stderr)


def test_a_second_start_on_the_same_port_is_refused(ssh_host, token_file):
    port = free_port()
    assert deploy("start", ssh_host, *start_args(port), token=token_file).returncode == 0
    try:
        line = one_line(deploy("start", ssh_host, *start_args(port), token=token_file))
        assert f"{ssh_host.target}: an agent already runs there on port {port}" in line, line
        assert f"tailwise deploy stop --ssh {ssh_host.target} --port {port}" in line, line
    finally:
        assert deploy("stop", ssh_host, "--port", str(port)).returncode == 0


def test_stop_kills_an_agent_deaf_to_sigterm_and_never_a_stranger(ssh_host, token_file):
    """A process of ours (its command line names the token file) that ignores SIGTERM, in its own
    session as deploy starts agents: SIGKILL after the bound, the whole group. A pid file naming a
    process that is not ours (here: this test) or none: nothing is signalled."""
    from tailwise.agents.deploy import TERM_S

    port = free_port()
    d = ssh_host.agent_dir()
    d.mkdir(mode=0o700)
    token_path = d / f"agent-{port}.token"
    token_path.write_text(TOKEN)
    deaf = subprocess.Popen(["/bin/sh", "-c", 'trap "" TERM; while :; do sleep 0.1; done', "deaf", str(token_path)],
                            start_new_session=True)
    try:
        (d / f"agent-{port}.pid").write_text(f"{deaf.pid}\n")
        r = deploy("status", ssh_host, "--port", str(port), token=token_file)
        assert r.returncode == 2 and f"running (pid {deaf.pid}) but not answering Health" in r.stdout, r.stdout
        t0 = time.monotonic()
        r = deploy("stop", ssh_host, "--port", str(port))
        assert r.returncode == 0, r.stderr
        assert f"stopped (pid {deaf.pid}, SIGKILL after {TERM_S:g} s of SIGTERM)" in r.stdout, r.stdout
        assert deaf.wait(5) == -signal.SIGKILL and time.monotonic() - t0 >= TERM_S
        assert not token_path.exists() and not (d / f"agent-{port}.pid").exists()
    finally:
        if deaf.poll() is None:
            os.killpg(deaf.pid, signal.SIGKILL)
            deaf.wait()

    for pid in (os.getpid(), deaf.pid):  # a stranger, then an agent that has ended
        (d / f"agent-{port}.pid").write_text(f"{pid}\n")
        r = deploy("status", ssh_host, "--port", str(port), token=token_file)
        assert r.returncode == 2 and r.stdout == (
            f"{ssh_host.target}: 127.0.0.1:{port} not running (the agent of pid {pid} has ended; its log: "
            f"~/.tailwise/agent-{port}.log there)\n"), r.stdout
        r = deploy("stop", ssh_host, "--port", str(port))
        assert r.returncode == 0 and "nothing to stop" in r.stdout, (r.stdout, r.stderr)
        assert not (d / f"agent-{port}.pid").exists()


# --------------------------------------------------------------------------- one line per failure

def test_a_refused_client_key_is_one_line_naming_the_host(ssh_host, token_file, tmp_path):
    other = tmp_path / "other_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(other))
    other.chmod(0o600)
    r = run_cli("deploy", "start", "--ssh", ssh_host.target, "--identity", str(other), "--known-hosts",
                str(ssh_host.known_hosts), "--token-file", str(token_file), *start_args(free_port()), timeout=CLI_S)
    line = one_line(r)
    assert line.startswith(f"tailwise: {ssh_host.target}: the SSH server refused the key {other} for {USER}"), line
    assert "authorized_keys" in line and "--identity KEY" in line, line
    assert not ssh_host.agent_dir().exists()


def test_an_unknown_host_key_is_refused_with_the_fix(ssh_host, token_file):
    stranger = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    ssh_host.known_hosts.write_text(f"[127.0.0.1]:{ssh_host.port} {stranger}\n")
    line = one_line(deploy("start", ssh_host, *start_args(free_port()), token=token_file))
    assert line.startswith(f"tailwise: {ssh_host.target}: its host key is not in {ssh_host.known_hosts}"), line
    assert f"ssh-keyscan -p {ssh_host.port} 127.0.0.1 >> {ssh_host.known_hosts}" in line, line
    assert not ssh_host.agent_dir().exists(), "something was done on a host whose key is unknown"
    # No known_hosts file at all: refused before connecting, with the fix.
    ssh_host.known_hosts.unlink()
    line = one_line(deploy("status", ssh_host, token=token_file))
    assert f"--known-hosts {ssh_host.known_hosts} does not exist" in line and "record the host's key" in line, line


def test_a_host_nobody_listens_on_is_one_line(ssh_host, token_file):
    port = free_port()
    r = run_cli("deploy", "stop", "--ssh", f"{USER}@127.0.0.1:{port}", "--identity", str(ssh_host.client_key),
                "--known-hosts", str(ssh_host.known_hosts), timeout=CLI_S)
    line = one_line(r)
    assert line == (f"tailwise: {USER}@127.0.0.1:{port}: connection refused on port {port}: start sshd there, or "
                    "name its port: --ssh USER@HOST:PORT"), line


def test_a_missing_tailwise_is_one_line_with_the_fix(ssh_host, token_file):
    r = deploy("start", ssh_host, "--port", str(free_port()), "--tailwise", "/nonexistent/bin/tailwise",
               "--insecure-plaintext", token=token_file)
    line = one_line(r)
    assert line == (f"tailwise: {ssh_host.target}: `/nonexistent/bin/tailwise` not found there: install tailwise "
                    "there or give --tailwise /path/to/tailwise"), line
    assert not ssh_host.agent_dir().exists(), "something was left on a host without tailwise"


def test_an_agent_that_exits_at_start_shows_its_log(ssh_host, token_file):
    port = free_port()
    # Valid here, refused there: no host has CPU 4095 to give.
    r = deploy("start", ssh_host, *start_args(port, "--cpus", "4095"), token=token_file)
    assert r.returncode == 2, (r.stdout, r.stderr)
    first, *tail = r.stderr.strip().splitlines()
    assert first.startswith(f"tailwise: {ssh_host.target}: the agent exited at start (pid "), first
    assert any("--cpus 4095" in line for line in tail) and all(line.startswith("    | ") for line in tail), tail
    assert r.stdout == ""
    d = ssh_host.agent_dir()
    assert not (d / f"agent-{port}.token").exists() and not (d / f"agent-{port}.pid").exists()


def test_start_is_all_or_none(ssh_host, token_file, tmp_path, ssh_loop):
    """Two hosts, the second with a host key known_hosts does not hold: the first's agent is
    stopped again."""
    home2 = tmp_path / "home2"
    home2.mkdir()
    client = asyncssh.import_private_key(ssh_host.client_key.read_text())
    server2 = _start_server(ssh_loop, home2, client, asyncssh.generate_private_key("ssh-ed25519"))
    second = f"{USER}@127.0.0.1:{server2.sockets[0].getsockname()[1]}"
    port = free_port()
    try:
        r = deploy("start", ssh_host, "--ssh", second, *start_args(port), token=token_file)
        assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert any(line.startswith(f"tailwise: {second}: its host key is not in") for line in lines), lines
        assert any(line.startswith(f"tailwise deploy: {ssh_host.target}: stopped again") for line in lines), lines
        assert _our_agents(ssh_host.home) == [] and not (ssh_host.agent_dir() / f"agent-{port}.token").exists()
    finally:
        for pid in _our_agents(home2):
            os.kill(pid, signal.SIGKILL)
        _stop_server(ssh_loop, server2)


def test_mutual_tls_and_no_plaintext_unless_told(ssh_host, token_file, tmp_path):
    """Issue 33: start without TLS or --insecure-plaintext is refused before any host is reached;
    with --tls-client-ca the agents admit only a client certificate from that CA — this machine's
    own checks show one (--agent-tls-cert/--agent-tls-key), status without one gets no answer."""
    port = free_port()
    line = one_line(deploy("start", ssh_host, "--port", str(port), "--tailwise", REMOTE_TAILWISE, token=token_file))
    assert "--tls-cert" in line and "--insecure-plaintext" in line, line
    assert not ssh_host.agent_dir().exists() or not list(ssh_host.agent_dir().glob(f"agent-{port}.*"))
    cert, key = write_pair(tmp_path / "tls")
    client_cert, client_key = write_pair(tmp_path / "client")
    mutual = ["--tls-client-ca", str(client_cert)]
    line = one_line(deploy("start", ssh_host, *start_args(port, *mutual, tls=(cert, key)), token=token_file))
    assert "--agent-tls-cert" in line, line
    client = ["--agent-tls-cert", str(client_cert), "--agent-tls-key", str(client_key)]
    r = deploy("start", ssh_host, *start_args(port, *mutual, *client, tls=(cert, key)), token=token_file)
    try:
        assert r.returncode == 0, r.stderr
        assert r.stdout == (f"--agents 127.0.0.1:{port} --agent-tls-ca {cert} --agent-tls-cert {client_cert} "
                            f"--agent-tls-key {client_key}\n"), r.stdout
        d = ssh_host.agent_dir()
        assert (d / f"agent-{port}.client-ca").read_bytes() == client_cert.read_bytes()
        assert "(TLS, client certificates required)" in (d / f"agent-{port}.log").read_text()
        r = deploy("status", ssh_host, "--port", str(port), "--agent-tls-ca", str(cert), *client, token=token_file)
        assert r.returncode == 0 and "answers Health: idle" in r.stdout, (r.stdout, r.stderr)
        r = deploy("status", ssh_host, "--port", str(port), "--agent-tls-ca", str(cert), token=token_file)
        assert r.returncode == 2 and "answers Health" not in r.stdout, (r.stdout, r.stderr)
    finally:
        assert deploy("stop", ssh_host, "--port", str(port)).returncode == 0
    assert not list(ssh_host.agent_dir().glob(f"agent-{port}.*[!g]")), "only the log stays"
