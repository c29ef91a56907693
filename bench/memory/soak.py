"""bench/memory: a run's resident memory over time (issue 23 item 5, "a soak benchmark shows the
resident set over time").

Prints one line per case and writes the figures as JSON (default bench/out/memory.json). Not a
test: nothing here asserts; the headline goes into BENCHMARKS.md ("Memory").

    python bench/memory/soak.py [--minutes 3] [--rate 50k] [--cases default,soak] [--no-out]

Cases:
* ``default``: ``tailwise run`` against the built-in server, every setting its default (the
  adaptive run: it ends when p99's CI is met, at most --max-time 60 s).
* ``default10``: the same with ``--duration 10``: a default run's length, fixed.
* ``soak``: ``tailwise run memcached://127.0.0.1:PORT --rate R --duration M`` against
  ``memcached -p PORT -t 1 -U 0`` (started here, stopped at the end) with ``--out`` into a
  scratch directory (unless --no-out), ``--samples-format`` csv or parquet.

Every ``--interval`` (1 s) the process's VmRSS and VmHWM are read from /proc/PID/status. The
JSON holds each series, the peak (VmHWM at the end), the growth per second while measuring (a
least-squares slope over the middle of the schedule: from 20 % to 95 % of --duration, the
statistics' rounds and the final write left out), the peak after the schedule's end (analysis
and write), what a 1-hour run would need at that slope, and the results directory's size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _status(pid: int) -> dict[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return {k: int(v) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", text, re.M)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def watch(cmd: list[str], interval_s: float, env: dict) -> dict:
    """Run ``cmd``, reading its memory every ``interval_s``: the series and how it ended."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    series = []
    last = None
    while proc.poll() is None:
        st = _status(proc.pid)
        if st and "VmRSS" in st:
            last = st
            series.append((round(time.monotonic() - t0, 2), st["VmRSS"], st["VmHWM"]))
        time.sleep(interval_s)
    out, err = proc.communicate()
    return {"cmd": cmd, "exit": proc.returncode, "wall_s": round(time.monotonic() - t0, 2),
            "series_t_rss_hwm_kb": series, "peak_kb": max((h for _, _, h in series), default=None),
            "last_hwm_kb": None if last is None else last["VmHWM"], "stdout": out, "stderr": err[-2000:]}


def _slope_kb_s(series: list, t_from: float, t_to: float) -> float | None:
    pts = [(t, r) for t, r, _ in series if t_from <= t <= t_to]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mr = sum(r for _, r in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return sum((t - mt) * (r - mr) for t, r in pts) / den if den else None


def _summarise(name: str, w: dict, duration_s: float | None, start_s: float) -> dict:
    s = w["series_t_rss_hwm_kb"]
    row = {"case": name, **{k: w[k] for k in ("cmd", "exit", "wall_s", "peak_kb")}}
    if duration_s:
        end = start_s + duration_s
        slope = _slope_kb_s(s, start_s + 0.2 * duration_s, start_s + 0.95 * duration_s)
        # The second half: once the bounded subsample is full, what still grows with the length.
        steady = _slope_kb_s(s, start_s + 0.5 * duration_s, start_s + 0.95 * duration_s)
        during = [r for t, r, _ in s if t <= end]
        after = [r for t, r, _ in s if t > end]
        at_end = during[-1] if during else 0
        row |= {"growth_kb_per_s": None if slope is None else round(slope, 1),
                "growth_second_half_kb_per_s": None if steady is None else round(steady, 1),
                "rss_at_schedule_end_kb": at_end,
                "peak_rss_after_schedule_kb": max(after) if after else None,
                # A 1-hour run by the second half's slope, plus what the end (analysis, write) added here.
                "one_hour_at_slope_mb": None if steady is None else round(
                    (at_end + max(steady, 0.0) * (3600 - duration_s)
                     + max(0, (w["peak_kb"] or 0) - at_end)) / 1024, 1)}
    row["series_t_rss_hwm_kb"] = s
    row["stderr_tail"] = w["stderr"][-600:]
    return row


def case_default(args, env) -> dict:
    cmd = [sys.executable, "-m", "tailwise", "run", "--quiet", "--json"]
    return _summarise("default", watch(cmd, args.interval, env), None, 0.0)


def case_default10(args, env) -> dict:
    """The same, its length fixed: --duration 10 (the adaptive run's length depends on the machine)."""
    cmd = [sys.executable, "-m", "tailwise", "run", "--duration", "10", "--quiet", "--json"]
    return _summarise("default10", watch(cmd, args.interval, env), 10.0, args.startup)


def case_soak(args, env) -> dict:
    memcached = shutil.which("memcached")
    if memcached is None:
        return {"case": "soak", "skipped": "memcached is not installed"}
    port = _free_port()
    root = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses to run as root without it
    server = subprocess.Popen([memcached, "-p", str(port), "-t", "1", "-U", "0", "-l", "127.0.0.1", *root],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scratch = Path(tempfile.mkdtemp(prefix="tailwise-soak-"))
    try:
        _wait_listening(port)
        duration_s = args.minutes * 60
        cmd = [sys.executable, "-m", "tailwise", "run", f"memcached://127.0.0.1:{port}", "--rate", args.rate,
               "--duration", f"{duration_s:g}", "--quiet", "--json"]
        if not args.no_out:
            cmd += ["--out", str(scratch / "out"), "--samples-format", args.samples_format]
        w = watch(cmd, args.interval, env)
        row = _summarise("soak", w, duration_s, args.startup)
        files = sorted((scratch / "out").glob("*")) if (scratch / "out").exists() else []
        row["out_files_mb"] = {p.name: round(p.stat().st_size / 2**20, 1) for p in files if p.is_file()}
        try:
            summary = json.loads(w["stdout"][w["stdout"].find("{"):]) if "{" in w["stdout"] else {}
        except json.JSONDecodeError:
            summary = {}
        row["summary"] = {k: summary.get(k) for k in ("verdict", "counters")} | {
            "samples": (summary.get("latency") or {}).get("samples"),
            "thinning": (summary.get("methodology") or {}).get("thinning")}
        return row
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--rate", default="50k")
    ap.add_argument("--cases", default="default,soak")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between two readings")
    ap.add_argument("--startup", type=float, default=1.5, help="seconds before the schedule starts (imports, connect)")
    ap.add_argument("--samples-format", default="csv", choices=("csv", "parquet"))
    ap.add_argument("--no-out", action="store_true", help="soak without --out: the samples are not written")
    ap.add_argument("--json", default=str(ROOT / "bench" / "out" / "memory.json"))
    ap.add_argument("--python-root", default=str(ROOT / "python"),
                    help="the tailwise package's parent directory (another checkout: before/after)")
    args = ap.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([args.python_root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    rows = []
    for name in args.cases.split(","):
        row = {"default": case_default, "default10": case_default10, "soak": case_soak}[name](args, env)
        rows.append(row)
        brief = {k: v for k, v in row.items() if k not in ("series_t_rss_hwm_kb", "cmd", "stderr_tail")}
        print(json.dumps(brief), flush=True)
    doc = {"machine": {"host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
                       "python": platform.python_version()},
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": vars(args), "cases": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(doc, indent=1))
    print(f"written: {args.json}")


if __name__ == "__main__":
    main()
