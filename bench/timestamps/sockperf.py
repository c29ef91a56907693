"""bench/timestamps/sockperf: Debian's sockperf 3.7 ping-pong as an outside reference floor.

A second tool's figures on the same paths (loopback, and a veth pair between two network
namespaces) tell whether tailwise's own floor is the machine's or ours.

    python bench/timestamps/sockperf.py [--seconds 3] [--mps 1000]

prints one JSON object. Needs `apt-get install sockperf`; the veth runs need root.

How sockperf 3.7 reports latency (checked here with `--full-log`, which logs each message's
txTime and rxTime): by default every figure it prints ("avg-latency", the percentiles, MIN/MAX)
is HALF the round trip — the log's latency column is (rxTime - txTime) / 2 and the printed
percentiles match that column. `--full-rtt` ("Show results in round-trip-time instead of
latency", `sockperf pp --help`) makes it print "avg-rtt" and full round trips instead. We pass
--full-rtt and, should a build ignore it and print "avg-latency", double the figures.
Note also that sockperf exits 0 even when it fails (refused connection, unknown option), so
success is judged by finding its statistics in the output.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

MSG_SIZE = 32
#: How long the server may take to bind before we give up.
LISTEN_TIMEOUT_S = 5.0

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # sockperf colours its output even into a pipe
_FIGURES = {
    "min_us": r"<MIN> observation\s*=\s*([\d.]+)",
    "p50_us": r"percentile 50\.000\s*=\s*([\d.]+)",
    "p99_us": r"percentile 99\.000\s*=\s*([\d.]+)",
    "p999_us": r"percentile 99\.900\s*=\s*([\d.]+)",
    "max_us": r"<MAX> observation\s*=\s*([\d.]+)",
}


def sockperf_pingpong(server_argv_prefix: list[str], client_argv_prefix: list[str], ip: str, port: int,
                      tcp: bool, seconds: float, mps: int) -> dict:
    """One sockperf ping-pong run at `mps` messages/s of 32 bytes; round-trip figures in µs.

    The prefixes place server and client, e.g. ["ip", "netns", "exec", ns], or [] for here.
    The server is always stopped.
    """
    if shutil.which("sockperf") is None:
        raise RuntimeError("sockperf is not installed: apt-get install sockperf")
    proto = ["--tcp"] if tcp else []
    server_cmd = [*server_argv_prefix, "sockperf", "sr", "-i", ip, "-p", str(port), *proto]
    client_cmd = [*client_argv_prefix, "sockperf", "pp", "-i", ip, "-p", str(port), *proto,
                  "-t", f"{seconds:g}", "--mps", str(mps), "-m", str(MSG_SIZE), "--full-rtt"]
    # The server's output goes to a file: nobody reads it during the run, and a pipe could fill.
    with tempfile.TemporaryFile("w+") as server_out:
        server = subprocess.Popen(server_cmd, stdout=server_out, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_listening(server, server_out, server_argv_prefix, port, tcp)
            # sockperf adds a warm-up (~0.4 s) before the timed part.
            try:
                done = subprocess.run(client_cmd, capture_output=True, text=True, timeout=seconds + 15)
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"`{' '.join(client_cmd)}` did not finish in {e.timeout:g} s") from None
        finally:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=5)
    out = _ANSI.sub("", done.stdout + done.stderr)
    figures = _parse(out)
    if done.returncode != 0 or figures is None:
        raise RuntimeError(f"`{' '.join(client_cmd)}` failed (exit {done.returncode}):\n{out.strip()}")
    figures["command"] = " ".join(client_cmd)
    return figures


def _wait_listening(server: subprocess.Popen, server_out, prefix: list[str], port: int, tcp: bool) -> None:
    # `ss` run where the server runs (same namespace) shows its socket once it is bound.
    ss = [*prefix, "ss", "-Hln", "-t" if tcp else "-u", f"sport = :{port}"]
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while True:
        if server.poll() is not None:
            server_out.seek(0)
            raise RuntimeError(f"sockperf server exited ({server.returncode}):\n{_ANSI.sub('', server_out.read()).strip()}")
        if subprocess.run(ss, capture_output=True, text=True, timeout=10).stdout.strip():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"sockperf server not listening on port {port} after {LISTEN_TIMEOUT_S:g} s")
        time.sleep(0.05)


def _parse(out: str) -> dict | None:
    """Round-trip figures from sockperf's report, or None when it has none (it failed)."""
    avg = re.search(r"avg-(rtt|latency)=([\d.]+)", out)
    samples = re.search(r"Total (\d+) observations", out)
    if avg is None or samples is None:
        return None
    factor = 2.0 if avg.group(1) == "latency" else 1.0  # "latency" is half the round trip
    figures = {}
    for key, pattern in _FIGURES.items():
        m = re.search(pattern, out)
        if m is None:
            return None
        figures[key] = round(float(m.group(1)) * factor, 3)
    figures["avg_rtt_us"] = round(float(avg.group(2)) * factor, 3)
    figures["samples"] = int(samples.group(1))
    return figures


def _free_port(tcp: bool) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--mps", type=int, default=1000)
    args = parser.parse_args()

    from tailwise.measure import netns

    runs = {}
    for tcp in (False, True):
        proto = "tcp" if tcp else "udp"
        runs[f"loopback_{proto}"] = sockperf_pingpong([], [], "127.0.0.1", _free_port(tcp), tcp, args.seconds, args.mps)
    veth_skipped = netns.can_create()
    if veth_skipped is None:
        with netns.veth_pair() as pair:
            for tcp in (False, True):
                proto = "tcp" if tcp else "udp"
                runs[f"veth_{proto}"] = sockperf_pingpong(
                    pair.argv(pair.server_ns, []), pair.argv(pair.client_ns, []),
                    pair.server_ip, 11111, tcp, args.seconds, args.mps)
    print(json.dumps({
        "tool": "sockperf 3.7 ping-pong",
        "figures": "round trip, µs (--full-rtt)",
        "msg_size": MSG_SIZE,
        "mps": args.mps,
        "seconds": args.seconds,
        "veth_skipped": veth_skipped,
        "runs": runs,
    }, indent=2))


if __name__ == "__main__":
    sys.exit(main())
