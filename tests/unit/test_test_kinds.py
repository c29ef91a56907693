"""The test suite's own layout: `-m unit` selects exactly tests/unit/, `-m e2e` exactly tests/e2e/,
together every test; a test file outside both, or a unit test that starts a server, is refused in
one line that says where it belongs (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Collection only: nothing runs, but the whole tree is imported.
COLLECT_TIMEOUT_S = 120


def _collect(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, timeout=COLLECT_TIMEOUT_S, cwd=cwd,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def _ids(r: subprocess.CompletedProcess) -> list[str]:
    assert r.returncode == 0, r.stdout + r.stderr
    return [ln for ln in r.stdout.splitlines() if "::" in ln]


def test_each_marker_selects_its_directory_and_together_every_test():
    unit, e2e, every = _ids(_collect("-m", "unit")), _ids(_collect("-m", "e2e")), _ids(_collect())
    assert unit and all(t.startswith("tests/unit/") for t in unit)
    assert e2e and all(t.startswith("tests/e2e/") for t in e2e)
    assert sorted(unit + e2e) == sorted(every)


@pytest.mark.parametrize("where,body,says", [
    ("test_stray.py", "def test_x():\n    pass\n", "belongs in tests/unit/"),
    ("unit/test_stray_server.py", "def test_x(memcached):\n    pass\n", "starts a server (memcached)"),
])
def test_a_test_without_its_kind_is_refused_in_one_line(tmp_path, where, body, says):
    """A copy of the conftest and the plugin with one misplaced test: collection fails and says why."""
    tests = tmp_path / "tests"
    (tests / "unit").mkdir(parents=True)
    (tests / "e2e").mkdir()
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tests / "support").symlink_to(ROOT / "tests" / "support")
    (tests / where).write_text(body)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    r = _collect(cwd=tmp_path)
    assert r.returncode != 0 and says in r.stdout + r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
