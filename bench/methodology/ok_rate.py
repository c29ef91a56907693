"""bench/methodology/ok_rate: how often a user gets an answer on this machine, before and after a change.

Runs two installations of tailwise ("before" and "after") alternately — before, after, before,
after… (run i of each version back to back), so that the machine's noise falls on both alike — in
these scenarios, N runs each (issue 32's benchmark: the first four):

* default: `run --json`, the README's first command (the built-in server, 10k req/s, p99 ± 10 %,
  adaptive, at most 60 s);
* memcached: a memcached started here (`-U 0 -t 1 -m 64`, on a free port of 127.0.0.1, stopped at
  the end, also on Ctrl-C), measured with `run memcached://… --rate 10k --conns 16 --outstanding 1
  --duration 15 --json` (fixed length);
* memcached-20k: the same memcached at `--rate 20k --duration 3` (the arrivals check on a Poisson
  schedule at 20k req/s);
* builtin: `run --service fixed:10us --rate 20k --percentile 99 --ci 10us --json` against the
  built-in server (adaptive; it ends by itself within ~70 s);
* poll-block: the same with `--poll block`.

Before each pair the host's noise is measured: a pinned spinner on every CPU at once for 1 s, its
stalls > 5 µs (count, time lost, longest). Verdicts: ok, imprecise (issue 32: valid, wider than
asked) and not-measurable; a not-measurable run of a scenario where no freeze was made and the
target kept up (its rate check passed) is a false alarm, named with its check and figure.

Per run it records the exit status, the wall time, the verdict, the failed checks with their
details, the p99 with its interval (and the every-request p99 of the window), whether the rate
check passed (the client kept up), the engine's and the target's stalls, the share left out, the
`delayed` object when the summary has one, the host's steal time and why the coordinator stopped.
Each CPU's stalls > 5 µs over 1 s are measured before the first run and after the last. Prints a
table — per scenario and version: runs, ok, ok among the runs whose rate check passed, median wall
time, median and longest engine stall, the failed checks — and writes everything as JSON (default
bench/out/ok_rate.json). Not a test: the full run took ~25 min here (3 × 2 × 10 runs of 6–70 s).

    python bench/methodology/ok_rate.py [--before CMD] [--after CMD] [--reps N]
        [--scenarios memcached,builtin,poll-block] [--quick] [--out FILE]

CMD is a command line split like a shell's (`--after "python3 -m tailwise"`); a version whose CLI
does not answer `--version` is skipped. `--quick` (a smoke test): memcached for 3 s, the built-in
server with `--max-time 6`, 2 runs each.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tailwise import _core
from tailwise.host.facts import host_info

SCENARIOS = ("default", "memcached", "memcached-20k", "builtin", "poll-block")
#: Added to a run's --duration or --max-time before it is killed and recorded as `timeout`.
GRACE_S = 120
#: The coordinator's --max-time when none is given (cli.py).
DEFAULT_MAX_TIME_S = 60
#: memcached refuses to run as root without -u: it then runs as root (nothing else changes).
MEMCACHED = ["memcached", "-l", "127.0.0.1", "-U", "0", "-t", "1", "-m", "64"] + (["-u", "root"] if os.geteuid() == 0 else [])
EXIT_NAMES = {0: "ok", 1: "not-measurable", 2: "error", 3: "threshold", 4: "imprecise"}


def scenario_args(name: str, quick: bool, port: int | None) -> tuple[list[str], float]:
    """The arguments after the CLI for one scenario, and how long it may take before it is killed."""
    if name == "default":
        return (["run", "--json"] + (["--max-time", "6"] if quick else []), (6 if quick else DEFAULT_MAX_TIME_S) + GRACE_S)
    if name == "memcached":
        duration = 3 if quick else 15
        return (["run", f"memcached://127.0.0.1:{port}", "--rate", "10k", "--conns", "16", "--outstanding", "1",
                 "--duration", str(duration), "--json"], duration + GRACE_S)
    if name == "memcached-20k":
        return (["run", f"memcached://127.0.0.1:{port}", "--rate", "20k", "--duration", "3", "--json"], 3 + GRACE_S)
    args = ["run", "--service", "fixed:10us", "--rate", "20k", "--percentile", "99", "--ci", "10us", "--json"]
    if name == "poll-block":
        args += ["--poll", "block"]
    max_time = DEFAULT_MAX_TIME_S
    if quick:
        max_time = 6
        args += ["--max-time", str(max_time)]
    return args, max_time + GRACE_S


def cli_version(cmd: list[str]) -> str | None:
    """What the CLI says its version is, or None when it is missing or does not answer."""
    try:
        r = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return r.stdout.strip() or r.stderr.strip() or "?"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_memcached(port: int) -> subprocess.Popen:
    """A memcached on 127.0.0.1:port, once it accepts connections."""
    proc = subprocess.Popen(MEMCACHED + ["-p", str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"memcached exited with status {proc.returncode}: "
                               f"{proc.stderr.read().decode(errors='replace').strip()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            if time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"memcached did not accept connections on port {port} within 10 s") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    """End a process this script started (it leads its own process group) and whatever it started."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


def machine_stalls() -> list[dict]:
    """Each CPU's stalls > 5 µs over the same 1 s, a pinned spinner on every CPU at once
    (tests/support/noise.py's measure): count, time lost, longest."""
    from concurrent.futures import ThreadPoolExecutor

    cpus = sorted(os.sched_getaffinity(0))
    with ThreadPoolExecutor(len(cpus)) as pool:
        got = list(pool.map(lambda cpu: _core.measure_stalls(1_000_000_000, 5_000, cpu), cpus))
    return [{"cpu": cpu, **st, "lost_share": st["lost_ns"] / st["duration_ns"]} for cpu, st in zip(cpus, got)]


def print_stalls(when: str, rows: list[dict]) -> None:
    print(f"machine {when}: " + "; ".join(
        f"CPU {r['cpu']} lost {r['lost_share']:.1%} ({r['count']:,} stalls > 5 µs, longest {r['max_ns'] / 1e3:.0f} µs)"
        for r in rows))


def run_once(version: str, cmd: list[str], scenario: str, args: list[str], timeout_s: float) -> dict:
    """One run of the CLI, and what its summary says."""
    rec: dict = {"version": version, "scenario": scenario, "argv": cmd + args}
    t = time.monotonic()
    proc = subprocess.Popen(cmd + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop(proc)
        proc.communicate()
        rec.update(exit=None, wall_s=time.monotonic() - t, verdict="timeout")
        return rec
    except BaseException:  # Ctrl-C: the run is in its own session, so end it here
        stop(proc)
        raise
    rec.update(exit=proc.returncode, wall_s=time.monotonic() - t)
    try:
        s = json.loads(out)
    except ValueError:
        s = None
    if not isinstance(s, dict):
        lines = err.strip().splitlines()
        rec.update(verdict="error", error=lines[-1] if lines else f"exit status {proc.returncode}, no summary")
        return rec
    if proc.returncode == 2:
        lines = err.strip().splitlines()
        rec["error"] = lines[-1] if lines else s.get("error")
    checks = s.get("checks") or []
    lat = s.get("latency") or {}
    pcts = {p.get("p"): dict(p) for p in lat.get("percentiles") or []}
    p99 = pcts.get(99.0)
    window = lat.get("window") or {}
    m = s.get("methodology") or {}
    rate = next((c for c in checks if c.get("name") == "rate"), None)
    rec.update(
        verdict=s.get("verdict"),
        exit_meaning=EXIT_NAMES.get(proc.returncode),
        failed=[c.get("name") for c in checks if not c.get("ok")],
        failed_detail={c.get("name"): c.get("detail") for c in checks if not c.get("ok")},
        p99=p99,
        window_p99_ns=next((p.get("value_ns") for p in window.get("percentiles") or [] if p.get("p") == 99), None),
        rate_ok=None if rate is None else bool(rate.get("ok")),
        stalls=m.get("stalls"),
        stalls_longest_ns=m.get("stalls_longest_ns"),
        target_stalls=m.get("target_stalls"),
        target_stalls_longest_ns=m.get("target_stalls_longest_ns"),
        excluded_share=(s.get("exclusions") or {}).get("share"),
        host_steal_s=(s.get("engine") or {}).get("host_steal_s"),
        stopped=m.get("stopped"),
        p50_ns=(pcts.get(50.0) or {}).get("value_ns"),
        p90_ns=(pcts.get(90.0) or {}).get("value_ns"),
        precision=s.get("precision"),
        late=(s.get("counters") or {}).get("late"),
        # Each round's failed checks: a validity check that failed in a round and passed at the
        # stop is the optional stopping that issue 32 closes.
        rounds_failed=[h.get("failed") for h in m.get("history") or []],
    )
    if "delayed" in s:
        rec["delayed"] = s["delayed"]
    return rec


def describe(r: dict) -> str:
    if r["verdict"] in ("timeout", "error"):
        return f"{r['verdict']}{': ' + r['error'] if r.get('error') else ''} ({r['wall_s']:.1f} s)"
    p = r.get("p99") or {}

    def us(v: int | None) -> str:
        return "?" if v is None else f"{v / 1e3:.1f}"

    ci = f"p99 {us(p.get('value_ns'))} µs [{us(p.get('low_ns'))}, {us(p.get('high_ns'))}]" if p else "no p99"
    longest = r.get("stalls_longest_ns")
    return (f"{r['verdict']} (exit {r['exit']}, {r['wall_s']:.1f} s, {r.get('stopped')}; failed: "
            f"{', '.join(r['failed']) or 'none'}); {ci}, every request {us(r.get('window_p99_ns'))} µs; rate "
            f"{'kept' if r.get('rate_ok') else 'missed' if r.get('rate_ok') is False else '?'}; stalls: engine "
            f"{r.get('stalls')} (longest {'?' if longest is None else f'{longest / 1e6:.2f} ms'}), target "
            f"{r.get('target_stalls')}")


def spread(values: list) -> float | None:
    """Largest over smallest, less one: how far the runs' figures lie apart."""
    v = [x for x in values if x]
    return max(v) / min(v) - 1.0 if len(v) > 1 else None


#: The checks whose failure means an assumption broke (methodology/verdict.py's VALIDITY).
VALIDITY = ("rate", "agents", "errors", "loss", "arrivals", "stationarity", "independence", "consistency")


def flipped(r: dict) -> bool:
    """An ok run in which a validity check failed in an earlier round (after the first)."""
    earlier = (r.get("rounds_failed") or [])[1:-1]
    return r.get("verdict") == "ok" and any(set(f or ()) & set(VALIDITY) for f in earlier)


def false_alarms(runs: list[dict]) -> list[str]:
    """Not-measurable runs whose target kept up (rate check passed): each check and its figure."""
    out = []
    for r in runs:
        if r.get("verdict") == "not-measurable" and r.get("rate_ok"):
            detail = r.get("failed_detail") or {}
            out.append("; ".join(f"{n}: {detail.get(n, '')[:160]}" for n in r.get("failed") or []))
    return out


def summarise(runs: list[dict]) -> dict:
    """The table's figures for one scenario and version."""
    rate_ok = [r for r in runs if r.get("rate_ok")]
    walls = [r["wall_s"] for r in runs]
    stalls = [r["stalls"] for r in runs if r.get("stalls") is not None]
    longest = [r["stalls_longest_ns"] for r in runs if r.get("stalls_longest_ns") is not None]
    failed = collections.Counter(n for r in runs for n in r.get("failed") or [])
    failed.update(r["verdict"] for r in runs if r["verdict"] in ("timeout", "error"))
    widen = [((r.get("precision") or {}).get("width") or {}).get("widening_ns") for r in runs]
    return {"runs": len(runs), "ok": sum(r["verdict"] == "ok" for r in runs),
            "imprecise": sum(r["verdict"] == "imprecise" for r in runs),
            "not_measurable": sum(r["verdict"] == "not-measurable" for r in runs),
            "answered": sum(r["verdict"] in ("ok", "imprecise") for r in runs),
            "ok_after_a_validity_failure": sum(flipped(r) for r in runs),
            "false_alarms": false_alarms(runs),
            "p50_spread": spread([r.get("p50_ns") for r in runs]), "p90_spread": spread([r.get("p90_ns") for r in runs]),
            "p99_widening_ns": [w for w in widen if w is not None],
            "rate_ok_runs": len(rate_ok),
            "ok_among_rate_ok": sum(r["verdict"] == "ok" for r in rate_ok),
            "median_wall_s": statistics.median(walls) if walls else None,
            "median_stalls": statistics.median(stalls) if stalls else None,
            "longest_stall_ns": max(longest, default=None), "failed": dict(failed.most_common())}


def print_table(table: dict) -> None:
    head = ("scenario", "version", "runs", "ok", "impr", "n-m", "ok|rate", "p50±", "p90±", "wall s", "stalls", "longest",
            "failed checks")
    rows = [head]

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0%}"

    for scenario, versions in table.items():
        for version, f in versions.items():
            rows.append((scenario, version, str(f["runs"]), str(f["ok"]), str(f.get("imprecise", 0)),
                         str(f.get("not_measurable", 0)), f"{f['ok_among_rate_ok']}/{f['rate_ok_runs']}",
                         pct(f.get("p50_spread")), pct(f.get("p90_spread")),
                         "-" if f["median_wall_s"] is None else f"{f['median_wall_s']:.1f}",
                         "-" if f["median_stalls"] is None else f"{f['median_stalls']:g}",
                         "-" if f["longest_stall_ns"] is None else f"{f['longest_stall_ns'] / 1e6:.2f} ms",
                         ", ".join(f"{n} {c}" for n, c in f["failed"].items()) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    print("impr: imprecise; n-m: not-measurable; ok|rate: ok among the runs whose rate check passed; p50±, p90±: "
          "largest over smallest of the runs' values, less one; stalls: median engine stalls per run; longest: the "
          "longest engine stall of any run")
    for scenario, versions in table.items():
        for version, f in versions.items():
            for alarm in f.get("false_alarms") or []:
                print(f"false alarm ({scenario}, {version}): {alarm}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="/tmp/venv-before/bin/tailwise", help="the CLI before the change")
    ap.add_argument("--after", default="tailwise", help="the CLI after the change")
    ap.add_argument("--reps", type=int, default=None, help="runs of each version per scenario [default: 10; --quick: 2]")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)}")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: memcached --duration 3, built-in --max-time 6, 2 runs")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "ok_rate.json"))
    args = ap.parse_args()
    reps = args.reps if args.reps is not None else 2 if args.quick else 10
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if unknown := [s for s in scenarios if s not in SCENARIOS]:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")

    versions: dict[str, list[str]] = {}
    tool_versions: dict[str, str] = {}
    for name, line in (("before", args.before), ("after", args.after)):
        cmd = shlex.split(line)
        v = cli_version(cmd) if cmd else None
        if v is None:
            print(f"{name}: `{line}` is missing or does not answer --version; skipped")
            continue
        versions[name], tool_versions[name] = cmd, v
        print(f"{name}: {line} ({v})")
    if not versions:
        print("no version to run", file=sys.stderr)
        return 2

    res: dict = {"host": host_info(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reps": reps,
                 "quick": args.quick, "versions": {n: {"cmd": c, "version": tool_versions[n]} for n, c in versions.items()},
                 "commands": {}, "runs": [], "interrupted": False}
    res["machine_stalls_before"] = machine_stalls()
    print_stalls("before the runs", res["machine_stalls_before"])
    try:
        for scenario in scenarios:
            memcached = None
            try:
                port = None
                if scenario.startswith("memcached"):
                    port = free_port()
                    memcached = start_memcached(port)
                    res["commands"]["memcached_server"] = MEMCACHED + ["-p", str(port)]
                sargs, timeout_s = scenario_args(scenario, args.quick, port)
                res["commands"][scenario] = {n: c + sargs for n, c in versions.items()}
                for i in range(reps):
                    noise = machine_stalls()
                    res.setdefault("noise", []).append({"scenario": scenario, "rep": i, "cpus": noise})
                    print_stalls(f"before pair {i + 1} of {scenario}", noise)
                    for name, cmd in versions.items():
                        r = run_once(name, cmd, scenario, sargs, timeout_s)
                        r["rep"] = i
                        r["noise_lost_share"] = max(c["lost_share"] for c in noise)
                        res["runs"].append(r)
                        print(f"{scenario} {i + 1}/{reps} {name}: {describe(r)}", flush=True)
            finally:
                if memcached is not None:
                    stop(memcached)
    except KeyboardInterrupt:
        res["interrupted"] = True
        print("interrupted: the table and the JSON hold the runs so far")
    res["machine_stalls_after"] = machine_stalls()
    print_stalls("after the runs", res["machine_stalls_after"])

    table: dict = {}
    for scenario in scenarios:
        for name in versions:
            runs = [r for r in res["runs"] if r["scenario"] == scenario and r["version"] == name]
            if runs:
                table.setdefault(scenario, {})[name] = summarise(runs)
    res["table"] = table
    print()
    print_table(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out}")
    return 130 if res["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
