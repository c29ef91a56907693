"""loadgen: how much open-loop load one tailwise thread generates, and how precisely.

* Highest rate one engine thread holds against `tailwise serve --service fixed:0 --spin` (server
  CPU), the whole client on the client CPU (here one thread is also the one process: the other
  CPU is the server's): rates stepped up (STEPS) until a step fails; a step holds when the
  `arrivals` and `rate` checks pass and the send lag's p99 is ≤ 5 µs. Reported: the highest that
  held, and the highest whose checks passed whatever the lag.
* The send-lag distribution (p50/p99/p99.9) at 10k, 100k req/s and at that maximum.
* Pipelined maximum against one memcached thread, 16 connections × 16 deep: tailwise (offered
  rates stepped until fewer than 99 % complete, then halved to within 5 %), mutilate (-c 16 -d 16, peak) and
  memtier_benchmark (-c 16 --pipeline=16, peak).
"""

from __future__ import annotations

import tools
from common import Ctx, aggregate, cell, md_table, noise_summary, noise_text, real_server, repeated, tailwise_server

STEPS = (10_000, 25_000, 50_000, 100_000, 150_000, 200_000, 300_000)
PIPE_STEPS = (50_000, 100_000, 150_000, 200_000, 300_000, 400_000)
LAG_OK_US = 5.0
#: The pipelined search stops when the highest offered rate held and the lowest failed are this close.
PIPE_RESOLUTION = 0.05


def _holds(r: dict) -> tuple[bool, bool]:
    checks = r.get("checks") or {}
    ok = bool(checks.get("arrivals", True)) and bool(checks.get("rate", False))
    return ok and (r.get("lag_p99_us") or 1e9) <= LAG_OK_US, ok


def search(ctx: Ctx, url: str, seconds: float) -> dict:
    held, checks_ok, steps = 0, 0, []
    for rate in STEPS[::2] if ctx.quick else STEPS:
        r = tools.tailwise(ctx, url, rate, seconds, 16, 4)
        lag_ok, ok = _holds(r)
        steps.append({"rate": rate, "lag_p50_us": r.get("lag_p50_us"), "lag_p99_us": r.get("lag_p99_us"),
                      "lag_p999_us": r.get("lag_p999_us"), "checks": r.get("checks"), "why": r.get("why")})
        held = rate if lag_ok else held
        checks_ok = rate if ok else checks_ok
        if not ok:
            break
    return {"held_rps": held or None, "checks_ok_rps": checks_ok or None, "steps": steps}


def pipelined(ctx: Ctx, url: str, seconds: float) -> dict:
    """Offered rates stepped up (PIPE_STEPS) until fewer than 99 % complete, then halved between the
    last held and the first failed until they are within PIPE_RESOLUTION of each other: the highest
    held, known to that resolution (issue 37 goal 3: fine enough to tell it from the peers' peak)."""
    best, held, failed = None, None, None
    for rate in PIPE_STEPS[1::2] if ctx.quick else PIPE_STEPS:
        r = tools.tailwise(ctx, url, rate, seconds, 16, 16)
        if not r.get("rps") or r["rps"] < 0.99 * rate:
            failed = rate
            break
        best, held = r["rps"], rate
    while held and failed and (failed - held) > PIPE_RESOLUTION * held:
        rate = (held + failed) // 2
        r = tools.tailwise(ctx, url, rate, seconds, 16, 16)
        if r.get("rps") and r["rps"] >= 0.99 * rate:
            best, held = r["rps"], rate
        else:
            failed = rate
    return {"rps": best, "held_rps": held, "failed_rps": failed}


def run(ctx: Ctx) -> dict:
    secs = min(ctx.seconds, 2.0)
    res: dict = {}
    with tailwise_server("fixed:0", spin=True) as (addr, pid):
        url = f"memcached://{addr}"
        runs = repeated(ctx, [
            ("search", lambda: search(ctx, url, secs)),
            ("lag 10k", lambda: tools.tailwise(ctx, url, 10_000, secs, 16, 4)),
            ("lag 100k", lambda: tools.tailwise(ctx, url, 100_000, secs, 16, 4)),
        ], server_pids=lambda: [pid])
        top = aggregate(runs["search"], ("held_rps", "checks_ok_rps"))
        mx = (top["checks_ok_rps"] or {}).get("median")
        if mx and mx not in (10_000, 100_000):
            runs.update(repeated(ctx, [(f"lag {mx:,.0f}", lambda: tools.tailwise(ctx, url, mx, secs, 16, 4))],
                                 server_pids=lambda: [pid]))
    res["search"] = {**top, "runs": runs["search"]}
    lag_rows = []
    res["send_lag"] = {}
    for name, rs in runs.items():
        if not name.startswith("lag"):
            continue
        a = aggregate(rs, ("lag_p50_us", "lag_p99_us", "lag_p999_us", "rps"))
        res["send_lag"][name] = {**a, "runs": rs}
        lag_rows.append([name.replace("lag ", "") + " req/s", cell(a["lag_p50_us"], 2), cell(a["lag_p99_us"]),
                         cell(a["lag_p999_us"]), cell(a["rps"], 0), (a.get("why") or "")[:100]])
    with real_server("memcached") as srv:
        url = f"memcached://127.0.0.1:{srv.port}"
        pipe = repeated(ctx, [
            ("tailwise", lambda: pipelined(ctx, url, secs)),
            ("mutilate", lambda: tools.mutilate(ctx, url, None, secs, 16, depth=16)),
            ("memtier_benchmark", lambda: tools.memtier(ctx, url, None, secs, 16, pipeline=16)),
        ], server_pids=lambda: [srv.pid])
    res["pipelined"] = {n: {**aggregate(rs, ("rps",)), "runs": rs} for n, rs in pipe.items()}
    all_cells = [r for rs in (*runs.values(), *pipe.values()) for r in rs]
    res["noise"] = noise_summary(all_cells)
    res["noise_text"] = noise_text(res["noise"])
    s = res["search"]
    res["table"] = "\n\n".join([
        md_table(["one tailwise thread, open loop (Poisson), 16 conns × 4", "req/s"], [
            [f"highest held (arrivals and rate checks pass, send lag p99 ≤ {LAG_OK_US:g} µs)", cell(s["held_rps"], 0)],
            ["highest with the checks passing (send lag aside)", cell(s["checks_ok_rps"], 0)]]),
        md_table(["offered", "send lag p50 µs", "p99 µs", "p99.9 µs", "completed req/s", "note"], lag_rows),
        md_table(["client, one memcached thread, 16 conns × 16 deep", "max req/s completed", "note"],
                 [[n, cell(a["rps"], 0), (a.get("why") or "")[:100]] for n, a in res["pipelined"].items()]),
    ])
    return res
