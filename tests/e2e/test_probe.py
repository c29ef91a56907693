"""The latency probe (issue 11, Lancet's latency agent in asymmetric mode): with --probe, only the
probe's requests are timed — the samples, the histograms and the every-request intervals are its
own — while the --rate load only loads; the target is offered both. Which requests the engine
times is tested in the engine (engine/tests.rs, `a_probe_times_…`); here, the run as a user sees it."""

from __future__ import annotations

import json

import pyarrow.csv as pacsv

from support.cli import MEASURED, run_cli


def _summary(r) -> dict:
    assert r.returncode in MEASURED, (r.returncode, r.stderr)
    return json.loads(r.stdout)


def test_only_the_probes_requests_are_timed(tmp_path):
    out = tmp_path / "out"
    s = _summary(run_cli("run", "--rate", "5k", "--duration", "1", "--probe", "--probe-rate", "1k", "--probe-conns", "2",
                         "--out", str(out), "--json"))
    probe = s["probe"]
    assert probe["conns"] == 2 and probe["rate_rps"] == 1000 and s["config"]["probe"] == {"conns": 2, "rate_rps": 1000}
    pc, c = probe["counters"], s["counters"]
    # ~1000 probe requests (Poisson s.d. ~32) among ~6000 offered.
    assert 800 < pc["intended"] < 1200, pc
    assert c["intended"] > 4500 + pc["intended"], c
    assert s["rate"]["target_rps"] == 6000
    # Every probe request is kept raw, and nothing else: samples, run histogram, intervals.
    assert s["methodology"]["samples_collected"] == pc["intended"]
    assert s["latency"]["histogram"]["count"] == pc["intended"]
    assert s["methodology"]["sample_every"] == 1
    rows = pacsv.read_csv(out / "samples.csv")
    assert rows.num_rows == pc["intended"]
    assert pc["tx_kernel"] == pc["received"] and s["latency"]["kernel_stamped_sends"] == c["received"]


def test_the_probe_from_a_workload_file(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('probe = true\nprobe_conns = 1\nprobe_rate = 500\n')
    s = _summary(run_cli("run", "--workload", str(f), "--rate", "2k", "--duration", "1", "--json"))
    assert s["probe"]["conns"] == 1 and s["probe"]["rate_rps"] == 500
    assert s["methodology"]["samples_collected"] == s["probe"]["counters"]["intended"]
    assert _summary(run_cli("run", "--rate", "2k", "--duration", "0.5", "--json"))["probe"] is None


def test_bad_probe_settings_are_one_line():
    for args, words in ((["--probe-conns", "0"], "--probe-conns 0"), (["--probe-rate", "-3"], "--probe-rate")):
        r = run_cli("run", "--duration", "0.5", "--probe", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert words in r.stderr, r.stderr
