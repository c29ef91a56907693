"""The gRPC server around the agent service (agents/server.py), closed to strangers.

Every call carries the shared token (``TokenCheck``, a server interceptor: UNAUTHENTICATED
otherwise, with no hint of the token, before the call's body is read: a stranger's half-open call
holds no thread); the service says the refusals, at most once a second per address, naming it.
``serve`` sets the server's streams per connection, keep-alive, idle and age limits
(``SERVER_OPTIONS``), and TLS when given.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from tailwise.agents import wire
from tailwise.agents.proto import agent_pb2_grpc
from tailwise.agents.server import MAX_CALLS_PER_PEER, AgentServer
from tailwise.errors import HostError

#: gRPC server limits (grpc/include/grpc/impl/channel_arg_names.h): streams per connection; a
#: connection with no call for 5 min is closed; one is pinged after 60 s without traffic and
#: closed if silent 20 s more (a vanished peer); a connection is closed after 1 h, its calls given
#: as long as a run may take to end (the coordinator reconnects on its next call).
SERVER_OPTIONS = (
    ("grpc.max_concurrent_streams", MAX_CALLS_PER_PEER),
    ("grpc.max_connection_idle_ms", 300_000),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.max_connection_age_ms", 3_600_000),
    ("grpc.max_connection_age_grace_ms", 24 * 3_600_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
)


class TokenCheck(grpc.ServerInterceptor):
    """No token, no service: a call without the agent's token (``wire.token_matches``, constant
    time) ends UNAUTHENTICATED before it reaches the service — and before its body is read: the
    refusal is a stream-request handler that never reads its request, where a unary one would hold
    a pool thread until the body came (16 half-open calls held all 16 and froze Health)."""

    def __init__(self, token: str, on_refused: Callable[[str, str], None]):
        self._token = token
        self._on_refused = on_refused

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if wire.token_matches(handler_call_details.invocation_metadata or (), self._token):
            return handler
        if handler is None:
            return None
        method = handler_call_details.method

        def deny(requests, context):
            self._on_refused(method, context.peer())
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")

        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.stream_unary_rpc_method_handler(deny)


def serve(servicer: AgentServer, token: str, listen: str, tls: tuple[bytes, bytes, bytes | None] | None = None,
          max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start the gRPC server for ``servicer`` on ``listen`` (HOST:PORT; port 0: a free one), with
    TLS from (certificate chain, private key, client CA or None) PEM when given: with a client CA,
    mutual TLS (a client without a certificate that chains to it is refused in the handshake, as
    kubelet's --client-ca-file does). Returns the server and its port."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tailwise-agent"),
        interceptors=[TokenCheck(token, servicer.refused_token)],
        # Two agents on one port must not share it (gRPC sets SO_REUSEPORT by default).
        options=[("grpc.so_reuseport", 0), *SERVER_OPTIONS],
        maximum_concurrent_rpcs=4 * max_workers)
    agent_pb2_grpc.add_AgentServicer_to_server(servicer, server)
    try:
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            cert, key, client_ca = tls
            port = server.add_secure_port(listen, grpc.ssl_server_credentials(
                [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None))
    except RuntimeError:
        port = 0
    if not port:
        why = "in use, or not an address of this host" + (", or a TLS key that is not the certificate's" if tls else "")
        raise HostError(f"cannot listen on {listen} ({why})",
                        "choose another --listen HOST:PORT (agents on one host need ports of their own)"
                        + (" and check --tls-cert and --tls-key" if tls else ""))
    server.start()
    return server, port
