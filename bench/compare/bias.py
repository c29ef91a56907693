"""bias: each client's figures minus the queueing model, against `tailwise serve` (Lancet Fig. 6).

`tailwise serve --service fixed:1us` and `fixed:10us` (one worker, busy-polling, on the server
CPU) at 20 % load (200k and 20k req/s), 8 connections: measured p50/p99/p99.9 minus the M/D/1
model's (`tailwise model`), for tailwise with kernel and with user timestamps (memcached://,
4 outstanding per connection) and each peer that speaks memcached ASCII and holds a rate
(mutilate -d 4, memtier_benchmark); memcslap has no rate option (libmemcached 1.1) and is left
out. The loopback floor: sockperf TCP ping-pong between the same two CPUs, in the same run.
"""

from __future__ import annotations

import json
import subprocess

import tools
from common import TAILWISE, Ctx, aggregate, cell, md_table, noise_summary, noise_text, repeated, tailwise_server

SERVICES = (("fixed:1us", 1e-6), ("fixed:10us", 10e-6))
LOAD = 0.2
CONNS = 8
FIGS = ("p50_us", "p99_us", "p999_us", "rps")


def model(service: str) -> dict:
    out = subprocess.run([*TAILWISE, "model", "--service", service, "--load", str(LOAD), "--json",
                          "--customers", "500000"], capture_output=True, text=True, timeout=120, check=True)
    m = json.loads(out.stdout)
    pick = {50.0: "p50_us", 99.0: "p99_us", 99.9: "p999_us"}
    return {pick[q["p"]]: q["value_ns"] / 1e3 for q in m["percentiles"] if q["p"] in pick}


def run(ctx: Ctx) -> dict:
    res: dict = {"load": LOAD, "conns": CONNS, "services": {}}
    rows = []
    floor = repeated(ctx, [("sockperf ping-pong", lambda: tools.sockperf_floor(ctx, min(ctx.seconds, 2.0)))])
    res["floor"] = aggregate(floor["sockperf ping-pong"], FIGS)
    all_cells = list(floor["sockperf ping-pong"])
    for service, s in SERVICES:
        rate = LOAD / s
        mdl = model(service)
        with tailwise_server(service, spin=True) as (addr, pid):
            url = f"memcached://{addr}"
            cells = [
                ("tailwise kernel", lambda: tools.tailwise(ctx, url, rate, ctx.seconds, CONNS, 4,
                                                           ("--timestamps", "kernel"))),
                ("tailwise user", lambda: tools.tailwise(ctx, url, rate, ctx.seconds, CONNS, 4,
                                                         ("--timestamps", "user"))),
                ("mutilate", lambda: tools.mutilate(ctx, url, rate, ctx.seconds, CONNS, depth=4)),
                ("memtier_benchmark", lambda: tools.memtier(ctx, url, rate, ctx.seconds, CONNS)),
            ]
            runs = repeated(ctx, cells, server_pids=lambda: [pid])
        per = {}
        for name, rs in runs.items():
            for r in rs:
                for k in ("p50_us", "p99_us", "p999_us"):
                    if r.get(k) is not None:
                        r[k.replace("_us", "_minus_model_us")] = r[k] - mdl[k]
            per[name] = aggregate(rs, (*FIGS, "p50_minus_model_us", "p99_minus_model_us", "p999_minus_model_us"))
            per[name]["runs"] = rs
            all_cells += rs
            a = per[name]
            rows.append([service, f"{rate:,.0f}", name, cell(a["p50_minus_model_us"]), cell(a["p99_minus_model_us"]),
                         cell(a["p999_minus_model_us"]), cell(a["rps"], 0), a.get("why", "")[:120]])
        res["services"][service] = {"rate_rps": rate, "model_us": mdl, "tools": per}
        rows.append([service, "", "*model (M/D/1)*", f"p50 {mdl['p50_us']:.1f}", f"p99 {mdl['p99_us']:.1f}",
                     f"p99.9 {mdl['p999_us']:.1f}", "", ""])
    f = res["floor"]
    rows.append(["loopback floor", "", "sockperf TCP ping-pong (round trip, not minus a model)", cell(f["p50_us"]),
                 cell(f["p99_us"]), cell(f["p999_us"]), cell(f["rps"], 0), f.get("why", "")[:120]])
    res["noise"] = noise_summary(all_cells)
    res["table"] = md_table(["service", "offered req/s", "client", "p50 − model µs", "p99 − model µs",
                             "p99.9 − model µs", "completed req/s", "note"], rows)
    res["noise_text"] = noise_text(res["noise"])
    return res
