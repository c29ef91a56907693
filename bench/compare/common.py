"""What every question of bench/run shares: where things run, how a client is run and measured,
the machine's noise, servers on CPU 0, and the tables.

Placement: servers on the lowest CPU (``taskset``), clients on the highest (``taskset -c``),
tailwise included (its coordinator then shares the engine's CPU, as a peer's threads do).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.support.servers: the test suite's server starters

from tailwise import _core  # noqa: E402

from parsers import median_spread  # noqa: E402

TAILWISE = [sys.executable, "-m", "tailwise"]
#: A client may run this much longer than asked (start-up, loading, analysis) before it is killed.
SLACK_S = 60.0
#: A stall longer than this counts as noise (tests/support/noise.py, bench/packet).
NOISE_STALL_NS = 5_000
#: Shortest span whose steal and foreign CPU are worth a figure (/proc/stat counts 10 ms jiffies).
MIN_NOISE_SPAN_S = 1.0


def cpus() -> tuple[int, int]:
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[0], allowed[-1]


SERVER_CPU, CLIENT_CPU = cpus()


def on_client(argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(CLIENT_CPU), *argv]


def on_server(argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(SERVER_CPU), *argv]


@dataclass
class Ctx:
    """One bench/run invocation: its options, the peers found, durations, the JSON it collects."""

    peers: dict
    repeats: int
    quick: bool
    seconds: float
    work: Path
    log: callable = print
    #: --before: another checkout, measured beside this one where a question compares installations.
    before: Path | None = None
    started: float = field(default_factory=time.monotonic)

    def peer(self, name: str) -> str | None:
        return (self.peers.get(name) or {}).get("path")

    def why_not(self, name: str) -> str:
        return (self.peers.get(name) or {}).get("why") or f"{name} unknown"

    def tmp(self, prefix: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.work))


# ------------------------------------------------------------------------------------ noise

def _proc_stat() -> dict:
    """Jiffies summed over the CPUs we use: busy (user+nice+system), irq (irq+softirq), steal."""
    use = {SERVER_CPU, CLIENT_CPU}
    busy = irq = steal = 0
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+) (.*)", line)
            if m and int(m.group(1)) in use:
                v = [int(x) for x in m.group(2).split()]
                busy += v[0] + v[1] + v[2]
                irq += v[5] + v[6]
                steal += v[7] if len(v) > 7 else 0
    return {"busy": busy, "irq": irq, "steal": steal}


def pid_cpu_s(pid: int) -> float | None:
    """utime + stime of a live process (all its threads), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Noise:
    """The machine's noise over one measured span: steal and the CPU time of processes that are
    not ours (busy time of our two CPUs minus this process, its reaped children and the live
    ``pids`` we name: the servers). A share of the two CPUs' wall time."""

    def __init__(self, pids: list[int] | None = None):
        self.pids = [p for p in (pids or []) if p]

    def _ours(self) -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system + sum(pid_cpu_s(p) or 0 for p in self.pids)

    def __enter__(self) -> "Noise":
        self.t0, self.s0, self.o0 = time.monotonic(), _proc_stat(), self._ours()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.monotonic() - self.t0
        s1, o1 = _proc_stat(), self._ours()
        hz = os.sysconf("SC_CLK_TCK")
        span = wall * 2  # two CPUs
        busy = (s1["busy"] - self.s0["busy"]) / hz
        # /proc/stat counts in jiffies (10 ms): over a span shorter than MIN_NOISE_SPAN_S one
        # jiffy is several per cent, so such a span has no figures (stats' 10k round is ~30 ms).
        short = wall < MIN_NOISE_SPAN_S
        self.figures = {
            "steal": None if short else round((s1["steal"] - self.s0["steal"]) / hz / span, 4),
            "foreign_cpu": None if short else round(max(busy - (o1 - self.o0), 0.0) / span, 4),
            "wall_s": round(wall, 2),
        }


#: CPUs a `tailwise serve --spin` of ours occupies now: a spinner there would time our own server
#: (it lost ~51 % of its time beside one), not the machine, so it is not run there.
_SPINNING: set[int] = set()


def spinner() -> dict:
    """What a lone pinned spinner loses on each of our CPUs (0.3 s each): stalls > 5 µs. A CPU our
    own spinning server holds is left out (no key)."""
    out = {}
    for cpu in sorted({SERVER_CPU, CLIENT_CPU} - _SPINNING):
        st = _core.measure_stalls(300_000_000, NOISE_STALL_NS, cpu)
        # Descheduled past its own end, a spinner can "lose" more than its span: at most all of it.
        out[str(cpu)] = round(min(st["lost_ns"] / st["duration_ns"], 1.0), 4)
    return out


def noise_summary(cells: list[dict]) -> dict:
    """Noise over a question: the spinner's lost share, steal and foreign CPU (median, max)."""
    def ms(vals):
        s = median_spread(vals)
        return None if s is None else {"median": s["median"], "max": s["max"]}
    return {
        "spinner_lost": ms([v for c in cells for v in (c.get("spinner") or {}).values()]),
        "steal": ms([c["noise"]["steal"] for c in cells if (c.get("noise") or {}).get("steal") is not None]),
        "foreign_cpu": ms([c["noise"]["foreign_cpu"] for c in cells
                           if (c.get("noise") or {}).get("foreign_cpu") is not None]),
    }


def noise_text(ns: dict) -> str:
    def f(k):
        v = ns.get(k)
        return "—" if v is None else f"{v['median']:.1%} (max {v['max']:.1%})"
    busy = max((ns.get(k) or {}).get("max", 0) for k in ("spinner_lost", "foreign_cpu"))
    verdict = "busy: other work took these CPUs, figures are noisy" if busy > 0.05 else \
        "quiet enough" if busy < 0.025 else "somewhat busy"
    return (f"machine noise: spinner lost {f('spinner_lost')}, steal {f('steal')}, "
            f"foreign CPU {f('foreign_cpu')} — {verdict}")


# ----------------------------------------------------------------------------------- clients

@dataclass
class Ran:
    """A client run: exit code, output, its own CPU (from wait4) and peak resident memory (VmHWM)."""

    rc: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    maxrss_mb: float
    rss_mb_series: list[float]
    timed_out: bool = False


def run_client(argv: list[str], timeout_s: float, rss_every_s: float | None = None, env: dict | None = None,
               during=None) -> Ran:
    """Run a client to its end (killed after ``timeout_s``), stdin closed. Its CPU comes from wait4
    (the process and the children it reaped); its peak RSS is the last VmHWM read every 10 ms, not
    wait4's ru_maxrss: subprocess starts the child with vfork, and exec then records the parent's
    high-water mark as the child's (kernel exec_mmap), so every small peer read as this driver's
    size. ``rss_every_s`` samples VmRSS.
    ``during(pid, t_since_start)`` is called every 10 ms while it runs (a freeze of the server)."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True, env=env,
                            start_new_session=True)
    series: list[float] = []
    next_rss = t0
    timed_out = False
    hwm_mb = 0.0
    while True:
        hwm_mb = max(hwm_mb, _vm(proc.pid, "VmHWM") or 0.0)
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        now = time.monotonic()
        if rss_every_s and now >= next_rss:
            series.append(_vm(proc.pid, "VmRSS") or 0.0)
            next_rss += rss_every_s
        if during is not None:
            during(proc.pid, now - t0)
        if now - t0 > timeout_s:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    return Ran(proc.returncode, out.read(), err.read(), time.monotonic() - t0, ru.ru_utime + ru.ru_stime,
               hwm_mb, series, timed_out)


def _vm(pid: int, key: str) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def tailwise_client(args: list[str], seconds: float, pin: str = "taskset", rss_every_s: float | None = None,
                    during=None) -> tuple[dict | None, Ran]:
    """``tailwise run ARGS --duration S --json --quiet``; pin "taskset" puts the whole process on the
    client CPU, "self" lets tailwise pin its engine (the coordinator then floats)."""
    argv = [*TAILWISE, "run", *args, "--duration", f"{seconds:g}", "--json", "--quiet"]
    if pin == "taskset":
        argv = on_client(argv)
    ran = run_client(argv, seconds + SLACK_S, rss_every_s=rss_every_s, during=during)
    try:
        return json.loads(ran.stdout), ran
    except ValueError:
        return None, ran


def fail_text(ran: Ran) -> str:
    text = (ran.stderr.strip() or ran.stdout.strip()).splitlines()[-3:]
    return ("timed out; " if ran.timed_out else f"exit {ran.rc}; ") + " / ".join(text)[-300:]


def cpu_us_per_req(ran: Ran, requests: int | None) -> float | None:
    return ran.cpu_s / requests * 1e6 if requests else None


# ----------------------------------------------------------------------------------- servers

def pin_to_server_cpu(pid: int) -> None:
    """Every thread of a started server onto the server CPU (threads it starts later inherit)."""
    subprocess.run(["taskset", "-a", "-cp", str(SERVER_CPU), str(pid)], capture_output=True, timeout=10)


@contextlib.contextmanager
def real_server(kind: str):
    """memcached (one thread), redis-server or nginx (one worker) on a free loopback port, on the
    server CPU, always stopped (tests/support/servers.py)."""
    from tests.support import servers
    start = {"memcached": lambda: servers.memcached_server(threads=1), "redis": servers.redis_server,
             "nginx": servers.nginx_server}[kind]
    with start() as srv:
        pin_to_server_cpu(srv.pid)
        yield srv


@contextlib.contextmanager
def tailwise_server(service: str, spin: bool = True):
    """``tailwise serve --service S --workers 1`` on the server CPU; yields (host:port, pid)."""
    argv = on_server([*TAILWISE, "serve", "--listen", "127.0.0.1:0", "--workers", "1", "--service", service,
                      *(["--spin"] if spin else [])])
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        addr = None
        while addr is None:
            log.seek(0)
            m = re.search(r"(127\.0\.0\.1:\d+)", log.read())
            if m:
                addr = m.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"tailwise serve did not start: {log.read()[-500:]}")
            else:
                time.sleep(0.05)
        if spin:
            _SPINNING.add(SERVER_CPU)
        yield addr, proc.pid
    finally:
        _SPINNING.discard(SERVER_CPU)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


# ------------------------------------------------------------------------------------ repeats

def repeated(ctx: Ctx, cells: list[tuple[str, callable]], server_pids=lambda: []) -> dict:
    """Run every cell once per repeat, interleaved (A B C, A B C, …), each inside a Noise span,
    with the spinner's reading before each repeat. Returns {cell name: [result dict per repeat]}."""
    runs: dict[str, list[dict]] = {name: [] for name, _ in cells}
    for rep in range(ctx.repeats):
        spin = spinner()
        for name, fn in cells:
            with Noise(server_pids()) as n:
                try:
                    r = fn()
                except (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                    r = {"why": f"{type(e).__name__}: {e}"[:400]}
            r["noise"], r["spinner"] = n.figures, spin
            runs[name].append(r)
            ctx.log(f"  [{rep + 1}/{ctx.repeats}] {name}: " + brief(r))
    return runs


def brief(r: dict) -> str:
    if r.get("why") and r.get("p50_us") is None and r.get("rps") is None:
        return "skipped/failed: " + r["why"]
    parts = [f"{k} {r[k]:,.1f}" for k in ("p50_us", "p99_us", "p999_us", "rps") if r.get(k) is not None]
    return ", ".join(parts) + (f" ({r['why']})" if r.get("why") else "")


def aggregate(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """Median and spread of each figure over the repeats; the reasons a repeat gave none."""
    out = {k: median_spread([r.get(k) for r in runs]) for k in keys}
    whys = sorted({r["why"] for r in runs if r.get("why")})
    if whys:
        out["why"] = "; ".join(whys)
    return out


# ------------------------------------------------------------------------------------- tables

def fmt(v, digits: int = 1) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if abs(v) >= 10_000:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def cell(ms: dict | None, digits: int = 1) -> str:
    """"median [min–max]" of a median_spread, or —."""
    if not ms:
        return "—"
    if ms["n"] == 1 or ms["min"] == ms["max"]:
        return fmt(ms["median"], digits)
    return f"{fmt(ms['median'], digits)} [{fmt(ms['min'], digits)}–{fmt(ms['max'], digits)}]"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
