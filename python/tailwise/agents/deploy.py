"""`tailwise deploy --ssh`: agents started on bare machines over SSH (asyncssh), checked, stopped.

Each host is handled on its own connection, all of them at once (asyncio.gather), each bounded in
time. What a host leaves behind lives in ``~/.tailwise/`` of the SSH user there: the token
(``agent-PORT.token``, mode 0600, written over SFTP: never on a command line), the TLS key material
when given (``agent-PORT.crt``, ``.key``, ``.client-ca``, 0600 the same way), the agent's output
(``agent-PORT.log``) and its process id (``agent-PORT.pid``). A process is taken for the agent only
while its command line names that token file, so a reused pid is never signalled.

Nothing is printed here: every host's outcome is a typed result, or a ``DeployError`` naming the
host, the problem and the fix (render/deploy.py says them; cli/deploy.py is the command).
"""

from __future__ import annotations

import asyncio
import shlex
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncssh

from tailwise.agents.wire import ClientTls
from tailwise.errors import InputError, TailwiseError
from tailwise.spec.fleet import AGENT_PORT

#: The directory under the SSH user's home that holds an agent's files (SFTP paths are relative to
#: the home directory, as OpenSSH's sftp-server starts there).
AGENT_DIR = ".tailwise"
DEFAULT_PORT = AGENT_PORT
#: Bounds, in seconds: the SSH handshake and login; one remote command; the agent answering Health
#: after it was started; SIGTERM before SIGKILL; one host's whole start, stop or status.
CONNECT_S = 15.0
COMMAND_S = 20.0
READY_S = 30.0
TERM_S = 10.0
HOST_S = 120.0
#: Lines of the agent's log shown when it failed to start.
LOG_LINES = 20

# The remote scripts' exit statuses (their own, chosen above anything sh or tailwise returns but 126/127).
_ALREADY, _NO_TAILWISE, _NO_DIR, _KILLED, _NOT_RUNNING, _STALE = 10, 11, 12, 13, 14, 15


class DeployError(TailwiseError):
    """A host where an agent could not be started, stopped or asked: the host, the problem, the fix."""

    def __init__(self, problem: str, remedy: str = "", log_tail: str = ""):
        super().__init__(problem, remedy)
        #: The end of the agent's own output, when it was started and failed.
        self.log_tail = log_tail


class KeyRefused(DeployError):
    """The SSH server refused every key offered."""


class HostKeyUnknown(DeployError):
    """The host's key is not in the known-hosts file, or differs from it."""


class Unreachable(DeployError):
    """No SSH connection: refused, unresolved, timed out, ended."""


class TailwiseMissing(DeployError):
    """The remote `tailwise` (or --tailwise CMD) does not run there."""


class AlreadyRunning(DeployError):
    """An agent started by deploy already runs there on that port."""


class AgentFailed(DeployError):
    """The agent was started but exited, or did not answer Health in time."""


@dataclass(frozen=True)
class SshTarget:
    """``[USER@]HOST[:PORT]``: a host to reach over SSH (an IPv6 address in brackets with a port)."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> SshTarget:
        user, at, rest = text.rpartition("@")
        host, port = rest, None
        if rest.startswith("["):
            host, close, tail = rest[1:].partition("]")
            if not close or (tail and not tail.startswith(":")):
                host = ""
            port = tail[1:] if tail else None
        elif rest.count(":") == 1:
            host, _, port = rest.partition(":")
        if not host or (at and not user) or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
            raise InputError(f"--ssh {text} is not USER@HOST[:PORT]",
                             "write e.g. --ssh alice@10.1.0.2, --ssh alice@node3:2222 or --ssh alice@[fd00::2]:22")
        return cls(host, user or None, int(port) if port is not None else None)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and self.port is not None else self.host
        return f"{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port is not None else ''}"

    def agent_address(self, port: int) -> str:
        """HOST:PORT of the agent there, as `run --agents` takes it."""
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"


@dataclass(frozen=True)
class SshOptions:
    """How to log in: the key (None: ssh's own keys and agent), the known hosts file, bounds."""

    known_hosts: str
    identity: str | None = None
    connect_s: float = CONNECT_S
    host_s: float = HOST_S


#: The TLS files an agent is given, by the flag that names them and their suffix there.
TLS_FILES = {"--tls-cert": "crt", "--tls-key": "key", "--tls-client-ca": "client-ca"}
#: Their paths in a host's scripts (``_prelude``'s variables), for removal.
_TLS_PATHS = " ".join(f'"$d/agent-$p.{suffix}"' for suffix in TLS_FILES.values())


@dataclass(frozen=True)
class AgentLaunch:
    """What to start on each host: the agent's port, its command, and its other flags."""

    port: int = DEFAULT_PORT
    tailwise: Sequence[str] = ("tailwise",)
    #: Further `tailwise agent` flags and their values, as given (--allow-targets, --max-rate …).
    args: Sequence[str] = ()
    ready_s: float = READY_S
    #: The agent's TLS files' contents by their flag (TLS_FILES), copied as the token is; none:
    #: the agent is started with --insecure-plaintext.
    tls_files: dict[str, bytes] = field(default_factory=dict)
    #: How this machine asks the started agents Health (their CA, and a client certificate).
    tls: ClientTls | None = None


@dataclass(frozen=True)
class Started:
    target: SshTarget
    address: str
    pid: int
    version: str
    hostname: str


@dataclass(frozen=True)
class Stopped:
    target: SshTarget
    #: None: no agent of ours ran on that port.
    pid: int | None
    killed: bool = False


@dataclass(frozen=True)
class Status:
    target: SshTarget
    address: str
    pid: int | None
    #: A pid file whose process has ended (the agent exited on its own, or the host rebooted).
    stale: bool = False
    #: The agent's Health answer: its state (idle, configured, running, finished), version, CPUs.
    state: str | None = None
    version: str | None = None
    problem: TailwiseError | None = None


@dataclass
class StartOutcome:
    """All hosts started, or none: when one fails, the others' agents are stopped again."""

    started: list[Started] = field(default_factory=list)
    failed: list[DeployError] = field(default_factory=list)
    rolled_back: list[Stopped | DeployError] = field(default_factory=list)


# --------------------------------------------------------------------------- SSH and its failures

def _ssh_error(e: BaseException, target: SshTarget, ssh: SshOptions) -> DeployError:
    """An SSH failure as one line: the host, what happened, what to do."""
    host, port = target.host, target.port or 22
    if isinstance(e, asyncssh.HostKeyNotVerifiable):
        return HostKeyUnknown(
            f"{target}: its host key is not in {ssh.known_hosts}, or differs from the one recorded there",
            f"check the key's fingerprint with the host's owner, then record it (ssh -p {port} {host} once, or "
            f"ssh-keyscan -p {port} {host} >> {ssh.known_hosts}), or give --known-hosts FILE")
    if isinstance(e, asyncssh.PermissionDenied):
        who = target.user or "the login user"
        keys = f"the key {ssh.identity}" if ssh.identity else "every key offered (ssh-agent, ~/.ssh/id_*)"
        return KeyRefused(f"{target}: the SSH server refused {keys} for {who}",
                          f"add the public key to {who}'s ~/.ssh/authorized_keys there (ssh-copy-id), or give "
                          "--identity KEY")
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return Unreachable(f"{target}: no answer within {ssh.connect_s:g} s",
                           f"check that {host} is up and its port {port} open to this machine")
    if isinstance(e, ConnectionRefusedError):
        return Unreachable(f"{target}: connection refused on port {port}",
                           "start sshd there, or name its port: --ssh USER@HOST:PORT")
    if isinstance(e, socket.gaierror):
        return Unreachable(f"{target}: cannot resolve {host} ({e.strerror})", "check the name, or give its address")
    if isinstance(e, asyncssh.DisconnectError):
        return Unreachable(f"{target}: the SSH connection ended ({e.reason})",
                           f"check that {host} is up and its port {port} open to this machine, and see sshd's log there")
    if isinstance(e, asyncssh.ChannelOpenError):
        return Unreachable(f"{target}: the SSH server refused a session ({e.reason})",
                           "allow sessions (and the sftp subsystem) for this user in sshd_config")
    if isinstance(e, OSError):
        return Unreachable(f"{target}: cannot connect ({e.strerror or e.__class__.__name__})",
                           f"check that {host} is up and its port {port} open to this machine")
    return Unreachable(f"{target}: SSH failed ({e.__class__.__name__}: {e})", "see sshd's log there")


async def _connect(target: SshTarget, ssh: SshOptions) -> asyncssh.SSHClientConnection:
    options: dict[str, Any] = {"known_hosts": ssh.known_hosts, "connect_timeout": ssh.connect_s,
                               "login_timeout": ssh.connect_s, "preferred_auth": "publickey"}
    if target.port is not None:
        options["port"] = target.port
    if target.user:
        options["username"] = target.user
    if ssh.identity:
        # The key given, and only it (as ssh's IdentitiesOnly): not whatever ssh-agent holds.
        options.update(client_keys=[ssh.identity], agent_path=None)
    try:
        return await asyncssh.connect(target.host, **options)
    except (asyncssh.Error, OSError, asyncio.TimeoutError) as e:
        raise _ssh_error(e, target, ssh) from None


class _Host:
    """One host's connection and the scripts run on it (always through ``sh``: the login shell may
    be any)."""

    def __init__(self, conn: asyncssh.SSHClientConnection, target: SshTarget, ssh: SshOptions, port: int):
        self.conn, self.target, self.ssh, self.port = conn, target, ssh, port

    async def sh(self, body: str, timeout: float = COMMAND_S) -> asyncssh.SSHCompletedProcess:
        script = _prelude(self.port) + body
        try:
            return await self.conn.run("sh -c " + shlex.quote(script), check=False, timeout=timeout)
        except asyncssh.TimeoutError:
            raise Unreachable(f"{self.target}: a command there did not finish within {timeout:g} s",
                              f"check the host's load, and the agent's files there: {self.files()}") from None
        except (asyncssh.Error, OSError, asyncio.TimeoutError) as e:
            raise _ssh_error(e, self.target, self.ssh) from None

    def files(self) -> str:
        return f"~/{AGENT_DIR}/agent-{self.port}.{{token,pid,log,crt,key,client-ca}}"


def _prelude(port: int) -> str:
    """Every script's start: the agent's files, its pid, and ``ours``: whether that pid is still
    the agent we started (alive, and its command line names our token file; /proc where there is
    one, as slim systems lack ps)."""
    return (f'd="$HOME/{AGENT_DIR}"; p={port}; pidf="$d/agent-$p.pid"; tok="$d/agent-$p.token"; log="$d/agent-$p.log"\n'

            'pid=$(cat "$pidf" 2>/dev/null); case "$pid" in *[!0-9]*) pid= ;; esac\n'
            'args() { if [ -r "/proc/$pid/cmdline" ]; then tr "\\000" " " <"/proc/$pid/cmdline"; '
            'else ps -o args= -p "$pid"; fi; }\n'
            'ours() { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && args 2>/dev/null | grep -qF -- "$tok"; }\n')


T = TypeVar("T")


async def _on_host(target: SshTarget, ssh: SshOptions, port: int, what: Callable[[_Host], Awaitable[T]]) -> T:
    """``what`` on a connection to ``target``, bounded by ``ssh.host_s``; the connection closed after."""

    async def run() -> T:
        conn = await _connect(target, ssh)
        try:
            return await what(_Host(conn, target, ssh, port))
        finally:
            conn.close()

    try:
        return await asyncio.wait_for(run(), ssh.host_s)
    except asyncio.TimeoutError:
        raise Unreachable(f"{target}: not done within {ssh.host_s:g} s",
                          f"check the host's load and the network; the agent's files there: ~/{AGENT_DIR}/agent-{port}.*"
                          ) from None


async def _each(targets: Sequence[SshTarget], one: Callable[[SshTarget], Awaitable[T]]) -> list[T | DeployError]:
    """``one`` on every host at once; a host's DeployError is its result, anything else raises."""
    results = await asyncio.gather(*(one(t) for t in targets), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, DeployError):
            raise r
    return list(results)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- start

def _quoted(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _last(r: asyncssh.SSHCompletedProcess) -> str:
    """A script's answer: its last line on stdout (a login shell's rc files may print before it)."""
    lines = str(r.stdout or "").split("\n")
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _said(r: asyncssh.SSHCompletedProcess) -> str:
    """What a script said on stderr, on one line."""
    return " ".join(str(r.stderr or "").split())


async def _check(h: _Host, tailwise: Sequence[str]) -> None:
    """No agent of ours on the port, the remote tailwise runs (`--version`), ~/.tailwise is 0700."""
    r = await h.sh(f'if ours; then echo "$pid"; exit {_ALREADY}; fi\n'
                   f'out=$({_quoted(tailwise)} --version 2>&1); rc=$?\n'
                   f'if [ $rc -ne 0 ]; then echo $rc; printf "%s\\n" "$out" | tail -n 2 >&2; exit {_NO_TAILWISE}; fi\n'
                   f'(umask 077; mkdir -p "$d") && chmod 700 "$d" || exit {_NO_DIR}\n')
    cmd, fix = " ".join(tailwise), "install tailwise there or give --tailwise /path/to/tailwise"
    if r.exit_status == _ALREADY:
        raise AlreadyRunning(f"{h.target}: an agent already runs there on port {h.port} (pid {_last(r)})",
                             f"stop it first (tailwise deploy stop --ssh {h.target} --port {h.port}), or use another "
                             "--port")
    if r.exit_status == _NO_TAILWISE:
        rc, said = int(_last(r)) if _last(r).isdigit() else -1, _said(r)
        problem = (f"`{cmd}` not found there" if rc in (126, 127)
                   else f"`{cmd} --version` failed there (exit {rc}{': ' + said if said else ''})")
        raise TailwiseMissing(f"{h.target}: {problem}", fix)
    if r.exit_status == _NO_DIR:
        raise DeployError(f"{h.target}: cannot make ~/{AGENT_DIR} there ({_said(r)})",
                          "check the home directory's owner and free space")
    if r.exit_status != 0:
        raise DeployError(f"{h.target}: the checks failed (exit {r.exit_status}: {_said(r)})",
                          "run `sh` there by hand and look")


async def _put_secrets(h: _Host, token: str, tls_files: dict[str, bytes]) -> None:
    """The token into ~/.tailwise/agent-PORT.token and the TLS files beside it, each created 0600
    (never on a command line: the agent refuses a key others may read, as ssh does)."""
    files = {"token": (token + "\n").encode(), **{TLS_FILES[flag]: data for flag, data in tls_files.items()}}
    path = ""
    try:
        async with h.conn.start_sftp_client() as sftp:
            for suffix, data in files.items():
                path = f"{AGENT_DIR}/agent-{h.port}.{suffix}"
                try:
                    await sftp.remove(path)
                except asyncssh.SFTPNoSuchFile:
                    pass
                async with sftp.open(path, "xb", asyncssh.SFTPAttrs(permissions=0o600)) as f:
                    await f.write(data)
                await sftp.chmod(path, 0o600)
    except asyncssh.SFTPError as e:
        raise DeployError(f"{h.target}: cannot write ~/{path} over SFTP ({e.reason})",
                          "enable the sftp subsystem in sshd_config there, and check the home directory") from None
    except (asyncssh.Error, OSError) as e:
        raise _ssh_error(e, h.target, h.ssh) from None


async def _launch(h: _Host, launch: AgentLaunch) -> int:
    """The agent, detached (its own session, immune to the connection's end); its pid."""
    tls = " ".join(f'{flag} "$d/agent-$p.{TLS_FILES[flag]}"' for flag in launch.tls_files) or "--insecure-plaintext"
    r = await h.sh(f'cd "$d" || exit {_NO_DIR}\n'
                   's=; command -v setsid >/dev/null 2>&1 && s=setsid\n'
                   f'nohup $s {_quoted(launch.tailwise)} agent --listen 0.0.0.0:$p --token-file "$tok" {tls} '
                   f'{_quoted(launch.args)} </dev/null >"$log" 2>&1 &\n'
                   'echo $! >"$pidf"; echo $!\n')
    if r.exit_status != 0 or not _last(r).isdigit():
        raise DeployError(f"{h.target}: the agent could not be started (exit {r.exit_status}: "
                          f"{_said(r)})", "run the same command there by hand and look")
    return int(_last(r))


async def _port_open(host: str, port: int, timeout: float) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def _ready(h: _Host, launch: AgentLaunch, token: str, pid: int) -> tuple[str, str]:
    """Wait until the agent answers Health with the token (its version, hostname), or fail with its
    log's tail. Its port is awaited first: gRPC's reconnect back-off would slow every try after."""
    from tailwise.agents.client import RemoteAgent

    address = h.target.agent_address(h.port)
    deadline = time.monotonic() + launch.ready_s
    while True:
        if await _port_open(h.target.host, h.port, 1.0):
            agent = RemoteAgent(address, token, launch.tls or ClientTls.plain(), call_s=5.0)
            try:
                reply = await asyncio.to_thread(agent.health)
            except TailwiseError as e:
                raise AgentFailed(f"{h.target}: the agent started (pid {pid}) but {address} did not answer Health: "
                                  f"{e.problem}", e.remedy, await _log_tail(h)) from None
            finally:
                agent.close()
            return reply.version, reply.hostname
        if (await h.sh("ours")).exit_status != 0:
            raise AgentFailed(f"{h.target}: the agent exited at start (pid {pid})",
                              f"see its log there, ~/{AGENT_DIR}/agent-{h.port}.log (its end below)", await _log_tail(h))
        if time.monotonic() > deadline:
            raise AgentFailed(f"{h.target}: the agent runs (pid {pid}) but {address} did not accept a connection "
                              f"within {launch.ready_s:g} s",
                              f"open port {h.port} there to this machine (firewall), or check the agent's log",
                              await _log_tail(h))
        await asyncio.sleep(0.2)


async def _log_tail(h: _Host) -> str:
    try:
        r = await h.sh(f'tail -n {LOG_LINES} "$log" 2>/dev/null')
    except DeployError:
        return ""
    return str(r.stdout).rstrip()


async def _start_one(target: SshTarget, token: str, launch: AgentLaunch, ssh: SshOptions) -> Started:
    async def on(h: _Host) -> Started:
        await _check(h, launch.tailwise)
        try:
            await _put_secrets(h, token, launch.tls_files)
            pid = await _launch(h, launch)
            version, hostname = await _ready(h, launch, token, pid)
        except BaseException:
            # Not started, or started but not usable: nothing is left behind (the log stays, to be read).
            try:
                await asyncio.shield(_terminate(h))
            except DeployError:
                pass
            raise
        return Started(target, target.agent_address(launch.port), pid, version, hostname)

    return await _on_host(target, ssh, launch.port, on)


async def _start_all(targets: Sequence[SshTarget], token: str, launch: AgentLaunch, ssh: SshOptions) -> StartOutcome:
    results = await _each(targets, lambda t: _start_one(t, token, launch, ssh))
    out = StartOutcome(started=[r for r in results if isinstance(r, Started)],
                       failed=[r for r in results if isinstance(r, DeployError)])
    if out.failed and out.started:
        out.rolled_back = await _each([s.target for s in out.started], lambda t: _stop_one(t, launch.port, ssh))
    return out


def start(targets: Sequence[SshTarget], token: str, launch: AgentLaunch, ssh: SshOptions) -> StartOutcome:
    """Start an agent on every host, at once; all or none: if one fails, the others are stopped."""
    return asyncio.run(_start_all(targets, token, launch, ssh))


# --------------------------------------------------------------------------- stop

async def _terminate(h: _Host) -> Stopped:
    """SIGTERM to the agent (its process group: a wrapper script's child too), SIGKILL after TERM_S;
    the token, TLS and pid files removed either way. The log stays."""
    steps = int(TERM_S / 0.2)
    r = await h.sh(f'if ! ours; then rm -f "$pidf" "$tok" {_TLS_PATHS}; exit {_NOT_RUNNING}; fi\n'
                   # dash's kill takes no "--": -PID is the process group (setsid made the agent its leader).
                   'kill -TERM -"$pid" 2>/dev/null || kill -TERM "$pid"\n'
                   f'i=0; while ours && [ $i -lt {steps} ]; do sleep 0.2; i=$((i+1)); done\n'
                   'how=0\n'
                   f'if ours; then kill -KILL -"$pid" 2>/dev/null || kill -KILL "$pid"; how={_KILLED}; sleep 0.2; fi\n'
                   f'rm -f "$pidf" "$tok" {_TLS_PATHS}; echo "$pid"; exit $how\n', timeout=TERM_S + COMMAND_S)
    if r.exit_status == _NOT_RUNNING:
        return Stopped(h.target, None)
    if r.exit_status not in (0, _KILLED):
        raise DeployError(f"{h.target}: stopping the agent on port {h.port} failed (exit {r.exit_status}: "
                          f"{_said(r)})", f"look at {h.files()} there")
    return Stopped(h.target, int(_last(r)), killed=r.exit_status == _KILLED)


async def _stop_one(target: SshTarget, port: int, ssh: SshOptions) -> Stopped:
    return await _on_host(target, ssh, port, _terminate)


def stop(targets: Sequence[SshTarget], port: int, ssh: SshOptions) -> list[Stopped | DeployError]:
    """Stop the agent on ``port`` of every host, at once; none running there is no error."""
    return asyncio.run(_each(targets, lambda t: _stop_one(t, port, ssh)))


# --------------------------------------------------------------------------- status

async def _status_one(target: SshTarget, port: int, token: str, ssh: SshOptions, tls: ClientTls | None) -> Status:
    from tailwise.agents.client import RemoteAgent

    async def on(h: _Host) -> Status:
        r = await h.sh('if ours; then echo "$pid"; exit 0; fi\n'
                       f'if [ -n "$pid" ]; then echo "$pid"; exit {_STALE}; fi\n'
                       f'exit {_NOT_RUNNING}\n')
        address = target.agent_address(port)
        if r.exit_status != 0:
            pid = _last(r)
            return Status(target, address, int(pid) if pid.isdigit() else None, stale=r.exit_status == _STALE)
        try:
            agent = RemoteAgent(address, token, tls, call_s=5.0)
        except TailwiseError as e:
            return Status(target, address, int(_last(r)), problem=e)
        try:
            reply = await asyncio.to_thread(agent.health)
        except TailwiseError as e:
            return Status(target, address, int(_last(r)), problem=e)
        finally:
            agent.close()
        return Status(target, address, int(_last(r)), state=reply.state, version=reply.version)

    return await _on_host(target, ssh, port, on)


def status(targets: Sequence[SshTarget], port: int, token: str, ssh: SshOptions,
           tls: ClientTls | None = None) -> list[Status | DeployError]:
    """For every host: whether our agent's process runs there, and whether it answers Health (over
    ``tls``; None: in the clear, to a loopback host only)."""
    return asyncio.run(_each(targets, lambda t: _status_one(t, port, token, ssh, tls)))
