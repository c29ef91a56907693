"""Terminal output (rich): the summary as a person reads it, warnings with cause and remedy — at the
width of the screen it is shown on (``screen_width``: the terminal's, else COLUMNS, else 100), prose
folded at spaces (``fold``), tables narrowed to their longest words (``print_table``), one unit for
the latencies of a screen (``unit_for``, ``in_unit``)."""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from tailwise.spec.units import fmt_ns  # noqa: F401  (the printers format times with it)

if TYPE_CHECKING:  # the models are read by attribute here; importing them is the caller's cost
    from tailwise.results.documents.counts import Packets, ServerStats, ServerStatsCombined, Tls
    from tailwise.results.documents.latency import Percentile
    from tailwise.results.documents.run import AgentReport, Barrier, Summary

#: The width off a terminal when COLUMNS is not set.
DEFAULT_WIDTH = 100
#: stderr off a terminal (a log): each message on one line, whatever its length.
LOG_WIDTH = 100_000


def screen_width(file=None) -> int:
    """The one width rule for every command's output: the terminal's width when ``file`` (stdout by
    default) is a terminal; else ``COLUMNS`` when set; else 100 (a pipe, a file)."""
    f = file if file is not None else sys.stdout
    try:
        if f.isatty():
            return os.get_terminal_size(f.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        pass
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else DEFAULT_WIDTH


def log_width(file=None) -> int:
    """stderr's width: the terminal's on a terminal (a person reads it there); off it, a log, where
    a warning or an error stays one line (grep finds it whole; every user error ends as one line)."""
    f = file if file is not None else sys.stderr
    try:
        return screen_width(f) if f.isatty() else LOG_WIDTH
    except (AttributeError, ValueError, OSError):
        return LOG_WIDTH


class WidthConsole(Console):
    """A rich Console whose width follows ``screen_width`` (or ``log_width`` for stderr) of the
    stream it writes to, read at each use (rich's own rule takes 80 columns off a terminal and
    COLUMNS over a terminal's width)."""

    def __init__(self, *args, log: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self._log = log

    @property
    def size(self) -> ConsoleDimensions:
        width = log_width(self.file) if self._log else screen_width(self.file)
        return ConsoleDimensions(width, super().size.height)

    @size.setter
    def size(self, new_size) -> None:  # rich's setter, kept for its callers
        Console.size.fset(self, new_size)


err_console = WidthConsole(stderr=True, log=True)


def stdout_console() -> Console:
    """stdout as a person or a pipe reads it: lines and tables fit ``screen_width`` (prose folded
    at spaces, continuation lines indented; nothing cut, no word broken)."""
    return WidthConsole()


def _units(plain: str, atoms: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """The spans that a line may not break inside: each run of non-spaces (the first with the
    spaces before it), merged with the one before it when a protected span (``atoms``: a
    command, a sysctl setting) covers both."""
    merged: list[tuple[int, int]] = []
    for m in re.finditer(r"\S+", plain):
        a, b = m.span()
        if merged and any(s < b and a < e and s < merged[-1][1] and merged[-1][0] < e for s, e in atoms):
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    if merged and merged[0][0]:
        merged[0] = (0, merged[0][1])  # a first line's own indentation is kept
    return merged


def fold_text(text: Text | str, width: int, *, indent: int = 2, atoms: tuple[tuple[int, int], ...] = ()) -> list[Text]:
    """``text`` folded to ``width`` at spaces, each line after the first indented by ``indent``. A
    word — or a protected span (``atoms``: offsets in the text) — is never broken: one longer than
    the line stands whole on a line of its own (wider than ``width``, never cut)."""
    t = Text(text) if isinstance(text, str) else text
    plain = t.plain
    lines: list[Text] = []
    start = end = None
    room = width
    for a, b in _units(plain, atoms):
        if start is None:
            start, end = a, b
        elif cell_len(plain[start:b]) <= room:
            end = b
        else:
            lines.append(t[start:end])
            room = width - indent
            start, end = a, b
    if start is not None:
        lines.append(t[start:end])
    return [line if i == 0 else Text(" " * indent) + line for i, line in enumerate(lines)] or [Text("")]


def fold(console: Console, text: Text | str, *, indent: int = 2, markup: bool = True,
         atoms: tuple[tuple[int, int], ...] = ()) -> None:
    """Prose printed folded to the console's width at word boundaries (``fold_text``): a whole
    sentence stays findable by reading on, and no word is broken. ``text``: rich markup (or a
    Text); each line of it folded on its own."""
    t = Text.from_markup(text) if isinstance(text, str) and markup else Text(text) if isinstance(text, str) else text
    for paragraph in t.split("\n", allow_blank=True):
        for line in fold_text(paragraph, console.width, indent=indent, atoms=atoms):
            console.print(line, soft_wrap=True, highlight=False)


def fit_columns(table: Table, width: int) -> None:
    """Each column of ``table`` a fixed width within ``width``: as wide as its longest cell when
    that fits, else narrowed in proportion to what it can give — never below its longest word, so
    that a cell wraps at its spaces and no word is folded (rich's own narrowing folds words). Only
    where even the longest words do not fit (a very narrow terminal) does rich fold."""
    def plain(cell) -> str:
        return Text.from_markup(cell).plain if isinstance(cell, str) else getattr(cell, "plain", str(cell))

    cols = table.columns
    room = width - table._extra_width - sum(table._get_padding_width(i) for i in range(len(cols)))
    low, high = [], []
    for col in cols:
        texts = [plain(col.header), *(plain(c) for c in col._cells)]
        longest = max((cell_len(w) for t in texts for w in t.split()), default=1)
        low.append(max(longest, col.min_width or 0))
        high.append(max([low[-1], *(cell_len(line) for t in texts for line in t.splitlines() or [""])]))
    excess = sum(high) - room
    slack = [h - lo for h, lo in zip(high, low)]
    if excess <= 0:
        widths = high
    elif sum(slack) <= excess:
        widths = low
    else:
        widths = [h - (excess * sl) // sum(slack) for h, sl in zip(high, slack)]
        for i in sorted(range(len(cols)), key=lambda i: -slack[i]):  # what rounding left over
            if sum(widths) <= room:
                break
            if widths[i] > low[i]:
                widths[i] -= 1
    for col, w in zip(cols, widths):
        col.width = w


def print_table(console: Console, table: Table) -> None:
    """A rich table at the console's width (``fit_columns``), each line without the spaces that
    pad its last cell (a pipe or a file gets no trailing blanks)."""
    from rich.segment import Segment, Segments

    fit_columns(table, console.width)
    for line in console.render_lines(table, console.options, pad=False, new_lines=False):
        while line and not line[-1].control and not line[-1].text.strip():
            line.pop()
        if line and not line[-1].control:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
        console.print(Segments([*line, Segment.line()]), soft_wrap=True)


@dataclass(frozen=True)
class TimeUnit:
    """One unit for the latencies of a screen: every time below a second on it is written in it."""

    name: str
    ns: float
    #: Decimals of a value from 1 to 1,000 of the unit (as fmt_ns writes them).
    decimals: int

    def number(self, v: float) -> str:
        x = v / self.ns
        if x == 0:
            return "0"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 1:
            return f"{x:,.{self.decimals}f}"
        # Three significant digits at most: 0.0121, 0.0005 (not 0.000500).
        return f"{x:.{min(2 - math.floor(math.log10(abs(x))), 9)}f}".rstrip("0").rstrip(".")

    def fmt(self, v: float | None) -> str:
        return "—" if v is None else f"{self.number(v)} {self.name}"


UNITS = {u.name: u for u in (TimeUnit("ns", 1.0, 0), TimeUnit("µs", 1e3, 1), TimeUnit("ms", 1e6, 2))}


def unit_for(values) -> TimeUnit:
    """The unit of a screen's latencies: the one fmt_ns gives the median of its figures (a table's
    values), so that most read between 1 and 1,000; µs when there are none."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v) and v > 0)
    if not xs:
        return UNITS["µs"]
    mid = xs[len(xs) // 2]
    return UNITS["ns"] if mid < 1e3 else UNITS["µs"] if mid < 1e6 else UNITS["ms"]


_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_RANGE = re.compile(rf"\[({_NUM}), ({_NUM})\] (ns|µs|ms)(?!\w)")
_TIME = re.compile(rf"(?<![\w.,])(?<!\de-)({_NUM}) (ns|µs|ms)(?!\w)")


def in_unit(text: str | None, unit: TimeUnit) -> str | None:
    """A sentence's times below a second (``6,570.0 µs``, ``[8.5, 12.0] µs``) written in ``unit``:
    one unit per screen. Seconds (durations) and a flag's value (``--ci 500us``: no space) stay."""
    if not text:
        return text

    def ns(number: str, name: str) -> float:
        return float(number.replace(",", "")) * UNITS[name].ns

    text = _RANGE.sub(lambda m: f"[{unit.number(ns(m[1], m[3]))}, {unit.number(ns(m[2], m[3]))}] {unit.name}", text)
    return _TIME.sub(lambda m: unit.fmt(ns(m[1], m[2])), text)


def short_text(text: str) -> str:
    """The short form of a long explanation: its first clause (up to the first "; " outside
    brackets) without its parenthesised figures. The whole text is for --verbose and the JSON."""
    out, depth, square, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            i += 1
            continue
        elif c in "[]":
            square += 1 if c == "[" else -1
        elif depth == 0 and square == 0 and text.startswith("; ", i):
            break
        if depth == 0:
            out.append(c)
        i += 1
    short = re.sub(r" +([,:;.])", r"\1", re.sub(r"  +", " ", "".join(out))).strip()
    return short or text


def percentile_text(p: Percentile, unit: TimeUnit | None = None) -> str:
    """A percentile as a figure, or what it would need: never a number the samples cannot support.
    ``unit``: the screen's (fmt_ns's own choice without it)."""
    if p.value_ns is None:
        # A compared run's cell (documents/compare.RunPercentile) carries no n_effective.
        need, have = p.samples_needed, getattr(p, "n_effective", None)
        if not need:
            return "—"
        return f"n_eff {have:,.0f} < {need:,} needed" if have is not None else f"needs n_eff ≥ {need:,}"
    return ("≥ " if p.censored else "") + (unit.fmt(p.value_ns) if unit else fmt_ns(p.value_ns))


def table_unit(s: Summary) -> TimeUnit:
    """The unit of a run's screen, from its table: the percentiles, their bounds, every request."""
    values = [v for p in s.latency.percentiles for v in (p.value_ns, p.low_ns, p.high_ns, p.lower_bound_ns)]
    return unit_for(values + [p.value_ns for p in s.latency.window.percentiles or ()])


def _percentile_table(s: Summary, unit: TimeUnit) -> Table:
    """The percentiles with their intervals and, beside them, every request of the same window."""
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1))
    for col in ("percentile", "value", "CI low", "CI high", "every request"):
        # Wrapped at spaces when the terminal is narrow (print_table: no word folded).
        t.add_column(col, justify="right", overflow="fold")
    window = {p.p: p.value_ns for p in s.latency.window.percentiles or ()}
    for p in s.latency.percentiles:
        t.add_row(f"p{p.p:g}", *_interval_cells(p, unit), unit.fmt(window.get(p.p)))
    return t


def _interval_cells(p: Percentile, unit: TimeUnit) -> tuple[str, str, str]:
    """A percentile's value, CI low and CI high as the tables show them."""
    if p.value_ns is not None and p.low_ns is None and p.high_ns is None and not p.samples_needed:
        # A value without any interval is not a figure to report (independence could not be judged).
        return ("no interval: samples correlated", "—", "—")
    if p.value_ns is None and p.lower_bound_ns is not None:
        # Unsupported, but the samples show how low it cannot be: "≥ x", one-sided.
        return (percentile_text(p, unit), "≥ " + unit.fmt(p.lower_bound_ns), "—")
    return (percentile_text(p, unit), unit.fmt(p.low_ns), unit.fmt(p.high_ns))


#: The percentiles each kind of request shows on the first screen (those of them reported).
KIND_PERCENTILES = (50.0, 99.0, 99.9)


def _kind_table(s: Summary, unit: TimeUnit) -> Table | None:
    """Per kind of request (``by_request``: gets and sets, several http:// requests), its share and
    p50, p99, p99.9 with their intervals, under the whole run's table; None with one kind."""
    if not s.by_request:
        return None
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1))
    for col, justify in (("request", "left"), ("share", "right"), ("percentile", "right"), ("value", "right"),
                         ("CI low", "right"), ("CI high", "right")):
        t.add_column(col, justify=justify, overflow="fold")
    for k in s.by_request:
        shown = [p for p in k.percentiles if p.p in KIND_PERCENTILES] or k.percentiles[:1]
        for i, p in enumerate(shown):
            first = i == 0
            t.add_row(_escape(k.name) if first else "", f"{k.share:.1%}" if first else "", f"p{p.p:g}",
                      *_interval_cells(p, unit))
    return t


#: The agents' table (a run on agents): the terminal's lines and the report's HTML table.
AGENT_COLUMNS = ("agent", "role", "share", "sent", "clock offset", "errors / timeouts", "error")


def _signed_ns(v: float) -> str:
    return ("−" if v < 0 else "+") + fmt_ns(abs(v))


def agent_cells(a: AgentReport) -> list[str]:
    """One agent of the summary's ``agents`` as text cells (``AGENT_COLUMNS``): its address,
    role, share and achieved send rate, clock offset ± half the exchange's round trip, errors and
    timeouts, and why it failed the run (empty when it did not)."""
    counted = a.counters or {}  # a map of the agent's own counter names (AgentReport.counters)
    offset, rtt = a.clock_offset_ns, a.clock_rtt_ns
    clock = "—" if offset is None else _signed_ns(offset) + ("" if rtt is None else f" ± {fmt_ns(rtt / 2)}")
    achieved = a.achieved_rps
    return [a.address or "?", a.role or "?", f"{a.rate_rps or 0:,.0f} req/s",
            "—" if achieved is None else f"{achieved:,.0f} req/s", clock,
            f"{counted.get('errors', 0):,} / {counted.get('timeouts', 0):,}", a.error or ""]


def barrier_text(b: Barrier) -> str:
    """How together the agents started, in one sentence."""
    return (f"the agents started within {fmt_ns(b.spread_ns)} of each other (clocks known to "
            f"± {fmt_ns(b.clock_uncertainty_ns)}), the last {fmt_ns(max(b.late_ns or 0, 0))} after "
            f"the instant asked")


def agent_lines(s: Summary) -> list[str]:
    """A run on agents: one line per agent and one for the start barrier (none otherwise)."""
    lines = []
    subsample = s.methodology.subsample
    thinned = {t.address: t.one_in for t in (subsample.agents_thinned if subsample else None) or ()}
    for a in s.agents or ():
        address, role, share, sent, clock, faults, error = agent_cells(a)
        held = (f"; its rows piled up past its memory ceiling, thinned to 1 in {thinned[address]:,} there (unbiased; "
                f"missing from the samples file)" if address in thinned else "")
        lines.append(f"agent {address} ({role}): share {share}, sent {sent}, clock offset {clock}, "
                     f"{faults} errors / timeouts{held}" + (f" — failed: {error}" if error else ""))
    if s.agents and s.barrier:
        lines.append(f"barrier: {barrier_text(s.barrier)}")
    return lines


def bits(per_s: float | None) -> str:
    """A bit rate as a person says it: 10.2 Mbit/s."""
    if per_s is None:
        return "? bit/s"
    for unit, size in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if per_s >= size:
            return f"{per_s / size:,.2f} {unit}"
    return f"{per_s:,.0f} bit/s"


def packets_line(p: Packets) -> str:
    """A packet run's packets (the summary's ``packets``) in one line: the rate in packets and
    frame bits per second, and what was lost, reordered and duplicated."""
    rate = f"{p.rate_pps:,.0f} pps" if p.rate_pps is not None else "? pps"
    ratio = f" ({p.loss_ratio:.3%})" if p.loss_ratio is not None else ""
    flows = f"{p.flows} flow{'' if p.flows == 1 else 's'}"
    return (f"packets: {p.sent:,} sent, {p.received:,} received · {rate}, {bits(p.bits_per_s)} of "
            f"{p.size_bytes}-byte frames · {p.lost:,} lost{ratio}, {p.reordered:,} reordered (by up to "
            f"{p.reorder_max:,}), {p.duplicates:,} duplicates · {flows}")


def tls_line(t: Tls, unit: TimeUnit) -> str:
    """TLS to the target (the summary's ``tls``) in one line: the handshakes' time (apart from the
    requests' latency), how many were full, resumed and failed, and how the server was verified."""
    h = t.handshake
    times = f"p50 {unit.fmt(h.p50_ns)}, p99 {unit.fmt(h.p99_ns)}" if h.count else "none completed"
    failed = f", {t.failed:,} failed" if t.failed else ""
    trust = ("[yellow]certificate not verified[/] (--tls-insecure)" if t.insecure
             else f"verified against {_escape(t.ca or 'system')}{' roots' if t.ca == 'system' else ''}")
    sni = f" · SNI {_escape(t.sni)}" if t.sni else ""
    resume = "" if t.resume else " (--tls-no-resume)"
    return (f"tls: {h.count:,} handshakes ({t.full:,} full, {t.resumed:,} resumed{resume}{failed}), {times}, "
            f"not in the latency · {trust}{sni}")


#: How each verdict is shown: imprecise in amber, never red — it is an answer, not a failure.
VERDICT_COLOUR = {"ok": "green", "imprecise": "yellow", "not-measurable": "red"}


def print_summary(s: Summary, console: Console | None = None, *, verbose: bool = False) -> None:
    """The result at a glance, folded to the console's width (``screen_width``): the verdict in one
    sentence (what it means, the most likely cause and its fix: render/verdict.py), the rates, the
    percentiles with their intervals and every request beside them, the requests, on a run on
    agents one line per agent and the barrier, and one line per failed check (its first clause and
    its remedy). One unit for every latency on it (``table_unit``). ``verbose``: every check with
    its whole text, the precision report, the warm-up, stalls and server lines."""
    from tailwise.render.verdict import verdict_sentence

    console = console or stdout_console()
    unit = table_unit(s)

    def say(text: str, *, markup: bool = True) -> None:
        fold(console, in_unit(text, unit) if markup else Text(in_unit(text, unit) or ""), markup=markup)

    verdict = s.verdict
    colour = VERDICT_COLOUR.get(verdict, "red")
    sentence = verdict_sentence(s)
    head = Text("verdict ") + Text(verdict, style=f"bold {colour}") + Text(in_unit(sentence[len(verdict):], unit))
    fold(console, head)
    r = s.rate
    lat = s.latency
    completed = f", {r.completed_rps:,.0f} req/s completed" if r.completed_rps is not None else ""
    fold(console, Text.assemble((str(s.target), "bold"),
                                f" · {r.target_rps:,.0f} req/s offered, {(r.achieved_rps or 0):,.0f} req/s sent"
                                f"{completed} over {r.duration_s:.2f} s"))
    if verbose and verdict == "imprecise" and s.precision and s.precision.detail:
        say(f"[bold {colour}]imprecise[/] (valid; every interval sound, wider than asked): "
            f"{_escape(s.precision.detail)}")
    probe = s.probe
    whose = (f" · the probe's requests only ({probe.conns} conns × 1 at {probe.rate_rps:,.0f} req/s)"
             if probe else "")
    say(f"latency from intended send time · {lat.source} timestamps · {lat.samples:,} samples · "
        f"{lat.confidence:.0%} CI{whose}")
    print_table(console, _percentile_table(s, unit))
    if (kinds := _kind_table(s, unit)) is not None:
        say("per kind of request (information: the verdict is the whole run's):")
        print_table(console, kinds)
    c = s.counters
    lag = {p.p: p.value_ns for p in s.send_lag.percentiles}
    extra = "".join(f", {n:,} {name.replace('_', ' ')}" for name, n in (
        ("never_sent", c.never_sent), ("unfinished", c.unfinished), ("reconnects", c.reconnects), ("resent", c.resent))
        if n)
    say(f"requests: {c.sent:,} sent, {c.received:,} received, {c.late:,} late, {c.errors:,} errors, "
        f"{c.timeouts:,} timeouts{extra} · send lag p99 {unit.fmt(lag.get(99.0))}")
    if s.packets:
        say(packets_line(s.packets), markup=False)
    if s.tls:
        say(tls_line(s.tls, unit))
    if s.config.workload is not None:
        ratio = s.hit_ratio
        say(f"keys: {c.gets:,} gets ({c.hits:,} hits, {c.misses:,} misses"
            f"{f', hit ratio {ratio:.1%}' if ratio is not None else ''}), {c.sets:,} sets ({c.stored:,} stored)")
    for line in agent_lines(s):
        say(line, markup=False)
    _delayed_line(s, say, unit, verbose)
    if s.host_pauses and s.host_pauses.note:
        # The figures of the host's pauses; why they matter and what helps: --verbose.
        note = s.host_pauses.note
        say(f"[yellow]host:[/] {_escape(note if verbose else _first_part(note))}")
    ts = s.target_stats
    # The server's own counts (memcached stats, redis INFO); the built-in server's view is the report's.
    counted = ts is not None and ts.source != "builtin-server"
    if counted and ts.delta and (verbose or ts.agrees is False):
        _server_line(ts, say)
    if counted and ts.error and verbose:
        say(f"[yellow]server stats:[/] {_escape(ts.error)}")
    for reason in s.error_reasons[:5 if verbose else 2]:
        say(f"[red]error[/] ×{reason.count:,}: {_escape(reason.reason)}")
    if verbose:
        w = s.warmup
        if w.span_s:
            say(f"warm-up: the first {w.span_s:.2f} s left out ({w.samples:,} samples, p99 "
                f"{unit.fmt(w.p99_ns)}; at most {w.bound_s:g} s and {w.max_share:.0%} of the run)")
        say(f"send lag p50 {unit.fmt(lag.get(50.0))}, p99 {unit.fmt(lag.get(99.0))}, "
            f"max {unit.fmt(s.send_lag.max_ns)}; {c.intended:,} requests intended")
    _check_lines(s, say, verbose)
    if s.error:
        say(f"[red]run stopped early:[/] {_escape(s.error)}")


def _check_lines(s: Summary, say, verbose: bool) -> None:
    """The checks' count, then a line per failed check — its first clause and its remedy (but the
    one the verdict's sentence quotes) — or, ``verbose``, every check with its whole text."""
    from tailwise.render.verdict import cause_of

    m = s.methodology
    checks = s.checks
    failed = [ch for ch in checks if not ch.ok]
    rounds = f"{m.rounds} round{'' if m.rounds == 1 else 's'}"
    stopped = f" · stopped: {m.stopped} ({rounds})" if m.mode == "adaptive" else ""
    passed = f"all {len(checks)} passed" if not failed else f"{len(checks) - len(failed)} of {len(checks)} passed"
    say(f"checks: {passed}{stopped}" + ("" if verbose or not checks else " (--verbose: each check's figures)"))
    cause = None if verbose else cause_of(s)
    for ch in checks if verbose else failed:
        precision_only = ch.name in ("confidence", "stalls")
        mark = "[green]✓[/]" if ch.ok else "[yellow]~[/]" if precision_only else "[red]✗[/]"
        line = f"{mark} {ch.name}: {_escape(ch.detail if verbose else short_text(ch.detail))}"
        quoted = cause is not None and cause.check == ch.name and cause.fix == ch.remedy
        if not ch.ok and ch.remedy and not quoted:
            line += f" — [yellow]{_escape(ch.remedy)}[/]"
        say(line)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(str(text))


def _first_part(text: str) -> str:
    """A note's statement without its explanation: up to the first ": " outside brackets."""
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "(["
        depth -= ch in ")]"
        if depth == 0 and text.startswith(": ", i):
            return text[:i]
    return text


def _delayed_line(s: Summary, say, unit: TimeUnit, verbose: bool) -> None:
    dl = s.delayed
    if dl is None or not dl.samples:
        return
    how = "in as intervals" if dl.bounded is not False else "kept as measured (--keep-stalls)"
    asked = s.config.percentile
    widened = [f"p{p.p:g} by {unit.fmt(p.widening_ns)}" for p in dl.percentiles
               if p.widening_ns and (verbose or p.p == asked)]
    causes = ""
    if verbose:
        cs = dl.causes
        causes = f": {cs.sent_late:,} sent late, {cs.outstanding_across:,} outstanding across a stall"
    say(f"delayed by tailwise's own stalls: {dl.samples:,} of {dl.window_samples:,} samples "
        f"({dl.share:.2%}{causes}), {how}" + (f"; CI low widened: {', '.join(widened)}" if widened else ""))


def _server_line(ts: ServerStats | ServerStatsCombined, say) -> None:
    d = ts.delta

    def n(v: int | None) -> str:
        return "?" if v is None else f"{v:,}"

    agrees = {True: " — agrees with ours", False: " — [red]differs from ours[/]"}.get(ts.agrees, "")
    say(f"server's own count ({_escape(ts.source)}): {n(d.gets)} gets, {n(d.sets)} sets, "
        f"{n(d.hits)} hits, {n(d.misses)} misses{agrees}")


#: --quiet: the result only (warnings and progress are not printed).
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def is_quiet() -> bool:
    """--quiet: warnings and progress are not printed (render/warning.py)."""
    return _quiet
