"""The run's histograms as files: latency.hdr and send_lag.hdr (HdrHistogram V2 compressed, base64,
as HdrHistogram's tools read them) and latency.hgrm (the percentile distribution Java's
``outputPercentileDistribution`` writes, as wrk2 and the HdrHistogram plotter read it)."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from hdrh.iterators import PercentileIterator

from tailwise.results.export.base import RunFiles
from tailwise.results.summary import decode_histogram


@dataclass(frozen=True)
class HdrFiles:
    """latency.hdr (every request) and send_lag.hdr (every request sent): the engine's encoding, base64."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        paths = []
        for name, raw in (("latency.hdr", run.result.latency_hist), ("send_lag.hdr", run.result.send_lag_hist)):
            paths.append(directory / name)
            paths[-1].write_bytes(base64.b64encode(raw) + b"\n")
        return paths


@dataclass(frozen=True)
class Hgrm:
    """latency.hgrm: the every-request latency histogram's percentile distribution (``write_hgrm``)."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        write_hgrm(directory / "latency.hgrm", run.result.latency_hist)
        return [directory / "latency.hgrm"]


#: The .hgrm percentile distribution is written in microseconds (values to the ns, 3 decimals).
HGRM_UNIT_NS = 1_000
#: Rows per halving of the distance to 100 % (HdrHistogram's and wrk2's default).
HGRM_TICKS_PER_HALF = 5


class JavaPercentileIterator(PercentileIterator):
    """hdrh's percentile iterator with Java HdrHistogram's ticks: ``ticks_per_half`` steps per
    halving of the distance to 100 %, the halvings counted in whole powers of 2 (hdrh 0.10 takes the
    fractional power, so its rows fall at other percentiles than Java's and wrk2's)."""

    def increment_iteration_level(self):
        self.percentile_to_iterate_from = self.percentile_to_iterate_to
        gap = 100.0 - self.percentile_to_iterate_to
        if gap:
            # As Java computes it: (long) (Math.log(100 / gap) / Math.log(2)).
            halvings = int(math.log(100.0 / gap) / math.log(2))
            self.percentile_to_iterate_to += 100.0 / (self.percentile_ticks_per_half_distance * 2 ** (halvings + 1))


def _java_f(x: float, decimals: int, width: int = 0) -> str:
    """``String.format("%W.Df", x)`` as Java writes it: the shortest decimal of x rounded half up
    (Python's % rounds the binary value half to even: 0.9997802734375 → …437, Java's …438)."""
    rounded = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return format(rounded, "f").rjust(width)


def write_hgrm(path: Path, raw_hist: bytes) -> None:
    """The every-request latency histogram as HdrHistogram's percentile-distribution text, in µs,
    exactly as Java's ``outputPercentileDistribution(out, 5, 1000.0)`` writes it (the format of
    wrk2 and the HdrHistogram plotter): Java's percentile ticks, and a footer whose Mean,
    StdDeviation and Max are in µs like the rows (hdrh 0.10 writes other ticks and StdDeviation
    in ns)."""
    h = decode_histogram(raw_hist)
    d = h.significant_figures
    lines = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}\n", "\n"]
    for it in JavaPercentileIterator(h, HGRM_TICKS_PER_HALF):
        q = it.percentile_level_iterated_to / 100.0
        row = (f"{_java_f(it.value_iterated_to / HGRM_UNIT_NS, d, 12)} {_java_f(q, 12, 2)} "
               f"{it.total_count_to_this_value:10d}")
        last = it.percentile_level_iterated_to == 100.0
        lines.append(row + ("\n" if last else f" {_java_f(1.0 / (1.0 - q), 2, 14)}\n"))
    mean_us, stddev_us = h.get_mean_value() / HGRM_UNIT_NS, h.get_stddev() / HGRM_UNIT_NS
    lines.append(f"#[Mean    = {_java_f(mean_us, d, 12)}, StdDeviation   = {_java_f(stddev_us, d, 12)}]\n")
    lines.append(f"#[Max     = {_java_f(h.get_max_value() / HGRM_UNIT_NS, d, 12)}, "
                 f"Total count    = {h.get_total_count():12d}]\n")
    lines.append(f"#[Buckets = {h.bucket_count:12d}, SubBuckets     = {h.sub_bucket_count:12d}]\n")
    Path(path).write_text("".join(lines))
