"""Terminal output (rich): the summary as a person reads it, warnings with cause and remedy."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from tailwise.spec.units import fmt_ns  # noqa: F401  (the printers format times with it)

err_console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())


def stdout_console() -> Console:
    """stdout as a person or a pipe reads it: on a terminal, lines and tables fit its width
    (folded, never cut); off it (a pipe, a log) nothing is wrapped or folded, so that grep finds
    whole sentences and a table's rows stay whole."""
    tty = sys.stdout.isatty()
    return Console(soft_wrap=not tty, width=None if tty else 10_000)


def percentile_text(p: dict) -> str:
    """A percentile as a figure, or what it would need: never a number the samples cannot support."""
    if p.get("value_ns") is None:
        need, have = p.get("samples_needed"), p.get("n_effective")
        if not need:
            return "—"
        return f"n_eff {have:,.0f} < {need:,} needed" if have is not None else f"needs n_eff ≥ {need:,}"
    return ("≥ " if p.get("censored") else "") + fmt_ns(p["value_ns"])


def _percentile_table(s: dict) -> Table:
    """The percentiles with their intervals and, beside them, every request of the same window."""
    lat = s["latency"]
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 2))
    for col in ("percentile", "value", "CI low", "CI high", "every request"):
        t.add_column(col, justify="right", overflow="fold")
    window = {p["p"]: p["value_ns"] for p in (lat.get("window") or {}).get("percentiles", [])}
    for p in lat["percentiles"]:
        if p["value_ns"] is not None and p["low_ns"] is None and p["high_ns"] is None and not p.get("samples_needed"):
            # A value without any interval is not a figure to report (independence could not be judged).
            row = ("no interval yet: samples too correlated", "—", "—")
        elif p["value_ns"] is None and p.get("lower_bound_ns") is not None:
            # Unsupported, but the samples show how low it cannot be: "≥ x", one-sided.
            row = (percentile_text(p), "≥ " + fmt_ns(p["lower_bound_ns"]), "—")
        else:
            row = (percentile_text(p), fmt_ns(p["low_ns"]), fmt_ns(p["high_ns"]))
        t.add_row(f"p{p['p']:g}", *row, fmt_ns(window.get(p["p"])))
    return t


#: The agents' table (a run on agents): the terminal's lines and the report's HTML table.
AGENT_COLUMNS = ("agent", "role", "share", "sent", "clock offset", "errors / timeouts", "error")


def _signed_ns(v: float) -> str:
    return ("−" if v < 0 else "+") + fmt_ns(abs(v))


def agent_cells(a: dict) -> list[str]:
    """One agent of the summary's ``agents`` as text cells (``AGENT_COLUMNS``): its address,
    role, share and achieved send rate, clock offset ± half the exchange's round trip, errors and
    timeouts, and why it failed the run (empty when it did not)."""
    c = a.get("counters") or {}
    offset, rtt = a.get("clock_offset_ns"), a.get("clock_rtt_ns")
    clock = "—" if offset is None else _signed_ns(offset) + ("" if rtt is None else f" ± {fmt_ns(rtt / 2)}")
    achieved = a.get("achieved_rps")
    return [a.get("address") or "?", a.get("role") or "?", f"{a.get('rate_rps') or 0:,.0f} req/s",
            "—" if achieved is None else f"{achieved:,.0f} req/s", clock,
            f"{c.get('errors', 0):,} / {c.get('timeouts', 0):,}", a.get("error") or ""]


def barrier_text(b: dict) -> str:
    """How together the agents started, in one sentence."""
    return (f"the agents started within {fmt_ns(b.get('spread_ns'))} of each other (clocks known to "
            f"± {fmt_ns(b.get('clock_uncertainty_ns'))}), the last {fmt_ns(max(b.get('late_ns') or 0, 0))} after "
            f"the instant asked")


def agent_lines(s: dict) -> list[str]:
    """A run on agents: one line per agent and one for the start barrier (none otherwise)."""
    lines = []
    subsample = (s.get("methodology") or {}).get("subsample") or {}
    thinned = {t["address"]: t["one_in"] for t in subsample.get("agents_thinned") or []}
    for a in s.get("agents") or []:
        address, role, share, sent, clock, faults, error = agent_cells(a)
        held = (f"; its rows piled up past its memory ceiling, thinned to 1 in {thinned[address]:,} there (unbiased; "
                f"missing from the samples file)" if address in thinned else "")
        lines.append(f"agent {address} ({role}): share {share}, sent {sent}, clock offset {clock}, "
                     f"{faults} errors / timeouts{held}" + (f" — failed: {error}" if error else ""))
    if s.get("agents") and s.get("barrier"):
        lines.append(f"barrier: {barrier_text(s['barrier'])}")
    return lines


def bits(per_s: float | None) -> str:
    """A bit rate as a person says it: 10.2 Mbit/s."""
    if per_s is None:
        return "? bit/s"
    for unit, size in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if per_s >= size:
            return f"{per_s / size:,.2f} {unit}"
    return f"{per_s:,.0f} bit/s"


def packets_line(p: dict) -> str:
    """A packet run's packets (the summary's ``packets``) in one line: the rate in packets and
    frame bits per second, and what was lost, reordered and duplicated."""
    rate = f"{p['rate_pps']:,.0f} pps" if p.get("rate_pps") is not None else "? pps"
    ratio = f" ({p['loss_ratio']:.3%})" if p.get("loss_ratio") is not None else ""
    flows = f"{p['flows']} flow{'' if p['flows'] == 1 else 's'}"
    return (f"packets: {p['sent']:,} sent, {p['received']:,} received · {rate}, {bits(p.get('bits_per_s'))} of "
            f"{p['size_bytes']}-byte frames · {p['lost']:,} lost{ratio}, {p['reordered']:,} reordered (by up to "
            f"{p['reorder_max']:,}), {p['duplicates']:,} duplicates · {flows}")


#: How each verdict is shown: imprecise in amber, never red — it is an answer, not a failure.
VERDICT_COLOUR = {"ok": "green", "imprecise": "yellow", "not-measurable": "red"}


def print_summary(s: dict, console: Console | None = None, *, verbose: bool = False) -> None:
    """The result at a glance (about 15 lines for an ok run): the verdict, the percentiles with
    their intervals and every request beside them, the requests, on a run on agents one line per
    agent and the barrier, and one line per failed check with its cause and remedy. ``verbose``: every check, and the warm-up, stalls and server lines."""
    # Off a terminal (a pipe, a log) lines are never wrapped: grep must find whole sentences.
    console = console or stdout_console()
    verdict = s["verdict"]
    colour = VERDICT_COLOUR.get(verdict, "red")
    r = s["rate"]
    lat = s["latency"]
    completed = f", {r['completed_rps']:,.0f} completed" if r.get("completed_rps") is not None else ""
    console.print(f"[bold]{s['target']}[/] — verdict [bold {colour}]{verdict}[/] · {r['target_rps']:,.0f} req/s offered, "
                  f"{(r['achieved_rps'] or 0):,.0f} sent{completed} over {r['duration_s']:.2f} s")
    precision = s.get("precision") or {}
    if verdict == "imprecise" and precision.get("detail"):
        console.print(f"[bold {colour}]imprecise[/] (valid; every interval sound, wider than asked): "
                      f"{precision['detail']}")
    probe = s.get("probe")
    whose = (f" · the probe's requests only ({probe['conns']} conns × 1 at {probe['rate_rps']:,.0f} req/s)"
             if probe else "")
    console.print(f"latency from intended send time · {lat['source']} timestamps · {lat['samples']:,} samples · "
                  f"{lat['confidence']:.0%} CI{whose}")
    console.print(_percentile_table(s))
    c = s["counters"]
    lag = {p["p"]: p["value_ns"] for p in s["send_lag"]["percentiles"]}
    extra = "".join(f", {c[k]:,} {k.replace('_', ' ')}" for k in ("never_sent", "unfinished", "reconnects", "resent")
                    if c.get(k))
    console.print(f"requests: {c['sent']:,} sent, {c['received']:,} received, {c['late']:,} late, {c['errors']:,} errors, "
                  f"{c['timeouts']:,} timeouts{extra} · send lag p99 {fmt_ns(lag.get(99.0))}")
    if s.get("packets"):
        console.print(packets_line(s["packets"]), highlight=False)
    if (s.get("config") or {}).get("workload") is not None:
        ratio = s.get("hit_ratio")
        console.print(f"keys: {c['gets']:,} gets ({c['hits']:,} hits, {c['misses']:,} misses"
                      f"{f', hit ratio {ratio:.1%}' if ratio is not None else ''}), {c['sets']:,} sets ({c['stored']:,} stored)")
    for line in agent_lines(s):
        console.print(line, highlight=False)
    _delayed_line(s, console, verbose)
    hp = s.get("host_pauses") or {}
    if hp.get("note"):
        console.print(f"[yellow]host:[/] {hp['note']}")
    ts = s.get("target_stats") or {}
    if ts.get("delta") and (verbose or ts.get("agrees") is False):
        _server_line(ts, console)
    if ts.get("error") and verbose:
        console.print(f"[yellow]server stats:[/] {ts['error']}")
    for reason in s.get("error_reasons", [])[:5 if verbose else 2]:
        console.print(f"[red]error[/] ×{reason['count']:,}: {reason['reason']}")
    if verbose:
        w = s.get("warmup") or {}
        if w.get("span_s"):
            console.print(f"warm-up: the first {w['span_s']:.2f} s left out ({w['samples']:,} samples, p99 "
                          f"{fmt_ns(w.get('p99_ns'))}; at most {w['bound_s']:g} s and {w['max_share']:.0%} of the run)")
        console.print(f"send lag p50 {fmt_ns(lag.get(50.0))}, p99 {fmt_ns(lag.get(99.0))}, max {fmt_ns(s['send_lag']['max_ns'])}; "
                      f"{c['intended']:,} requests intended")
    m = s.get("methodology") or {}
    checks = s["checks"]
    failed = [ch for ch in checks if not ch["ok"]]
    stopped = f" · stopped: {m['stopped']} ({m['rounds']} rounds)" if m.get("mode") == "adaptive" else ""
    passed = f"all {len(checks)} passed" if not failed else f"{len(checks) - len(failed)} of {len(checks)} passed"
    console.print(f"checks: {passed}{stopped}" + ("" if verbose or not checks else " (--verbose: each check's figures)"))
    for ch in checks if verbose else failed:
        precision_only = ch["name"] in ("confidence", "stalls")
        mark = "[green]✓[/]" if ch["ok"] else "[yellow]~[/]" if precision_only else "[red]✗[/]"
        line = f"{mark} {ch['name']}: {ch['detail']}"
        if not ch["ok"] and ch["remedy"]:
            line += f" — [yellow]{ch['remedy']}[/]"
        console.print(line)
    if s.get("error"):
        console.print(f"[red]run stopped early:[/] {s['error']}")


def _delayed_line(s: dict, console: Console, verbose: bool) -> None:
    dl = s.get("delayed") or {}
    if not dl.get("samples"):
        return
    how = "in as intervals" if dl.get("bounded", True) else "kept as measured (--keep-stalls)"
    asked = (s.get("config") or {}).get("percentile")
    widened = [f"p{p['p']:g} by {fmt_ns(p['widening_ns'])}" for p in dl["percentiles"]
               if p.get("widening_ns") and (verbose or p["p"] == asked)]
    causes = ""
    if verbose:
        cs = dl["causes"]
        causes = f": {cs['sent_late']:,} sent late, {cs['outstanding_across']:,} outstanding across a stall"
    console.print(f"delayed by tailwise's own stalls: {dl['samples']:,} of {dl['window_samples']:,} samples "
                  f"({dl['share']:.2%}{causes}), {how}" + (f"; CI low widened: {', '.join(widened)}" if widened else ""))


def _server_line(ts: dict, console: Console) -> None:
    d = ts["delta"]

    def n(name: str) -> str:
        return "?" if d.get(name) is None else f"{d[name]:,}"

    agrees = {True: " — agrees with ours", False: " — [red]differs from ours[/]"}.get(ts.get("agrees"), "")
    console.print(f"server's own count ({ts.get('source')}): {n('gets')} gets, {n('sets')} sets, "
                  f"{n('hits')} hits, {n('misses')} misses{agrees}")


#: --quiet: the result only (warnings and progress are not printed).
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def warn(cause: str, remedy: str) -> None:
    if not _quiet:
        err_console.print(f"[yellow]warning:[/] {cause} — {remedy}")
