"""tls: the cost of TLS, as each client sees it, against nginx and redis-server on loopback.

Issue 36's benchmark: nginx (one worker) at RATE req/s over HTTP and over HTTPS, side by side,
each with tailwise, wrk2, vegeta and fortio; redis-server over plaintext and over TLS
(``--tls-port``), tailwise and memtier_benchmark ``--tls``. The certificates are made here with
trustme (a test CA, a server certificate for 127.0.0.1), and every client trusts that CA (wrk2
verifies nothing; it is given no CA). Figures: p50/p99/p99.9 as each tool reports them, the
completed rate, the whole client's CPU per request (wait4), the server's CPU per request (its
/proc/PID/stat before and after: over TLS its record work is on every request's path), and
tailwise's handshake p50 (its
summary's ``tls.handshake``: the connections' handshakes, before the schedule and on reconnect,
never inside a request's latency). The goal (issue 36): tailwise's p50 over TLS at most 3 µs above
its p50 over plaintext, and the lowest p50 over TLS as over plaintext.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

import tools
from common import Ctx, aggregate, cell, md_table, noise_summary, noise_text, pin_to_server_cpu, real_server, repeated

# tests/support/tls_servers.py imports its neighbours as `support.…`: the tests directory on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

RATE = 10_000
CONNS = 16
FIGS = ("p50_us", "p99_us", "p999_us", "rps", "cpu_us_per_req", "server_cpu_us_per_req", "handshake_p50_us")


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU so far (/proc/PID/stat utime, stime; proc(5))."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_server_cpu(pid: int, cells: list) -> list:
    """Each cell also measures the server's CPU per completed request: over TLS the server's own
    record work is on every request's path, so what TLS adds to a p50 is mostly the server's."""
    def wrap(fn):
        def cell():
            before = _cpu_s(pid)
            r = fn()
            if r.get("requests"):
                r["server_cpu_us_per_req"] = (_cpu_s(pid) - before) / r["requests"] * 1e6
            return r
        return cell
    return [(name, wrap(fn)) for name, fn in cells]


@contextlib.contextmanager
def tls_server(kind: str, pki):
    """nginx over HTTPS or redis-server on --tls-port (tests/support/tls_servers.py), on the
    server CPU, always stopped."""
    from tests.support import tls_servers
    start = {"nginx": lambda: tls_servers.nginx_tls_server(pki, access_log=False), "redis": lambda: tls_servers.redis_tls_server(pki)}
    with start[kind]() as srv:
        pin_to_server_cpu(srv.pid)
        yield srv


def cells_for(ctx: Ctx, kind: str, srv, pki) -> list:
    s, ca = ctx.seconds, str(pki.ca) if pki else None
    plain = pki is None
    if kind == "redis":
        url = f"redis://127.0.0.1:{srv.port}" if plain else f"redis+tls://127.0.0.1:{srv.port}"
        tw_extra = () if plain else ("--tls-ca", ca)
        return [("tailwise", lambda: tools.tailwise(ctx, url, RATE, s, CONNS, extra=tw_extra)),
                ("memtier_benchmark", lambda: tools.memtier(ctx, url, RATE, s, CONNS, protocol="redis", tls_ca=ca))]
    url = srv.url if plain else srv.url.replace("https://localhost", "https://127.0.0.1")
    tw_extra = () if plain else ("--tls-ca", ca)
    return [("tailwise", lambda: tools.tailwise(ctx, url, RATE, s, CONNS, extra=tw_extra)),
            ("wrk2", lambda: tools.wrk2(ctx, url, RATE, s, CONNS)),
            ("vegeta", lambda: tools.vegeta(ctx, url, RATE, s, CONNS, tls_ca=ca)),
            ("fortio", lambda: tools.fortio(ctx, url, RATE, s, CONNS, tls_ca=ca))]


def run(ctx: Ctx) -> dict:
    from tests.support.tls_servers import make_pki
    res: dict = {"rate_rps": RATE, "conns": CONNS, "servers": {}}
    rows, all_cells = [], []
    with tempfile.TemporaryDirectory(prefix="tls-", dir=ctx.work) as d:
        pki = make_pki(Path(d))
        for kind in ("nginx", "redis"):
            for transport in ("plain", "tls"):
                name = f"{kind} {transport}"
                try:
                    server = real_server(kind) if transport == "plain" else tls_server(kind, pki)
                    with server as srv:
                        cells = with_server_cpu(srv.pid, cells_for(ctx, kind, srv, None if transport == "plain" else pki))
                        runs = repeated(ctx, cells, server_pids=lambda: [srv.pid])
                except (FileNotFoundError, RuntimeError) as e:
                    res["servers"][name] = {"why": str(e)}
                    rows.append([kind, transport, "—", *["—"] * 7, f"server not started: {e}"[:120]])
                    continue
                per = {client: {**aggregate(rs, FIGS), "runs": rs} for client, rs in runs.items()}
                res["servers"][name] = per
                for rs in runs.values():
                    all_cells += rs
                for client, a in per.items():
                    rows.append([kind, transport, client, cell(a["p50_us"]), cell(a["p99_us"]), cell(a["p999_us"]),
                                 cell(a["rps"], 0), cell(a["cpu_us_per_req"]), cell(a["server_cpu_us_per_req"]),
                                 cell(a["handshake_p50_us"]),
                                 (a.get("why") or "")[:120]])
    tw = {name: (per.get("tailwise") or {}).get("p50_us", {}) for name, per in res["servers"].items()
          if isinstance(per, dict) and "tailwise" in per}
    for kind in ("nginx", "redis"):
        a, b = (tw.get(f"{kind} plain") or {}).get("median"), (tw.get(f"{kind} tls") or {}).get("median")
        res[f"{kind}_tls_p50_added_us"] = None if a is None or b is None else round(b - a, 2)
    res["noise"] = noise_summary(all_cells)
    res["noise_text"] = noise_text(res["noise"])
    res["table"] = md_table(["server", "transport", "client", "p50 µs", "p99 µs", "p99.9 µs", "completed req/s",
                             "CPU µs per req", "server CPU µs per req", "handshake p50 µs", "note"], rows)
    res["note"] = (f"offered {RATE:,} req/s, {CONNS} connections; tailwise's p50 added by TLS: nginx "
                   f"{res['nginx_tls_p50_added_us']} µs, redis {res['redis_tls_p50_added_us']} µs (goal ≤ 3)")
    return res
