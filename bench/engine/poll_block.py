"""bench/engine/poll_block.py: what `--poll block` costs and what kernel stamps cost (issue 23 item 5).

Three questions, each in alternating runs (so that the shared machine's noise falls on every
variant alike), median and spread of `--repeats` runs, the machine's noise beside each run:

* cost: engine CPU per request (the summary's `engine.cpu_ns_per_request`), the whole client
  process's CPU per request, the engine's sleeps per request (`engine.sleeps`), every-request
  p50/p90/p99 and send lag p99 at 10k req/s against `tailwise serve` (fixed:10us; `--target
  memcached`: memcached -t 1) for `--poll block` and `--poll spin`, for each build given
  (`--root NAME=DIR`: a checkout whose python/ holds a built tailwise), next to memtier_benchmark
  at the same rate when `--memtier PATH` is given (its whole process's CPU, from wait4);
* bias: p50/p99 minus the M/D/1 model at 20 % load of `serve --service fixed:10us` (20k req/s),
  block vs spin (Lancet Fig. 6's case);
* stamps: `--timestamps kernel` vs `user` at 20k req/s against `serve --spin` on CPU 0, the
  client under `taskset -c 1` so that its coordinator shares the engine's CPU (issue 23's case):
  send lag p99, every-request p99, engine stalls and CPU per request;
* coordinator: where that placement's send lag comes from (issue 37 goal 4), the same runs with
  the coordinator as it is, under SCHED_IDLE while the schedule runs (the engine always preempts
  it), or asleep for the whole run (it takes no snapshot: `LocalAgent.poll_s` past the end):
  send lag p50/p99, p99 of the sends no long loop iteration delayed, the requests such an
  iteration delayed, loop iterations > 20 µs per s, and the engine thread's involuntary context
  switches per s (its /proc status, read 1 s after it starts and 0.5 s before the end).

The server is on the lowest CPU, the engine pins itself to the highest. Not a test: nothing here
asserts.

    python bench/engine/poll_block.py [--root after=.] [--root before=/tmp/before] [--repeats 3]
        [--seconds 10] [--memtier PATH] [--target serve|memcached] [--only cost,bias,stamps,coordinator] [--modes block,spin]
        [--coordinator as-is,idle,asleep] [--out FILE]

On a machine that other work keeps busy, run it in a session of its own at a higher autogroup
priority, so that the figures are the tool's (BENCHMARKS.md says how it was run):
`setsid bash -c 'echo -20 > /proc/self/autogroup; exec python bench/engine/poll_block.py …'`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE / "python"))
from tailwise import _core  # noqa: E402
from tailwise.stats.model import model_percentiles  # noqa: E402

CPU_SERVER, CPU_CLIENT = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))
TICK = os.sysconf("SC_CLK_TCK")
LISTEN = re.compile(r"listening on synthetic://(\S+)")
#: A stall longer than this counts as noise (tests/support/noise.py, bench/packet/run.py).
NOISE_STALL_NS = 5_000


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a live process, s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def host_cpu() -> dict:
    """Per CPU busy and steal jiffies, now (/proc/stat)."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if re.match(r"cpu\d", line):
            name, *v = line.split()
            v = [int(x) for x in v]
            out[name] = {"busy": sum(v) - v[3] - v[4], "steal": v[7] if len(v) > 7 else 0}
    return out


def noise_between(a: dict, b: dict, seconds: float, ours_s: float) -> dict:
    """Machine busy and steal over a run's wall time, and the CPU others took (busy − ours: the
    client and the server), in CPUs."""
    busy = sum(b[c]["busy"] - a[c]["busy"] for c in b) / TICK
    steal = sum(b[c]["steal"] - a[c]["steal"] for c in b) / TICK
    return {"busy_cpus": round(busy / seconds, 3), "steal_cpus": round(steal / seconds, 3),
            "foreign_cpus": round(max(busy - ours_s, 0) / seconds, 3)}


def with_noise(r: dict, noise: dict) -> dict:
    """A run's figures, the CPU others took during it among them."""
    return r | {"foreign_cpus": noise["foreign_cpus"], "noise": noise}


def spinner_noise() -> dict:
    """Each CPU's share of 1 s lost to stalls > 5 µs (a pinned spinner)."""
    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        st = _core.measure_stalls(1_000_000_000, NOISE_STALL_NS, cpu)
        out[str(cpu)] = {"lost_fraction": round(st["lost_ns"] / st["duration_ns"], 4), "max_us": round(st["max_ns"] / 1e3)}
    return out


class Serve:
    """`tailwise serve` of a root (or memcached, one thread: `service` "memcached"), on the lowest
    CPU; SIGTERM at the end."""

    scheme = "synthetic"

    def __init__(self, root: Path, service: str, spin: bool):
        self.argv = [sys.executable, "-m", "tailwise", "serve", "--service", service, *(["--spin"] if spin else [])]
        self.env = {**os.environ, "PYTHONPATH": str(root / "python")}
        if service == "memcached":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            self.argv = ["memcached", "-t", "1", "-U", "0", "-l", "127.0.0.1", "-p", str(port), "-u", "nobody", "-vv"]
            self.scheme, self.addr_then = "memcached", f"127.0.0.1:{port}"

    def __enter__(self) -> "Serve":
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(["taskset", "-c", str(CPU_SERVER), *self.argv], env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True)
        for _ in range(600):
            if self.scheme == "memcached":
                host, port = self.addr_then.rsplit(":", 1)
                with socket.socket() as s:
                    if s.connect_ex((host, int(port))) == 0:
                        self.addr = self.addr_then
                        return self
                time.sleep(0.05)
                continue
            self.log.seek(0)
            m = LISTEN.search(self.log.read())
            if m:
                self.addr = m.group(1)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"`{' '.join(self.argv)}` did not listen")

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def timed(argv: list[str], env: dict, timeout: float) -> tuple[str, str, float]:
    """Run to the end; (stdout, stderr, CPU s of the process and its children, from wait4)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return out.read(), err.read(), ru.ru_utime + ru.ru_stime


def pct(hist: dict, p: float) -> float | None:
    return next((x["value_ns"] for x in hist.get("percentiles", []) if x["p"] == p), None)


#: `tailwise` as `python -m tailwise` runs it, with the coordinator changed (the coordinator question)
#: and the engine thread's involuntary context switches read from inside: 1 s after the thread
#: starts and 0.5 s before the run's end, printed to stderr as `CTXT <switches per s>`.
COORDINATOR = r'''
import os, re, sys, threading, time
import tailwise.driver.local as local
how, seconds = sys.argv.pop(1), float(sys.argv.pop(1))
if how == "asleep":
    local.LocalAgent.poll_s = seconds + 1.0
elif how == "idle":
    ran = local.run_to_end
    def run_to_end(session, *a, **k):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # this thread only
        try:
            return ran(session, *a, **k)
        finally:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    local.run_to_end = run_to_end
def switches():
    for t in os.listdir("/proc/self/task"):
        try:
            if open(f"/proc/self/task/{t}/comm").read().startswith("tw-engine"):
                return int(re.search(r"nonvoluntary_ctxt_switches:\s+(\d+)", open(f"/proc/self/task/{t}/status").read())[1])
        except OSError:
            pass
def sample():
    for _ in range(3000):  # the engine's thread, once it exists (a build may load for a while first)
        if switches() is not None:
            break
        time.sleep(0.01)
    time.sleep(1.0)
    a, t = switches(), time.monotonic()
    time.sleep(max(seconds - 1.5, 0.1))
    b = switches()
    if a is not None and b is not None:
        print(f"CTXT {(b - a) / (time.monotonic() - t):.2f}", file=sys.stderr, flush=True)
threading.Thread(target=sample, daemon=True).start()
sys.argv[0] = "tailwise"
from tailwise.cli.main import main
main()
'''


def tailwise_run(root: Path, srv: Serve, rate: float, seconds: float, extra: list[str], prefix: list[str],
                 coordinator: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    how = ["-c", COORDINATOR, coordinator, f"{seconds:g}"] if coordinator else ["-m", "tailwise"]
    argv = [*prefix, sys.executable, *how, "run", f"{srv.scheme}://{srv.addr}", "--rate", f"{rate:.0f}",
            "--duration", f"{seconds:g}", "--json", "--quiet", *extra]
    server0, host0, t0 = proc_cpu_s(srv.proc.pid), host_cpu(), time.monotonic()
    stdout, stderr, cpu_s = timed(argv, env, seconds + 120)
    server_s, host1, wall = proc_cpu_s(srv.proc.pid) - server0, host_cpu(), time.monotonic() - t0
    try:
        s = json.loads(stdout)
    except ValueError:
        raise RuntimeError(f"`{' '.join(argv)}` printed no summary: {stderr.strip()[-400:]}") from None
    eng, lat, lag, n = s["engine"], s["latency"]["histogram"], s["send_lag"], s["counters"]["sent"]
    ctxt = re.search(r"^CTXT (\S+)", stderr, re.M)
    return with_noise({
        **({"engine_involuntary_per_s": float(ctxt[1])} if ctxt else {}),
        "send_lag_p50_us": pct(lag, 50.0) / 1e3,
        "delayed_by_loop": float(n - lag.get("unstalled", {}).get("count", n)),
        "loop_stalls_per_s": eng["stalls"] / seconds,
        "engine_cpu_us_per_req": eng["cpu_ns_per_request"] / 1e3,
        "process_cpu_us_per_req": cpu_s / n * 1e6,
        "p50_us": pct(lat, 50.0) / 1e3, "p90_us": pct(lat, 90.0) / 1e3, "p99_us": pct(lat, 99.0) / 1e3,
        "sleeps_per_req": eng.get("sleeps", 0) / n,
        "send_lag_p99_us": pct(lag, 99.0) / 1e3,
        "send_lag_unstalled_p99_us": (pct(lag.get("unstalled", {}), 99.0) or 0) / 1e3,
        "engine_stalls": eng["stalls"], "engine_stalled_s": eng["stalled_s"], "preemptions": eng["preemptions"],
        "sent": n, "rate_check": next((c["ok"] for c in s["checks"] if c["name"] == "rate"), None),
    }, noise_between(host0, host1, wall, cpu_s + server_s))


def memtier_run(memtier: str, srv: Serve, rate: float, seconds: float) -> dict:
    """memtier_benchmark at `rate` (8 connections, gets): its whole process's CPU per request."""
    conns = 8
    host, port = srv.addr.rsplit(":", 1)
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "m.json"
        argv = ["taskset", "-c", str(CPU_CLIENT), memtier, "-s", host, "-p", port, "-P", "memcache_text", "-t", "1",
                "-c", str(conns), "--ratio", "0:1", "--test-time", f"{seconds:.0f}", "--rate-limiting",
                f"{rate / conns:.0f}", "--hide-histogram", "--json-out-file", str(js), "--key-maximum", "10000",
                "--print-percentiles", "50,90,99"]
        server0, host0, t0 = proc_cpu_s(srv.proc.pid), host_cpu(), time.monotonic()
        _, stderr, cpu_s = timed(argv, dict(os.environ), seconds + 60)
        server_s, host1, wall = proc_cpu_s(srv.proc.pid) - server0, host_cpu(), time.monotonic() - t0
        try:
            tot = json.loads(js.read_text())["ALL STATS"]["Totals"]
        except (OSError, ValueError, KeyError):
            raise RuntimeError(f"memtier wrote no results: {stderr.strip()[-400:]}") from None
    n = tot["Count"] if "Count" in tot else tot["Ops/sec"] * seconds
    pcts = tot.get("Percentile Latencies", {})
    return with_noise({"process_cpu_us_per_req": cpu_s / n * 1e6, "ops_per_s": tot["Ops/sec"],
                       "p50_us": (pcts.get("p50.00") or 0) * 1e3, "p90_us": (pcts.get("p90.00") or 0) * 1e3,
                       "p99_us": (pcts.get("p99.00") or 0) * 1e3},
                      noise_between(host0, host1, wall, cpu_s + server_s))


def summarise(runs: list[dict]) -> dict:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {k: {"median": statistics.median(r[k] for r in runs), "min": min(r[k] for r in runs),
                "max": max(r[k] for r in runs)} for k in keys}


def alternate(variants: dict, repeats: int) -> dict:
    """Each variant once per round, in turn; every run kept, then medians and spread; a pinned
    spinner's lost time on each CPU before and after."""
    before = spinner_noise()
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for i in range(repeats):
        for name, fn in variants.items():
            r = fn()
            runs[name].append(r)
            shown = ", ".join(f"{k} {v:.1f}" for k, v in r.items() if isinstance(v, float))
            print(f"  round {i + 1} {name}: {shown}", flush=True)
    after = spinner_noise()
    print(f"  a pinned spinner's lost share of 1 s, before and after: {before}, {after}", flush=True)
    return {"variants": {name: {"runs": rs, "summary": summarise(rs)} for name, rs in runs.items()},
            "spinner_lost": {"before": before, "after": after}}


def show(title: str, res: dict, keys: list[str]) -> None:
    print(f"\n{title} (median [min–max])")
    print(f"{'variant':<18}" + "".join(f"{k:>30}" for k in keys))
    for name, r in res["variants"].items():
        cells = []
        for k in keys:
            s = r["summary"].get(k)
            cells.append("—" if s is None else f"{s['median']:.1f} [{s['min']:.1f}–{s['max']:.1f}]")
        print(f"{name:<18}" + "".join(f"{c:>30}" for c in cells))


def has_mode(root: Path, mode: str) -> bool:
    """Whether a build's CLI knows `--poll MODE` (one from before a mode was added does not)."""
    return f'"{mode}"' in (root / "python" / "tailwise" / "cli" / "options.py").read_text()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", default=[], metavar="NAME=DIR",
                    help="a build to measure (repeatable; the first one's server is used) [this checkout]")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--memtier", help="memtier_benchmark binary, measured beside in the cost question")
    ap.add_argument("--only", default="cost,bias,stamps,coordinator")
    ap.add_argument("--target", default="serve", choices=["serve", "memcached"],
                    help="the cost question's server: tailwise serve (fixed:10us) or memcached -t 1")
    ap.add_argument("--modes", default="block,spin", help="--poll modes of the cost and bias questions")
    ap.add_argument("--coordinator", default="as-is,idle,asleep",
                    help="the coordinator question's variants: as-is (as the build places it), idle (SCHED_IDLE "
                         "while the schedule runs), asleep (no snapshot during the run)")
    ap.add_argument("--out", default=str(HERE / "bench" / "out" / "poll-block.json"))
    args = ap.parse_args()
    roots = dict(r.split("=", 1) for r in args.root) or {"this": str(HERE)}
    roots = {k: Path(v).resolve() for k, v in roots.items()}
    first = next(iter(roots.values()))
    only, modes = set(args.only.split(",")), args.modes.split(",")
    started = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())
    out: dict = {"started": started, "roots": {k: str(v) for k, v in roots.items()}, "seconds": args.seconds,
                 "repeats": args.repeats, "cpus": {"server": CPU_SERVER, "client": CPU_CLIENT}}
    sec = args.seconds
    if "cost" in only:
        with Serve(first, "fixed:10us" if args.target == "serve" else "memcached", spin=False) as srv:
            variants = {f"{name} {mode}": (lambda root=root, mode=mode: tailwise_run(root, srv, 10_000, sec, ["--poll", mode], []))
                        for name, root in roots.items() for mode in modes if has_mode(root, mode)}
            if args.memtier:
                variants["memtier"] = lambda: memtier_run(args.memtier, srv, 10_000, sec)
            print(f"cost: 10k req/s against {srv.scheme}://{srv.addr}", flush=True)
            out["cost"] = alternate(variants, args.repeats)
        show("cost at 10k req/s", out["cost"], ["engine_cpu_us_per_req", "process_cpu_us_per_req", "sleeps_per_req",
                                                "p50_us", "p90_us", "p99_us", "send_lag_p99_us", "foreign_cpus"])
    if "bias" in only:
        model = {p["p"]: p["value_ns"] / 1e3 for p in model_percentiles("fixed:10us", 0.2, ps=[50.0, 99.0])["percentiles"]}
        out["model_us"] = model

        def bias(root: Path, mode: str) -> dict:
            r = tailwise_run(root, srv, 20_000, sec, ["--poll", mode], [])
            return r | {"p50_minus_model_us": r["p50_us"] - model[50.0], "p99_minus_model_us": r["p99_us"] - model[99.0]}

        with Serve(first, "fixed:10us", spin=False) as srv:
            print("bias: 20 % load of fixed:10us (20k req/s)", flush=True)
            out["bias"] = alternate({f"{name} {mode}": (lambda root=root, mode=mode: bias(root, mode))
                                     for name, root in roots.items() for mode in modes}, args.repeats)
        show("bias at 20 % of fixed:10us", out["bias"], ["p50_minus_model_us", "p99_minus_model_us", "send_lag_p99_us",
                                                         "engine_cpu_us_per_req", "foreign_cpus"])
    if "stamps" in only:
        client = ["taskset", "-c", str(CPU_CLIENT)]
        with Serve(first, "fixed:10us", spin=True) as srv:
            print("stamps: `serve --spin` on the server CPU, the client under taskset on the engine's", flush=True)
            out["stamps"] = alternate({f"{name} {s}": (lambda root=root, s=s: tailwise_run(root, srv, 20_000, sec,
                                                                                           ["--timestamps", s], client))
                                       for name, root in roots.items() for s in ("kernel", "user")}, args.repeats)
        show("kernel vs user stamps at 20k req/s", out["stamps"], ["send_lag_p99_us", "p99_us", "engine_stalls",
                                                                   "engine_cpu_us_per_req", "foreign_cpus"])
    if "coordinator" in only:
        client = ["taskset", "-c", str(CPU_CLIENT)]
        with Serve(first, "fixed:10us", spin=True) as srv:
            print("coordinator: `serve --spin` on the server CPU, the client under taskset on the engine's", flush=True)
            out["coordinator"] = alternate({f"{name} {how}": (lambda root=root, how=how: tailwise_run(
                root, srv, 20_000, sec, ["--conns", "8", "--outstanding", "4"], client, coordinator=how))
                for name, root in roots.items() for how in args.coordinator.split(",")}, args.repeats)
        show("the coordinator on the engine's CPU, 20k req/s", out["coordinator"],
             ["send_lag_p99_us", "send_lag_unstalled_p99_us", "delayed_by_loop", "loop_stalls_per_s",
              "engine_involuntary_per_s", "foreign_cpus"])
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
