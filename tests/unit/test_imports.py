"""A command imports only what it uses (issue 23: ≤ 100 MB resident for a default run): the
statistics' and the files' heavy libraries are never loaded by `--help`, and a measurement loads
neither SciPy nor statsmodels (stats/special.py, stats/unitroot.py replace them) nor gRPC
(only a run on agents)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON = str(Path(__file__).resolve().parents[2] / "python")
#: Never imported by what the tests below run.
HEAVY = ("scipy", "statsmodels", "pyarrow", "matplotlib", "jinja2", "grpc", "pandas", "asyncssh")


def _imported(args: list[str]) -> set[str]:
    """The top-level packages ``python -X importtime ARGS`` imported (its stderr lists each module)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:.*\|\s*([\w.]+)\s*$", done.stderr, re.M)}


@pytest.mark.parametrize("command", [["--help"], ["run", "--help"], ["sweep", "--help"], ["model", "--help"],
                                     ["report", "--help"], ["--version"]])
def test_help_imports_nothing_heavy(command):
    got = _imported(["-m", "tailwise", *command])
    assert "tailwise" in got
    assert not got.intersection(HEAVY), sorted(got.intersection(HEAVY))


def test_a_measurement_imports_neither_scipy_nor_statsmodels_nor_grpc():
    # Every module `tailwise run` (one machine, no --out) imports on its way to the summary.
    code = ("import tailwise.cli.main, tailwise.cli.run, tailwise.measure.point, tailwise.methodology.controller, "
            "tailwise.methodology.analysis, tailwise.results.summary, tailwise.results.journal, "
            "tailwise.render.point, tailwise.render.output, tailwise.render.run")
    got = _imported(["-c", code])
    assert not got.intersection(HEAVY), sorted(got.intersection(HEAVY))
