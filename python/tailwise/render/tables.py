"""Tables of the commands that print one result: `tailwise model` and `tailwise calibrate`, at the
screen's width (render/output's ``screen_width``), their sentences folded at spaces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from tailwise.render.output import fold, print_table, stdout_console
from tailwise.spec.units import fmt_ns

if TYPE_CHECKING:
    from tailwise.results.documents.calibrate import Calibration


def print_model(result: dict, console=None) -> None:
    """The model's percentiles as a small rich table."""
    console = console or stdout_console()
    k = result["workers"]
    fold(console, f"[bold]{result['model']}[/]: service {result['service']}, load {result['load']:g} = "
                  f"{result['rate_rps']:,.0f} req/s on {k} worker{'s' if k != 1 else ''} sharing one FIFO queue; "
                  f"{result['customers']:,} customers after {result['warmup']:,} warm-up, seed {result['seed']}")
    t = Table()
    t.add_column("percentile", justify="right")
    t.add_column("sojourn (wait + service)", justify="right")
    for p in result["percentiles"]:
        t.add_row(f"p{p['p']:g}", fmt_ns(p["value_ns"]))
    print_table(console, t)
    line = f"mean {fmt_ns(result['mean_ns'])}"
    if result["analytic"]:
        line += f" ({result['analytic']['formula']}: {fmt_ns(result['analytic']['mean_ns'])})"
    fold(console, line + f"; mean service time {fmt_ns(result['mean_service_ns'])}")


def print_calibration(result: Calibration, console=None) -> None:
    console = console or stdout_console()
    fold(console, f"[bold]tailwise calibrate[/] — timestamp sources on this machine "
                  f"(a clock read costs {result.clock.monotonic_read_ns:.0f} ns)")
    t = Table(title="round trip per source, same requests (ping-pong); a TLS record per call")
    for col in ("path", "source", "min", "p50", "p99", "p99.9", "bias p50/p99"):
        t.add_column(col, justify="left" if col in ("path", "source") else "right", overflow="fold")

    def figures(r) -> list[str]:
        return [fmt_ns(r.min_ns), fmt_ns(r.p50_ns), fmt_ns(r.p99_ns), fmt_ns(r.p99_9_ns)]

    for p in result.paths:
        if not p.tried:
            continue
        if p.nic.available:
            t.add_row(p.path, "nic (own run)", *figures(p.nic.rtt), "best")
        for name, source, b in (("kernel", p.kernel, p.kernel.bias_vs_nic), ("user", p.user, p.user.bias)):
            bias = f"{_signed(b.p50_ns)}/{_signed(b.p99_ns)}" if b and b.p50_ns is not None else "best"
            t.add_row(p.path, name, *figures(source.rtt), bias)
        if p.tls and p.tls.tried:
            t.add_row(p.path, "kernel, TLS", *figures(p.tls.rtt), f"{_signed(p.tls.adds_p50_ns)} vs clear")
    c = result.tls
    if c:
        for name, f in ((f"encrypt {c.request_bytes} B", c.encrypt), (f"decrypt {c.reply_bytes} B", c.decrypt)):
            t.add_row("TLS record", name, *figures(f), "in memory")
    print_table(console, t)
    for p in result.paths:
        if p.tried and p.user.send_side.n:
            fold(console, f"{p.path}: user stamps add {fmt_ns(p.user.send_side.p50_ns)} before the send "
                          f"and {fmt_ns(p.user.receive_side.p50_ns)} after the arrival (medians)")
    if c:
        fold(console, f"TLS here ({c.version}, {c.cipher}): the client's record work per request is "
                      f"{fmt_ns(c.encrypt.p50_ns)} to encrypt and {fmt_ns(c.decrypt.p50_ns)} to decrypt (medians, "
                      f"a clock read included), outside both stamps of a round trip")
    for p in result.paths:
        if p.tls and p.tls.tried:
            fold(console, f"{p.path} over TLS: the median round trip {_signed(p.tls.adds_p50_ns)} against the clear "
                          f"(kernel stamps; {_signed(p.tls.user_adds_p50_ns)} by user stamps): the server's record "
                          f"work and the longer segments")
    m = result.model_bias
    if m:
        t = Table(title=f"whole tool vs the model: tailwise serve {m.service} at {m.load:.0%} load")
        for col in ("source", "p50 − model", "p99 − model", "server stalls out: p50/p99"):
            t.add_column(col, justify="left" if col == "source" else "right", overflow="fold")
        sources = {"kernel": m.sources.kernel, "user": m.sources.user, **(m.sources.model_extra or {})}
        for name, src in sources.items():
            d, cl = src.minus_model, src.server_stalls_left_out.minus_model
            t.add_row(name, _signed(d.p50_ns), _signed(d.p99_ns), f"{_signed(cl.p50_ns)}/{_signed(cl.p99_ns)}")
        print_table(console, t)
        g = m.goal
        fold(console, f"goal with kernel stamps: p50 within {fmt_ns(g.within_ns['p50_ns'])}, p99 within "
                      f"{fmt_ns(g.within_ns['p99_ns'])} of the model: {'[green]met[/]' if g.met else '[red]missed[/]'}")
        fold(console, f"[dim]{m.note}[/]")
    for n in result.not_tried:
        fold(console, f"[yellow]not tried[/]: {n.what}" + (f" on {n.path}" if n.path else "") + f" — {n.why}")


def _signed(v: float | None) -> str:
    if v is None:
        return "—"
    return ("+" if v >= 0 else "−") + fmt_ns(abs(v))
