"""bench/agents: what the coordinator costs per round with 1, 2 and 4 agents, the merged maximum
rate against `tailwise serve`, and the start barrier's spread (issue 21).

Hosts are network namespaces on one bridge (measure/netns.lan): a server host (`tailwise serve`),
N agent hosts (`tailwise agent`) and the coordinator's host, where this script re-runs itself to
drive the agents through `agent.group.AgentGroup` — the same code `run --agents` uses. On this
2-core machine every agent, the server and the coordinator share the same two CPUs, so the
merged maximum rate shows what one box holds, not what n machines would; the coordinator's cost
per agent per round is what scales to n machines, and is measured as CPU time.

    python bench/agents/run.py [--quick] [--out FILE]   (root: it makes network namespaces)

Prints its figures and writes them as JSON (default bench/out/agents.json). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

AGENT_PORT, SERVE_PORT = 7100, 7200
TOKEN = "bench-" + "0123456789abcdef" * 2


def _inner(args: argparse.Namespace) -> dict:
    """In the coordinator's namespace: drive the agents, time each round."""
    from tailwise.agents.group import AgentGroup
    from tailwise.agents.wire import ClientTls
    from tailwise.spec.load import LoadSpec, protocol

    out = {}
    for n in args.ns:
        addrs = args.agents[:n]
        spec = LoadSpec(targets=[args.target], rate_rps=args.rate, duration_ns=int(args.seconds * 1e9), conns=4 * n,
                        outstanding=4, pin=False, busy_poll=False, protocol=protocol("synthetic"), seed=1)
        group = AgentGroup(addrs, TOKEN, tls=ClientTls.plain())
        session = group.start(spec)
        rounds = []
        while not session.is_finished():
            time.sleep(args.round_s)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            taken = session.take()
            rounds.append({"wall_ms": (time.perf_counter() - wall0) * 1e3, "cpu_ms": (time.process_time() - cpu0) * 1e3,
                           "rows": 0 if taken is None else len(taken.finished)})
        result = session.finish()
        busy = rounds[1:-1] or rounds
        out[str(n)] = {
            "agents": n, "rate_rps": args.rate, "rounds": len(rounds),
            "round_wall_ms_median": statistics.median(r["wall_ms"] for r in busy),
            "round_cpu_ms_median": statistics.median(r["cpu_ms"] for r in busy),
            "round_cpu_ms_max": max(r["cpu_ms"] for r in busy),
            "sent": result.counters.get("sent", 0), "received": result.counters.get("received", 0),
            "completed_rps": result.received_in_window / max(result.elapsed_ns / 1e9, 1e-9),
            "barrier": result.barrier, "error": result.error,
            # Namespaces on one machine share one CLOCK_MONOTONIC: the agents' own time zeros are
            # directly comparable here, which measures the barrier without the offset estimate.
            "true_spread_ns": max(m.start_mono_ns for m in session.members) - min(m.start_mono_ns for m in session.members),
            "offset_estimates_ns": [m.offset.offset_ns for m in session.members],
        }
    if args.max_rate:
        n = max(args.ns)
        spec = LoadSpec(targets=[args.target], rate_rps=args.max_rate, duration_ns=int(args.seconds * 1e9),
                        conns=16 * n, outstanding=16, pin=False, busy_poll=False, sample_every=100,
                        protocol=protocol("synthetic"), seed=2)
        r = AgentGroup(args.agents[:n], TOKEN, tls=ClientTls.plain()).run(spec)
        out["max"] = {"agents": n, "offered_rps": args.max_rate, "sent_rps": r.counters.get("sent", 0) / (r.elapsed_ns / 1e9),
                      "completed_rps": r.received_in_window / (r.elapsed_ns / 1e9), "error": r.error}
    return out


def _wait_ready(lan, token: Path, addrs: list[str]) -> None:
    code = ("import sys,time\nfrom tailwise.agents.client import RemoteAgent\nfrom tailwise.agents.wire import ClientTls\n"
            "from tailwise.errors import TailwiseError\n"
            "for a in sys.argv[1:]:\n  t=time.monotonic()+30\n  while True:\n    try:\n"
            f"      RemoteAgent(a,{TOKEN!r},ClientTls.plain(),call_s=1.0).health(); break\n"
            "    except TailwiseError:\n      assert time.monotonic()<t, a\n      time.sleep(0.2)\n")
    subprocess.run(lan.argv("coord", [sys.executable, "-c", code, *addrs]), check=True, timeout=60,
                   env=os.environ | {"PYTHONPATH": str(ROOT / "python")})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke of the bench itself)")
    ap.add_argument("--out", default=str(ROOT / "bench/out/agents.json"))
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--agents", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--ns", type=int, nargs="*", default=[1, 2, 4], help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=float, default=20_000.0, help=argparse.SUPPRESS)
    ap.add_argument("--max-rate", type=float, default=2_000_000.0, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=10.0, help=argparse.SUPPRESS)
    ap.add_argument("--round-s", type=float, default=1.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        print(json.dumps(_inner(args)))
        return 0
    from tailwise.measure import netns

    seconds = 3.0 if args.quick else args.seconds
    n_max = max(args.ns)
    env = os.environ | {"PYTHONPATH": str(ROOT / "python")}
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"tw-bench-agents-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    token = tmp / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    with netns.lan(["coord", "server", *[f"a{i}" for i in range(n_max)]]) as lan, ExitStack() as stack:
        def start(host: str, argv: list[str]) -> None:
            p = subprocess.Popen(lan.argv(host, argv), stdout=open(tmp / f"{host}.log", "w"), stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
            stack.callback(lambda: (p.kill(), p.wait(10)))

        start("server", [sys.executable, "-m", "tailwise", "serve", "--listen", f"0.0.0.0:{SERVE_PORT}", "--service",
                         "fixed:0", "--no-pin"])
        for i in range(n_max):
            # The bench's own namespaces are a network it trusts: the agents and the coordinator
            # talk in the clear, as they must be told to (issue 33).
            start(f"a{i}", [sys.executable, "-m", "tailwise", "agent", "--listen", f"0.0.0.0:{AGENT_PORT}",
                            "--token-file", str(token), "--allow-targets", f"{lan.ips['server']}/32",
                            "--insecure-plaintext"])
        addrs = [f"{lan.ips[f'a{i}']}:{AGENT_PORT}" for i in range(n_max)]
        _wait_ready(lan, token, addrs)
        inner = [sys.executable, __file__, "--inner", "--agents", *addrs, "--target", f"{lan.ips['server']}:{SERVE_PORT}",
                 "--ns", *map(str, args.ns), "--rate", str(args.rate), "--seconds", str(seconds),
                 "--round-s", str(args.round_s), "--max-rate", str(args.max_rate)]
        done = subprocess.run(lan.argv("coord", inner), capture_output=True, text=True, env=env, timeout=600)
        if done.returncode != 0:
            sys.exit(done.stderr[-3000:])
        res = json.loads(done.stdout)
    res["machine"] = {"cpus": os.cpu_count(), "note": "agents, server and coordinator share these CPUs"}
    print(json.dumps(res, indent=2))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
