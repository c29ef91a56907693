"""startup: how long from the command to its first request, tailwise and the peers side by side.

Each tool is launched 3 times per repeat (5 with one repeat), at 5,000 req/s for 1 s (the peers
with one connection and one thread, tailwise with its defaults), on the client CPU; each launch
gives two figures:

* ``first_request_ms``: from time.monotonic() just before the spawn to the first byte of the first
  request reaching the server. A relay in this process (127.0.0.1, a thread per direction, on the
  server CPU) stands in front of memcached or nginx, passes everything both ways and records
  time.monotonic() when each connection's first client bytes arrive (≈ 0.1 ms late: the relay
  connects upstream before it reads). For tailwise a connection opening with memcached's
  ``stats`` is not a request: tailwise reads the server's counters before its load
  (``stats_ms``: when that read arrived).
* ``wall_s``: the whole command's wall time (10 ms polls), informational.

tailwise's bytecode is compiled first (``python -m compileall``), as pip compiles an installed
package's; ``--before DIR`` adds "tailwise (before)": another checkout's python/ tree, launched the
same way, for a before-and-after in one run.

tailwise with no target (its built-in server, inside the process) has no relay: it runs under
``strace -f --seccomp-bpf -e trace=socket,connect -ttt`` (--seccomp-bpf: the syscalls not traced
run at full speed) and the figure is the first connect(2) of a TCP socket to 127.0.0.1 on the
built-in server's port (read from the summary's ``synthetic://127.0.0.1:PORT``; socket(2) is
traced to leave out a UDP socket tailwise connects to that port first, a route lookup that
sends nothing), less time.time() at the spawn. The engine connects its sockets just before its
first request: this is the first request less the engine's start between the two (against
memcached under strace, 6 ms from the first connect to the first ``get``), and it includes
strace's own start and its stops at the traced calls (plain ``-e trace`` when --seccomp-bpf is
refused: said in the result's ``strace``). The goals (issue 37): tailwise's first
request ≤ 0.5 s after ``tailwise run TARGET``, ≤ 1 s with the built-in server.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import (SERVER_CPU, SLACK_S, TAILWISE, Ctx, cell, fail_text, md_table, noise_summary,
                    noise_text, on_client, real_server, repeated, run_client)
from parsers import median_spread

RATE = 5_000
#: This checkout's package (bench/run puts its python/ tree first on the path).
TAILWISE_TREE = Path(__file__).resolve().parents[2] / "python" / "tailwise"
GOALS_MS = {"target": 500, "built-in": 1000}
FIGS = ("first_request_ms", "wall_s", "stats_ms")


class Relay:
    """127.0.0.1:PORT → the real server's ``upstream`` port, both ways; ``firsts`` holds
    (time.monotonic(), first bytes) of each connection's first data from its client."""

    def __init__(self, upstream: int):
        self.upstream, self.firsts, self.lock = upstream, [], threading.Lock()
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        self.stop, self.open = threading.Event(), set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        os.sched_setaffinity(0, {SERVER_CPU})  # this thread; the pumps it starts inherit it
        while not self.stop.is_set():
            try:
                c, _ = self.lsock.accept()
                u = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except TimeoutError:
                continue
            except OSError:
                if self.stop.is_set():
                    return
                continue
            for s in (c, u):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = [c, u, 0]  # the sockets, and how many directions have ended
            with self.lock:
                self.open |= {c, u}
            threading.Thread(target=self._pump, args=(c, u, pair, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, pair, False), daemon=True).start()

    def _pump(self, src, dst, pair, from_client: bool) -> None:
        first = from_client
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if first:
                    t, first = time.monotonic(), False
                    with self.lock:
                        self.firsts.append((t, data[:24]))
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with self.lock:
            pair[2] += 1
            if pair[2] == 2:  # both directions ended: close the pair
                for s in pair[:2]:
                    s.close()
                    self.open.discard(s)

    def take(self) -> list:
        with self.lock:
            out, self.firsts = sorted(self.firsts), []
        return out

    def close(self) -> None:
        self.stop.set()
        self.lsock.close()
        with self.lock:
            for s in self.open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.open.clear()


@contextlib.contextmanager
def relayed(kind: str):
    """A real server (common.real_server) with a Relay in front; yields (server, relay)."""
    with real_server(kind) as srv:
        relay = Relay(srv.port)
        try:
            yield srv, relay
        finally:
            relay.close()


def verdict(ran) -> dict:
    """tailwise's verdict (its summary's first line): why it exits 1 while it did measure."""
    m = re.search(r"^verdict (\S+)", ran.stdout, re.M)
    return {"verdict": m[1]} if m else {}


def launch(argv: list[str], relay: Relay, skip_stats: bool = False) -> dict:
    relay.take()
    t0 = time.monotonic()
    ran = run_client(on_client(argv), 1 + SLACK_S)
    firsts = relay.take()
    stats = [f for f in firsts if skip_stats and f[1].startswith(b"stats")]
    load = [f for f in firsts if f not in stats]
    r = {"wall_s": round(ran.wall_s, 3), "rc": ran.rc, **verdict(ran)}
    if stats:  # tailwise's read of memcached's counters, before its load: not a request
        r["stats_ms"] = round((stats[0][0] - t0) * 1e3, 1)
    if load:
        r["first_request_ms"] = round((load[0][0] - t0) * 1e3, 1)
        r["first_bytes"] = load[0][1].decode("latin-1")
    else:
        r["why"] = "no request reached the relay; " + fail_text(ran)
    return r


# strace -f -ttt lines: "PID SECONDS.MICROS call(args) = result".
_SOCK = re.compile(r"^(\d+)\s+\S+\s+socket\(AF_INET6?, (SOCK_[A-Z]+).*?(?:= (\d+))?$")
_RESUMED = re.compile(r"^(\d+)\s+\S+\s+<\.\.\. socket resumed>.*= (\d+)$")
_CONNECT = re.compile(r'^\d+\s+([\d.]+)\s+connect\((\d+), \{sa_family=AF_INET, '
                      r'sin_port=htons\((\d+)\), sin_addr=inet_addr\("127\.0\.0\.1"\)')


def first_tcp_connect(trace: str, port: int | None) -> tuple[float | None, int | None]:
    """strace -f -ttt's first connect of a SOCK_STREAM socket to 127.0.0.1:port (any port ≠ 0
    when None): (its wall-clock time, the port)."""
    kinds, pending = {}, {}
    for line in trace.splitlines():
        if m := _SOCK.match(line):
            if m[3]:
                kinds[m[3]] = m[2]
            else:  # "<unfinished ...>": its fd comes on the "resumed" line
                pending[m[1]] = m[2]
        elif m := _RESUMED.match(line):
            kinds[m[2]] = pending.pop(m[1], None)
        elif (m := _CONNECT.match(line)) and kinds.get(m[2]) == "SOCK_STREAM" and int(m[3]) \
                and port in (None, int(m[3])):
            return float(m[1]), int(m[3])
    return None, None


def launch_builtin(ctx: Ctx, argv: list[str], seccomp: bool) -> dict:
    trace = ctx.tmp("strace-") / "trace"
    cmd = ["strace", "-f", *(["--seccomp-bpf"] if seccomp else []), "-e", "trace=socket,connect",
           "-ttt", "-o", str(trace), *argv]
    t_wall = time.time()  # strace -ttt prints wall-clock time
    ran = run_client(on_client(cmd), 1 + SLACK_S)
    m = re.search(r"synthetic://127\.0\.0\.1:(\d+)", ran.stdout)  # the built-in server's port
    port = int(m[1]) if m else None
    t, got = first_tcp_connect(trace.read_text() if trace.exists() else "", port)
    r = {"wall_s": round(ran.wall_s, 3), "rc": ran.rc, "server_port": port, "connect_port": got,
         **verdict(ran)}
    if t is None:
        r["why"] = "no TCP connect to the built-in server in strace's output; " + fail_text(ran)
    else:
        r["first_request_ms"] = round((t - t_wall) * 1e3, 1)
        if port is None:
            r["why"] = "no port in the summary: the first TCP connect to 127.0.0.1 kept, unchecked"
    return r


def seccomp_ok() -> bool:
    try:
        argv = ["strace", "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", os.devnull, "true"]
        p = subprocess.run(argv, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0


def commands(ctx: Ctx, servers: dict, tmp) -> list[tuple[str, str, object]]:
    """(tool, target, argv | () -> argv | why it is skipped) of every cell."""
    def peer(name, build):
        exe = ctx.peer(name)
        return (lambda: build(exe)) if exe else ctx.why_not(name)

    r = str(RATE)
    tw, tw_args = [*TAILWISE, "run"], ["--rate", r, "--duration", "1", "--quiet"]
    # --before: the other checkout's tailwise, by its own python/ tree (the same interpreter).
    before = ["env", f"PYTHONPATH={ctx.before / 'python'}", *tw] if ctx.before else None

    def tailwise(target: str, *args: str) -> list:
        return [("tailwise", target, [*tw, *args, *tw_args])] + \
            ([("tailwise (before)", target, [*before, *args, *tw_args])] if before else [])

    out = []
    if "memcached" in servers:
        p = servers["memcached"][1].port
        out += [
            *tailwise("memcached", f"memcached://127.0.0.1:{p}"),
            ("mutilate", "memcached", peer("mutilate", lambda x: [
                x, "-s", f"127.0.0.1:{p}", "--noload", "-T", "1", "-c", "1", "-t", "1", "-q", r])),
            ("memtier_benchmark", "memcached", peer("memtier_benchmark", lambda x: [
                x, "-s", "127.0.0.1", "-p", str(p), "-P", "memcache_text", "-t", "1", "-c", "1",
                "--ratio=0:1", "--key-maximum=10000", "--test-time=1", f"--rate-limiting={r}",
                "--hide-histogram"]))]
    if "nginx" in servers:
        url = f"http://127.0.0.1:{servers['nginx'][1].port}/fixed"
        (tmp / "targets").write_text(f"GET {url}\n")
        out += [
            *tailwise("nginx /fixed", url),
            ("wrk2", "nginx /fixed", peer("wrk2", lambda x: [
                x, "-t1", "-c1", "-d1s", f"-R{r}", url])),
            ("wrk", "nginx /fixed", peer("wrk", lambda x: [x, "-t1", "-c1", "-d1s", url])),
            ("vegeta", "nginx /fixed", peer("vegeta", lambda x: [
                x, "attack", "-targets", str(tmp / "targets"), "-rate", f"{r}/s", "-duration", "1s",
                "-connections", "1", "-max-connections", "1", "-output", str(tmp / "out.bin")])),
            ("fortio", "nginx /fixed", peer("fortio", lambda x: [
                x, "load", "-qps", r, "-c", "1", "-t", "1s", "-loglevel", "Error", url]))]
    out += [(tool, "built-in (strace)", argv if shutil.which("strace")
             else "strace is not installed (apt-get install strace)") for tool, _, argv in tailwise("built-in")]
    return out


def compile_bytecode(ctx: Ctx) -> None:
    """Each tailwise tree's bytecode, as pip compiles an installed package's: without it (here
    PYTHONDONTWRITEBYTECODE=1) every launch compiles the modules it imports again."""
    for tree in [TAILWISE_TREE, *([ctx.before / "python" / "tailwise"] if ctx.before else [])]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=False, timeout=300)


def run(ctx: Ctx) -> dict:
    per_repeat = max(math.ceil(5 / ctx.repeats), 3)  # ≥ 5 launches per cell in all
    compile_bytecode(ctx)
    seccomp = seccomp_ok()
    res: dict = {"rate_rps": RATE, "launches_per_repeat": per_repeat, "goals_ms": GOALS_MS,
                 "strace": "--seccomp-bpf" if seccomp else "plain -e trace (--seccomp-bpf refused)",
                 "servers": {}}
    rows = []
    with contextlib.ExitStack() as stack:
        servers = {}
        for kind in ("memcached", "nginx"):
            try:
                servers[kind] = stack.enter_context(relayed(kind))  # (server, relay)
                res["servers"][kind] = {"port": servers[kind][0].port,
                                        "relay_port": servers[kind][1].port}
            except (FileNotFoundError, RuntimeError, OSError) as e:
                res["servers"][kind] = {"why": str(e)}
                rows.append(["—", kind, "—", "—", f"server not started: {e}"[:120]])

        def cell_fn(tool, target, argv):
            def fn():
                if isinstance(argv, str):
                    return {"why": argv}
                a = argv() if callable(argv) else argv
                out = []
                for _ in range(per_repeat):
                    if target.startswith("built-in"):
                        r = launch_builtin(ctx, a, seccomp)
                    else:
                        relay = servers["memcached" if target == "memcached" else "nginx"][1]
                        r = launch(a, relay, skip_stats=tool.startswith("tailwise"))
                    why = f" ({r['why'][:160]})" if r.get("why") else ""
                    ctx.log(f"    {tool} → {target}: first request {r.get('first_request_ms')} ms,"
                            f" wall {r['wall_s']} s{why}")
                    out.append(r)
                cmd = " ".join(a).replace(" ".join(TAILWISE), "tailwise").replace("env PYTHONPATH=", "PYTHONPATH=")
                if target.startswith("built-in"):
                    cmd = "strace … " + cmd
                return {"launches": out, "cmd": cmd}
            return fn

        specs = commands(ctx, servers, ctx.tmp("startup-"))
        runs = repeated(ctx, [(f"{t} → {g}", cell_fn(t, g, a)) for t, g, a in specs],
                        server_pids=lambda: [s.pid for s, _ in servers.values()])

    res["cells"], all_cells = {}, []
    for (tool, target, _), (name, rs) in zip(specs, runs.items()):
        all_cells += rs
        ls = [r for rr in rs for r in rr.get("launches", [])]
        c = {k: median_spread([r.get(k) for r in ls]) for k in FIGS}
        c.update({"tool": tool, "target": target,
                  "cmd": next((r["cmd"] for r in rs if r.get("cmd")), None),
                  "n": sum(r.get("first_request_ms") is not None for r in ls), "runs": rs})
        notes = sorted({r["why"][:200] for r in [*rs, *ls] if r.get("why")})
        if c["stats_ms"]:
            notes.insert(0, f"its `stats` read at {c['stats_ms']['median']:.0f} ms, before")
        if target.startswith("built-in") and c["n"]:
            checked = sum(r.get("server_port") is not None for r in ls)
            notes.append(f"connect to the server's port ({checked}/{len(ls)} checked); "
                         "wall under strace")
        rcs = sorted({f"{r['rc']}" + (f" (verdict {r['verdict']})" if r.get("verdict") else "")
                      for r in ls if r.get("rc")})
        if rcs and c["n"]:
            notes.append(f"exit {', '.join(rcs)}: figures kept")
        c["note"] = "; ".join(notes)
        res["cells"][name] = c
        rows.append([tool, target, cell(c["first_request_ms"], 0), cell(c["wall_s"], 2),
                     c["note"][:200]])

    def med(target, tool="tailwise"):
        c = (res["cells"].get(f"{tool} → {target}") or {}).get("first_request_ms")
        return (c or {}).get("median")

    def vs(v, goal):
        return "—" if v is None else f"{v:.0f} ms ({'meets' if v <= goal else 'misses'} ≤ {goal})"

    targets = ("memcached", "nginx /fixed", "built-in (strace)")
    res["tailwise_first_request_ms"] = {t: med(t) for t in targets}
    if ctx.before:
        res["before_first_request_ms"] = {t: med(t, "tailwise (before)") for t in targets}
    res["noise"] = noise_summary(all_cells)
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = md_table(["tool", "target", "first request ms", "whole 1 s run s", "note"], rows)
    goal = GOALS_MS["target"]
    res["note"] = (f"tailwise's median first request: memcached {vs(med('memcached'), goal)}, "
                   f"http {vs(med('nginx /fixed'), goal)}, built-in server "
                   f"{vs(med('built-in (strace)'), GOALS_MS['built-in'])} (issue 37's goals). "
                   f"Median [range] of {per_repeat} launches × {ctx.repeats} repeats, "
                   f"{RATE:,} req/s for 1 s, peers with 1 connection and 1 thread; "
                   f"strace {res['strace']}.")
    if ctx.before:
        res["note"] += (" tailwise (before), " + str(ctx.before) + ": " + ", ".join(
            f"{t} {v:.0f} ms" for t, v in res["before_first_request_ms"].items() if v is not None) + ".")
    return res
