"""`tailwise report DIR`: plots (PNG and SVG) and one self-contained HTML page for a results directory.

A run directory gets the latency CCDF on log-log axes (every request, down to 1/count, the
reported percentiles with their CIs, and the queueing model when the target was the built-in
server), the CDF, the send-lag distribution and the per-interval percentiles over time; a packet
run (udp+flow://) its CCDF down to p99.9999 and its loss and reordering over time (render/packets.py)
too. A sweep directory gets latency vs load with CI bars (knee, saturation, SLO), the points'
CCDFs overlaid, and the run plots of its highest unsaturated point.

The page embeds every plot as a PNG ``data:`` URI: it loads nothing else (no network, no
script), so it can be mailed or archived alone.

By concern: ``reading`` (the directory's files, read once, and what is computed from them: the
queueing model's curve), ``figures`` (the matplotlib figures, one function each) and ``page``
(report.html from the templates, and the files written). Here: what the commands use.
"""

from __future__ import annotations

from tailwise.render.report.figures import ccdf_overlay_figure, save_figure
from tailwise.render.report.page import figure, fmt_ns, prepare_out, render, table, write_report
from tailwise.render.report.reading import read_histogram

__all__ = ["ccdf_overlay_figure", "figure", "fmt_ns", "prepare_out", "read_histogram", "render", "save_figure",
           "table", "write_report"]
