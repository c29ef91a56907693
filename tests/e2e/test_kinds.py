"""Issue 36, item 4: gets and sets against a real memcached (and redis-server), each with its own
percentiles — their counts those the server itself counted (memcached ``stats``: cmd_get, cmd_set;
Redis ``INFO commandstats``) and the samples' SET flag."""

from __future__ import annotations

import json

import pyarrow.csv as pacsv
import pytest

from support.cli import MEASURED, run_cli
from tailwise import _core


@pytest.mark.parametrize("server", ["memcached", "redis"])
def test_gets_and_sets_have_their_own_percentiles_and_the_server_s_counts(server, request, tmp_path):
    target = request.getfixturevalue(server)
    out = tmp_path / "out"
    r = run_cli("run", target.url, "--mix", "9:1", "--duration", "2", "--rate", "2k", "--conns", "2",
                "--seed", "6", "--sample-every", "1", "--warmup", "0", "--out", str(out), "--json")
    assert r.returncode in MEASURED and "Traceback" not in r.stderr, r.stderr
    s = json.loads(r.stdout)
    assert s["error"] is None and s["counters"]["errors"] == 0, s["error_reasons"]
    get, set_ = s["by_request"]
    assert (get["name"], set_["name"]) == ("get", "set")
    # Every request sampled and in the window: the counts are the server's own.
    delta = s["target_stats"]["delta"]
    assert (get["count"], set_["count"]) == (delta["gets"], delta["sets"]), (get["count"], set_["count"], delta)
    assert (get["count"], set_["count"]) == (s["counters"]["gets"], s["counters"]["sets"])
    assert abs(set_["share"] - 0.1) < 0.03, set_["share"]
    for k in (get, set_):
        p50 = next(p for p in k["percentiles"] if p["p"] == 50.0)
        assert p50["low_ns"] <= p50["value_ns"] <= p50["high_ns"], (k["name"], p50)
    # The samples' SET flag says which were sets, as many as memcached counted.
    table = pacsv.read_csv(out / "samples.csv").to_pydict()
    sets = sum(1 for f in table["flags"] if f & _core.SAMPLE_FLAGS["SET"])
    assert sets == delta["sets"] and set(table["request"]) == {0}
