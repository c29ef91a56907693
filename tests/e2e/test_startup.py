"""Issue 37: the first request does not wait for what only the analysis needs.

`tailwise run` is run as users run it, with the engine's constructor wrapped: at the engine's start
no statistics library (scipy.stats, statsmodels) and no result model (the summary's pydantic
documents) may be loaded yet. The run then ends as always, with its verdict and every figure, the
libraries loaded after the first request (the end of --duration, or the methodology's first round).
The start-up's length is a figure of `bench/run startup`, not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.cli import CLI_TIMEOUT_S, MEASURED

#: What a sweep's first request must not wait for; a run's, not the result's models either (a sweep
#: builds its documents first).
STATISTICS = ("scipy.stats", "statsmodels.tsa.stattools", "scipy.optimize")
HEAVY = (*STATISTICS, "tailwise.results.documents.run")

PROBE = r"""
import json, sys
import tailwise._core as core

HEAVY = {heavy!r}
seen = {{}}
Engine = core.Engine

def engine(*args, **kwargs):
    seen.setdefault("at_start", sorted(m for m in HEAVY if m in sys.modules))
    return Engine(*args, **kwargs)

core.Engine = engine
sys.argv = ["tailwise", *sys.argv[1:]]
from tailwise.cli.main import main
try:
    main()
finally:
    seen["at_end"] = sorted(m for m in HEAVY if m in sys.modules)
    print("PROBE " + json.dumps(seen), file=sys.stderr)
"""


def _run_probed(*args: str, command: str = "run") -> tuple[dict, dict]:
    """The summary of `tailwise COMMAND ARGS --json` and what was loaded (of HEAVY) at the engine's
    first start and at the end."""
    p = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), command, *args, "--json"],
                       capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert p.returncode in MEASURED, p.stderr[-2000:]
    probe = [line for line in p.stderr.splitlines() if line.startswith("PROBE ")]
    assert probe, p.stderr[-2000:]
    return json.loads(p.stdout), json.loads(probe[-1].removeprefix("PROBE "))


def _answered(summary: dict) -> None:
    assert summary["verdict"] in ("ok", "imprecise", "not-measurable")
    assert summary["counters"]["received"] > 0
    p50 = next(p for p in summary["latency"]["percentiles"] if p["p"] == 50)
    assert p50["value_ns"] and p50["low_ns"] <= p50["value_ns"] <= p50["high_ns"]
    assert summary["checks"], "every check is still reported"


@pytest.mark.parametrize("length", [("--duration", "1"), ("--max-time", "3", "--ci", "50%")],
                         ids=["duration", "methodology"])
def test_the_first_request_waits_for_no_statistics_library(length):
    summary, loaded = _run_probed("--rate", "2k", *length)
    assert loaded["at_start"] == [], f"loaded before the first request: {loaded['at_start']}"
    # The analysis still ran, on the same libraries, after the first request.
    assert set(loaded["at_end"]) >= {"scipy.stats", "statsmodels.tsa.stattools"}
    _answered(summary)
    if length[0] == "--max-time":
        assert summary["methodology"]["mode"] != "fixed"


def test_against_a_real_server_too(memcached):
    summary, loaded = _run_probed(memcached.url, "--rate", "2k", "--duration", "1")
    assert loaded["at_start"] == [], f"loaded before the first request: {loaded['at_start']}"
    _answered(summary)
    assert summary["target_stats"], "the server's own counters, fetched before and after, as before"


def test_a_sweeps_first_point_waits_for_no_statistics_library(tmp_path):
    summary, loaded = _run_probed("--rates", "2k,4k", "--duration", "0.5", "--out", str(tmp_path / "sweep"),
                                  command="sweep")
    assert not set(loaded["at_start"]) & set(STATISTICS), f"loaded before the first request: {loaded['at_start']}"
    assert [p["rate_rps"] for p in summary["points"]] == [2000, 4000]
    assert set(loaded["at_end"]) >= set(STATISTICS)
