"""The agent service's checked-in stubs are what agent.proto generates (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailwise.agents.proto.__main__ import ROOT, generate

STUBS = ("agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py")


def test_the_checked_in_stubs_are_up_to_date(tmp_path: Path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools is a test extra: pip install -e '.[test]'")
    generate(tmp_path)
    here = ROOT / "tailwise" / "agents" / "proto"
    for name in STUBS:
        assert (tmp_path / "tailwise/agents/proto" / name).read_text() == (here / name).read_text(), \
            f"{name} is out of date: run `python -m tailwise.agents.proto` and commit the result"


def test_the_stubs_load_and_name_the_service():
    from tailwise.agents.proto import agent_pb2, agent_pb2_grpc

    service = agent_pb2.DESCRIPTOR.services_by_name["Agent"]
    assert [m.name for m in service.methods] == ["Health", "Clock", "Configure", "Start", "Progress", "Snapshot",
                                                 "Pause", "Resume", "Stop", "Finish"]
    assert hasattr(agent_pb2_grpc, "AgentServicer") and hasattr(agent_pb2_grpc, "AgentStub")
