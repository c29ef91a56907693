"""RunSpec (issue 12, step 0): one run's settings parsed once from flags over a workload file over
defaults, validated, and serialisable: the JSON it writes (also the summary's ``config.spec``)
parses back to the same spec."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.load import LoadSpec
from tailwise.spec.runspec import RunSpec
from tailwise.spec.units import parse_time_ns
from tailwise.spec.workload import DEFAULTS, parse_mix

NONE = {name: None for name in DEFAULTS}


def _flags(**given) -> dict:
    return NONE | given


def _same(a: RunSpec, b: RunSpec) -> None:
    fields = [f.name for f in dataclasses.fields(RunSpec) if f.name != "capped"]
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}


def test_defaults_and_a_json_round_trip():
    rs = RunSpec.from_flags(_flags(), None)
    assert rs.builtin and rs.scheme == "synthetic" and rs.rate_rps == 10_000
    assert rs.ci_rel == 0.10 and rs.duration_ns is None and rs.sample_every == 1 and rs.seed > 0
    _same(rs, RunSpec.from_json(json.loads(json.dumps(rs.to_json()))))


def test_flags_win_over_the_workload_file_and_the_file_over_the_defaults(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('rate = "50k"\nconns = 16\nduration = "2s"\nprobe = true\nprobe_rate = 500\n'
                 'targets = "memcached://127.0.0.1:11211"\nmix = "9:1"\n')
    rs = RunSpec.from_flags(_flags(conns=32, seed=7), str(f))
    assert rs.rate_rps == 50_000 and rs.conns == 32 and rs.duration_ns == 2_000_000_000 and rs.seed == 7
    assert rs.probe_conns == 4 and rs.probe_rate_rps == 500 and rs.scheme == "memcached"
    assert rs.workload.set_fraction == pytest.approx(0.1) and rs.sample_every == 3  # ≤ 20k samples/s
    back = RunSpec.from_json(rs.to_json())
    _same(rs, back)
    cfg = rs.config("tailwise run")
    assert cfg["spec"] == rs.to_json() and cfg["probe"] == {"conns": 4, "rate_rps": 500.0}
    assert cfg["workload"]["set_fraction"] == pytest.approx(0.1) and cfg["workload_file"] == str(f)


def test_the_load_spec_it_gives_the_engine():
    rs = RunSpec.from_flags(_flags(targets=["udp://127.0.0.1:9?size=100"], rate="5k", duration="1"), None)
    ls = rs.load_spec(["127.0.0.1:9"], "kernel")
    assert ls.protocol == {"scheme": "udp", "size": 100} and ls.rate_rps == 5000 and ls.duration_ns == 1_000_000_000
    assert ls.timestamps == "kernel" and ls.seed == rs.seed and ls.probe is None
    # What the engine receives: the same, every default filled in from the engine's own.
    engine = json.loads(_core.check_engine_config(ls.to_json()))
    assert engine == ls.engine_config() | {"protocol": {"scheme": "udp", "size": 100}}


def test_load_spec_is_the_engine_configuration_field_for_field():
    """One definition of the engine's settings and their defaults: EngineConfig (Rust, serde).
    LoadSpec has exactly its fields, takes its defaults from it, and so do the command's."""
    # `tls` is the one field the engine leaves out when it has none (plaintext configurations are
    # written as before issue 36): optional, not a default.
    assert sorted(f.name for f in dataclasses.fields(LoadSpec)) == sorted(_core.ENGINE_DEFAULTS | {"tls": None})
    ls = LoadSpec(targets=["127.0.0.1:9"], rate_rps=1.0, duration_ns=1)
    assert "tls" not in _core.ENGINE_DEFAULTS and ls.tls is None
    given = {"targets": ["127.0.0.1:9"], "rate_rps": 1.0, "duration_ns": 1}
    assert json.loads(_core.check_engine_config(ls.to_json())) == _core.ENGINE_DEFAULTS | given
    assert LoadSpec.from_engine_config(json.loads(ls.to_json())) == ls
    engine, work = _core.ENGINE_DEFAULTS, _core.ENGINE_DEFAULTS["workload"]
    assert {k: DEFAULTS[k] for k in ("arrival", "threads", "conns", "outstanding", "pin")} == \
        {k: engine[k] for k in ("arrival", "threads", "conns", "outstanding", "pin")}
    assert {k: DEFAULTS[k] for k in ("keys", "key_size", "value_size", "popularity")} == \
        {k: work[k] for k in ("keys", "key_size", "value_size", "popularity")}
    assert parse_mix(DEFAULTS["mix"]) == work["set_fraction"]
    assert parse_time_ns(DEFAULTS["timeout"]) == engine["timeout_ns"]
    assert parse_time_ns(DEFAULTS["late"]) == engine["late_ns"]
    assert (DEFAULTS["poll"] == "spin") == engine["busy_poll"]


def test_a_configuration_the_engine_would_refuse_is_refused_whole():
    with pytest.raises(InputError) as e:
        _core.check_engine_config(json.dumps({"targets": ["127.0.0.1:9"], "rate_rps": 1, "duration_ns": 1, "conn": 3}))
    assert "unknown field `conn`" in e.value.problem and "ENGINE_DEFAULTS" in e.value.remedy
    with pytest.raises(InputError) as e:
        _core.check_engine_config(json.dumps({"protocol": {"scheme": "memcached", "size": 3}}))
    assert "has no parameter 'size'" in e.value.problem


@pytest.mark.parametrize("given, words", [
    (dict(rate="-5"), "--rate -5 must be positive"),
    (dict(conns=1, threads=2), "--conns 1 is below --threads 2"),
    (dict(targets=["udp://127.0.0.1:9"], keys=5), "--keys does not apply to udp://"),
    (dict(timestamps="gps"), "--timestamps gps is unknown"),
    (dict(probe=True, probe_conns=0), "--probe-conns 0 must be at least 1"),
    (dict(confidence=0.3), "--confidence 0.3 is outside"),
])
def test_bad_settings_are_one_input_error(given, words):
    with pytest.raises(InputError) as e:
        RunSpec.from_flags(_flags(**given), None)
    assert words in e.value.line()


def test_a_spec_read_back_is_validated_again():
    settings = RunSpec.from_flags(_flags(), None).to_json() | {"outstanding": 0}
    with pytest.raises(InputError, match="--outstanding 0 must be at least 1"):
        RunSpec.from_json(settings)
