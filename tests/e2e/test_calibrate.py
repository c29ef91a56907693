"""`tailwise calibrate` (issue 11): each timestamp source's round trips for the same requests, its
bias against the best, the clock's cost, which sources it could not try and why, and the whole
tool against the queueing model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from support.cli import CLI, run_cli
from tailwise.measure import netns

def _json(r) -> dict:
    assert r.returncode == 0, (r.returncode, r.stderr)
    return json.loads(r.stdout)


def _check_path(p: dict, interface: str | None = None) -> None:
    assert p["tried"], p
    assert p["kernel_stamped"] == p["requests"] > 500, p
    k, u = p["kernel"]["rtt"], p["user"]["rtt"]
    # Same requests: the kernel sees the send after the write call began and the reply before the
    # reader wakes, so its round trip is the shorter one, at every figure.
    for key in ("min_ns", "p50_ns", "p99_ns"):
        assert 0 < k[key] <= u[key], (key, k, u)
    assert p["user"]["bias"]["p50_ns"] > 0
    assert p["user"]["send_side"]["p50_ns"] > 0 and p["user"]["receive_side"]["p50_ns"] > 0
    assert p["nic"]["available"] is False and "cannot stamp in hardware" in p["nic"]["reason"]
    if interface:
        assert p["interface"] == interface and p["nic"]["reason"].startswith(interface)


def _check_tls(s: dict, loopback: dict) -> None:
    """Issue 36: the record cost in memory, and the loopback ping over TLS next to the clear one."""
    c = s["tls"]
    assert c["version"] == "TLSv1.3" and c["cipher"].startswith("TLS13_"), c
    for side in ("encrypt", "decrypt"):
        f = c[side]
        assert f["n"] == c["iterations"] > 0 and 0 < f["min_ns"] <= f["p50_ns"] <= f["max_ns"], (side, f)
    t = loopback["tls"]
    assert t["tried"], t
    assert t["target"].startswith("synthetic+tls://127.0.0.1:")
    assert t["kernel_stamped"] == t["requests"] > 500, t
    assert t["rtt"]["n"] == t["kernel_stamped"] and 0 < t["rtt"]["p50_ns"] <= t["user_rtt"]["p50_ns"], t
    assert t["adds_p50_ns"] == t["rtt"]["p50_ns"] - loopback["kernel"]["rtt"]["p50_ns"]
    assert not [n for n in s["not_tried"] if n["what"] == "tls"]


def test_sources_on_loopback_and_veth_with_what_could_not_be_tried():
    s = _json(run_cli("calibrate", "--no-model", "--duration", "1s", "--json", timeout=120))
    assert s["schema"] == "tailwise.calibrate/1"
    assert 1 < s["clock"]["monotonic_read_ns"] < 1_000
    paths = {p["path"]: p for p in s["paths"]}
    _check_path(paths["loopback"], "lo")
    _check_tls(s, paths["loopback"])
    not_tried = {(n["what"], n.get("path")) for n in s["not_tried"]}
    assert ("nic", "loopback") in not_tried
    if netns.can_create() is None:
        _check_path(paths["veth"])
        assert "tls" not in paths["veth"]  # the ping over TLS is loopback's
        assert ("nic", "veth") in not_tried
        # The namespaces it made are gone.
        assert not set(paths["veth"]["namespaces"]) & set(subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout.split())
    else:
        assert not paths["veth"]["tried"] and ("veth", None) in not_tried
    assert s["model_bias"] is None


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None,
                    reason="as root, needs setpriv (util-linux) to drop privileges")
def test_without_root_it_measures_what_it_can_and_says_why_not_the_rest():
    # As root: every capability dropped (an empty bounding set: nothing survives the exec), as an
    # unprivileged user would run it; the files stay readable, unlike as another user.
    drop = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
    r = subprocess.run([*drop, *CLI, "calibrate", "--no-model", "--duration", "1s", "--json"],
                       capture_output=True, text=True, timeout=120)
    s = _json(r)
    paths = {p["path"]: p for p in s["paths"]}
    _check_path(paths["loopback"], "lo")
    assert not paths["veth"]["tried"] and "root" in paths["veth"]["reason"]
    assert {"what": "veth", "why": paths["veth"]["reason"]} in s["not_tried"]


def test_against_a_udp_echo_reflector(udp_echo):
    s = _json(run_cli("calibrate", udp_echo.url, "--duration", "1s", "--json", timeout=60))
    (p,) = s["paths"]
    assert p["path"] == "target" and p["target"] == udp_echo.url.split("?")[0]
    _check_path(p, "lo")


def test_a_target_that_is_no_reflector_is_one_line():
    r = run_cli("calibrate", "memcached://127.0.0.1:1", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "calibrate needs a reflector, not memcached://" in r.stderr
    r = run_cli("calibrate", "synthetic+tls://127.0.0.1:1", "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "calibrate measures a reflector in the clear, not synthetic+tls://" in r.stderr


def test_the_whole_tool_against_the_model():
    s = _json(run_cli("calibrate", "--duration", "1s", "--json", timeout=180))
    m = s["model_bias"]
    assert m["service"] == "fixed:10us" and m["load"] == 0.2
    for name in ("kernel", "user"):
        src = m["sources"][name]
        print(f"{name}: minus model {src['minus_model']}, server stalls left out "
              f"{src['server_stalls_left_out']}")
        # The service time is spun for real and the network adds to it: never below the model.
        for key in ("p50_ns", "p99_ns"):
            if src["minus_model"][key] is not None:
                assert src["minus_model"][key] >= 0, (name, key, src)
            assert src["server_stalls_left_out"]["minus_model"][key] >= 0, (name, key, src)
    assert isinstance(m["goal"]["met"], bool) and "only place" in m["note"]
    # User stamps add the thread's wake-up to every reply: above the kernel's at the median.
    assert m["sources"]["user"]["p50_ns"] > m["sources"]["kernel"]["p50_ns"]
