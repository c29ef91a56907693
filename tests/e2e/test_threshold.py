"""--threshold on the command line: the exit codes it adds (3: failed or inconclusive, whatever the
verdict); --quiet; the ETA in round lines. The gate judged on the whole confidence interval
(threshold.py): tests/unit/test_threshold_judging.py."""

import json


from support.cli import MEASURED, run_cli
from tailwise.spec.threshold import PASS


def test_pass_fail_and_inconclusive_thresholds_set_the_exit_code():
    ok = run_cli("run", "--rate", "10k", "--duration", "1", "--json", "--threshold", "p50<1s")
    s = json.loads(ok.stdout)
    assert [t["status"] for t in s["thresholds"]] == [PASS]
    assert ok.returncode == {"ok": 0, "imprecise": 4, "not-measurable": 1}[s["verdict"]]

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
    assert r.returncode in MEASURED, r.stderr
    assert r.stderr == "", r.stderr
    assert "p99" in r.stdout and "verdict" in r.stdout
    r = run_cli("run", "--rate", "10k", "--max-time", "3s", "--ci", "1ns")
    rounds = [line for line in r.stderr.splitlines() if line.startswith("round ")]
    assert rounds and all("elapsed" in line for line in rounds)
    # 1 ns is out of reach: the coordinator still has time to spend, and estimates it — as an
    # estimate, never as a bound it may break.
    assert any("est. " in line and "s more" in line for line in rounds), rounds
    assert not any("≤" in line for line in rounds), rounds
