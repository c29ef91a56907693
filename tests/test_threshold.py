"""--threshold: a CI gate judged on the whole confidence interval (threshold.py), and the exit
codes it adds (3: failed or inconclusive, whatever the verdict); --quiet; the ETA in round lines."""

import json

import pytest

from conftest import run_cli
from tailwise.errors import InputError
from tailwise.threshold import FAIL, INCONCLUSIVE, PASS, Threshold, parse_all


@pytest.mark.parametrize("text,low,high,want", [
    ("p99<200us", 100_000, 199_999, PASS),
    ("p99<200us", 100_000, 200_000, INCONCLUSIVE),  # the upper bound must be below
    ("p99<=200us", 100_000, 200_000, PASS),
    ("p99<200us", 200_000, 300_000, FAIL),
    ("p99<200us", 150_000, 250_000, INCONCLUSIVE),
    ("p99<200us", None, None, INCONCLUSIVE),
    ("p99<200us", 100_000, None, INCONCLUSIVE),  # an unbounded CI cannot pass
    ("p99<200us", 250_000, None, FAIL),  # … but its lower bound can already miss
    ("p50>10us", 11_000, 20_000, PASS),
    ("p50>10us", 5_000, 9_000, FAIL),
    ("p50>=10us", 10_000, 20_000, PASS),
])
def test_a_threshold_is_judged_on_the_whole_interval(text, low, high, want):
    assert Threshold.parse(text).judge(low, high) == want


def test_threshold_parsing():
    t = Threshold.parse(" p99.9 <= 1.5ms ")
    assert (t.p, t.op, t.limit_ns) == (99.9, "<=", 1_500_000)
    for bad in ("99<1ms", "p99<", "p99~1ms", "p100<1ms", "p99<1", "p99<fast"):
        with pytest.raises(InputError):
            Threshold.parse(bad)
    with pytest.raises(InputError) as e:
        parse_all(["p95<1ms"], {50.0, 99.0})
    assert "--percentiles 50,95,99" in e.value.line()


def test_pass_fail_and_inconclusive_thresholds_set_the_exit_code():
    ok = run_cli("run", "--rate", "10k", "--duration", "1", "--json", "--threshold", "p50<1s")
    s = json.loads(ok.stdout)
    assert [t["status"] for t in s["thresholds"]] == [PASS]
    assert ok.returncode == (0 if s["verdict"] == "ok" else 1)

    r = run_cli("run", "--rate", "10k", "--duration", "1", "--threshold", "p50<1s", "--threshold", "p50<1ns",
                "--threshold", "p99.99<1s")
    assert r.returncode == 3, r.stderr
    assert "threshold p50<1s: pass" in r.stderr
    assert "threshold p50<1ns: fail" in r.stderr and "misses" in r.stderr
    # 10k requests cannot bound p99.99: inconclusive, whatever the value.
    assert "threshold p99.99<1s: inconclusive" in r.stderr


def test_bad_thresholds_are_one_line_errors_before_any_request():
    for args, words in ((["--threshold", "p99 under 1ms"], "is not a percentile limit"),
                        (["--threshold", "p100<1ms"], "outside (0, 100)"),
                        (["--percentiles", "50,abc"], "'abc' is not a number")):
        r = run_cli("run", "--rate", "10k", "--duration", "1", *args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert "measuring" not in r.stderr


def test_quiet_prints_only_the_result_and_rounds_carry_elapsed_and_eta():
    # --quiet: the result on stdout, nothing on stderr (not even the warnings of a busy host).
    r = run_cli("run", "--rate", "10k", "--max-time", "3s", "--quiet", "--threads", "4")
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr == "", r.stderr
    assert "p99" in r.stdout and "verdict" in r.stdout
    r = run_cli("run", "--rate", "10k", "--max-time", "3s", "--ci", "1ns")
    rounds = [line for line in r.stderr.splitlines() if line.startswith("round ")]
    assert rounds and all("elapsed" in line for line in rounds)
    # 1 ns is out of reach: the coordinator still has time to spend, and estimates it — as an
    # estimate, never as a bound it may break.
    assert any("est. " in line and "s more" in line for line in rounds), rounds
    assert not any("≤" in line for line in rounds), rounds
