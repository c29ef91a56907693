"""The coordinator's end of one agent (agents/proto/agent.proto): every call with the token and a
deadline, every failure a ``TailwiseError`` naming the agent (agents/wire.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc

from tailwise import _core
from tailwise.agents.proto import agent_pb2 as pb
from tailwise.agents.proto.agent_pb2_grpc import AgentStub
from tailwise.agents.wire import ClientTls, bearer, problem, unchunk
from tailwise.spec.fleet import refuse_plaintext

#: A call's deadline unless it waits for the run (Finish).
CALL_S = 5.0
#: Clock exchanges per offset estimate; the one with the shortest round trip is kept.
CLOCK_TRIES = 8
#: Messages up to this size either way (a chunk is 1 MiB; the meta of a long run is larger).
MAX_MESSAGE = 64 << 20


@dataclass(frozen=True)
class ClockOffset:
    """The agent's CLOCK_MONOTONIC minus the coordinator's, estimated NTP-style from the exchange
    with the shortest round trip; the true offset lies within ± ``rtt_ns`` / 2 of it."""

    offset_ns: int
    rtt_ns: int


class RemoteAgent:
    """One agent at ``address`` (HOST:PORT), over TLS unless ``tls`` is None or plaintext: then
    only a loopback address, or any when ``tls.plaintext`` (--insecure-plaintext) says so."""

    def __init__(self, address: str, token: str, tls: ClientTls | None = None, call_s: float = CALL_S):
        if tls is None:
            refuse_plaintext(address, "agent")
        self.address = address
        self._meta = bearer(token)
        self.call_s = call_s
        options = [("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)]
        if tls is not None and not tls.plaintext:
            self._channel = grpc.secure_channel(address, tls.credentials(), options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._stub = AgentStub(self._channel)
        #: Each run's lease key from Configure: the calls that keep its lease carry it.
        self._keys: dict[str, str] = {}

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request, timeout_s: float | None = None):
        try:
            return getattr(self._stub, method)(request, metadata=self._meta, timeout=timeout_s or self.call_s)
        except grpc.RpcError as e:
            raise problem(e, self.address) from None

    def _stream(self, method: str, request, timeout_s: float | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
        try:
            return unchunk(getattr(self._stub, method)(request, metadata=self._meta, timeout=timeout_s or self.call_s))
        except grpc.RpcError as e:
            raise problem(e, self.address) from None

    def health(self) -> pb.HealthReply:
        return self._call("Health", pb.HealthRequest())

    def clock_offset(self, tries: int = CLOCK_TRIES) -> ClockOffset:
        best: ClockOffset | None = None
        for _ in range(tries):
            t1 = _core.now_ns()
            r = self._call("Clock", pb.ClockRequest())
            t2 = _core.now_ns()
            est = ClockOffset(r.mono_ns - (t1 + t2) // 2, t2 - t1)
            if best is None or est.rtt_ns < best.rtt_ns:
                best = est
        assert best is not None
        return best

    def configure(self, run_id: str, role: str, config: dict[str, Any], agent_index: int = 0) -> dict[str, Any]:
        """``agent_index``: the agent's place among the run's (its rows' keys: stats/subsample.py)."""
        r = self._call("Configure", pb.ConfigureRequest(run_id=run_id, role=role, engine_config=json.dumps(config),
                                                        agent_index=agent_index))
        self._keys[run_id] = r.lease_key
        return json.loads(r.engine_config)

    def _ref(self, run_id: str) -> pb.RunRef:
        return pb.RunRef(run_id=run_id, lease_key=self._keys.get(run_id, ""))

    def start(self, run_id: str, start_at_mono_ns: int) -> int:
        """Start at an instant of the agent's clock; returns the schedule's real time zero (its clock)."""
        return self._call("Start", pb.StartRequest(run_id=run_id, start_at_mono_ns=start_at_mono_ns,
                                                   lease_key=self._keys.get(run_id, "")), 30.0).start_mono_ns

    def progress(self, run_id: str, verb: str = "Progress") -> dict[str, Any]:
        r = self._call(verb, self._ref(run_id))
        return {"counters": json.loads(r.counters or "{}"), "finished": r.finished, "in_flight": r.in_flight,
                "elapsed_ns": r.elapsed_ns}

    def snapshot(self, run_id: str) -> tuple[dict[str, Any], dict[str, bytes]]:
        return self._stream("Snapshot", self._ref(run_id), 15.0)

    def finish(self, run_id: str, timeout_s: float) -> tuple[dict[str, Any], dict[str, bytes]]:
        return self._stream("Finish", self._ref(run_id), timeout_s)
