"""A packet run's part of `tailwise report` (udp+flow://: the summary's ``packets`` object is set).

What the report adds for a packet run: the packets block as text (rate in packets and frame bits
per second, loss, reordering with its largest displacement, duplicates), and loss and reordering
over time from packets.csv (one row per 100 ms of intended time, written by the run). The CCDF
itself is the run's (render/report/figures.py), drawn deeper: down to 1 − F = 1e-6, p99.9999,
as KBNets reports a forwarder's latency (Primorac, Bugnion, Argyraki, "How to Measure the Killer
Microsecond", KBNets'17, Fig. 2–3).

matplotlib is imported by render/report/figures.py's helpers only when a plot is drawn.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tailwise.results.documents.run import Summary
from tailwise.spec.units import fmt_ns

PACKETS_CSV = "packets.csv"
#: packets.csv's columns (the packet contract): one row per interval of intended time.
PACKET_COLUMNS = ("interval", "start_s", "sent", "received", "lost", "reordered", "duplicates")
#: A packet run's CCDF axis reaches at least this deep: p99.9999.
CCDF_DEPTH = 1e-6


@dataclass
class PacketIntervals:
    """packets.csv as arrays, one element per interval (ascending start)."""

    start_s: np.ndarray
    sent: np.ndarray
    received: np.ndarray
    lost: np.ndarray
    reordered: np.ndarray
    duplicates: np.ndarray

    @property
    def length_s(self) -> float:
        """The interval's length: the step between starts (0.1 s by the contract)."""
        steps = np.diff(self.start_s)
        return float(np.median(steps)) if len(steps) else 0.1


def read_packets_csv(directory: Path) -> tuple[PacketIntervals | None, str | None]:
    """(intervals, None), or (None, one line saying why there are none): missing, unreadable, a
    column missing, or no rows. Never raises on a bad file: the rest of the report goes out."""
    path = Path(directory) / PACKETS_CSV
    if not path.is_file():
        return None, f"{PACKETS_CSV}: none in {directory}, so no loss and reordering over time"
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in PACKET_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                return None, f"{PACKETS_CSV}: column {', '.join(missing)} missing, so no loss and reordering over time"
            rows = [[float(r[c]) for c in PACKET_COLUMNS] for r in reader]
    except (OSError, ValueError, TypeError, csv.Error) as e:
        return None, f"{PACKETS_CSV}: cannot be read ({e}), so no loss and reordering over time"
    if not rows:
        return None, f"{PACKETS_CSV}: no intervals in it, so no loss and reordering over time"
    a = np.asarray(sorted(rows, key=lambda r: r[0]), dtype=float)
    return PacketIntervals(a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 6]), None


def fmt_bits(bits_per_s: float | None) -> str:
    """Bits per second in the unit that reads best (kbit/s … Gbit/s)."""
    if bits_per_s is None:
        return "—"
    for div, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits_per_s >= div:
            return f"{bits_per_s / div:,.2f} {unit}"
    return f"{bits_per_s:,.0f} bit/s"


def fmt_ratio(r: float | None) -> str:
    """A share as a percentage with three significant digits: a loss of 1e-6 is not '0.00 %'."""
    if r is None:
        return "—"
    return "0 %" if r == 0 else f"{r * 100:.3g} %"


def _count(v) -> str:
    return "—" if v is None else f"{int(v):,}"


def _pps(v) -> str:
    return "—" if v is None else f"{v:,.0f} pps"


def packet_lines(summary: Summary) -> list[str]:
    """The packets block as text lines (none for a run that is not a packet run)."""
    p = summary.packets
    if p is None:
        return []
    head = (f"packets: {_count(p.size_bytes)}-byte frames ({_count(p.payload_bytes)}-byte UDP payload), "
            f"{_count(p.flows)} flow{'' if p.flows == 1 else 's'}"
            + (f", latency resolution {fmt_ns(p.resolution_ns)}" if p.resolution_ns is not None else ""))
    rate = (f"sent {_count(p.sent)} ({_pps(p.sent_pps)}), received {_count(p.received)} "
            f"({_pps(p.rate_pps)}), {fmt_bits(p.bits_per_s)} of frames received "
            "(frame bits: Ethernet header to FCS)")
    faults = (f"lost {_count(p.lost)} of {_count(p.sent)} sent ({fmt_ratio(p.loss_ratio)}), "
              f"reordered {_count(p.reordered)} (max displacement {_count(p.reorder_max)} packets), "
              f"duplicates {_count(p.duplicates)}")
    return [head, rate, faults]


def report_lines(directory: Path, summary: Summary) -> list[str]:
    """What `tailwise report` prints of a packet run: the packets block, and one line when its
    packets.csv cannot be drawn (nothing for other runs)."""
    lines = packet_lines(summary)
    if lines:
        _, problem = read_packets_csv(directory)
        if problem:
            lines.append(problem)
    return lines


def _totals_label(name: str, total: float, sent: float) -> str:
    share = f", {fmt_ratio(total / sent)} of sent" if sent else ""
    return f"{name}: {int(total):,}{share}"


def loss_figure(fig, ax, iv: PacketIntervals | None, problem: str | None, no_data) -> None:
    """Lost, reordered and duplicated packets per interval (counts, linear y from 0: an interval
    with none reads as zero, not as a missing point on a log axis), each with its total and share
    of the packets sent in the legend; the packets sent per interval on a second axis."""
    if iv is None:
        no_data(ax, problem or f"no {PACKETS_CSV} in this directory")
        return
    t = iv.start_s
    edges = np.append(t, t[-1] + iv.length_s)
    sent_total = float(iv.sent.sum())
    top = 0.0
    for series, name, colour in ((iv.lost, "lost", "C3"), (iv.reordered, "reordered", "C1"),
                                 (iv.duplicates, "duplicates", "C4")):
        ax.stairs(series, edges, lw=1.4, color=colour, label=_totals_label(name, float(series.sum()), sent_total),
                  gid=f"packets-{name}")
        top = max(top, float(series.max()))
    ax.set_ylim(0, max(top, 1.0) * 1.15)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(f"intended send time (s), one step per {iv.length_s * 1e3:.0f} ms")
    ax.set_ylabel(f"packets per {iv.length_s * 1e3:.0f} ms")
    ax.grid(True, alpha=0.3)
    sent_ax = ax.twinx()
    sent_ax.stairs(iv.sent, edges, lw=0.8, color="0.6", ls=":", gid="packets-sent")
    sent_ax.set_ylim(0, max(float(iv.sent.max()), 1.0) * 1.15)
    sent_ax.set_ylabel(f"sent per {iv.length_s * 1e3:.0f} ms (dotted)", color="0.45")
    ax.plot([], [], lw=0.8, color="0.6", ls=":", label=f"sent: {int(sent_total):,}")
    if top == 0:
        ax.text(0.5, 0.55, "no packet lost, reordered or duplicated", ha="center", va="center",
                transform=ax.transAxes, color="C2", gid="packets-none")
    ax.set_title("loss and reordering over time (packets.csv)", fontsize=10)
    # Below the axes: a step anywhere in time stays visible.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, frameon=False)
