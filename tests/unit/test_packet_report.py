"""`tailwise report` of a packet run (udp+flow://), on a results directory made here: a summary
(a real run's, tests/unit/screens/run-ok.json, made a packet run's) with its ``packets`` object,
the every-request histogram made with `_core.Histogram`, and a packets.csv. Checks what is drawn (the CCDF down to p99.9999, loss and reordering over time) and
the numbers printed; a run without ``packets`` keeps its four plots, a missing packets.csv is one
line. Real packet runs: tests/e2e/test_packet.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from tailwise import _core
from tailwise.cli.report import report as report_command
from tailwise.render import packets as pk
from tailwise.render.report import write_report
from tailwise.render.report.figures import ccdf_figure, packet_loss_figure
from tailwise.render.report.reading import PACKET_RUN_PLOTS, RUN_PLOTS, Run
from tailwise.results.documents.run import Summary

SENT, LOST, REORDERED, REORDER_MAX, DUPLICATES = 400_000, 6, 3, 2, 1
TIMEOUT_NS = 1_000_000_000
TARGET = "udp+flow://10.0.0.2:9000"
#: A real run's summary (the built-in server's), which _summary makes a packet run's.
REAL_RUN = Path(__file__).parent / "screens" / "run-ok.json"
#: (interval, sent, received, lost, reordered, duplicates); the totals above, over 4 s.
ROWS = [(i, 10_000, 10_000 - (3 if i in (7, 30) else 0), 3 if i in (7, 30) else 0,
         (1 if i in (1, 2, 3) else 0), (1 if i == 12 else 0)) for i in range(40)]
PACKETS = {"size_bytes": 64, "payload_bytes": 18, "flows": 4, "sent": SENT, "received": SENT - LOST,
           "lost": LOST, "loss_ratio": LOST / SENT, "reordered": REORDERED, "reorder_max": REORDER_MAX,
           "duplicates": DUPLICATES, "rate_pps": 99_998.5, "sent_pps": 100_000.0,
           "bits_per_s": 99_998.5 * 64 * 8, "resolution_ns": 64, "max_loss": 0.001}


def _percentiles(h) -> list[dict]:
    out = []
    for p in (50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 99.9999):
        if (1 - p / 100) * h.total < 1:  # beyond the sample: not measurable, no number
            out.append({"p": p, "value_ns": None, "low_ns": None, "high_ns": None, "samples_needed": 10_000_000,
                        "n_effective": float(h.total), "censored": False})
            continue
        v = h.value_at_percentile(p)
        out.append({"p": p, "value_ns": v, "low_ns": v * 0.95, "high_ns": v * 1.05, "n_effective": float(h.total),
                    "samples_needed": None, "censored": False})
    return out


def _summary(h, packets: dict | None) -> dict:
    s = json.loads(REAL_RUN.read_text())
    c = {"sent": SENT, "received": SENT - LOST, "late": 0, "errors": 0, "timeouts": LOST}
    if packets:
        c |= {"lost": LOST, "reordered": REORDERED, "reorder_max": REORDER_MAX, "duplicates": DUPLICATES}
    s |= {"target": TARGET, "verdict": "ok", "error": None, "interrupted": False,
          "rate": {"target_rps": 100_000, "achieved_rps": 100_000, "completed_rps": 99_998.5, "duration_s": 4.0,
                   "paused_s": 0.0},
          "counters": s["counters"] | c, "target_stats": None, "packets": packets}
    s["latency"] |= {"percentiles": _percentiles(h), "confidence": 0.95, "source": "kernel", "samples": h.total}
    s["config"] |= {"target": TARGET, "targets": [TARGET], "protocol": "udp+flow", "builtin_server": None,
                    "timeout_ns": TIMEOUT_NS}
    return Summary.model_validate(s).to_json()  # as the run writes it: a summary that validates


def _write_run(d, packets: dict | None = PACKETS, csv_rows=ROWS) -> _core.Histogram:
    d.mkdir(parents=True, exist_ok=True)
    h = _core.Histogram(_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.HIST_SIGFIG)
    rng = np.random.default_rng(1)
    h.record_values([int(v) for v in 8_000 + rng.exponential(2_000, SENT - LOST)])
    h.record(TIMEOUT_NS, LOST)  # the lost packets, censored at the timeout
    (d / "latency.hdr").write_bytes(base64.b64encode(h.encode()) + b"\n")
    (d / "summary.json").write_text(json.dumps(_summary(h, packets)))
    if csv_rows is not None:
        lines = ["interval,start_s,sent,received,lost,reordered,duplicates"]
        lines += [f"{i},{i * 0.1:.1f},{s},{r},{lo},{ro},{du}" for i, s, r, lo, ro, du in csv_rows]
        (d / "packets.csv").write_text("\n".join(lines) + "\n")
    return h


def _by_gid(fig, gid: str):
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, (gid, found)
    return found[0]


def test_packet_run_report_draws_the_deep_ccdf_and_loss_over_time(tmp_path):
    d = tmp_path / "run"
    _write_run(d)
    paths = write_report(d, with_model=False)
    assert {p.name for p in paths} == {f"{n}.{e}" for n in PACKET_RUN_PLOTS for e in ("png", "svg")} | {"report.html"}
    assert all(p.stat().st_size > 0 for p in paths)
    ccdf_svg, loss_svg = (d / "ccdf.svg").read_text(), (d / "packets.svg").read_text()
    assert 'id="ccdf-depth"' in ccdf_svg and 'id="ccdf-timeout"' in ccdf_svg
    # Every percentile with a value is marked; p99.9999 has none (400,000 packets reach 2.5e-6).
    assert all(f'id="percentile-p{p:g}"' in ccdf_svg for p in (50, 90, 99, 99.9, 99.99, 99.999))
    assert 'id="percentile-p99.9999"' not in ccdf_svg
    assert all(f'id="packets-{n}"' in loss_svg for n in ("lost", "reordered", "duplicates", "sent"))
    assert 'id="packets-none"' not in loss_svg
    html = (d / "report.html").read_text()
    assert 'id="packets"' in html and "lost 6 of 400,000 sent (0.0015 %)" in html
    assert 'id="plot-packets"' in html and "p99.9999" in html


def test_the_ccdf_axis_reaches_p99_9999_and_the_curve_stops_at_the_last_packet(tmp_path):
    h = _write_run(tmp_path / "run")
    fig = ccdf_figure(Run.read(tmp_path / "run"), None)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] <= 1e-6 and ax.get_yscale() == "log" and ax.get_xscale() == "log"
    x, y = _by_gid(fig, "ccdf-every-request").get_data()
    assert y[0] == pytest.approx(1.0) and y[-1] == pytest.approx(LOST / h.total)  # the lost packets are the tail
    assert x[-1] == pytest.approx(h.highest_equivalent(TIMEOUT_NS) / 1e3)
    assert _by_gid(fig, "ccdf-depth").get_ydata()[0] == pytest.approx(1 / h.total)
    assert _by_gid(fig, "ccdf-timeout").get_xdata()[0] == pytest.approx(TIMEOUT_NS / 1e3)


def test_loss_over_time_has_each_interval_and_zero_reads_as_zero(tmp_path):
    _write_run(tmp_path / "run")
    fig = packet_loss_figure(Run.read(tmp_path / "run"))
    lost = _by_gid(fig, "packets-lost")
    values, edges = lost.get_data().values, lost.get_data().edges
    assert len(values) == 40 and edges[0] == 0 and edges[-1] == pytest.approx(4.0)
    assert values.sum() == LOST and values[7] == 3 and values[30] == 3 and values[0] == 0
    assert _by_gid(fig, "packets-reordered").get_data().values.sum() == REORDERED
    assert _by_gid(fig, "packets-duplicates").get_data().values.sum() == DUPLICATES
    assert fig.axes[0].get_ylim()[0] == 0  # linear from zero: a clean interval is on the axis
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "lost: 6, 0.0015 % of sent" in labels and "reordered: 3, 0.00075 % of sent" in labels


def test_a_clean_run_says_nothing_was_lost(tmp_path):
    _write_run(tmp_path / "run", csv_rows=[(i, 1000, 1000, 0, 0, 0) for i in range(10)])
    fig = packet_loss_figure(Run.read(tmp_path / "run"))
    assert _by_gid(fig, "packets-none") is not None
    assert fig.axes[0].get_ylim() == pytest.approx((0, 1.15))


def test_the_packets_block_is_printed_with_its_figures(tmp_path, capsys):
    d = tmp_path / "run"
    _write_run(d)
    report_command(str(d), out=str(tmp_path / "out"), model=False, quiet=False)
    out, err = capsys.readouterr()
    assert (tmp_path / "out" / "packets.png").is_file() and str(tmp_path / "out" / "packets.png") in out
    assert "packets: 64-byte frames (18-byte UDP payload), 4 flows, latency resolution 64 ns" in err
    assert ("sent 400,000 (100,000 pps), received 399,994 (99,998 pps), 51.20 Mbit/s of frames received "
            "(frame bits: Ethernet header to FCS)") in err
    assert "lost 6 of 400,000 sent (0.0015 %), reordered 3 (max displacement 2 packets), duplicates 1" in err
    assert "packets.csv" not in err and "packets:" not in out  # stdout stays the files, one a line


def test_a_missing_packets_csv_is_one_line(tmp_path, capsys):
    d = tmp_path / "run"
    _write_run(d, csv_rows=None)
    report_command(str(d), out=None, model=False, quiet=False)
    _, err = capsys.readouterr()
    missing = [line for line in err.splitlines() if "packets.csv" in line]
    assert missing == [f"packets.csv: none in {d}, so no loss and reordering over time"]
    assert "Traceback" not in err and (d / "packets.png").is_file()
    assert "packets.csv: none in" in (d / "report.html").read_text()


@pytest.mark.parametrize("text, says", [
    ("interval,start_s,sent\n0,0.0,5\n", "column received, lost, reordered, duplicates missing"),
    ("interval,start_s,sent,received,lost,reordered,duplicates\n0,0.0,x,1,0,0,0\n", "cannot be read"),
    ("interval,start_s,sent,received,lost,reordered,duplicates\n", "no intervals in it"),
])
def test_a_bad_packets_csv_is_one_line_too(tmp_path, text, says):
    (tmp_path / "packets.csv").write_text(text)
    iv, problem = pk.read_packets_csv(tmp_path)
    assert iv is None and says in problem and "\n" not in problem


def test_a_run_that_is_not_a_packet_run_is_unchanged(tmp_path, capsys):
    d = tmp_path / "run"
    h = _write_run(d, packets=None, csv_rows=None)
    paths = write_report(d, with_model=False)
    assert {p.name for p in paths} == {f"{n}.{e}" for n in RUN_PLOTS for e in ("png", "svg")} | {"report.html"}
    assert 'id="ccdf-depth"' not in (d / "ccdf.svg").read_text()
    fig = ccdf_figure(Run.read(d), None)
    assert fig.axes[0].get_ylim()[0] == pytest.approx(1 / h.total / 3)  # as deep as the sample, no deeper
    assert 'id="packets"' not in (d / "report.html").read_text()
    report_command(str(d), out=None, model=False, quiet=False)
    assert capsys.readouterr().err == ""
    s = Summary.model_validate(json.loads((d / "summary.json").read_text()))
    assert pk.packet_lines(s) == [] and pk.report_lines(d, s) == []
