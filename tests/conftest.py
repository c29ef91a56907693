"""Loads the tests' plugin (fixtures: tests/support/plugin.py) and marks each test with its kind.

tests/unit/ (marker ``unit``): in process, no server started, no traffic sent; tests/e2e/ (marker
``e2e``): real servers on 127.0.0.1, the CLI end to end. `pytest -m unit` (scripts/test --fast)
runs the unit suite alone. A test file anywhere else, or a unit test asking for a server fixture,
is a usage error that says where the test belongs, so that every test shows its kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ("support.plugin",)

#: The marker of each test directory (registered in pyproject.toml).
KINDS = {"unit": pytest.mark.unit, "e2e": pytest.mark.e2e}
TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    servers = {*config.pluginmanager.get_plugin("support.plugin").FIXTURES, "serve"}
    for item in items:
        try:
            rel = Path(item.path).resolve().relative_to(TESTS_DIR)
        except ValueError:  # collected from outside tests/ (a path given on the command line)
            continue
        kind = KINDS.get(rel.parts[0]) if len(rel.parts) > 1 else None
        if kind is None:
            raise pytest.UsageError(f"tests/{rel}: a test file belongs in tests/unit/ (no server, no traffic) "
                                    "or tests/e2e/ (real servers, the CLI end to end); move it there")
        started = sorted(servers & set(getattr(item, "fixturenames", ())))
        if kind is KINDS["unit"] and started:
            raise pytest.UsageError(f"{item.nodeid} starts a server ({', '.join(started)}): "
                                    "move it to tests/e2e/, or drop the fixture")
        item.add_marker(kind)
