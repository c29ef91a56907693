"""Packet mode (udp+flow://) in the control plane: its options checked, carried into the engine's
configuration and back, its default percentiles, the loss check's verdict and figure, the
summary's packets object and packets.csv — all on fabricated values, no traffic."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from tailwise import _core
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.errors import InputError
from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.methodology.checks import loss_check
from tailwise.methodology.remedies import Advice
from tailwise.methodology.words import remedy_words
from tailwise.results.export import RunFiles
from tailwise.results.export.packets import PacketsCsv
from tailwise.results.files import PACKETS_HEADER
from tailwise.spec.load import LoadSpec
from tailwise.spec.precision import Precision
from tailwise.spec.runspec import RunSpec
from tailwise.spec.workload import DEFAULTS
from tailwise.stats import PACKET_PERCENTILES
from tailwise.stats.histogram import Buckets

TARGET = "udp+flow://127.0.0.1:9"


def spec(**given) -> RunSpec:
    return RunSpec.from_flags({name: None for name in DEFAULTS} | given, None)


def test_udp_flow_is_a_datagram_protocol_without_keys():
    assert _core.PROTOCOLS["udp+flow"] == {"keys": False, "datagram": True}
    assert (_core.PACKET_SIZE, _core.PACKET_SIZE_MIN, _core.PACKET_SIZE_MAX) == (64, 64, 9018)
    assert (_core.PACKET_FLOWS, _core.PACKET_FLOWS_MAX) == (1, 1024)


def test_defaults_and_the_engine_configuration_round_trip():
    rs = spec(targets=[TARGET], rate="20k", duration="2")
    assert (rs.size, rs.flows, rs.max_loss) == (64, 1, 0.001)
    assert rs.percentiles == PACKET_PERCENTILES, "a packet run reports to p99.9999"
    ls = rs.load_spec(["127.0.0.1:9"], "kernel")
    assert ls.protocol == {"scheme": "udp+flow", "size": 64, "flows": 1}
    engine = json.loads(_core.check_engine_config(ls.to_json()))
    assert engine == ls.engine_config()
    assert LoadSpec.from_engine_config(engine) == ls
    big = spec(targets=[TARGET], size=1500, flows=8, threads=2, conns=1, max_loss=0.01)
    assert big.load_spec(["127.0.0.1:9"], "user").protocol == {"scheme": "udp+flow", "size": 1500, "flows": 8}
    assert big.config("tailwise run")["packet"] == {"size_bytes": 1500, "flows": 8, "max_loss": 0.01}
    assert big.precision().max_loss == 0.01
    assert RunSpec.from_json(big.to_json()).flows == 8
    # Other protocols: no packet settings, the usual percentiles.
    plain = spec(targets=["udp://127.0.0.1:9"])
    assert (plain.size, plain.flows, plain.max_loss, plain.config("x")["packet"]) == (None, None, None, None)
    assert 99.9999 not in plain.percentiles


@pytest.mark.parametrize("given, words", [
    (dict(targets=[TARGET], size=63), "--size 63 is outside 64..9018 bytes"),
    (dict(targets=[TARGET], size=9019), "--size 9019 is outside"),
    (dict(targets=[TARGET], flows=0), "--flows 0 is outside 1..1024"),
    (dict(targets=[TARGET], flows=1025), "--flows 1025 is outside"),
    (dict(targets=[TARGET], flows=1, threads=2), "--flows 1 is below --threads 2"),
    (dict(targets=[TARGET], max_loss=1.5), "--max-loss 1.5 is outside [0, 1]"),
    (dict(targets=["udp://127.0.0.1:9"], size=64), "--size does not apply to udp://"),
    (dict(targets=["memcached://127.0.0.1:9"], flows=2), "--flows does not apply to memcached://"),
    (dict(flows=2), "--flows needs a udp+flow://HOST:PORT target: there is no built-in reflector"),
    (dict(targets=[TARGET + "?size=100"]), "has a query"),
])
def test_bad_packet_settings_are_one_input_error(given, words):
    with pytest.raises(InputError) as e:
        spec(**given)
    assert words in e.value.line()
    assert "\n" not in e.value.line()


def test_the_engine_refuses_what_the_command_would():
    cfg = {"targets": ["127.0.0.1:9"], "rate_rps": 1, "duration_ns": 1}
    for proto, words in (({"size": 40}, "size 40 is out of range"), ({"flows": 2000}, "flows 2000 is out of range")):
        with pytest.raises(InputError) as e:
            _core.check_engine_config(json.dumps(cfg | {"protocol": {"scheme": "udp+flow"} | proto}))
        assert words in e.value.problem
    with pytest.raises(InputError) as e:
        _core.check_engine_config(json.dumps(cfg | {"threads": 2, "protocol": {"scheme": "udp+flow", "flows": 1}}))
    assert "1 flows cannot feed 2 threads" in e.value.problem and "--flows 2" in e.value.remedy


def counters(sent: int, lost: int, **more) -> dict:
    return {"intended": sent, "sent": sent, "received": sent - lost, "late": 0, "never_sent": 0, "errors": 0,
            "timeouts": lost, "unfinished": 0, "lost": lost, "reordered": 0, "reorder_max": 0, "duplicates": 0} | more


def test_the_loss_check_fails_above_max_loss_with_its_figure():
    ok = loss_check(counters(100_000, 100, reordered=7, reorder_max=2, duplicates=3), 0.001)
    assert ok.ok and ok.statistic == pytest.approx(0.001)
    assert ok.detail.startswith("lost 100 of 100,000 sent (0.100%), within --max-loss 0.100%")
    assert "7 reordered (by up to 2), 3 duplicates" in ok.detail
    bad = loss_check(counters(100_000, 101), 0.001)
    assert not bad.ok and bad.remedy is Advice.FIND_LOSS
    assert bad.detail.startswith("lost 101 of 100,000 sent (0.101%), above --max-loss 0.100%")
    assert "packets.csv" in remedy_words(bad.remedy) and "--rate" in remedy_words(bad.remedy)
    assert bad.as_json()["remedy"] == remedy_words(Advice.FIND_LOSS)


def test_a_packet_run_is_judged_on_loss_not_on_timeouts():
    rng = np.random.default_rng(5)
    n = 30_000
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.cumsum(rng.exponential(50_000, n)).astype(np.uint64)
    s["sent_ns"] = s["intended_ns"] + 300
    s["latency_ns"] = (20_000 + rng.exponential(10_000, n)).astype(np.uint64)
    t, lat = s["intended_ns"].astype(np.int64), s["latency_ns"].astype(np.int64)

    def run(c: dict, max_loss: float | None):
        plan = RunPlan(Precision(ci_rel=0.2, max_loss=max_loss), rate_rps=20_000, arrival="exp", conns=1,
                       outstanding=1 << 20, sample_every=1)
        return analyse(AnalysisInput(
            plan, s, c, elapsed_s=n / 20_000, received_in_window=c["received"], rng=rng, end_ns=int(t[-1]) + 1,
            every_request=lambda f, l: Buckets.of_values(lat[(t >= f * 100_000_000) & (t < l * 100_000_000)])))

    few = run(counters(n, 3), 0.001)
    names = {c.name: c for c in few.checks}
    assert names["loss"].ok and names["errors"].ok, "3 packets lost of 30,000 are within 0.1 %: not errors"
    many = run(counters(n, 300), 0.001)
    assert many.state == "load" and not {c.name: c for c in many.checks}["loss"].ok
    assert "loss" not in {c.name for c in run(counters(n, 0), None).checks}, "no loss check but for packet runs"


def test_packets_csv_has_one_row_per_interval(tmp_path):
    # A packet run's summary has its packets block; the exporter reads only that and the result's intervals.
    run = RunFiles(SimpleNamespace(packets=True), SimpleNamespace(packet_intervals=[(0, 10, 9, 1, 0, 0), (1, 12, 12, 0, 2, 1)]))
    path, = PacketsCsv().write(tmp_path, run)
    assert path == tmp_path / "packets.csv"
    assert path.read_text().splitlines() == [PACKETS_HEADER, "0,0.0,10,9,1,0,0", "1,0.1,12,12,0,2,1"]
    assert PACKETS_HEADER == "interval,start_s,sent,received,lost,reordered,duplicates"
