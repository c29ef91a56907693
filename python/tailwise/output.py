"""Terminal output (rich): the summary as a person reads it, warnings with cause and remedy."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

err_console = Console(stderr=True)


def fmt_ns(v: float | None) -> str:
    if v is None:
        return "—"
    if v < 1_000:
        return f"{v:.0f} ns"
    if v < 1_000_000:
        return f"{v / 1e3:.1f} µs"
    if v < 1_000_000_000:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e9:.2f} s"


def print_summary(s: dict, console: Console | None = None) -> None:
    console = console or Console()
    verdict = s["verdict"]
    colour = "green" if verdict == "ok" else "red"
    r = s["rate"]
    lat = s["latency"]
    console.print(
        f"[bold]{s['target']}[/]  target {r['target_rps']:,.0f} req/s, achieved "
        f"{(r['achieved_rps'] or 0):,.0f} req/s over {r['duration_s']:.2f} s — verdict [bold {colour}]{verdict}[/]"
    )
    t = Table(title=f"latency from intended send time ({lat['source']} timestamps, {lat['samples']:,} samples, "
                    f"{lat['confidence']:.0%} CI)", title_justify="left")
    for col in ("percentile", "value", "CI low", "CI high", "all requests"):
        t.add_column(col, justify="right")
    hist = {p["p"]: p["value_ns"] for p in lat["histogram"]["percentiles"]}
    for p in lat["percentiles"]:
        t.add_row(f"p{p['p']:g}", fmt_ns(p["value_ns"]), fmt_ns(p["low_ns"]), fmt_ns(p["high_ns"]), fmt_ns(hist.get(p["p"])))
    console.print(t)
    lag = {p["p"]: p["value_ns"] for p in s["send_lag"]["percentiles"]}
    c = s["counters"]
    console.print(
        f"send lag p50 {fmt_ns(lag.get(50.0))}, p99 {fmt_ns(lag.get(99.0))}, max {fmt_ns(s['send_lag']['max_ns'])}   "
        f"requests: {c['intended']:,} intended, {c['sent']:,} sent, {c['received']:,} received, {c['late']:,} late, "
        f"{c['never_sent']:,} never sent, {c['errors']:,} errors, {c['timeouts']:,} timeouts"
    )
    if c.get("gets") or c.get("sets"):
        ratio = s.get("hit_ratio")
        console.print(f"keys: {c['gets']:,} gets ({c['hits']:,} hits, {c['misses']:,} misses"
                      f"{f', hit ratio {ratio:.1%}' if ratio is not None else ''}), {c['sets']:,} sets ({c['stored']:,} stored)")
    ts = s.get("target_stats") or {}
    if ts.get("delta"):
        d = ts["delta"]

        def n(name: str) -> str:
            return "?" if d.get(name) is None else f"{d[name]:,}"

        agrees = {True: " — agrees with ours", False: " — [red]differs from ours[/]"}.get(ts.get("agrees"), "")
        console.print(f"server's own count ({ts.get('source')}): {n('gets')} gets, {n('sets')} sets, "
                      f"{n('hits')} hits, {n('misses')} misses{agrees}")
        if ts.get("error"):
            console.print(f"[yellow]server stats:[/] {ts['error']}")
    for reason in s.get("error_reasons", [])[:5]:
        console.print(f"[red]error[/] ×{reason['count']:,}: {reason['reason']}")
    for ch in s["checks"]:
        mark = "[green]✓[/]" if ch["ok"] else "[red]✗[/]"
        line = f"{mark} {ch['name']}: {ch['detail']}"
        if not ch["ok"] and ch["remedy"]:
            line += f" — [yellow]{ch['remedy']}[/]"
        console.print(line)
    if s.get("error"):
        console.print(f"[red]run stopped early:[/] {s['error']}")


def warn(cause: str, remedy: str) -> None:
    err_console.print(f"[yellow]warning:[/] {cause} — {remedy}")
