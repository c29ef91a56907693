"""What crosses the agent service's wire besides its messages (agents/proto/agent.proto): the
token, problems as gRPC statuses, and results in chunks. The agent's server (agents/server.py) and
the coordinator's client (agents/client.py) both use these, so the two sides agree by construction.
"""

from __future__ import annotations

import hmac
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from tailwise.agents.proto import agent_pb2 as pb
from tailwise.errors import HostError, InputError, TailwiseError, TargetError

#: The metadata key every call carries the token in, as ``Bearer TOKEN``.
TOKEN_KEY = "authorization"
#: Trailing metadata of a refused or failed call: the problem's kind and its remedy.
KIND_KEY = "tailwise-kind"
REMEDY_KEY = "tailwise-remedy"
#: A chunk's payload at most (gRPC's default message limit is 4 MiB).
CHUNK_BYTES = 1 << 20
#: Shorter tokens are refused: 16 bytes of /dev/urandom in base64 are 24 characters.
MIN_TOKEN_CHARS = 16
#: The placeholder in deploy/kubernetes/secret.yaml, which anyone who read the repository knows.
PLACEHOLDER_PREFIX = "REPLACE-ME"

_KINDS: dict[str, type[TailwiseError]] = {"input": InputError, "target": TargetError, "host": HostError}
_CODES = {"input": grpc.StatusCode.INVALID_ARGUMENT, "target": grpc.StatusCode.FAILED_PRECONDITION,
          "host": grpc.StatusCode.FAILED_PRECONDITION}


class AgentError(TailwiseError):
    """An agent cannot be reached, refused the coordinator, or failed: named, with what to do."""


def check_private(path: str | Path, who: str) -> None:
    """Refuse a secret file (a token, a TLS key) that others may read or write, as ssh refuses such
    a private key: any bit for others, or for its group — unless the group is this process's own
    and the file is not this process's (a Kubernetes Secret volume: root's, mode 0440, group the
    pod's fsGroup; a systemd credential is the service's own, 0400). A missing file is left to the
    read that follows, which says so."""
    try:
        st = os.stat(path)
    except OSError:
        return
    mode = stat.S_IMODE(st.st_mode)
    group_ok = st.st_gid == os.getegid() and st.st_uid != os.geteuid() and not mode & 0o030
    if mode & 0o007 or (mode & 0o070 and not group_ok):
        who_else = "others" if mode & 0o007 else "its group"
        raise InputError(f"{who} {path} may be read by {who_else} (mode {mode:04o}): a secret must be this user's alone",
                         f"chmod 600 {path}")


def read_pem(path: str, flag: str, what: str) -> bytes:
    """A PEM file given by ``flag``: a certificate (``what`` "certificate") or a private key (checked
    private first, as ssh checks its keys)."""
    marker = "-----BEGIN CERTIFICATE-----" if what == "certificate" else "PRIVATE KEY-----"
    if what != "certificate":
        check_private(path, flag)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {flag} {path} ({e.strerror or e.__class__.__name__})",
                         "check the path and its permissions") from None
    if marker.encode() not in data:
        raise InputError(f"{flag} {path} holds no {what} in PEM",
                         "give the PEM files, e.g. from: openssl req -x509 -newkey ec -pkeyopt "
                         "ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out cert.pem -subj /CN=HOST "
                         "-addext subjectAltName=IP:ADDRESS")
    return data


@dataclass(frozen=True)
class ClientTls:
    """How the coordinator talks to agents: TLS trusting ``ca`` (PEM; None: the system's roots), with
    a client certificate (``cert``, ``key``) for agents that require one (`agent --tls-client-ca`);
    or in the clear (``plaintext``), which only loopback agents or ``--insecure-plaintext`` allow."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    plaintext: bool = False

    @classmethod
    def plain(cls) -> ClientTls:
        return cls(plaintext=True)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key, certificate_chain=self.cert)


def client_tls(ca: str | None, cert: str | None, key: str | None, insecure_plaintext: bool) -> ClientTls | None:
    """The coordinator's side of TLS from its flags (``--agent-tls-ca/-cert/-key``,
    ``--insecure-plaintext``), the files read and checked now, before anything is measured."""
    if ca is None:
        return ClientTls.plain() if insecure_plaintext else None
    return ClientTls(read_pem(ca, "--agent-tls-ca", "certificate"),
                     read_pem(cert, "--agent-tls-cert", "certificate") if cert else None,
                     read_pem(key, "--agent-tls-key", "private key") if key else None)


def read_token(path: str | Path, who: str = "--token-file") -> str:
    """The shared token from its file (one line; surrounding whitespace dropped). Never echoed."""
    check_private(path, who)
    try:
        token = Path(path).read_text().strip()
    except FileNotFoundError:
        raise InputError(f"{who} {path} does not exist",
                         "write a random token to it: umask 077; head -c 32 /dev/urandom | base64 > FILE") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {who} {path} ({e.__class__.__name__})", "check the path and its permissions") from None
    if token.startswith(PLACEHOLDER_PREFIX):
        raise InputError(f"{who} {path} holds the example placeholder, which anyone can read in the repository",
                         "write a random token to it: head -c 32 /dev/urandom | base64 > FILE")
    if len(token) < MIN_TOKEN_CHARS:
        raise InputError(f"{who} {path} holds a token of {len(token)} characters: too short to guard a traffic generator",
                         f"use at least {MIN_TOKEN_CHARS}: head -c 32 /dev/urandom | base64 > FILE")
    return token


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries ``token``."""
    return ((TOKEN_KEY, f"Bearer {token}"),)


def token_matches(metadata: Iterable[tuple[str, str | bytes]], token: str) -> bool:
    """Whether the call's metadata carries ``token`` (compared in constant time)."""
    given = next((v for k, v in metadata if k == TOKEN_KEY), None)
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def kind_of(e: TailwiseError) -> str:
    for name, cls in _KINDS.items():
        if isinstance(e, cls):
            return name
    return "input"


def abort(context: grpc.ServicerContext, e: TailwiseError) -> None:
    """End the call with ``e``: its problem as the status details, kind and remedy as trailers."""
    kind = kind_of(e)
    context.set_trailing_metadata(((KIND_KEY, kind), (REMEDY_KEY, e.remedy or "")))
    context.abort(_CODES[kind], e.problem)


def problem(err: grpc.RpcError, agent: str) -> TailwiseError:
    """A failed call as the coordinator reports it: the agent's own problem (InputError,
    TargetError, HostError, prefixed with the agent's address), or an ``AgentError`` saying why
    the agent could not be asked (unreachable, no answer in time, refused the token)."""
    code = err.code() if hasattr(err, "code") else None
    details = (err.details() if hasattr(err, "details") else None) or str(err)
    trailers = dict(err.trailing_metadata() or ()) if hasattr(err, "trailing_metadata") else {}
    kind = trailers.get(KIND_KEY)
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](f"agent {agent}: {details}", str(trailers.get(REMEDY_KEY, "")))
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AgentError(f"agent {agent} refused the token ({details})",
                          "give the coordinator the agent's token file (--token-file)")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return AgentError(f"agent {agent} did not answer in time", "check that the agent runs and its host is not overloaded")
    if code == grpc.StatusCode.UNAVAILABLE:
        return AgentError(f"agent {agent} cannot be reached ({details})",
                          "start `tailwise agent` there, check HOST:PORT, the firewall and TLS (--agent-tls-ca; "
                          "--agent-tls-cert/--agent-tls-key when the agent requires a client certificate)")
    return AgentError(f"agent {agent} failed: {details}", "see the agent's own output")


def chunks(meta: dict[str, Any], parts: Iterable[tuple[str, bytes]]) -> Iterator[pb.Chunk]:
    """A snapshot or result as the stream carries it: ``meta`` first, then each part, cut."""
    yield pb.Chunk(meta=json.dumps(meta))
    for name, data in parts:
        view = memoryview(data)
        for at in range(0, max(len(view), 1), CHUNK_BYTES):
            yield pb.Chunk(part=pb.Part(name=name, data=bytes(view[at:at + CHUNK_BYTES])))


def unchunk(stream: Iterable[pb.Chunk]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The inverse of ``chunks``: (meta, parts by name)."""
    meta: dict[str, Any] | None = None
    parts: dict[str, bytearray] = {}
    for c in stream:
        if c.WhichOneof("body") == "meta":
            meta = json.loads(c.meta)
        else:
            parts.setdefault(c.part.name, bytearray()).extend(c.part.data)
    if meta is None:
        raise AgentError("an agent's answer ended before its first chunk", "run the same tailwise version on both sides")
    return meta, {k: bytes(v) for k, v in parts.items()}
