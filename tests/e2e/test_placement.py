"""Issue 37 goal 4: where the coordinator runs while the engine's schedule runs (host/placement.py).

With every client on one CPU (`taskset -c N tailwise run`, the bench's placement) and the target
on another, the coordinator cannot keep off the engine's CPU: it yields it, running under
SCHED_IDLE while the schedule runs, so that a `--poll block` engine waking for a send preempts it
at once. It returns to the normal policy for each methodology round and for the analysis, and the
run ends as always. A spinning engine would starve an idle-policy thread: then it keeps the normal
policy. The main thread's policy is read from /proc as the run goes (sched(7): 5 is SCHED_IDLE).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from support.cli import CLI, CLI_TIMEOUT_S, MEASURED

SCHED_IDLE = 5


def _policy(pid: int) -> int | None:
    """The scheduling policy of ``pid``'s main thread (/proc/PID/stat field 41)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[38])
    except (OSError, IndexError, ValueError):
        return None


def _run_on_one_cpu(target: str, *args: str) -> tuple[dict, list[int]]:
    """`tailwise run TARGET ARGS --json` under taskset on the highest CPU; its summary and the main
    thread's policy every 20 ms while it ran."""
    cpu = max(os.sched_getaffinity(0))
    p = subprocess.Popen(["taskset", "-c", str(cpu), *CLI, "run", target, "--rate", "2k", *args, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, deadline = [], time.monotonic() + CLI_TIMEOUT_S
    while p.poll() is None and time.monotonic() < deadline:
        if (policy := _policy(p.pid)) is not None:
            seen.append(policy)
        time.sleep(0.02)
    out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert p.returncode in MEASURED, err[-2000:]
    return json.loads(out), seen


@pytest.fixture
def other_cpu_serve(serve):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs: the target on one, every client on the other")
    return serve("--service", "fixed:10us", cpu=min(os.sched_getaffinity(0)))


@pytest.mark.parametrize("length", [("--duration", "3"), ("--max-time", "4", "--ci", "50%")],
                         ids=["duration", "methodology"])
def test_sharing_the_engines_cpu_the_coordinator_yields_it(other_cpu_serve, length):
    summary, seen = _run_on_one_cpu(other_cpu_serve.url, "--poll", "block", *length)
    # Yielding while the schedule runs (≥ 100 ms of it seen; never, were it not to yield), and back
    # to the normal policy for the analysis at the end.
    assert seen.count(SCHED_IDLE) >= 5, seen
    assert seen[-1] != SCHED_IDLE, "the analysis runs at the normal policy"
    assert summary["counters"]["received"] > 0 and summary["checks"]
    if length[0] == "--max-time":
        assert "yielding" in summary["methodology"]["coordinator"]


def test_beside_a_spinning_engine_it_keeps_the_normal_policy(other_cpu_serve):
    summary, seen = _run_on_one_cpu(other_cpu_serve.url, "--poll", "spin", "--duration", "2")
    assert SCHED_IDLE not in seen, seen
    assert summary["counters"]["received"] > 0
