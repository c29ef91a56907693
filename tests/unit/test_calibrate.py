"""`tailwise calibrate`'s TLS row (issue 36): what record protection costs on this host, measured
with a rustls client and server joined in memory (engine/tls_cost.rs: no socket, no traffic), the
entry calibrate writes from it, and the rows the table shows."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from tailwise import _core
from tailwise.errors import InputError
from tailwise.measure.calibrate import TLS_ITERATIONS, TLS_REPLY_BYTES, TLS_REQUEST_BYTES, _figures, tls_cost
from tailwise.render.tables import print_calibration
from tailwise.results.documents.base import STRICT
from tailwise.results.documents.calibrate import Calibration, TlsCost


def test_each_call_is_timed_and_the_session_is_tls_1_3():
    c = _core.tls_record_cost_ns(2_000, 64, 128)
    assert len(c["encrypt_ns"]) == len(c["decrypt_ns"]) == 2_000
    # A clock read and an AEAD pass each: never 0.
    assert min(c["encrypt_ns"]) > 0 and min(c["decrypt_ns"]) > 0
    # rustls' client and server with their safe defaults: TLS 1.3 and one of its suites (RFC 8446 §B.4).
    assert c["version"] == "TLSv1.3" and c["cipher"].startswith("TLS13_"), c


def test_a_full_record_costs_more_than_a_small_one():
    """The figures measure the record's work: 16 KiB (RFC 8446 §5.1's largest plaintext) against
    64 bytes, medians of the same host a moment apart — the AEAD pass alone is 256 times longer."""
    small = _core.tls_record_cost_ns(500, 64, 64)
    full = _core.tls_record_cost_ns(500, 16_384, 16_384)
    for key in ("encrypt_ns", "decrypt_ns"):
        assert np.median(full[key]) > np.median(small[key]), key


@pytest.mark.parametrize("args, name", [((0, 64, 128), "iterations"), ((1, 0, 128), "request_bytes"),
                                        ((1, 64, 16_385), "reply_bytes"), ((1_000_001, 64, 128), "iterations")])
def test_arguments_out_of_range_are_one_input_error_naming_them(args, name):
    with pytest.raises(InputError) as e:
        _core.tls_record_cost_ns(*args)
    assert e.value.problem.startswith(name) and name in e.value.remedy


def test_the_entry_calibrate_writes():
    entry = tls_cost(21.0)
    TlsCost.model_validate(entry, context=STRICT)
    assert (entry["iterations"], entry["request_bytes"], entry["reply_bytes"]) == (
        TLS_ITERATIONS, TLS_REQUEST_BYTES, TLS_REPLY_BYTES)
    for side in ("encrypt", "decrypt"):
        f = entry[side]
        assert f["n"] == TLS_ITERATIONS
        assert 0 < f["min_ns"] <= f["p50_ns"] <= f["p99_ns"] <= f["p99.9_ns"] <= f["max_ns"], f
    assert "21 ns" in entry["note"] and "no network" in entry["note"]


def _document() -> Calibration:
    rtt = np.arange(8_000, 9_000, 10, dtype=np.int64)
    figures, bias = _figures(rtt), {"n": 100, "p50_ns": 50, "p99_ns": 90}
    path = {"path": "loopback", "tried": True, "target": "synthetic://127.0.0.1:1", "interface": "lo",
            "rate_rps": 2_000, "seconds": 1.0, "best": "kernel", "requests": 100, "kernel_stamped": 100,
            "kernel": {"rtt": figures}, "user": {"rtt": figures, "bias": bias, "send_side": bias, "receive_side": bias},
            "nic": {"available": False, "reason": "lo cannot stamp in hardware"},
            "tls": {"tried": True, "target": "synthetic+tls://127.0.0.1:2", "requests": 100, "kernel_stamped": 100,
                    "rtt": _figures(rtt + 700), "user_rtt": _figures(rtt + 650), "adds_p50_ns": 700,
                    "user_adds_p50_ns": 650, "note": "the server's record work"}}
    return Calibration.model_validate({
        "schema": "tailwise.calibrate/1",
        "host": {"hostname": "h", "kernel": "6.1", "cpu_model": None, "cores": 2, "usable_cores": 2,
                 "clocksource": "tsc", "python": "3.11"},
        "clock": {"monotonic_read_ns": 21.0, "realtime_read_ns": 21.0},
        "paths": [path], "model_bias": None, "not_tried": [], "tls": tls_cost(21.0)})


@pytest.mark.parametrize("width", [80, 120])
def test_the_table_shows_the_ping_over_tls_and_the_record_cost(width):
    console = Console(file=io.StringIO(), width=width, record=True)
    print_calibration(_document(), console)
    text = console.export_text()
    assert "kernel, TLS" in text and "+700 ns vs" in text
    assert "encrypt 64" in text and "decrypt" in text  # "64 B" may wrap at 80 columns
    assert "TLSv1.3" in text and "+700 ns against the clear" in text.replace("\n  ", " ")
    assert max(len(line) for line in text.splitlines()) <= width
