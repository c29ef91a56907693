"""servers: every client against memcached, redis-server and nginx at one offered load.

Each server (one thread / one worker, on the server CPU) is started by the harness on a free
loopback port; each client runs on the client CPU at RATE req/s with 16 connections where it
takes a rate (tailwise, mutilate, memtier_benchmark, wrk2, vegeta, fortio, h2load --rps), at its
own closed-loop maximum where it does not (redis-benchmark, wrk, memcslap: marked so). Figures:
p50/p99/p99.9 as each tool reports them, the completed rate, the whole client's CPU per request
(wait4: user + system) as seconds per million requests, its peak resident memory, and tailwise's
ratio to each (tailwise ÷ tool: below 1 is less).
"""

from __future__ import annotations

import tools
from common import Ctx, aggregate, cell, fmt, md_table, noise_summary, noise_text, real_server, repeated

RATE = 10_000
CONNS = 16
FIGS = ("p50_us", "p99_us", "p999_us", "rps", "cpu_us_per_req", "rss_mb")


def cells_for(ctx: Ctx, kind: str, srv) -> list:
    s = ctx.seconds
    if kind == "memcached":
        url = f"memcached://127.0.0.1:{srv.port}"
        return [("tailwise", lambda: tools.tailwise(ctx, url, RATE, s, CONNS)),
                ("mutilate", lambda: tools.mutilate(ctx, url, RATE, s, CONNS)),
                ("memtier_benchmark", lambda: tools.memtier(ctx, url, RATE, s, CONNS)),
                ("memcslap (closed loop)", lambda: tools.memcslap(ctx, url, s, CONNS))]
    if kind == "redis":
        url = f"redis://127.0.0.1:{srv.port}"
        return [("tailwise", lambda: tools.tailwise(ctx, url, RATE, s, CONNS)),
                ("memtier_benchmark", lambda: tools.memtier(ctx, url, RATE, s, CONNS, protocol="redis")),
                ("redis-benchmark (closed loop)", lambda: tools.redis_benchmark(ctx, url, s, CONNS))]
    url = srv.url
    return [("tailwise", lambda: tools.tailwise(ctx, url, RATE, s, CONNS)),
            ("wrk2", lambda: tools.wrk2(ctx, url, RATE, s, CONNS)),
            ("vegeta", lambda: tools.vegeta(ctx, url, RATE, s, CONNS)),
            ("fortio", lambda: tools.fortio(ctx, url, RATE, s, CONNS)),
            ("h2load", lambda: tools.h2load(ctx, url, RATE, s, CONNS)),
            ("wrk (closed loop)", lambda: tools.wrk(ctx, url, s, CONNS))]


def _ratio(tw: dict, other: dict, key: str) -> str:
    a, b = (tw.get(key) or {}).get("median"), (other.get(key) or {}).get("median")
    return "—" if not a or not b else f"{a / b:.2f}"


def run(ctx: Ctx) -> dict:
    res: dict = {"rate_rps": RATE, "conns": CONNS, "servers": {}}
    rows, all_cells = [], []
    for kind in ("memcached", "redis", "nginx"):
        try:
            with real_server(kind) as srv:
                runs = repeated(ctx, cells_for(ctx, kind, srv), server_pids=lambda: [srv.pid])
        except (FileNotFoundError, RuntimeError) as e:
            res["servers"][kind] = {"why": str(e)}
            rows.append([kind, "—", *["—"] * 9, f"server not started: {e}"[:120]])
            continue
        per = {name: {**aggregate(rs, FIGS), "runs": rs} for name, rs in runs.items()}
        res["servers"][kind] = per
        for rs in runs.values():
            all_cells += rs
        tw = per["tailwise"]
        for name, a in per.items():
            rows.append([kind, name, cell(a["p50_us"]), cell(a["p99_us"]), cell(a["p999_us"]), cell(a["rps"], 0),
                         cell(a["cpu_us_per_req"]), cell(a["rss_mb"]),
                         "" if name == "tailwise" else _ratio(tw, a, "p99_us"),
                         "" if name == "tailwise" else _ratio(tw, a, "cpu_us_per_req"),
                         "" if name == "tailwise" else _ratio(tw, a, "rss_mb"), (a.get("why") or "")[:120]])
    res["noise"] = noise_summary(all_cells)
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = md_table(["server", "client", "p50 µs", "p99 µs", "p99.9 µs", "completed req/s",
                             "CPU s per M req", "peak RSS MB", "tailwise ÷ it: p99", "CPU", "RSS", "note"], rows)
    res["note"] = (f"offered {fmt(RATE, 0)} req/s, {CONNS} connections; CPU µs per request = CPU s per million "
                   "requests")
    return res
