"""bench/agents/attack: the control plane under attack (issue 33) — how long the coordinator's
Health takes while strangers hold half-open calls or knock with wrong tokens.

One `tailwise agent` on loopback (a real process, its token in a 0600 file). For each case the
coordinator (``agent.remote.RemoteAgent``, the code `run --agents` uses) calls Health
``--calls`` times, ``--gap-ms`` apart, and the script reports p50, p99 and the largest:

* ``quiet``: nobody else.
* ``held N`` (64, 1024): N calls from strangers (no token) that send their headers and never
  their body, opened at once as Health starts, spread over connections of 8 streams (the agent's
  streams per connection) — the issue's probe, where 16 of them held every pool thread.
* ``flood N`` (64, 1024): the same, but each one refused is opened again at once, so that N are
  in flight all the time: a flood of refusals, as fast as the stranger's process can open them,
  on the same two CPUs as the agent and the coordinator.
* ``refused 100/s``: a stranger's Health with a wrong token, 100 a second.

Placement: the stranger is a process of its own on CPU 0 (gRPC's Python threads would otherwise
share the coordinator's interpreter lock, and the figure would be the stranger's, not the
agent's), the agent and the coordinator on CPU 1.

Goal (issue 33): Health p99 ≤ 10 ms with 0, 64 and 1,024 half-open calls and 100 refused a second. Prints a table and writes JSON (default
bench/out/attack.json). Not a test: ~1 min here.

    python bench/agents/attack.py [--calls 300] [--gap-ms 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from tailwise.agents import wire  # noqa: E402
from tailwise.agents.proto import agent_pb2 as pb  # noqa: E402
from tailwise.agents.client import RemoteAgent  # noqa: E402

TOKEN = "bench-" + "0123456789abcdef" * 2
METHOD = "/tailwise.agent.v1.Agent/Progress"


class HalfOpen:
    """Keep ``n`` stranger's calls open (headers sent, body held back) until ``stop``."""

    def __init__(self, port: int, n: int, reopen: bool):
        self.opened = 0
        self._reopen = reopen
        self._stop = threading.Event()
        self._channels = [grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
                          for _ in range((n + 7) // 8)]
        self._calls = [ch.stream_unary(METHOD, request_serializer=lambda b: b,
                                       response_deserializer=pb.ProgressReply.FromString) for ch in self._channels]
        for i in range(n):
            self._open(i // 8)

    def _body(self, done: threading.Event):
        # gRPC reads the body on a thread of its own: it ends when the call does.
        done.wait(60)
        return
        yield b""

    def _open(self, k: int) -> None:
        if self._stop.is_set():
            return
        self.opened += 1
        done = threading.Event()
        f = self._calls[k].future(self._body(done), timeout=60)

        def again(_f) -> None:
            done.set()
            if self._reopen:
                self._open(k)

        f.add_done_callback(again)

    def stop(self) -> None:
        self._stop.set()
        for ch in self._channels:
            ch.close()


class Knocker:
    """A stranger's Health with a wrong token, ``per_s`` a second, until ``stop``."""

    def __init__(self, port: int, per_s: float):
        self.sent = 0
        self._stop = threading.Event()
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        self._thread = threading.Thread(target=self._run, args=(per_s,), daemon=True)
        self._thread.start()

    def _run(self, per_s: float) -> None:
        health = self._channel.unary_unary("/tailwise.agent.v1.Agent/Health",
                                           request_serializer=pb.HealthRequest.SerializeToString,
                                           response_deserializer=pb.HealthReply.FromString)
        while not self._stop.wait(1 / per_s):
            try:
                health(pb.HealthRequest(), metadata=wire.bearer("wrong-" + "x" * 20), timeout=5)
            except grpc.RpcError:
                self.sent += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._channel.close()


def health_times(coordinator: RemoteAgent, calls: int, gap_s: float) -> np.ndarray:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        coordinator.health()
        out.append(time.perf_counter() - t0)
        time.sleep(gap_s)
    return np.array(out) * 1e3


def stranger(case: str, port: int) -> None:
    """The stranger's process: run ``case`` until stdin closes, then say how many calls it made."""
    kind, n = case.split()
    attacker = HalfOpen(port, int(n), reopen=kind == "flood") if kind in ("held", "flood") else Knocker(port, float(n))
    print("ready", flush=True)
    sys.stdin.read()
    attacker.stop()
    print(attacker.opened if isinstance(attacker, HalfOpen) else attacker.sent, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "attack.json"))
    ap.add_argument("--stranger", nargs=2, metavar=("CASE", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stranger:
        return stranger(args.stranger[0], int(args.stranger[1]))
    cpus = sorted(os.sched_getaffinity(0))
    mine, theirs = ({cpus[-1]}, {cpus[0]}) if len(cpus) > 1 else (set(cpus), set(cpus))
    os.sched_setaffinity(0, mine)  # the agent (started below) inherits it
    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        proc = subprocess.Popen([sys.executable, "-m", "tailwise", "agent", "--listen", "127.0.0.1:0", "--token-file",
                                 str(token)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=os.environ | {"PYTHONPATH": str(ROOT / "python")})
        try:
            port = None
            while port is None:
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit(f"the agent did not start: {proc.stderr.read()}")
                if m := re.search(r"listening on 127\.0\.0\.1:(\d+)", line):
                    port = int(m.group(1))
            coordinator = RemoteAgent(f"127.0.0.1:{port}", TOKEN, call_s=5.0)
            coordinator.health()
            results = []
            for case in ("quiet", "held 64", "held 1024", "flood 64", "flood 1024", "refused 100"):
                kind = case.split()[0]
                extra = {}
                them = None
                if kind != "quiet":
                    them = subprocess.Popen([sys.executable, __file__, "--stranger", case, str(port)],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                            preexec_fn=lambda: os.sched_setaffinity(0, theirs))
                    assert them.stdout.readline().strip() == "ready"
                if kind != "held":
                    time.sleep(0.5)
                ms = health_times(coordinator, args.calls, args.gap_ms / 1e3)
                if them is not None:
                    made, _ = them.communicate("", timeout=60)
                    extra["stranger_calls"] = int(made.strip() or 0)
                row = {"case": case, "calls": len(ms), "p50_ms": float(np.percentile(ms, 50)),
                       "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()), **extra}
                results.append(row)
                if kind == "refused":
                    row["case"] = case = "refused 100/s"
                print(f"{case:16} Health p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms  "
                      f"max {row['max_ms']:7.3f} ms  {extra or ''}", flush=True)
            coordinator.close()
        finally:
            proc.terminate()
            out_text, err = proc.communicate(timeout=30)
    said = [ln for ln in (out_text + err).splitlines() if "refused " in ln]
    refusal_lines = len(said)
    print(f"the agent's refusal lines over the run: {refusal_lines}; the first two: {said[:2]}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cases": results, "refusal_lines": refusal_lines, "calls": args.calls,
                               "gap_ms": args.gap_ms}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
