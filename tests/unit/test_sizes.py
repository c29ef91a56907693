"""No Python module of the package is over 600 lines (issue 35, item 5: "Rooms that hold too much"):
a module that grows past it holds more than one concern and is split by concern, as agents/server.py,
host/doctor.py and results/documents/run.py were. Generated code (gRPC's agent_pb2*.py) is exempt."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tailwise"

#: The most lines a module may have.
MAX_LINES = 600
#: Generated from agents/proto/agent.proto, never edited by hand.
GENERATED = ("agents/proto/agent_pb2*.py",)


def _generated(path: Path) -> bool:
    return any(path.relative_to(PACKAGE).match(pattern) for pattern in GENERATED)


def test_no_module_is_over_600_lines():
    lengths = {path: len(path.read_text().splitlines())
               for path in sorted(PACKAGE.rglob("*.py")) if not _generated(path)}
    over = [f"python/tailwise/{path.relative_to(PACKAGE)} has {n} lines"
            for path, n in lengths.items() if n > MAX_LINES]
    assert not over, (f"modules over {MAX_LINES} lines (split each by concern into modules of its package, and update "
                      f"ARCHITECTURE.md's module table): " + "; ".join(over))


def test_the_generated_modules_are_still_there():
    """The exemption names files that exist: a renamed proto must not exempt nothing silently."""
    assert [p for p in PACKAGE.rglob("*.py") if _generated(p)], f"no module matches {GENERATED}: update GENERATED"
