"""Issue 20: the data plane's constants have one definition, in Rust, and Python takes them from
``tailwise._core`` — the sample flags, the 64-byte sample row, the histogram and interval widths,
the stall thresholds, the protocols. These tests fail when Python's view and the engine's differ,
and when the documentation (docs/results.md) names other flag bits than the engine sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tailwise import _core
from tailwise.results import summary as results
from tailwise.spec import target
from tailwise.stats import model
from tailwise.driver.local import LocalAgent
from tailwise.results.rows import SAMPLE_DTYPE, Flag
from tailwise.spec.load import LoadSpec
from tailwise.errors import InputError
from tailwise.methodology import analysis, checks, controller
from tailwise.measure.server import builtin_server

ROOT = Path(__file__).resolve().parents[2]


def test_flag_is_the_engines_flags():
    assert {f.name: f.value for f in Flag} == _core.SAMPLE_FLAGS
    assert [f.name for f in Flag] == list(_core.SAMPLE_FLAGS)  # in bit order, as the engine lists them
    bits = list(_core.SAMPLE_FLAGS.values())
    assert all(b > 0 and b & (b - 1) == 0 for b in bits) and len(set(bits)) == len(bits)
    assert Flag.CENSORED | Flag.TIMEOUT == _core.SAMPLE_FLAGS["CENSORED"] | _core.SAMPLE_FLAGS["TIMEOUT"]


def test_flags_in_docs_are_the_engines():
    text = (ROOT / "docs" / "results.md").read_text()
    line = next(row for row in text.splitlines() if row.startswith("| `flags` |"))
    documented = {name: int(bit) for bit, name in re.findall(r"(\d+) `([A-Z_]+)`", line)}
    assert documented == _core.SAMPLE_FLAGS


def test_sample_dtype_is_the_engines_row():
    assert SAMPLE_DTYPE.itemsize == _core.SAMPLE_BYTES == 64
    assert [(name, SAMPLE_DTYPE.fields[name][1], SAMPLE_DTYPE.fields[name][0].str) for name in SAMPLE_DTYPE.names] \
        == [tuple(f) for f in _core.SAMPLE_FIELDS]
    # Contiguous little-endian fields: the rows are the engine's bytes as they come.
    assert SAMPLE_DTYPE.isalignedstruct is False and not SAMPLE_DTYPE.hasobject
    ends = [offset + np.dtype(code).itemsize for _, offset, code in _core.SAMPLE_FIELDS]
    assert [offset for _, offset, _ in _core.SAMPLE_FIELDS] == [0, *ends[:-1]] and ends[-1] == _core.SAMPLE_BYTES


def test_python_constants_are_the_engines():
    assert analysis.INTERVAL_NS == _core.INTERVAL_NS == _core.interval_params()[0]
    assert _core.interval_params() == (_core.INTERVAL_NS, _core.INTERVAL_SIGFIG)
    assert _core.histogram_params() == (_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.HIST_SIGFIG)
    assert results.STALL_NS == _core.STALL_NS < _core.MASK_STALL_NS
    assert checks.MASK_STALL_US * 1_000 == _core.MASK_STALL_NS
    assert target.SCHEMES == tuple(_core.PROTOCOLS)
    assert set(target.KEYED) == {name for name, p in _core.PROTOCOLS.items() if p["keys"]}
    assert set(controller.DATAGRAM_SCHEMES) == {name for name, p in _core.PROTOCOLS.items() if p["datagram"]}
    assert (model.MAX_CUSTOMERS, model.MAX_WORKERS) == (_core.MODEL_MAX_CUSTOMERS, _core.MODEL_MAX_WORKERS)


def test_udp_size_bounds_are_the_engines():
    low, high = _core.ECHO_MIN_DATAGRAM, _core.ECHO_MAX_DATAGRAM
    assert target.parse_target(f"udp://127.0.0.1:7?size={low}").udp_size == low
    assert target.parse_target(f"udp://127.0.0.1:7?size={high}").udp_size == high
    for size in (low - 1, high + 1):
        with pytest.raises(InputError) as e:
            target.parse_target(f"udp://127.0.0.1:7?size={size}")
        assert f"from {low} to {high} bytes" in e.value.remedy


def test_engine_rows_read_with_the_layout():
    """A short real run: every row the engine writes reads back as a request with its own times —
    a layout that disagreed with the engine's would shift fields into each other."""
    with builtin_server("fixed:10us", busy_poll=False) as server:
        spec = LoadSpec(targets=[server.addr], rate_rps=2_000, duration_ns=300_000_000, conns=2, outstanding=4,
                        timeout_ns=200_000_000, busy_poll=False, pin=False)
        r = LocalAgent().run(spec)
    s, c = r.samples, r.counters
    assert s.dtype == SAMPLE_DTYPE and len(s) == c["intended"] > 100, c
    known = np.uint32(sum(_core.SAMPLE_FLAGS.values()))
    assert ((s["flags"] & ~known) == 0).all()
    answered = s[(s["flags"] & np.uint32(Flag.CENSORED)) == 0]
    assert len(answered) == c["received"] + c["errors"], c
    # timestamps "user": the latency counts from the intended time to the clock after the read.
    assert (answered["latency_ns"] == answered["rx_user_ns"] - answered["intended_ns"]).all()
    assert (answered["sent_ns"] >= answered["intended_ns"]).all()
    assert (answered["rx_user_ns"] > answered["sent_ns"]).all()
    assert (answered["tx_ns"] == 0).all() and (s["intended_ns"] < 400_000_000).all()
    assert ((s["inflation_ns"] == 0) | ((s["flags"] & np.uint32(Flag.INFLATED)) != 0)).all()
    # One engine thread; busy from an instant the client was idle, never after the intended time;
    # a wait for a slot never longer than the send lag.
    assert (s["thread"] == 0).all() and (s["busy_from_ns"] <= s["intended_ns"]).all()
    assert (answered["slot_wait_ns"] <= answered["sent_ns"] - answered["intended_ns"]).all()
