"""bench/agents/memory: an agent's resident memory while its coordinator stops asking (issue 33,
item 3) — the rows it keeps for a coordinator that takes no snapshot, at the highest rate here.

One `tailwise agent` on loopback (a real process, `--max-memory`), loading `tailwise serve
--udp-reflect` (one worker, pinned to the lowest CPU; the engine's thread pins itself to the
highest). The coordinator (``agent.remote.RemoteAgent``, the code `run --agents` uses) configures
and starts a run of every request sampled (64 bytes a row), then only calls Progress once a second
with the run's lease key — the lease holds, no Snapshot comes — for ``--seconds``; then one
Snapshot, Stop and Finish. The agent's VmRSS is read from /proc every 0.1 s all along.

Reported: the rate offered and the rate sent (each request is a row whether the machine sent it
or not: the rows come at the offered rate), the rows the engine kept (× 64 bytes: what the agent
held before issue 33, the rows waiting in the engine for a Snapshot), the resident set at the
start of the load, its largest and its last while the coordinator was silent, its largest through
the Snapshot and Finish, the bound, and the level the agent thinned to (the Snapshot's
``thinned_level``) with its line saying so.

``--agent-python DIR`` runs the agent from another source tree (PYTHONPATH; e.g. a worktree of an
older commit with its built extension) and ``--max-memory none`` leaves the flag out: the figures
before the bound. Goal (issue 33): memory flat within its bound. Prints a table and writes JSON
(default bench/out/agent_memory.json). Not a test: ``--seconds`` (60) plus ~10 s here.

    python bench/agents/memory.py [--seconds 60] [--rate 1M] [--protocol udp+flow|udp]
                                  [--max-memory 512Mi|none] [--agent-python DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from tailwise.agents.client import RemoteAgent  # noqa: E402
from tailwise.spec.load import LoadSpec  # noqa: E402
from tailwise.spec.units import parse_rate  # noqa: E402

TOKEN = "bench-" + "0123456789abcdef" * 2
ROW_BYTES = 64
MiB = 1 << 20


def rss_bytes(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) * 1024 if m else 0


class Sampler:
    """The agent's VmRSS every ``every_s``, each reading tagged with the phase it fell in."""

    def __init__(self, pid: int, every_s: float = 0.1):
        self.pid, self.phase, self.series = pid, "idle", []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.series.append((round(time.monotonic() - self._t0, 2), rss_bytes(self.pid), self.phase))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def of(self, *phases: str) -> list[int]:
        return [m for _, m, p in self.series if p in phases and m]


def start(argv: list[str], pattern: str, env: dict | None = None, cpus: set[int] | None = None):
    """A tailwise process and the first match of ``pattern`` in its output."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"{argv[3:5]} did not start: {''.join(lines)}")
        lines.append(line)
        if m := re.search(pattern, line):
            return proc, m, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the coordinator stays silent")
    ap.add_argument("--rate", default="1M", help="the load offered (issue 33: 1 M req/s)")
    ap.add_argument("--protocol", choices=("udp+flow", "udp"), default="udp+flow")
    ap.add_argument("--max-memory", default="512Mi", help="the agent's --max-memory; none: the flag left out")
    ap.add_argument("--agent-python", help="run the agent from this source tree (PYTHONPATH)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "agent_memory.json"))
    args = ap.parse_args()
    rate = parse_rate(args.rate)
    cpus = sorted(os.sched_getaffinity(0))
    tailwise = [sys.executable, "-m", "tailwise"]
    here = os.environ | {"PYTHONPATH": str(ROOT / "python")}
    agent_env = os.environ | {"PYTHONPATH": str(Path(args.agent_python).resolve() if args.agent_python
                                                 else ROOT / "python")}
    reflector, m, _ = start([*tailwise, "serve", "--udp-reflect", "--listen", "127.0.0.1:0", "--workers", "1", "--pin"],
                            r"reflecting UDP on (\S+)", here)
    target = m.group(1).rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        memory = [] if args.max_memory == "none" else ["--max-memory", args.max_memory]
        agent, m, said = start([*tailwise, "agent", "--listen", "127.0.0.1:0", "--token-file", str(token), *memory],
                               r"listening on 127\.0\.0\.1:(\d+)", agent_env)
        port = int(m.group(1))
        bound = re.search(r"max memory ([^;(]+)", said[-1])
        sampler = Sampler(agent.pid)
        coordinator = RemoteAgent(f"127.0.0.1:{port}", TOKEN, call_s=30.0)
        try:
            spec = LoadSpec(targets=[target], rate_rps=rate, duration_ns=int((args.seconds + 30) * 1e9), threads=1,
                            conns=4, outstanding=64, timeout_ns=200_000_000, sample_every=1,
                            protocol={"scheme": "udp+flow", "size": 64, "flows": 1} if args.protocol == "udp+flow"
                            else {"scheme": "udp", "size": 16})
            coordinator.configure("memory", "symmetric", json.loads(spec.to_json()), 0)
            coordinator.start("memory", 0)
            time.sleep(0.2)
            sampler.phase = "silent"
            t0 = time.monotonic()
            first = coordinator.progress("memory")["counters"]
            while time.monotonic() - t0 < args.seconds:
                time.sleep(1.0)
                last = coordinator.progress("memory")  # keyed: renews the lease, takes nothing
            silent_s = time.monotonic() - t0
            sampler.phase = "snapshot"
            meta, parts = coordinator.snapshot("memory")
            sampler.phase = "finish"
            coordinator.progress("memory", "Stop")
            end, end_parts = coordinator.finish("memory", 120.0)
            sampler.phase = "done"
            time.sleep(0.3)
        finally:
            sampler.stop()
            coordinator.close()
            agent.terminate()
            out_text, _ = agent.communicate(timeout=30)
            reflector.terminate()
            reflector.wait(30)
    c0, c1 = first, last["counters"]
    span_s = (c1.get("elapsed_ns", 0) - c0.get("elapsed_ns", 0)) / 1e9 or silent_s
    intended = c1.get("intended", 0) - c0.get("intended", 0)
    sent = c1.get("sent", 0) - c0.get("sent", 0)
    silent = sampler.of("silent")
    after = sampler.of("snapshot", "finish")
    thinned = [ln.split("tailwise agent: ", 1)[-1] for ln in (''.join(said) + out_text).splitlines()
               if "passed this agent's ceiling" in ln]
    figures = {
        "machine": f"{platform.node()} ({len(cpus)} CPUs, {platform.release()})",
        "protocol": args.protocol, "rate_offered_rps": rate, "seconds_silent": round(silent_s, 1),
        "intended_rps": round(intended / span_s), "sent_rps": round(sent / span_s),
        "rows_kept": c1.get("intended", 0),
        "rows_mib": round(c1.get("intended", 0) * ROW_BYTES / MiB),
        "bound": bound.group(1).strip() if bound else "?", "max_memory_flag": args.max_memory,
        "agent_python": args.agent_python or "this tree",
        "rss_start_mib": round(silent[0] / MiB) if silent else None,
        "rss_silent_max_mib": round(max(silent) / MiB) if silent else None,
        "rss_silent_end_mib": round(silent[-1] / MiB) if silent else None,
        "rss_snapshot_finish_max_mib": round(max(after) / MiB) if after else None,
        "thinned_level": meta.get("thinned_level"), "snapshot_rows": len(parts.get("samples", b"")) // ROW_BYTES,
        "finish_thinned_level": end.get("thinned_level"), "agent_said": thinned,
        "series": [(t, round(b / MiB, 1), p) for t, b, p in sampler.series],
    }
    for key in ("machine", "protocol", "rate_offered_rps", "intended_rps", "sent_rps", "seconds_silent", "rows_kept",
                "rows_mib", "bound", "rss_start_mib", "rss_silent_max_mib", "rss_silent_end_mib",
                "rss_snapshot_finish_max_mib", "thinned_level", "snapshot_rows", "finish_thinned_level", "agent_said"):
        print(f"{key:28} {figures[key]}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
