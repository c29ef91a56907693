"""Timestamp sources (issue 11, first part): --timestamps auto|nic|kernel|user.

Kernel software receive stamps (SO_TIMESTAMPING) on TCP and UDP over loopback; `nic` failing in
one line where the interface's driver cannot stamp (lo, virtio and veth here: EOPNOTSUPP);
`auto` falling back to kernel stamps and saying why in the summary. That a stopped engine's
stop stays out of kernel-stamped replies is tested in the engine itself (engine/tests.rs,
`kernel_receive_stamps_…`), where the replies in flight across the stop are known exactly.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def _summary(r) -> dict:
    assert r.returncode in (0, 1), (r.returncode, r.stderr)
    return json.loads(r.stdout)


def test_nic_where_no_driver_can_is_one_line_and_exit_2():
    r = run_cli("run", "--rate", "1k", "--duration", "1", "--timestamps", "nic")
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("tailwise:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "--timestamps nic" in lines[0] and "lo cannot stamp in hardware" in lines[0], lines[0]
    assert "--timestamps kernel" in lines[0]


def test_auto_falls_back_to_kernel_stamps_and_says_why():
    s = _summary(run_cli("run", "--rate", "5k", "--duration", "1", "--json"))
    lat = s["latency"]
    assert lat["source"] == "kernel" and s["config"]["timestamps"] == "kernel"
    assert lat["source_note"].startswith("nic: lo cannot stamp in hardware")
    assert lat["kernel_stamped_replies"] == s["counters"]["received"] > 0


def test_user_stamps_are_still_there_for_comparison():
    s = _summary(run_cli("run", "--rate", "5k", "--duration", "1", "--timestamps", "user", "--json"))
    assert s["latency"]["source"] == "user" and s["latency"]["kernel_stamped_replies"] == 0
    assert s["latency"]["source_note"] is None


@pytest.mark.parametrize("fixture", ["udp_echo", "memcached"])
def test_kernel_stamps_on_udp_and_tcp_targets(request, fixture):
    srv = request.getfixturevalue(fixture)
    s = _summary(run_cli("run", srv.url, "--rate", "2k", "--duration", "1", "--timestamps", "kernel", "--json"))
    c = s["counters"]
    assert s["latency"]["source"] == "kernel"
    assert c["received"] > 1000 and s["latency"]["kernel_stamped_replies"] == c["received"], c
    # A stamp converted from CLOCK_REALTIME is never taken for a reply faster than a loopback round
    # trip can be (4 µs at best here: shared/notes/platform.md).
    assert s["latency"]["histogram"]["min_ns"] >= 2_000


def test_an_unknown_source_is_refused():
    r = run_cli("run", "--timestamps", "gps", "--duration", "1")
    assert r.returncode == 2 and "--timestamps gps is unknown" in r.stderr
