"""Validation of the methodology against the synthetic server and the queueing model.

What each case must show (issue 3): a heavy tail is not measurable and the confidence check says
so; a closed loop is named with the connections it needs; a 100 ms server stall shows in the tail
and the stationarity check flags it (when the tail holds enough samples to test for transients);
at fixed:10us and 20 % load the coordinator concludes by itself on p90 ± 5 µs, and at 50 % load
with exp:10us and bimodal:10us on p90 ± 10 %; their p50 and p90 sit between the model and the
model plus the loopback overhead measured in the same test, the two services come out in the
model's order, and no measured p99 lies below the model's.

Under the rule that nothing leaves the statistics for its value (issue 9) the built-in server's
own stalls — the host taking its vCPU for 1–7 ms a few times a second — stay in its tail, so p99
is the host's as much as the queue's on this 2-vCPU guest and p99 ± 10 µs is reached only in some
runs (BENCHMARKS.md gives how often): the cases validate p90 and check that p99 is never below
the model. The model comparisons need a quiet machine: each measures the machine first
(``quiet_machine``) and skips, with the figure, when another task takes the CPUs — or when the
run's own figures show the machine turned noisy during it (``_noise``: engine stalls, or a client
that could not send on time, which the tool itself reports as not-measurable), or when a verdict
or an upper bound fails and the machine, measured again, is noisy. A figure below the model is
never excused. Runs are bounded by --duration or --max-time; no test asserts
wall-clock speed.
"""

import json
import re
import time

import pytest

from support.cli import MEASURED, run_cli
from support.live_run import Run, assert_freeze_visible, freeze
from support.noise import NOISY, machine_noise
from tailwise.spec.units import parse_dist

#: The machine can turn noisy mid-test: a run whose engine thread stalled (≥ 200 µs) more often
#: than this per second, or once for longer than NOISY_STALL_NS, was not measured on a quiet
#: machine (quiet spells here show 1–5 stalls/s of ≤ 5 ms: BENCHMARKS.md).
NOISY_STALLS_PER_S = 8.0
#: A run in which the engine's stalls delayed more than this share of the requests was taken on a
#: noisy host: 0.1–0.3 % in quiet runs here, 1.6–2.2 % in those whose p90 the host clustered.
NOISY_DELAYED = 0.01
NOISY_STALL_NS = 10_000_000


@pytest.fixture
def quiet_machine():
    """Measure the machine before a model comparison: skip, saying how busy it is, when another
    task takes the CPUs (validation on a shared machine would fail for the neighbour's sake)."""
    if (why := machine_noise()) is not None:
        pytest.skip(f"machine too busy to validate against the model: {why}")


def _unless_noisy_now(failure: str) -> None:
    """A comparison with the model failed: skip if the machine is noisy now (it turned noisy
    during the test), else fail. Only failures noise can cause come here — a verdict short of
    ok, a figure above the model's band — never a figure below the model."""
    if (why := machine_noise()) is not None:
        pytest.skip(f"{failure} — on a machine that turned noisy: {why}")
    pytest.fail(failure)


def _summary(r) -> dict:
    assert r.returncode in MEASURED, (r.returncode, r.stderr)
    return json.loads(r.stdout)


def _check(s: dict, name: str) -> dict:
    return next(c for c in s["checks"] if c["name"] == name)


def _pct(s: dict, p: float) -> dict:
    return next(x for x in s["latency"]["percentiles"] if x["p"] == p)


def test_heavy_tail_is_imprecise_and_says_why():
    """A heavy tail (lognormal σ = 2) cannot be bounded to ±5 µs at p99 in 15 s: every validity
    check holds, so the run is imprecise (exit 4) — an answer with its interval — not ok and not
    not-measurable (issue 32)."""
    r = run_cli("run", "--rate", "10k", "--service", "lognormal:10us:2", "--percentile", "99",
                "--ci", "10us", "--max-time", "15s", "--json")
    s = _summary(r)
    failed = {c["name"]: c["detail"] for c in s["checks"] if not c["ok"]}
    assert s["verdict"] == "imprecise", failed
    assert r.returncode == 4
    assert set(failed) <= {"confidence", "stalls"} and failed
    conf = _check(s, "confidence")
    assert not conf["ok"] and conf["remedy"]
    assert s["methodology"]["mode"] == "adaptive"
    pr = s["precision"]
    assert pr["reached"] is False and pr["asked"]["ci_ns"] == 10_000
    assert {x["p"] for x in pr["percentiles"]} == {x["p"] for x in s["latency"]["percentiles"]}
    assert "p99" in pr["detail"] and pr["remedy"]["words"] in pr["detail"]
    # Every interval is still reported: the asked one is wider than asked, not missing.
    p99 = _pct(s, 99.0)
    assert p99["value_ns"] is not None or p99["lower_bound_ns"] is not None


def test_closed_loop_shortfall_names_the_connections_needed():
    s = _summary(run_cli("run", "--rate", "50k", "--conns", "1", "--outstanding", "1", "--service", "fixed:20us",
                         "--duration", "2", "--json"))
    assert s["verdict"] == "not-measurable"
    rate = _check(s, "rate")
    assert not rate["ok"] and "closed loop: too few connections" in rate["detail"]
    needed = int(re.search(r"--conns (\d+)", rate["remedy"]).group(1))
    # 50k req/s × ≥ 20 µs ≥ 1 request in flight; with 2× headroom at least 2 connections.
    assert needed >= 2


def test_a_100ms_server_stall_shows_in_the_tail_and_fails_stationarity(serve):
    """A 100 ms stop of the server 3 s into a 6 s run at 20k req/s: ~2 % of the requests wait in
    it, so p99 must show it (or the run is not-measurable, a check that saw it failing), and the
    stationarity check flags it as a transient whenever the tail holds enough samples for that
    test — on a noisy host the tail's own clustering can defer it, which the check then says."""
    srv = serve("--service", "fixed:10us", "--spin")
    run = Run(srv.url, "--rate", "20k", "--duration", "6")
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 3.0 - time.monotonic()))
    freeze(srv.proc.pid, 0.1)
    s = run.summary()
    # Latency counts from the intended send time: requests due during the pause carry it.
    assert s["latency"]["histogram"]["max_ns"] >= 90_000_000
    assert_freeze_visible(s, 0.1, "100 ms stop mid-run")
    st = _check(s, "stationarity")
    if "too few samples above" in st["detail"]:
        print(f"transient test deferred: {st['detail']}")
        assert "needs" in st["detail"]
    else:
        assert not st["ok"] and "transient" in st["detail"], st
        assert s["verdict"] == "not-measurable"


#: The loopback overhead measured alone moves by up to ~15 µs at p99 between runs on this 2-vCPU
#: guest (BENCHMARKS.md); the gap to the model is allowed that much beyond it.
SLACK_NS = 20_000


#: A p99 run on this 2-vCPU guest can end not-measurable when the machine drifts mid-run (3 of 22
#: before the level-drift effect size, 0 of 10 after: BENCHMARKS.md), so each adaptive case gets
#: a second attempt; every attempt's verdict is printed.
ATTEMPTS = 2


#: Checks that fail when the client itself could not keep to the schedule (its host, not the target).
CLIENT_SIDE = ("stalls", "exclusions")


def _noise(s: dict) -> str | None:
    """Why the machine was too noisy during this run to compare it with the model, or None."""
    failed = {c["name"]: c["detail"] for c in s["checks"] if not c["ok"]}
    client = [f"{name}: {failed[name]}" for name in CLIENT_SIDE if name in failed]
    if "late sends" in failed.get("arrivals", ""):
        client.append(f"arrivals: {failed['arrivals']}")
    if s["verdict"] != "ok" and client:
        return "the client could not keep to its schedule on this machine during the run — " + "; ".join(client)
    delayed = s.get("delayed") or {}
    if s["verdict"] != "ok" and delayed.get("share", 0.0) > NOISY_DELAYED:
        # The host took the engine's CPU often enough to delay a percent of the requests: its pauses
        # cluster the tail (τ of p90 40–430 in such runs here, 8 in quiet ones) beyond what the
        # --max-time allows — the run says so (verdict imprecise), the model is not what failed.
        return (f"the host delayed {delayed['share']:.1%} of the requests by stalling the engine "
                f"({delayed['samples']:,} of {delayed['window_samples']:,}; a quiet spell: ≤ {NOISY_DELAYED:.0%})")
    m = s["methodology"]
    ts = s.get("target_stats") or {}
    if ts.get("source") == "builtin-server":
        # The model's server never stops; the built-in one stops when the host takes its CPU.
        dur = max(s["rate"]["duration_s"], 1e-9)
        # Judged by the time lost, not the count: a quiet spell here gives the server 5–10 short
        # stalls (≥ 200 µs) a second, 0.5–1 % of its time.
        lost, longest = ts["stalled_s"] / dur, ts["stalls_longest_ns"] or 0
        if lost > NOISY or longest > NOISY_STALL_NS:
            return (f"the host took the built-in server's CPU during the run: {ts['stalls']} stalls of its worker "
                    f"in {dur:.1f} s ({lost:.1%} of the run), the longest {longest / 1e6:.1f} ms "
                    f"(a quiet spell: ≤ {NOISY:.1%}, ≤ {NOISY_STALL_NS / 1e6:g} ms)")
    per_s = m["stalls"] / max(s["rate"]["duration_s"], 1e-9)
    if per_s > NOISY_STALLS_PER_S or m["stalls_longest_ns"] > NOISY_STALL_NS:
        return (f"the machine turned noisy during the run: {m['stalls']} stalls of the engine in "
                f"{s['rate']['duration_s']:.1f} s ({per_s:.1f}/s), the longest {m['stalls_longest_ns'] / 1e6:.1f} ms "
                f"(a quiet spell: ≤ {NOISY_STALLS_PER_S:g}/s, ≤ {NOISY_STALL_NS / 1e6:g} ms)")
    return None


def _adaptive(*args: str) -> dict:
    """An adaptive run, retried once if not ok; skipped (with the figures) if the machine was
    noisy during the run the test would judge."""
    for attempt in range(1, ATTEMPTS + 1):
        s = _summary(run_cli("run", *args, "--json"))
        m = s["methodology"]
        ts = s.get("target_stats") or {}
        print(f"\n{' '.join(args)}: attempt {attempt}: verdict {s['verdict']} after {s['rate']['duration_s']:.1f} s, "
              f"{m['rounds']} rounds ({m['stopped']}), {m['stalls']} engine stalls delaying "
              f"{m['delayed_samples']} of {m['samples_collected']} samples; "
              f"server stalls {ts.get('stalls')} ({ts.get('stalled_s', 0):.3f} s); "
              f"failed: {[c['name'] for c in s['checks'] if not c['ok']]}")
        if s["verdict"] == "ok":
            break
    if (why := _noise(s)) is not None:
        pytest.skip(why)
    return s


def _rate_for_load(service: str, load: float) -> float:
    """The rate that offers the built-in server ``load`` of its real capacity: its own work on a
    request counts inside the service time (server/mod.rs), so a service shorter than that work
    is stretched, and that work varies with the host (6 µs here on a quiet day, 12–15 µs on a
    busy one: exp:10us then averages 15.7 µs and a nominal 50k req/s is 78 %, where the p90's
    interval needs minutes) and with the load itself (requests that come in bursts share reads
    and wake-ups: 14.3 µs at 10k req/s, 11.7 µs at 35k, on the CI run that found it). So it is
    measured where it will be used: a short run at the nominal rate for ``load``, then at the
    rate that run gives."""
    rate = load * 1e9 / parse_dist(service)[1]
    for _ in range(2):
        s = _summary(run_cli("run", "--rate", f"{rate:.0f}", "--service", service, "--duration", "2", "--json"))
        effective_ns = s["target_stats"]["effective_service_ns"]
        print(f"{service}: effective service {effective_ns / 1e3:.1f} µs at {rate:,.0f} req/s "
              f"→ {load:.0%} load at {load * 1e9 / effective_ns:,.0f} req/s")
        rate = load * 1e9 / effective_ns
    return rate


def _gap_line(name: str, p: float, measured: float, model: float, overhead: float) -> str:
    return (f"{name} p{p:g}: measured {measured / 1e3:.1f} µs, model {model / 1e3:.1f} µs, "
            f"gap {(measured - model) / 1e3:.1f} µs, loopback overhead p{p:g} {overhead / 1e3:.1f} µs")


def _every(s: dict) -> dict:
    """Every request of the run's window, per percentile (never null, unlike a reported figure)."""
    return {p["p"]: p["value_ns"] for p in s["latency"]["window"]["percentiles"]}


def test_fixed_10us_at_20_percent_load_against_the_model(quiet_machine):
    """The coordinator concludes by itself on p90 ± 5 µs; p50 and p90 sit between the model's and
    the model's plus the loopback overhead measured in the same test (plus ``SLACK_NS``: the
    overhead alone varies run to run with the machine's noise), and p99 is never below the model."""
    model = json.loads(run_cli("model", "--service", "fixed:10us", "--load", "0.2", "--json").stdout)
    m = {p["p"]: p["value_ns"] for p in model["percentiles"]}
    # The loopback overhead in the same test: the same load with no service time at all.
    overhead = _summary(run_cli("run", "--rate", "20k", "--service", "fixed:0", "--duration", "4", "--json"))
    o = _every(overhead)
    s = _adaptive("--rate", "20k", "--service", "fixed:10us", "--percentile", "90", "--ci", "5us", "--max-time", "40s")
    assert s["methodology"]["mode"] == "adaptive" and s["methodology"]["rounds"] >= 1
    if s["verdict"] != "ok":
        _unless_noisy_now(f"verdict {s['verdict']}: {[c['detail'] for c in s['checks'] if not c['ok']]}")
    target = _pct(s, 90)
    assert target["high_ns"] - target["low_ns"] <= 5_000
    ts = s["target_stats"]
    print(f"server: effective service {ts['effective_service_ns'] / 1e3:.1f} µs for fixed:10us "
          f"(+{ts['service_overhead_ns'] / 1e3:.1f} µs of its own work), utilisation {ts['utilisation']:.0%} at nominal 20 %")
    assert ts["served"] >= s["counters"]["received"] and ts["effective_service_ns"] >= 10_000
    for p in (50.0, 90.0):
        measured = _pct(s, p)["value_ns"]
        print(_gap_line("fixed:10us", p, measured, m[p], o[p]))
        # Never below the model (the service time is spun for real).
        assert m[p] <= measured
        if measured > m[p] + o[p] + SLACK_NS:
            _unless_noisy_now(_gap_line("fixed:10us", p, measured, m[p], o[p]) + f" (allowed + {SLACK_NS / 1e3:g} µs)")
    p99 = _pct(s, 99)
    print(f"fixed:10us p99: measured {p99['value_ns']} ns [{p99['low_ns']}, {p99['high_ns']}], model {m[99.0]} ns, "
          f"every request {_every(s)[99.0]} ns")
    assert p99["value_ns"] is None or p99["value_ns"] >= m[99.0], "a measured p99 below the queueing model"


def test_exp_and_bimodal_at_50_percent_load_follow_the_model(quiet_machine):
    """At 50 % load (of the capacity the server shows on a light run) the coordinator bounds p90
    within 10 % for each service, and each measured p50/p90 sits between the model — at the
    utilisation the server really saw, which machine noise moves between 0.4 and 0.7 (its own work
    per request drifts between the run that sets the rate and this one: 14.5 µs, then 12.1 µs on
    one CI host) — and the model plus the loopback overhead measured in the same test (plus
    ``SLACK_NS``); p99, which the host's stalls own here (module doc), is never below the model. The services' p90s differ by ~20 µs in the model (bimodal above exp): the
    measurement must order them the same way."""
    overhead = _summary(run_cli("run", "--rate", "50k", "--service", "fixed:0", "--duration", "4", "--json"))
    o = _every(overhead)
    measured, model = {}, {}
    for service in ("exp:10us", "bimodal:10us"):
        rate = _rate_for_load(service, 0.5)
        s = _adaptive("--rate", f"{rate:.0f}", "--service", service, "--percentile", "90", "--ci", "10%",
                      "--max-time", "40s")
        if s["verdict"] != "ok":
            _unless_noisy_now(f"{service}: verdict {s['verdict']}: {[c['detail'] for c in s['checks'] if not c['ok']]}")
        rho = s["target_stats"]["utilisation"]
        # Around half load (the server's own work is inside the service time): the model is taken
        # at the ρ the server saw, so the comparison holds anywhere in this range.
        assert 0.35 <= rho <= 0.8, rho
        m = json.loads(run_cli("model", "--service", service, "--load", f"{rho:.3f}", "--json").stdout)
        model[service] = {p["p"]: p["value_ns"] for p in m["percentiles"]}
        measured[service] = {p["p"]: p["value_ns"] for p in s["latency"]["percentiles"]}
        for p in (50.0, 90.0):
            got, want = measured[service][p], model[service][p]
            print(_gap_line(f"{service} at ρ={rho:.2f}", p, got, want, o[p]))
            assert want <= got
            if got > want + o[p] + SLACK_NS:
                _unless_noisy_now(_gap_line(service, p, got, want, o[p]) + f" (allowed + {SLACK_NS / 1e3:g} µs)")
        p99 = measured[service][99.0]
        print(f"{service} p99: measured {p99 and p99 / 1e3} µs, model {model[service][99.0] / 1e3:.1f} µs "
              f"(every request {_every(s)[99.0] / 1e3:.1f} µs)")
        assert p99 is None or p99 >= model[service][99.0], "a measured p99 below the queueing model"
    assert measured["bimodal:10us"][90.0] > measured["exp:10us"][90.0]
