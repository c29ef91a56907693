"""bench/engine/syscalls.py: system calls and wake-ups a request, tailwise against memtier_benchmark (issue 37 goal 2).

At 10k req/s against memcached (one thread, on the lowest CPU; the client on the highest), for
each build given (`--root NAME=DIR`) in each `--poll` mode of `--modes` it has, and memtier_benchmark (`--memtier PATH`, 16 connections
rate-limited to 10k in all), in alternating runs of 8 s, counted over 3 s from 3 s in:

* the client's system calls a request, by kernel tracepoint (`perf stat -e syscalls:sys_enter_*`:
  counted in the kernel, so the thread runs as it would — under `strace -c` each call costs ~10×
  and the engine falls behind its schedule, which changes the calls it makes): tailwise's engine
  thread, memtier's whole process;
* memcached's voluntary context switches a request: how often the server slept and had to be woken
  (on a VM, a wake-up across CPUs is an IPI that the sender pays inside `send`);
* the client's own sleeps a request (voluntary context switches: the engine thread's, memtier's
  process's);
* tailwise's engine CPU a request, p50 and p90 (its summary).

Requests a second are taken as the rate asked (10k). Not a test: nothing here asserts.

    python bench/engine/syscalls.py [--root after=.] [--root before=/tmp/before] [--memtier PATH]
        [--modes block,lean] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from poll_block import CPU_CLIENT, Serve, has_mode, spinner_noise  # noqa: E402

RATE, SECONDS, FROM_S, COUNT_S = 10_000, 8, 3, 3
CALLS = ("sendto", "write", "writev", "recvmsg", "recvmmsg", "recvfrom", "read", "readv", "ioctl", "epoll_wait", "epoll_pwait",
         "epoll_pwait2", "timerfd_settime", "clock_nanosleep")


def sleeps_of(pid: int, tid: int | None = None) -> int:
    """Voluntary context switches of one thread, or of every thread of a process."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        if tid is None or t.name == str(tid):
            for line in (t / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def engine_thread(pid: int) -> int | None:
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (t / "comm").read_text().startswith("tw-engine"):
                return int(t.name)
        except OSError:
            pass
    return None


def count(pid: int, tid: int | None, server_pid: int) -> dict:
    """System calls a request of the client (thread `tid` of `pid`, or the whole process), its sleeps
    and the server's, over COUNT_S."""
    events = ",".join([f"syscalls:sys_enter_{c}" for c in CALLS] + ["raw_syscalls:sys_enter"])
    target = ["-t", str(tid)] if tid else ["-p", str(pid)]
    s0, c0 = sleeps_of(server_pid), sleeps_of(pid, tid)
    out = subprocess.run(["perf", "stat", "-x,", "-e", events, *target, "--", "sleep", str(COUNT_S)],
                         capture_output=True, text=True).stderr
    s1, c1 = sleeps_of(server_pid), sleeps_of(pid, tid)
    n = RATE * COUNT_S
    calls = {}
    for line in out.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[0].isdigit() and int(parts[0]) > 0:
            calls[parts[2].split(":")[1].removeprefix("sys_enter_").replace("sys_enter", "all")] = int(parts[0]) / n
    return {"syscalls_per_req": calls.get("all", 0.0), "calls": calls, "client_sleeps_per_req": (c1 - c0) / n,
            "server_sleeps_per_req": (s1 - s0) / n}


def tailwise(root: Path, srv: Serve, poll: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    argv = ["taskset", "-c", str(CPU_CLIENT), sys.executable, "-m", "tailwise", "run", f"memcached://{srv.addr}",
            "--rate", str(RATE), "--duration", str(SECONDS), "--poll", poll, "--json", "--quiet"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, tid = time.monotonic() + 60, None
    while tid is None and time.monotonic() < deadline and proc.poll() is None:
        tid = engine_thread(proc.pid)
        time.sleep(0.01)
    time.sleep(FROM_S)
    counted = count(proc.pid, tid, srv.proc.pid) if tid else {}
    stdout, stderr = proc.communicate(timeout=SECONDS + 120)
    s = json.loads(stdout) if stdout.strip() else {}
    if not s or not counted:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {stderr.strip()[-400:]}")
    eng, pcts = s["engine"], {p["p"]: (p["value_ns"] or 0) / 1e3 for p in s["latency"]["percentiles"]}
    return counted | {"engine_cpu_us_per_req": eng["cpu_ns_per_request"] / 1e3,
                      "p50_us": pcts[50.0], "p90_us": pcts[90.0]}


def memtier(path: str, srv: Serve) -> dict:
    host, port = srv.addr.rsplit(":", 1)
    conns = 16
    argv = ["taskset", "-c", str(CPU_CLIENT), path, "-s", host, "-p", port, "-P", "memcache_text", "-t", "1",
            "-c", str(conns), "--ratio", "0:1", "--test-time", str(SECONDS), "--rate-limiting", str(RATE // conns),
            "--hide-histogram", "--key-maximum", "10000"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(FROM_S)
    counted = count(proc.pid, None, srv.proc.pid)
    proc.wait(timeout=SECONDS + 60)
    return counted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--memtier", help="memtier_benchmark binary")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", default="block,lean", help="--poll modes, each tried with every build that has it")
    ap.add_argument("--out", default=str(HERE / "bench" / "out" / "syscalls.json"))
    args = ap.parse_args()
    roots = {k: Path(v).resolve() for k, v in (r.split("=", 1) for r in args.root)} or {"this": HERE}
    first = next(iter(roots.values()))
    before = spinner_noise()
    runs: dict[str, list[dict]] = {}
    with Serve(first, "memcached", spin=False) as srv:
        for i in range(args.repeats):
            for (name, root), mode in itertools.product(roots.items(), args.modes.split(",")):
                if not has_mode(root, mode):
                    continue
                key = f"{name} {mode}"
                runs.setdefault(key, []).append(tailwise(root, srv, mode))
                print(f"  round {i + 1} {key}: {runs[key][-1]}", flush=True)
            if args.memtier:
                runs.setdefault("memtier", []).append(memtier(args.memtier, srv))
                print(f"  round {i + 1} memtier: {runs['memtier'][-1]}", flush=True)
    noise = {"before": before, "after": spinner_noise()}
    keys = ["syscalls_per_req", "client_sleeps_per_req", "server_sleeps_per_req", "engine_cpu_us_per_req", "p50_us", "p90_us"]
    print(f"\nat {RATE} req/s against memcached -t 1 (median [min–max] of {args.repeats})")
    print("variant".ljust(14) + "".join(k.rjust(26) for k in keys))
    summary = {}
    for name, rs in runs.items():
        summary[name] = {k: [r[k] for r in rs] for k in keys if k in rs[0]}
        cells = [f"{statistics.median(v):.2f} [{min(v):.2f}–{max(v):.2f}]" for v in summary[name].values()]
        cells += ["—"] * (len(keys) - len(cells))
        print(name.ljust(14) + "".join(c.rjust(26) for c in cells))
    print(f"a pinned spinner's lost share of 1 s, before and after: {noise['before']}, {noise['after']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"runs": runs, "noise": noise}, indent=1))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
