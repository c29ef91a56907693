"""bench/packet: packets per second one engine thread sustains at 64 bytes, next to sockperf.

Prints a table and writes the figures as JSON (default bench/out/packet.json). Not a test:
nothing here asserts; the headline goes into BENCHMARKS.md.

    python bench/packet/run.py [--seconds 2] [--start 50k] [--step 1.5] [--paths loopback,veth]

On each path (loopback; a veth pair between two network namespaces, skipped with the reason
where this process may not make them):
* tailwise: `tailwise serve --udp-reflect` (one worker, pinned to the lowest CPU) and
  `tailwise run udp+flow://HOST:PORT --rate R --size 64 --threads 1` (pinned to the highest),
  the rate stepped up ×--step from --start until the loss exceeds --max-loss (0.1 %) or the
  run's `rate` check fails, then bisected --refine times between the last rate that held and
  the first that did not. The sustained rate is the highest that held; at it, the send lag's
  p50/p99/p99.9 (how late the one thread sent) and the latency percentiles, from the summary
  (where the sampled ones have no interval, the every-packet histogram's, marked so).
  A stricter search follows from --strict-start: the highest rate held *on schedule* — also the
  `arrivals` check passed and the send lag's p99 ≤ --max-lag (50 µs, tailwise's own `--late`; 5 µs,
  bench/run's bar for RPCs, was missed even at 10k pps on this machine: 5.7–9.5 µs): a rate the
  thread held only by sending late is sustained but not on schedule.
* sockperf 3.7 `under-load` (`sockperf under-load --mps R -m 64` against `sockperf server`,
  pinned as the two tailwise processes are) at the same rate in the same run: its latency
  percentiles (round trips, --full-rtt) and the drops it counts. sockperf asks for a reply to one
  message in --reply-every (100 by default): its percentiles are over ~1 % of the messages, ours
  over every packet. Its -m is the UDP payload (64 bytes: a 110-byte frame), ours --size the
  Ethernet frame (64 bytes: an 18-byte payload); --sockperf-msg 18 sends the same frames.
* the machine's noise before and after: the share of a second each CPU loses to stalls > 5 µs
  (as tests/support/noise.py measures it).

Until this tailwise has packet mode (`run udp+flow://` and `serve --udp-reflect`; the help texts
are asked), the tailwise half is skipped with that reason and sockperf runs at --sockperf-rates.
Every loop is bounded: each process by a timeout, the whole by --budget (seconds).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "timestamps"))

from sockperf import _ANSI, _free_port, _wait_listening  # noqa: E402

from tailwise import _core  # noqa: E402
from tailwise.host.facts import host_info  # noqa: E402
from tailwise.measure import netns  # noqa: E402

TAILWISE = [sys.executable, "-m", "tailwise"]
#: How long a server may take to say it listens.
LISTEN_TIMEOUT_S = 10.0
#: A run may take this much longer than its --duration (start, analysis, writing) before it is killed.
RUN_SLACK_S = 60.0
#: The percentiles the table shows (sockperf prints these, ours are in the summary).
FIGS = (50.0, 99.0, 99.9, 99.99)
SOCKPERF_FIGS = {50.0: "50.000", 99.0: "99.000", 99.9: "99.900", 99.99: "99.990", 99.999: "99.999"}
PORT = 11111
#: A stall longer than this counts as noise (tests/support/noise.py).
NOISE_STALL_NS = 5_000


def rate_arg(text: str) -> float:
    """50k, 1.5M, 20000."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([kKmM]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate (e.g. 50k, 1.5M)")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


# ------------------------------------------------------------------------------ the machine

def cpus() -> tuple[int, int]:
    """(server CPU, client CPU): the reflector's worker 0 pins to the lowest allowed CPU, the one
    engine thread to the highest (host/facts.pinned_cpus); sockperf is put on the same two."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[0], allowed[-1]


def noise() -> dict:
    """Each CPU's share of 1 s lost to stalls > 5 µs, and how many."""
    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        st = _core.measure_stalls(1_000_000_000, NOISE_STALL_NS, cpu)
        out[str(cpu)] = {"lost_fraction": round(st["lost_ns"] / st["duration_ns"], 5), "stalls": st["count"],
                         "max_us": round(st["max_ns"] / 1e3, 1)}
    return out


def has_packet_mode() -> str | None:
    """None when this tailwise has `serve --udp-reflect` and `run --size/--flows`, else why not."""
    for argv, needs in ((["serve", "--help"], "--udp-reflect"), (["run", "--help"], "--flows")):
        try:
            text = subprocess.run([*TAILWISE, *argv], capture_output=True, text=True, timeout=60).stdout
        except subprocess.TimeoutExpired:
            return f"`tailwise {' '.join(argv)}` did not answer in 60 s"
        if needs not in text:
            return (f"this tailwise has no packet mode yet (`tailwise {argv[0]}` has no {needs}): "
                    "the packet engine and the reflector are not merged")
    return None


# ------------------------------------------------------------------------------------ paths

@dataclass
class Where:
    """Where the server and the client run: argv prefixes and the server's address."""

    name: str
    server_ip: str
    port: int
    server_prefix: list[str] = field(default_factory=list)
    client_prefix: list[str] = field(default_factory=list)


def pinned(prefix: list[str], cpu: int, argv: list[str]) -> list[str]:
    return [*prefix, "taskset", "-c", str(cpu), *argv]


# --------------------------------------------------------------------------------- tailwise

class Reflector:
    """`tailwise serve --udp-reflect` on the path's server side, one worker pinned (unless ``pin``
    is False: then where the path's server prefix puts it, e.g. `taskset`); stopped by
    SIGINT (its pid: `ip netns exec` execs, so the pid is the server's), its counters kept."""

    LINE = re.compile(r"reflecting UDP on (\S+)")

    def __init__(self, path: Where, port: int, pin: bool = True):
        self.argv = [*path.server_prefix, *TAILWISE, "serve", "--udp-reflect", "--listen", f"{path.server_ip}:{port}",
                     "--workers", "1", "--pin" if pin else "--no-pin"]
        self.out = tempfile.TemporaryFile("w+")
        self.proc: subprocess.Popen | None = None
        self.counters: str | None = None

    def __enter__(self) -> "Reflector":
        self.proc = subprocess.Popen(self.argv, stdout=self.out, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not self.LINE.search(self._text()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"`{' '.join(self.argv)}` exited ({self.proc.returncode}): {self._text().strip()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"`{' '.join(self.argv)}` did not say it listens in {LISTEN_TIMEOUT_S:g} s")
            time.sleep(0.05)
        return self

    def _text(self) -> str:
        self.out.seek(0)
        return self.out.read()

    def __exit__(self, *exc) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        # Its last lines: received, sent, dropped, … (the contract's counters).
        self.counters = " ".join(self._text().strip().splitlines()[-6:])
        self.out.close()


def tailwise_run(path: Where, port: int, rate: float, seconds: float, size: int, out_dir: Path) -> dict:
    """One `tailwise run udp+flow://` at ``rate`` for ``seconds``: its summary (the JSON it prints)."""
    argv = [*path.client_prefix, *TAILWISE, "run", f"udp+flow://{path.server_ip}:{port}", "--rate", f"{rate:.0f}",
            "--size", str(size), "--threads", "1", "--pin", "--duration", f"{seconds:g}", "--out", str(out_dir),
            "--json", "--quiet"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + RUN_SLACK_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"`{' '.join(argv)}` did not finish in {seconds + RUN_SLACK_S:g} s") from None
    try:
        summary = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"`{' '.join(argv)}` exited {done.returncode} without a summary: "
                           f"{done.stderr.strip()[-500:]}") from None
    return summary


def _pct(items: list[dict], p: float) -> float | None:
    return next((q.get("value_ns") for q in items or [] if abs(q.get("p", -1) - p) < 1e-9), None)


def judge(summary: dict, rate: float, max_loss: float, max_lag_ns: float) -> dict:
    """What one step tells: held (loss within max_loss and the rate check passed) or why not, and
    whether on schedule too (arrivals passed, send lag p99 ≤ max_lag_ns)."""
    packets = summary.get("packets") or {}
    checks = {c.get("name"): c for c in summary.get("checks") or []}
    rate_check = checks.get("rate") or {}
    loss = packets.get("loss_ratio")
    why = []
    if loss is None or loss > max_loss:
        why.append(f"loss {loss if loss is None else f'{loss:.4%}'} > {max_loss:.2%}")
    if not rate_check.get("ok", False):
        why.append(f"rate check: {rate_check.get('detail') or 'missing'}")
    late = list(why)
    if not (checks.get("arrivals") or {}).get("ok", False):
        late.append("arrivals check failed")
    lag99 = _pct((summary.get("send_lag") or {}).get("percentiles"), 99.0)
    if lag99 is None or lag99 > max_lag_ns:
        late.append(f"send lag p99 {_us(lag99)} µs > {max_lag_ns / 1e3:g} µs")
    return {"rate_pps": rate, "held": not why, "why": "; ".join(why) or None, "verdict": summary.get("verdict"),
            "on_schedule": not late, "why_not_on_schedule": "; ".join(late) or None,
            "sent_pps": packets.get("sent_pps"), "rate_pps_achieved": packets.get("rate_pps"), "loss_ratio": loss,
            "lost": packets.get("lost"), "reordered": packets.get("reordered"),
            "send_lag_ns": {f"p{p:g}": _pct((summary.get("send_lag") or {}).get("percentiles"), p) for p in (50, 99, 99.9)},
            "latency_ns": {f"p{p:g}": _pct((summary.get("latency") or {}).get("percentiles"), p) for p in FIGS}}


def from_hdr(out_dir: Path, step: dict) -> None:
    """The percentiles the summary does not give, read from the every-packet histograms: the send
    lag's (send_lag.hdr) and, where a sampled latency percentile has no value (too correlated or
    too few for an interval), the latency's (latency.hdr), named in ``latency_every_packet``."""
    from tailwise.results.summary import decode_histogram

    for key, name in (("send_lag_ns", "send_lag.hdr"), ("latency_ns", "latency.hdr")):
        missing = [k for k, v in step[key].items() if v is None]
        hdr = out_dir / name
        if not missing or not hdr.is_file():
            continue
        h = decode_histogram(base64.b64decode(hdr.read_bytes().strip()))  # the file is base64 (docs/results.md)
        for k in missing:
            step[key][k] = h.get_value_at_percentile(float(k[1:])) if h.get_total_count() else None
        if key == "latency_ns":
            step["latency_every_packet"] = missing


def find_sustained(path: Where, args, deadline: float, work: Path, key: str = "held") -> dict:
    """Step the rate up until a step does not hold (``key``: "held", or "on_schedule" from
    --strict-start), bisect between, all against one reflector."""
    steps: list[dict] = []
    port = path.port + 1

    def step(rate: float) -> dict:
        out = work / f"{path.name}-{key}-{rate:.0f}"
        s = judge(tailwise_run(path, port, rate, args.seconds, args.size, out), rate, args.max_loss,
                  args.max_lag * 1e3)
        from_hdr(out, s)
        steps.append(s)
        why = s["why"] if key == "held" else s["why_not_on_schedule"]
        print(f"  {path.name:8} tailwise {rate:>11,.0f} pps: sent {s['sent_pps'] or 0:>11,.0f} pps, loss "
              f"{(s['loss_ratio'] or 0):.4%}, send lag p99 {_us(s['send_lag_ns']['p99'])} µs — "
              f"{'held' if s[key] else 'not held: ' + str(why)}{' (on schedule)' if key != 'held' else ''}",
              file=sys.stderr)
        return s

    held, failed = None, None
    with Reflector(path, port) as reflector:
        rate = args.start if key == "held" else args.strict_start
        while rate <= args.max_rate and time.monotonic() < deadline:
            s = step(rate)
            if not s[key]:
                failed = s
                break
            held, rate = s, rate * args.step
        for _ in range(args.refine):
            if held is None or failed is None or time.monotonic() >= deadline:
                break
            mid = float(f"{math.sqrt(held['rate_pps'] * failed['rate_pps']):.3g}")  # a rate a person can retype
            if not held["rate_pps"] < mid < failed["rate_pps"]:
                break
            s = step(mid)
            held, failed = (s, failed) if s[key] else (held, s)
    return {"sustained": held, "first_not_held": failed, "steps": steps, "reflector": reflector.counters,
            "stopped": "a step did not hold" if failed else ("--max-rate reached" if rate > args.max_rate else "--budget")}


# ---------------------------------------------------------------------------------- sockperf

def sockperf_under_load(path: Where, rate: float, seconds: float, msg: int, port: int) -> dict:
    """`sockperf under-load --mps R` against `sockperf server` on the path, pinned as tailwise's
    processes are: its round-trip percentiles (µs), sent/received and the drops it counts."""
    server_cpu, client_cpu = cpus()
    server_cmd = pinned(path.server_prefix, server_cpu, ["sockperf", "server", "-i", path.server_ip, "-p", str(port)])
    client_cmd = pinned(path.client_prefix, client_cpu, [
        "sockperf", "under-load", "-i", path.server_ip, "-p", str(port), "--mps", f"{rate:.0f}", "-m", str(msg),
        "-t", f"{seconds:g}", "--full-rtt"])
    with tempfile.TemporaryFile("w+") as server_out:
        server = subprocess.Popen(server_cmd, stdout=server_out, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_listening(server, server_out, path.server_prefix, port, False)
            try:  # sockperf adds a warm-up (~0.4 s) before the timed part
                done = subprocess.run(client_cmd, capture_output=True, text=True, timeout=seconds + 30)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"`{' '.join(client_cmd)}` did not finish in {e.timeout:g} s") from None
        finally:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=5)
    text = _ANSI.sub("", done.stdout + done.stderr)
    figures = parse_under_load(text)
    if figures is None:  # sockperf exits 0 even when it failed: its statistics tell
        raise RuntimeError(f"`{' '.join(client_cmd)}` printed no statistics (exit {done.returncode}):\n{text.strip()}")
    return figures | {"rate_pps": rate, "command": " ".join(client_cmd)}


def parse_under_load(text: str) -> dict | None:
    """sockperf 3.7 under-load's report: the valid part's counts, drops, the round trips (µs)."""
    valid = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
    obs = re.search(r"Total (\d+) observations", text)
    avg = re.search(r"avg-(rtt|latency)=([\d.]+)", text)
    if not (valid and obs and avg):
        return None
    factor = 2.0 if avg.group(1) == "latency" else 1.0  # "latency" is half the round trip (--full-rtt ignored)
    drops = re.search(r"# dropped messages = (\d+); # duplicated messages = (\d+); # out-of-order messages = (\d+)", text)
    out = {"valid_s": float(valid.group(1)), "sent": int(valid.group(2)), "replies": int(valid.group(3)),
           "sent_mps": round(int(valid.group(2)) / float(valid.group(1))) if float(valid.group(1)) else None,
           "observations": int(obs.group(1)), "avg_rtt_us": round(float(avg.group(2)) * factor, 3),
           "dropped": int(drops.group(1)) if drops else None, "duplicated": int(drops.group(2)) if drops else None,
           "out_of_order": int(drops.group(3)) if drops else None, "rtt_us": {}}
    for p, label in SOCKPERF_FIGS.items():
        m = re.search(rf"percentile {re.escape(label)}\s*=\s*([\d.]+)", text)
        out["rtt_us"][f"p{p:g}"] = round(float(m.group(1)) * factor, 3) if m else None
    for key, name in (("min", "MIN"), ("max", "MAX")):
        m = re.search(rf"<{name}> observation\s*=\s*([\d.]+)", text)
        out["rtt_us"][key] = round(float(m.group(1)) * factor, 3) if m else None
    # Replies lost: sockperf asks one reply per --reply-every messages and counts the missing ones.
    out["drop_ratio"] = round(out["dropped"] / (out["dropped"] + out["replies"]), 6) if drops and out["replies"] + out["dropped"] else None
    return out


# ------------------------------------------------------------------------------------- main

def bench_path(path: Where, args, packet_mode: str | None, deadline: float, work: Path) -> dict:
    res: dict = {"tailwise_skipped": packet_mode}
    rates = list(args.sockperf_rates)
    if packet_mode is None:
        res["tailwise"] = tw = find_sustained(path, args, deadline, work)
        res["tailwise_on_schedule"] = find_sustained(path, args, deadline, work, "on_schedule")
        if tw["sustained"]:
            rates = [tw["sustained"]["rate_pps"]]
    res["sockperf"] = []
    for rate in rates:
        if time.monotonic() >= deadline:
            res["sockperf_stopped"] = "--budget"
            break
        s = sockperf_under_load(path, rate, args.seconds, args.sockperf_msg, path.port)
        res["sockperf"].append(s)
        print(f"  {path.name:8} sockperf {rate:>11,.0f} msg/s: {s['observations']:,} round trips, p50 "
              f"{s['rtt_us']['p50']} µs, p99 {s['rtt_us']['p99']} µs, {s['dropped']} dropped", file=sys.stderr)
    return res


def run_on(name: str, args, packet_mode: str | None, deadline: float, work: Path) -> dict:
    if name == "loopback":
        # A free port: other programs on this host may hold sockperf's default.
        return bench_path(Where("loopback", "127.0.0.1", _free_port(False)), args, packet_mode, deadline, work)
    why = netns.can_create()
    if why is not None:
        return {"skipped": why}
    with netns.veth_pair("twpk") as pair:
        path = Where("veth", pair.server_ip, PORT, pair.argv(pair.server_ns, []), pair.argv(pair.client_ns, []))
        return bench_path(path, args, packet_mode, deadline, work)


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:.1f}"


def _v(v) -> str:
    return "—" if v is None else f"{v:.1f}"


def print_table(res: dict) -> None:
    print(f"\npackets per second, one engine thread, {res['size']}-byte frames, loss ≤ {res['max_loss']:.2%} and "
          f"the rate check passed; on sched: also the arrivals check passed and send lag p99 ≤ {res['max_lag_us']:g} µs")
    print(f"{'path':9} {'sustained pps':>14} {'send lag p50/p99/p99.9 (µs)':>30} {'tailwise p50/p99/p99.9/p99.99 (µs)':>36}")
    for name, r in res["paths"].items():
        if r.get("skipped"):
            print(f"{name:9} skipped: {r['skipped']}")
            continue
        for key, label in (("tailwise", name), ("tailwise_on_schedule", "  on sched")):
            tw = (r.get(key) or {}).get("sustained")
            if tw is None:
                print(f"{label:9} tailwise: {r.get('tailwise_skipped') or 'no step held (see steps)'}")
                continue
            lag, lat = tw["send_lag_ns"], tw["latency_ns"]
            every = " (every packet)" if tw.get("latency_every_packet") else ""
            print(f"{label:9} {tw['rate_pps']:>14,.0f} {'/'.join(_us(lag[k]) for k in ('p50', 'p99', 'p99.9')):>30} "
                  f"{'/'.join(_us(lat[k]) for k in ('p50', 'p99', 'p99.9', 'p99.99')):>36}{every}")
        for s in r.get("sockperf") or []:
            rt = s["rtt_us"]
            print(f"{'':9} sockperf under-load at {s['rate_pps']:,.0f} msg/s (sent {s['sent_mps'] or 0:,.0f}/s, "
                  f"-m {res['sockperf_msg']}): round trip "
                  f"p50/p99/p99.9/p99.99 {'/'.join(_v(rt[k]) for k in ('p50', 'p99', 'p99.9', 'p99.99'))} µs over "
                  f"{s['observations']:,} replies, {s['dropped']} dropped")


def parse_args(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="Figures: see the module's docstring (python -m pydoc bench/packet/run.py).")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each step and each sockperf run (default 2)")
    ap.add_argument("--start", type=rate_arg, default=50_000.0, help="first rate tried, pps (default 50k)")
    ap.add_argument("--step", type=float, default=1.5, help="each next rate is this times the last (default 1.5)")
    ap.add_argument("--max-rate", type=rate_arg, default=5_000_000.0, help="never try above this (default 5M)")
    ap.add_argument("--strict-start", type=rate_arg, default=10_000.0,
                    help="first rate of the on-schedule search, pps (default 10k)")
    ap.add_argument("--max-lag", type=float, default=50.0,
                    help="on schedule: send lag p99 at most this many µs (default 50: tailwise's --late), and the "
                         "arrivals check passed")
    ap.add_argument("--refine", type=int, default=3, help="bisections between held and not held (default 3)")
    ap.add_argument("--max-loss", type=float, default=0.001, help="a step holds with at most this loss (default 0.001)")
    ap.add_argument("--size", type=int, default=64, help="tailwise --size: Ethernet frame bytes (default 64)")
    ap.add_argument("--sockperf-msg", type=int, default=64, help="sockperf -m: UDP payload bytes (default 64)")
    ap.add_argument("--sockperf-rates", type=lambda t: [rate_arg(x) for x in t.split(",")], default=[50e3, 100e3, 200e3],
                    help="sockperf's rates when tailwise has no sustained rate to give it (default 50k,100k,200k)")
    ap.add_argument("--paths", default="loopback,veth", help="comma-separated: loopback, veth (default both)")
    ap.add_argument("--budget", type=float, default=600.0, help="stop starting steps after this many seconds (default 600)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "packet.json"), help="the JSON written")
    args = ap.parse_args(argv)
    if args.step <= 1 or args.seconds <= 0 or args.start <= 0 or args.refine < 0:
        ap.error("--step must be > 1, --seconds and --start > 0, --refine ≥ 0")
    bad = set(args.paths.split(",")) - {"loopback", "veth"}
    if bad:
        ap.error(f"--paths: unknown {', '.join(sorted(bad))} (loopback, veth)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("sockperf") is None:
        print("sockperf is not installed: apt-get install sockperf", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget
    packet_mode = has_packet_mode()
    if packet_mode:
        print(f"tailwise half skipped: {packet_mode}", file=sys.stderr)
    res: dict = {"host": host_info(), "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "size": args.size, "sockperf_msg": args.sockperf_msg, "seconds": args.seconds,
                 "max_loss": args.max_loss, "max_lag_us": args.max_lag, "cpus": dict(zip(("server", "client"), cpus())),
                 "sockperf": subprocess.run(["sockperf", "--version"], capture_output=True, text=True,
                                            timeout=10).stdout.strip().splitlines()[0],
                 "noise_before": noise(), "paths": {}}
    with tempfile.TemporaryDirectory(prefix="tw-bench-packet-") as work:
        for name in args.paths.split(","):
            res["paths"][name] = run_on(name, args, packet_mode, deadline, Path(work))
    res["noise_after"] = noise()
    print_table(res)
    worst = max(c["lost_fraction"] for n in ("noise_before", "noise_after") for c in res[n].values())
    print(f"machine: the noisiest CPU lost {worst:.2%} of a second to stalls > 5 µs (a quiet one here: 1–2 %)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
