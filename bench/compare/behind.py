"""behind: the three places issue 23 says tailwise is behind, measured as the tool is now.

* `--poll block` at 10k req/s against memcached (16 connections): the engine's CPU per request
  (the summary's engine.cpu_ns_per_request) and the whole process's (wait4), p50, next to
  `--poll spin` and to memtier_benchmark's whole-tool CPU per request at the same rate.
* Kernel vs user timestamps against `tailwise serve --service fixed:10us --spin` (server CPU) at
  20 % load: the client under `taskset -c CLIENT` (its coordinator shares the engine's CPU) and
  self-pinned (no taskset: tailwise pins its engine, the coordinator floats): send lag p99,
  every-request p99 minus the M/D/1 model, the engine's stalls.
* Resident memory: a default `tailwise run --duration 5` (built-in server, 10k req/s, no taskset) — peak
  (wait4 ru_maxrss = VmHWM) — and a MEM_SECONDS run at 50k req/s against memcached with its
  VmRSS sampled every second: the growth per second while it measures (a least-squares slope over
  the middle of the run) and the peak.
"""

from __future__ import annotations

import tools
from bias import model
from common import (TAILWISE, Ctx, SLACK_S, aggregate, cell, md_table, noise_summary, noise_text,
                    real_server, repeated, run_client, tailwise_server)


def _slope(series: list[float]) -> float | None:
    """MB per second over the middle 60 % of a once-a-second series."""
    n = len(series)
    lo, hi = int(n * 0.2), int(n * 0.8)
    ys = series[lo:hi]
    if len(ys) < 3:
        return None
    xs = list(range(len(ys)))
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def poll_block(ctx: Ctx) -> tuple[dict, list]:
    with real_server("memcached") as srv:
        url = f"memcached://127.0.0.1:{srv.port}"
        runs = repeated(ctx, [
            ("tailwise --poll block", lambda: tools.tailwise(ctx, url, 10_000, ctx.seconds, 16, 1,
                                                             ("--poll", "block"))),
            ("tailwise --poll spin", lambda: tools.tailwise(ctx, url, 10_000, ctx.seconds, 16, 1,
                                                            ("--poll", "spin"))),
            ("memtier_benchmark", lambda: tools.memtier(ctx, url, 10_000, ctx.seconds, 16)),
        ], server_pids=lambda: [srv.pid])
    agg = {n: {**aggregate(rs, ("engine_cpu_us_per_req", "cpu_us_per_req", "p50_us", "rps")), "runs": rs}
           for n, rs in runs.items()}
    rows = [[n, cell(a["engine_cpu_us_per_req"]), cell(a["cpu_us_per_req"]), cell(a["p50_us"]), cell(a["rps"], 0),
             (a.get("why") or "")[:100]] for n, a in agg.items()]
    return {"table": md_table(["10k req/s, memcached, 16 conns", "engine CPU µs/req", "whole client CPU µs/req",
                               "p50 µs", "completed req/s", "note"], rows), "tools": agg}, \
        [r for rs in runs.values() for r in rs]


def stamps(ctx: Ctx) -> tuple[dict, list]:
    mdl = model("fixed:10us")
    with tailwise_server("fixed:10us", spin=True) as (addr, pid):
        url = f"memcached://{addr}"
        cells = []
        for pin in ("taskset",) if ctx.quick else ("taskset", "self"):
            for src in ("kernel", "user"):
                cells.append((f"{src} stamps, {'taskset -c 1' if pin == 'taskset' else 'self-pinned'}",
                              lambda src=src, pin=pin: tools.tailwise(ctx, url, 20_000, ctx.seconds, 8, 4,
                                                                      ("--timestamps", src), pin=pin)))
        runs = repeated(ctx, cells, server_pids=lambda: [pid])
    for rs in runs.values():
        for r in rs:
            if r.get("p99_us") is not None:
                r["p99_minus_model_us"] = r["p99_us"] - mdl["p99_us"]
                r["p50_minus_model_us"] = r["p50_us"] - mdl["p50_us"]
    agg = {n: {**aggregate(rs, ("lag_p99_us", "p50_minus_model_us", "p99_minus_model_us", "engine_stalls")),
               "runs": rs} for n, rs in runs.items()}
    rows = [[n, cell(a["lag_p99_us"]), cell(a["p50_minus_model_us"]), cell(a["p99_minus_model_us"]),
             cell(a["engine_stalls"], 0), (a.get("why") or "")[:100]] for n, a in agg.items()]
    return {"model_us": mdl, "tools": agg,
            "table": md_table(["serve --spin fixed:10us, 20k req/s", "send lag p99 µs", "p50 − model µs",
                               "p99 − model µs", "engine stalls", "note"], rows)}, \
        [r for rs in runs.values() for r in rs]


def memory(ctx: Ctx) -> dict:
    # As a user runs it: no taskset (the built-in server's worker pins itself to the other CPU).
    short = 2.0 if ctx.quick else 5.0
    default = run_client([*TAILWISE, "run", "--duration", f"{short:g}", "--json", "--quiet"], short + SLACK_S,
                         rss_every_s=1.0)
    mem_s = 5.0 if ctx.quick else 60.0
    with real_server("memcached") as srv:
        long = tools.tailwise(ctx, f"memcached://127.0.0.1:{srv.port}", 50_000, mem_s, 16, 4, rss_every_s=1.0)
    series = long.get("rss_series_mb") or []
    out = {"default_run": {"peak_mb": round(default.maxrss_mb, 1), "rss_series_mb": default.rss_mb_series,
                           "rc": default.rc},
           "long_run": {"seconds": mem_s, "rate_rps": 50_000, "peak_mb": long.get("rss_mb"),
                        "growth_mb_per_s": _slope(series), "rss_series_mb": series, "rps": long.get("rps"),
                        "why": long.get("why")}}
    g = out["long_run"]["growth_mb_per_s"]
    out["table"] = md_table(["run", "peak RSS MB (VmHWM)", "growth while measuring"], [
        [f"default `tailwise run --duration {short:g}` (built-in server, 10k req/s)", f"{default.maxrss_mb:.0f}",
         "—"],
        [f"{mem_s:g} s at 50k req/s against memcached (16 × 4)", cell(long.get("rss_mb") and
                                                                       {"median": long["rss_mb"], "n": 1}, 0),
         "—" if g is None else f"{g:.2f} MB/s"]])
    return out


def run(ctx: Ctx) -> dict:
    block, c1 = poll_block(ctx)
    st, c2 = stamps(ctx)
    mem = memory(ctx)
    res = {"poll_block": block, "stamps": st, "memory": mem}
    res["noise"] = noise_summary(c1 + c2)
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = "\n\n".join([block["table"], st["table"], mem["table"]])
    return res
