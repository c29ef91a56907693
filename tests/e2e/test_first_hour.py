"""A new user's first hour (issue 10) on the command line: workload-file names, --version, input
errors, interrupts, output that fits the protocol and 100 columns off a terminal. Each case is
what a newcomer typed; runs are bounded by --duration or the time cap. The units, the --help
examples and scripts/test's summary are in tests/unit/test_first_hour_parsing.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from support.cli import MEASURED, CLI, run_cli
from support.live_run import Run


def _error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_the_readme_s_two_minutes_run():
    """`--max-time 2m` and `--duration 2m`: accepted (cut to 1 s by the time cap)."""
    env = {**os.environ, "TAILWISE_TIME_CAP": "1s"}
    for flag in ("--max-time", "--duration"):
        r = subprocess.run([*CLI, "run", "--rate", "2k", flag, "2m", "--json"], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode in MEASURED, r.stderr
        assert "TAILWISE_TIME_CAP=1s shortens this run" in r.stderr
        assert json.loads(r.stdout)["rate"]["duration_s"] < 5


# --- input errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (("--rate", "-5"), "--rate -5 must be positive"),
    (("--rate", "0"), "--rate 0 must be positive"),
    (("--rate", "5m"), "M for millions"),
    (("--ci", "200%"), "between 0 and 100 %"),
    (("--ci", "100%"), "between 0 and 100 %"),
    (("--late", "50"), "--late 50 has no unit"),
    (("--max-time", "2 weeks"), "unknown time unit"),
])
def test_nonsense_is_refused_before_anything_runs(args, says):
    line = _error_line(run_cli("run", *args, "--duration", "30"))
    assert says in line, line


def test_version_flag_and_command():
    for args in (("--version",), ("version",)):
        r = run_cli(*args)
        assert r.returncode == 0 and r.stdout.startswith("tailwise "), r


# --- workload files use the flag names -----------------------------------------------------------

def test_workload_file_takes_the_flag_names(tmp_path):
    for key, duration in (("value", "1"), ("value_size", '"1s"')):  # --value and --value-size; plain seconds
        f = tmp_path / f"{key}.toml"
        f.write_text(f'{key} = "uniform:100:300"\nduration = {duration}\nrate = "1k"\n')
        r = run_cli("run", "--workload", str(f), "--json")
        assert r.returncode in MEASURED, r.stderr
        assert json.loads(r.stdout)["config"]["rate_rps"] == 1000


@pytest.mark.parametrize("text,says", [
    ('value_sise = "200"', "unknown setting value_sise: did you mean value_size?"),
    ('max_tim = "2m"', "did you mean max_time?"),
    ('value = "200"\nvalue_size = "300"', "gives both value and value_size"),
])
def test_unknown_workload_settings_name_the_closest(tmp_path, text, says):
    f = tmp_path / "w.toml"
    f.write_text(text + "\n")
    line = _error_line(run_cli("run", "--workload", str(f)))
    assert says in line, line


# --- interrupts ----------------------------------------------------------------------------------

@pytest.mark.parametrize("keep", [True, False])
def test_ctrl_c_says_it_was_interrupted_and_where_the_results_are(tmp_path, keep):
    out = tmp_path / "r"
    run = Run("--rate", "5k", "--percentile", "99.99", "--ci", "1%", "--max-time", "30",
              *(["--out", str(out)] if keep else []), json_out=False)
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 2.5 - time.monotonic()))
    run.proc.send_signal(signal.SIGINT)
    r = run.finish(timeout_s=60)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tailwise: interrupted after ") and "s of measuring" in last, last
    if keep:
        assert f"results kept in {out}/" in last
        s = json.loads((out / "summary.json").read_text())
        assert s["interrupted"] and s["methodology"]["stopped"] == "interrupted"
    else:
        assert "nothing kept on disk" in last
    # The user stopped it: no remedy may tell them to run longer.
    assert "run longer" not in r.stdout, r.stdout
    assert "stopped: interrupted" in r.stdout


# --- output fits the protocol, folded to 100 columns off a terminal ------------------------------

def test_no_keys_line_without_keys_and_100_columns_off_a_terminal():
    """Off a terminal without COLUMNS the result is 100 columns wide (issue 34): folded at spaces,
    each continuation indented, so a sentence reads on; an error stays one line, however long."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe: 100 columns
    r = subprocess.run([*CLI, "run", "--rate", "2k", "--duration", "1", "--verbose"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode in MEASURED, r.stderr
    assert "keys:" not in r.stdout and "gets (" not in r.stdout
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 100, [ln for ln in lines if len(ln) > 100]
    checks = [ln for ln in lines if ln.startswith(("✓ ", "✗ ", "~ "))]
    assert len(checks) >= 8, checks
    # Every line after the table starts a sentence, or continues the one above, indented.
    after = r.stdout.split("requests: ", 1)[1].splitlines()[1:]
    assert all(ln.startswith(("✓ ", "✗ ", "~ ", "checks:", "keys", "server's", "error", "warm-up", "delayed by",
                              "host:", "send lag", "  ")) for ln in after if ln.strip()), after
    long_error = run_cli("run", "--workload", "/nonexistent/" + "very-long-directory-name/" * 4 + "w.toml")
    assert len(_error_line(long_error)) > 120
