"""Issue 20: each document is one set of typed models that writes both the JSON and its schema.

docs/schema/summary.schema.json, sweep.schema.json, compare.schema.json, calibrate.schema.json and
doctor.schema.json are generated from the models; these tests
fail when the committed files and the models disagree, and hold the models to writing values as
given (JSON's types are the contract) and only the keys they declare.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from support.schemas import assert_valid
from tailwise.measure.calibrate import _bias, _figures
from tailwise.results.documents.__main__ import schemas
from tailwise.results.documents.base import STRICT, amend
from tailwise.results.documents.calibrate import Calibration
from tailwise.results.documents.doctor import Doctor, report
from tailwise.results.documents.config import Host
from tailwise.results.documents.counts import Counters
from tailwise.results.documents.latency import Warmup, Window
from tailwise.results.documents.run import Summary

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"


def test_every_document_has_its_generated_schema():
    assert sorted(schemas()) == ["calibrate.schema.json", "compare.schema.json", "doctor.schema.json",
                                 "summary.schema.json", "sweep.schema.json"]


@pytest.mark.parametrize("name", sorted(schemas()))
def test_the_schema_files_are_the_models(name):
    committed = (SCHEMA_DIR / name).read_text()
    assert committed == schemas()[name], (
        f"docs/schema/{name} and the models of python/tailwise/results/documents disagree: "
        "regenerate it with `python -m tailwise.results.documents` (never edit it by hand)")


def test_values_are_written_as_given():
    """An int stays an int and a float a float (a p99 of 1234.0 is written 1234.0, as before);
    numpy scalars become Python's; NaN is left to files.dumps (null)."""
    w = Warmup.model_validate({"span_s": 1, "bound_s": np.float64(0.5), "max_share": 0.1, "samples": np.int64(7),
                               "p99_ns": 1234.0})
    out = w.to_json()
    assert out == {"span_s": 1, "bound_s": 0.5, "max_share": 0.1, "samples": 7, "p99_ns": 1234.0}
    assert [type(out[k]) for k in ("span_s", "bound_s", "samples", "p99_ns")] == [int, float, int, float]
    assert np.isnan(Warmup.model_validate(w.to_json() | {"span_s": float("nan")}).to_json()["span_s"])


def test_absent_keys_stay_absent():
    """A field that may be absent (the window's every-request figures without interval
    histograms) is written only when it was given."""
    assert Window.model_validate({"start_ns": 0, "end_ns": 10}).to_json() == {"start_ns": 0, "end_ns": 10}


def test_undeclared_keys_are_kept_but_refused_in_strict_validation():
    """Readers allow later fields (schema 1), so an undeclared key is kept rather than lost; a
    strict validation (tests of real documents) refuses it, so that no writer adds one silently."""
    doc = {"span_s": 1.0, "bound_s": 0.5, "max_share": 0.1, "samples": 7, "p99_ns": None, "later_field": 3}
    assert Warmup.model_validate(doc).to_json()["later_field"] == 3
    with pytest.raises(ValidationError, match="later_field"):
        Warmup.model_validate(doc, context=STRICT)
    # A map of names (counters) takes any name, strictly too.
    counts = dict.fromkeys(Counters.model_fields, 0) | {"a_new_counter": 1}
    assert Counters.model_validate(counts, context=STRICT).to_json()["a_new_counter"] == 1


def test_amend_sets_declared_fields_only():
    doc = Summary.model_construct()
    amend(doc, thresholds=[], sweep={"index": 1, "rate_rps": 2e3, "grid_size": 3})
    assert doc.to_json() == {"thresholds": [], "sweep": {"index": 1, "rate_rps": 2e3, "grid_size": 3}}
    assert doc.sweep.grid_size == 3  # read back by attribute, as a model
    with pytest.raises(KeyError):
        amend(doc, not_a_field=1)
    with pytest.raises(ValidationError):
        amend(doc, thresholds=[{"threshold": "p99<1ms"}])  # a threshold without its verdict


# --------------------------------------------------------------------------- the calibration

def _calibration(rtt: np.ndarray, with_nic: bool, tls: bool = True) -> dict:
    """A calibrate document as measure/calibrate.calibrate builds it, numpy values included: one
    path tried (with the NIC's run, or without it and why; with its ping over TLS), veth not tried,
    the model bias and TLS's record cost (``tls`` False: a document from before issue 36)."""
    stamped = _figures(rtt)
    nic = {"available": False, "reason": "lo cannot stamp in hardware: no PTP clock"}
    kernel = {"rtt": stamped}
    if with_nic:
        nic = {"available": True, "reason": None, "requests": np.int64(len(rtt)), "stamped": len(rtt),
               "rtt": stamped, "user_bias": _bias(rtt // 2)}
        kernel["bias_vs_nic"] = {"min_ns": 0, "p50_ns": None, "p99_ns": 3}
    path = {"path": "loopback", "tried": True, "target": "synthetic://127.0.0.1:1", "interface": "lo",
            "rate_rps": 2_000, "seconds": 2.0, "best": "nic" if with_nic else "kernel", "requests": len(rtt),
            "kernel_stamped": len(rtt), "kernel": kernel,
            "user": {"rtt": _figures(rtt + 5), "bias": _bias(np.full(len(rtt), 5)), "send_side": _bias(rtt[:0]),
                     "receive_side": _bias(rtt[:0])},
            "nic": nic}
    if tls:
        path["tls"] = {"tried": True, "target": "synthetic+tls://127.0.0.1:2", "requests": len(rtt),
                       "kernel_stamped": np.int64(len(rtt)), "rtt": _figures(rtt + 700), "user_rtt": _figures(rtt + 710),
                       "adds_p50_ns": None if len(rtt) == 0 else np.int64(700),
                       "user_adds_p50_ns": None if len(rtt) == 0 else 5, "note": "the server's record work"}
    gaps = {"p50_ns": np.float64(1.5), "p99_ns": None, "p99.9_ns": -2}
    source = {"samples": 10, "verdict_state": "done", "p50_ns": 12_001.0, "p99_ns": None, "p99.9_ns": np.int64(9),
              "minus_model": gaps, "server_stalls_left_out": {"server_stalls": 0, "requests_left_out": 0,
                                                              "minus_model": gaps}}
    return {
        "schema": "tailwise.calibrate/1",
        "host": {"hostname": "h", "kernel": "6.1", "cpu_model": None, "cores": 2, "usable_cores": 2,
                 "clocksource": "tsc", "python": "3.11"},
        "clock": {"monotonic_read_ns": 20.5, "realtime_read_ns": np.float64(21.0)},
        "paths": [path, {"path": "veth", "tried": False, "reason": "not root"}],
        "model_bias": {"service": "fixed:10us", "load": 0.2, "rate_rps": 20_000.0, "seconds": 3.0, "model": "M/D/1",
                       "model_ns": {"p50_ns": 10_500.0, "p99_ns": 30_000.0, "p99.9_ns": 40_000.0},
                       "sources": {"kernel": source, "user": source},
                       "goal": {"with": "kernel", "within_ns": {"p50_ns": 12_000, "p99_ns": 30_000}, "met": False},
                       "note": "every request in"},
        "not_tried": [{"what": "veth", "why": "not root"}] + ([] if with_nic else [
            {"what": "nic", "why": nic["reason"], "path": "loopback"}]),
    } | ({"tls": {"version": "TLSv1.3", "cipher": "TLS13_AES_256_GCM_SHA384", "iterations": 10_000, "request_bytes": 64,
                  "reply_bytes": 128, "encrypt": _figures(rtt // 10), "decrypt": _figures(rtt // 8),
                  "note": "in memory"}} if tls else {})


@pytest.mark.parametrize("with_nic", [False, True], ids=["kernel", "nic"])
@pytest.mark.parametrize("n", [0, 100])
def test_the_calibration_model_takes_what_calibrate_writes(with_nic, n):
    """Every key measure/calibrate writes is declared (strictly), written back as given, and the
    document validates against the generated schema, empty figures (only n) included."""
    doc = _calibration(np.arange(1_000, 1_000 + n, dtype=np.int64), with_nic)
    out = Calibration.model_validate(doc, context=STRICT).to_json()
    assert out == doc
    assert out["paths"][0]["kernel"]["rtt"].get("p99.9_ns") == (None if n == 0 else 1_099)
    assert type(out["clock"]["realtime_read_ns"]) is float and type(out["model_bias"]["sources"]["kernel"]["p99.9_ns"]) is int
    assert_valid(out, "calibrate")
    assert_valid(out | {"model_bias": None}, "calibrate")


def test_a_calibration_from_before_tls_still_loads():
    """Issue 36's ``tls`` entries are additive: a document without them validates, reads back
    as None, and is written back without them."""
    doc = _calibration(np.arange(1_000, 1_100, dtype=np.int64), False, tls=False)
    c = Calibration.model_validate(doc, context=STRICT)
    assert c.tls is None and c.paths[0].tls is None
    assert c.to_json() == doc
    assert_valid(c.to_json(), "calibrate")


def test_a_failed_ping_over_tls_is_said_and_validates():
    doc = _calibration(np.arange(1_000, 1_100, dtype=np.int64), False)
    doc["paths"][0]["tls"] = {"tried": False, "reason": "the built-in server refused its certificate"}
    doc["not_tried"].append({"what": "tls", "why": "the built-in server refused its certificate", "path": "loopback"})
    out = Calibration.model_validate(doc, context=STRICT).to_json()
    assert out == doc
    assert_valid(out, "calibrate")


@pytest.mark.parametrize("change", ["tried path without user", "figures without percentiles", "nic without rtt",
                                    "untried path without reason", "unknown best", "no path", "tls ping without rtt",
                                    "untried tls ping without reason", "tls cost without cipher",
                                    "tls encrypt without percentiles"])
def test_a_broken_calibration_fails_the_schema(change):
    import jsonschema

    doc = Calibration.model_validate(_calibration(np.arange(1_000, 1_100, dtype=np.int64), True)).to_json()
    assert_valid(doc, "calibrate")
    path = doc["paths"][0]
    if change == "tried path without user":
        del path["user"]
    elif change == "figures without percentiles":
        del path["kernel"]["rtt"]["p99.9_ns"]
    elif change == "nic without rtt":
        del path["nic"]["rtt"]
    elif change == "untried path without reason":
        del doc["paths"][1]["reason"]
    elif change == "unknown best":
        path["best"] = "user"
    elif change == "tls ping without rtt":
        del path["tls"]["rtt"]
    elif change == "untried tls ping without reason":
        path["tls"] = {"tried": False}
    elif change == "tls cost without cipher":
        del doc["tls"]["cipher"]
    elif change == "tls encrypt without percentiles":
        del doc["tls"]["encrypt"]["p50_ns"]
    else:
        doc["paths"] = []
    with pytest.raises(jsonschema.ValidationError):
        assert_valid(doc, "calibrate")


# --------------------------------------------------------------------------- the doctor

_HOST = {"hostname": "h", "kernel": "6.1", "cpu_model": None, "cores": 2, "usable_cores": 2, "clocksource": "tsc",
         "python": "3.11"}


def _knobs(tmp_path) -> list[dict]:
    """Every knob as host/doctor.py writes it: on an empty tree (unreadable, each with its
    reason), then one of each other state with its readings."""
    from tailwise.host.doctor import Doctor as Examine, Fact, State

    knobs = [f.as_json() for f in Examine(tmp_path, iface="eth9", cpus={1}, sample_s=0).facts()]
    knobs[0] = Fact("governor", State.OK, "performance", "why", None, "/sys/…", None,
                    {"governor": {"0": "performance"}, "cur_mhz": {}}).as_json()
    knobs[1] = Fact("cstates", State.WARN, "intel_idle: C6 133 µs", "why", "sudo cpupower idle-set -D 3", "/sys/…",
                    "CPU 1 may sleep in C6", {"states": {"1": [{"name": "C6", "latency_us": 133, "enabled": True}]}}).as_json()
    knobs[5] = Fact("nic-numa", State.NOT_APPLICABLE, "does not apply", "why", None, "/sys/…", "one NUMA node").as_json()
    return knobs


def test_the_doctor_model_takes_what_tailwise_doctor_writes(tmp_path):
    """Every key is declared (strictly), written back as given, and valid against the generated
    schema; one entry per knob, each state with its detail."""
    from tailwise.host.doctor import KNOBS

    knobs = _knobs(tmp_path)
    doc = report(host=_HOST, target=None, interface="eth9", interface_note=None, cpus={1, 0}, sample_s=0.5, knobs=knobs)
    assert Doctor.model_validate(doc, context=STRICT).to_json() == doc
    assert doc["schema"] == "tailwise.doctor/1" and doc["cpus"] == [0, 1]
    assert [k["name"] for k in doc["knobs"]] == [k.name for k in KNOBS]
    assert {k["state"] for k in doc["knobs"]} == {"ok", "warn", "unreadable", "not-applicable"}
    assert all(k["detail"] for k in doc["knobs"] if k["state"] != "ok")
    assert_valid(doc, "doctor")
    # The same knobs in a run's host (summary.json's host.knobs, host.json).
    host = _HOST | {"knobs": knobs}
    assert Host.model_validate(host, context=STRICT).to_json() == host


@pytest.mark.parametrize("change", ["unknown state", "no knobs", "knob without why", "no schema"])
def test_a_broken_doctor_document_fails_the_schema(tmp_path, change):
    import jsonschema

    doc = report(host=_HOST, target="memcached://10.0.0.5:11211", interface=None, interface_note="no route",
                 cpus=[1], sample_s=0.5, knobs=_knobs(tmp_path))
    assert_valid(doc, "doctor")
    if change == "unknown state":
        doc["knobs"][0]["state"] = "fine"
    elif change == "no knobs":
        doc["knobs"] = []
    elif change == "knob without why":
        del doc["knobs"][2]["why"]
    else:
        del doc["schema"]
    with pytest.raises(jsonschema.ValidationError):
        assert_valid(doc, "doctor")
