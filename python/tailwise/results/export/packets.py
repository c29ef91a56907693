"""A packet run's CSVs (udp+flow://): packets.csv, its counts per 100 ms of intended time, and
packets-hist.csv, every answered packet in 100 ns bins. Nothing for any other run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailwise.results.export.base import RunFiles
from tailwise.results.files import PACKET_HIST_HEADER, PACKETS_HEADER
from tailwise.stats.histogram import LinearHistogram


@dataclass(frozen=True)
class PacketsCsv:
    """packets.csv: per 100 ms interval of intended time (``Engine.packet_intervals``: index, sent,
    received, lost, reordered, duplicates), start_s = index × 0.1."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        if not run.summary.packets:
            return []
        path = directory / "packets.csv"
        lines = [PACKETS_HEADER]
        lines += [f"{i},{i / 10:.1f},{sent},{received},{lost},{reordered},{dups}"
                  for i, sent, received, lost, reordered, dups in run.result.packet_intervals]
        path.write_text("\n".join(lines) + "\n")
        return [path]


@dataclass(frozen=True)
class PacketHistCsv:
    """packets-hist.csv: one row per 100 ns bin counted (stats/histogram.LinearHistogram), then one
    row for the answers above its range (high_ns empty)."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        hist = LinearHistogram.from_engine(run.result.packet_hist) if run.summary.packets else None
        if hist is None:
            return []
        path = directory / "packets-hist.csv"
        lines = [PACKET_HIST_HEADER] + [f"{lo},{hi},{n}" for lo, hi, n in hist.rows()]
        lines.append(f"{hist.range_ns},,{hist.above}")
        path.write_text("\n".join(lines) + "\n")
        return [path]
