"""Each client, run once against one target at one offered rate, read into one shape:
p50_us/p99_us/p999_us, rps (completed), cpu_us_per_req (the whole client's CPU from wait4, per
completed request), rss_mb (its peak resident set), cmd; ``why`` when it could not.

The peers run under ``taskset -c CLIENT_CPU``. Against memcached-protocol targets all tools ask
for gets of keys never set (misses): mutilate with --noload, memtier --ratio=0:1, tailwise's
default mix.
"""

from __future__ import annotations

from pathlib import Path

from common import Ctx, SLACK_S, cpu_us_per_req, fail_text, on_client, run_client, tailwise_client
import parsers


def _finish(ran, figures: dict, cmd: list[str]) -> dict:
    r = dict(figures)
    r["cpu_us_per_req"] = cpu_us_per_req(ran, figures.get("requests"))
    r["rss_mb"] = round(ran.maxrss_mb, 1)
    r["cmd"] = " ".join(cmd)
    if ran.rc != 0 or not figures.get("requests"):
        r["why"] = fail_text(ran)
    return r


def _hostport(target: str) -> tuple[str, int]:
    host, port = target.rsplit("/", 1)[-1].rsplit(":", 1)
    return host, int(port)


# ------------------------------------------------------------------------------------ tailwise

def tailwise(ctx: Ctx, url: str, rate: float, seconds: float, conns: int, outstanding: int = 1,
             extra: tuple[str, ...] = (), pin: str = "taskset", during=None, rss_every_s=None) -> dict:
    args = [url, "--rate", f"{rate:.0f}", "--conns", str(conns), "--outstanding", str(outstanding), *extra]
    summary, ran = tailwise_client(args, seconds, pin=pin, during=during, rss_every_s=rss_every_s)
    if summary is None:
        return {"why": fail_text(ran), "cmd": "tailwise run " + " ".join(args)}
    r = parsers.parse_tailwise(summary)
    r["cpu_us_per_req"] = cpu_us_per_req(ran, r.get("requests"))
    r["rss_mb"] = round(ran.maxrss_mb, 1)
    r["rss_series_mb"] = ran.rss_mb_series or None
    r["cmd"] = "tailwise run " + " ".join(args) + f" --duration {seconds:g}"
    r["summary_rate"] = summary.get("rate")
    r["checks"] = {c["name"]: c.get("ok") for c in summary.get("checks") or []}
    return r


# ---------------------------------------------------------------------------- memcached peers

def mutilate(ctx: Ctx, target: str, rate: float | None, seconds: float, conns: int, depth: int = 1,
             during=None) -> dict:
    exe = ctx.peer("mutilate")
    if exe is None:
        return {"why": ctx.why_not("mutilate")}
    host, port = _hostport(target)
    save = ctx.tmp("mutilate-") / "save.txt"
    cmd = [exe, "-s", f"{host}:{port}", "--noload", "-T", "1", "-c", str(conns), "-d", str(depth),
           "-t", str(max(int(round(seconds)), 1)), "--save", str(save)]
    if rate:
        cmd += ["-q", f"{rate:.0f}"]  # -i exponential: Poisson, mutilate's default
    ran = run_client(on_client(cmd), seconds + SLACK_S, during=during)
    saved = save.read_text() if save.exists() else None
    return _finish(ran, parsers.parse_mutilate(ran.stdout, saved), cmd)


def memtier(ctx: Ctx, target: str, rate: float | None, seconds: float, conns: int, protocol: str = "memcache_text",
            pipeline: int = 1, during=None, tls_ca: str | None = None) -> dict:
    exe = ctx.peer("memtier_benchmark")
    if exe is None:
        return {"why": ctx.why_not("memtier_benchmark")}
    host, port = _hostport(target)
    js = ctx.tmp("memtier-") / "out.json"
    secs = max(int(round(seconds)), 1)
    cmd = [exe, "-s", host, "-p", str(port), "-P", protocol, "-t", "1", "-c", str(conns), "--ratio=0:1",
           "--key-maximum=10000", f"--test-time={secs}", f"--pipeline={pipeline}", "--hide-histogram",
           "--print-percentiles=50,99,99.9", f"--json-out-file={js}"]
    if rate:
        per_conn = max(int(round(rate / conns)), 1)  # --rate-limiting is per connection
        cmd.append(f"--rate-limiting={per_conn}")
    if tls_ca:
        cmd += ["--tls", "--cacert", tls_ca]
    ran = run_client(on_client(cmd), seconds + SLACK_S, during=during)
    figures = parsers.parse_memtier_json(js.read_text(), secs) if js.exists() and js.stat().st_size else {}
    return _finish(ran, figures, cmd)


def memcslap(ctx: Ctx, target: str, seconds: float, conns: int) -> dict:
    """Closed loop, no rate option and no latencies in libmemcached 1.1: the rate it reaches."""
    exe = ctx.peer("memcslap")
    if exe is None:
        return {"why": ctx.why_not("memcslap")}
    host, port = _hostport(target)
    per = max(int(20_000 * seconds / conns), 1000)
    cmd = [exe, f"--servers={host}:{port}", f"--concurrency={conns}", f"--execute-number={per}", "--test=get"]
    ran = run_client(on_client(cmd), seconds * 10 + SLACK_S)
    return _finish(ran, parsers.parse_memcslap(ran.stdout), cmd)


# -------------------------------------------------------------------------------------- redis

def redis_benchmark(ctx: Ctx, target: str, seconds: float, conns: int) -> dict:
    """Closed loop (no rate option): -n sized for about ``seconds`` at ~40k req/s."""
    exe = ctx.peer("redis-benchmark")
    if exe is None:
        return {"why": ctx.why_not("redis-benchmark")}
    host, port = _hostport(target)
    cmd = [exe, "-h", host, "-p", str(port), "-c", str(conns), "-n", str(int(40_000 * seconds)), "-t", "get",
           "--csv"]
    ran = run_client(on_client(cmd), seconds * 10 + SLACK_S)
    figures = parsers.parse_redis_benchmark_csv(ran.stdout)
    if figures.get("rps"):
        figures["requests"] = int(40_000 * seconds)
    return _finish(ran, figures, cmd)


# --------------------------------------------------------------------------------------- http

def wrk2(ctx: Ctx, url: str, rate: float, seconds: float, conns: int) -> dict:
    exe = ctx.peer("wrk2")
    if exe is None:
        return {"why": ctx.why_not("wrk2")}
    cmd = [exe, "-t1", f"-c{conns}", f"-d{max(int(round(seconds)), 1)}s", f"-R{rate:.0f}", "--latency", url]
    ran = run_client(on_client(cmd), seconds + SLACK_S)
    return _finish(ran, parsers.parse_wrk(ran.stdout), cmd)


def wrk(ctx: Ctx, url: str, seconds: float, conns: int) -> dict:
    exe = ctx.peer("wrk")
    if exe is None:
        return {"why": ctx.why_not("wrk")}
    cmd = [exe, "-t1", f"-c{conns}", f"-d{max(int(round(seconds)), 1)}s", "--latency", url]
    ran = run_client(on_client(cmd), seconds + SLACK_S)
    return _finish(ran, parsers.parse_wrk(ran.stdout), cmd)


def h2load(ctx: Ctx, url: str, rate: float, seconds: float, conns: int) -> dict:
    exe = ctx.peer("h2load")
    if exe is None:
        return {"why": ctx.why_not("h2load")}
    cmd = [exe, "--h1", f"-c{conns}", "-t1", "-D", f"{max(int(round(seconds)), 1)}", f"--rps={rate / conns:g}", url]
    ran = run_client(on_client(cmd), seconds + SLACK_S)
    return _finish(ran, parsers.parse_h2load(ran.stdout), cmd)


def vegeta(ctx: Ctx, url: str, rate: float, seconds: float, conns: int, tls_ca: str | None = None) -> dict:
    exe = ctx.peer("vegeta")
    if exe is None:
        return {"why": ctx.why_not("vegeta")}
    d = ctx.tmp("vegeta-")
    # Bodies read whole (no -max-body 0): Go's transport reuses a connection only after its body was
    # read to the end, so a cut body costs a new connection (and over TLS a handshake) a request.
    # -max-connections as the others' -c: unbounded, a vegeta behind its schedule opens more, and
    # over TLS on one CPU each one's handshake puts it further behind (679 req/s of 10k here).
    (d / "targets").write_text(f"GET {url}\n")
    cmd = [exe, "attack", "-targets", str(d / "targets"), "-rate", f"{rate:.0f}/s", "-duration",
           f"{seconds:g}s", "-connections", str(conns), "-max-connections", str(conns), "-output", str(d / "out.bin")]
    if tls_ca:
        cmd += ["-root-certs", tls_ca]
    ran = run_client(on_client(cmd), seconds + SLACK_S)
    enc = run_client([exe, "encode", "--to", "csv", str(d / "out.bin")], SLACK_S) if (d / "out.bin").exists() \
        else None
    figures = parsers.parse_vegeta_csv(enc.stdout) if enc and enc.rc == 0 else {}
    return _finish(ran, figures, cmd)


def fortio(ctx: Ctx, url: str, rate: float, seconds: float, conns: int, tls_ca: str | None = None) -> dict:
    exe = ctx.peer("fortio")
    if exe is None:
        return {"why": ctx.why_not("fortio")}
    js = ctx.tmp("fortio-") / "out.json"
    cmd = [exe, "load", "-qps", f"{rate:.0f}", "-c", str(conns), "-t", f"{seconds:g}s", "-p", "50,99,99.9",
           "-json", str(js), "-loglevel", "Error", *(["-cacert", tls_ca] if tls_ca else []), url]
    ran = run_client(on_client(cmd), seconds + SLACK_S)
    figures = parsers.parse_fortio_json(js.read_text()) if js.exists() and js.stat().st_size else {}
    return _finish(ran, figures, cmd)


def sockperf_floor(ctx: Ctx, seconds: float, mps: int = 10_000) -> dict:
    """sockperf ping-pong over loopback TCP (server CPU / client CPU): the path's own round trip."""
    if ctx.peer("sockperf") is None:
        return {"why": ctx.why_not("sockperf")}
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "timestamps"))
    from sockperf import _free_port, sockperf_pingpong
    from common import CLIENT_CPU, SERVER_CPU
    s = sockperf_pingpong(["taskset", "-c", str(SERVER_CPU)], ["taskset", "-c", str(CLIENT_CPU)], "127.0.0.1",
                          _free_port(True), True, seconds, mps)
    return {"p50_us": s["p50_us"], "p99_us": s["p99_us"], "p999_us": s["p999_us"], "rps": s["samples"] / seconds,
            "cmd": s["command"], "note": "round trip, closed loop (one message at a time)"}
