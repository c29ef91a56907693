"""Regenerate the agent service's stubs from agent.proto: ``python -m tailwise.agents.proto``.

grpcio-tools' protoc writes ``agent_pb2.py`` (messages), ``agent_pb2.pyi`` (their types) and
``agent_pb2_grpc.py`` (the service) beside the .proto; they are checked in, so that running the
agent needs grpcio and protobuf only. tests/unit/test_agent_proto.py regenerates them into a
scratch directory and fails when they differ from the files here.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The directory that holds the ``tailwise`` package: protoc's include root, so that the
#: generated modules import each other as ``tailwise.agents.proto.…``.
ROOT = Path(__file__).resolve().parents[3]
PROTO = "tailwise/agents/proto/agent.proto"


def generate(out: Path) -> None:
    """Write the stubs under ``out`` (``out/tailwise/agents/proto/``)."""
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    code = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"--python_out={out}", f"--pyi_out={out}",
                        f"--grpc_python_out={out}", str(ROOT / PROTO)])
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {code})")


if __name__ == "__main__":
    generate(ROOT if len(sys.argv) < 2 else Path(sys.argv[1]))
