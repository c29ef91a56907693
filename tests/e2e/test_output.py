"""What a person reads of a run (output.py) and the settings they give (--percentiles, the workload
file's command settings): compact by default, whole sentences, never a truncated verdict, at the
width of the screen (a real run at 80 columns). Every --help and the live line (live.py):
tests/unit/test_output_help_and_live.py; every screen at 80 and 120 columns from saved summaries:
tests/unit/test_screens.py."""

import copy
import io
import json
import os
import re
import subprocess

import pytest
from rich.console import Console

from support.cli import CLI, CLI_TIMEOUT_S, MEASURED, run_cli
from tailwise.render.output import print_summary
from tailwise.results.documents.run import Summary


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict:
    """A real run's summary (whatever its verdict on this host)."""
    out = tmp_path_factory.mktemp("run") / "r"
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--out", str(out))
    assert r.returncode in MEASURED, r.stderr
    return json.loads(r.stdout)


def render(s: dict, width: int, verbose: bool = False) -> list[str]:
    buf = io.StringIO()
    print_summary(Summary.model_validate(s), Console(file=buf, width=width, soft_wrap=False, color_system=None),
                  verbose=verbose)
    return buf.getvalue().splitlines()


def as_ok(s: dict) -> dict:
    ok = copy.deepcopy(s)
    ok["verdict"] = "ok"
    for ch in ok["checks"]:
        ch["ok"], ch["remedy"] = True, None
    return ok


def test_an_ok_run_fits_in_25_lines_at_100_columns(summary):
    lines = render(as_ok(summary), 100)
    assert len(lines) <= 25, "\n".join(lines)
    assert "verdict ok" in lines[0]
    assert any(ln.startswith("checks: all ") for ln in lines), lines
    # The percentiles, each with its interval and every request beside it.
    for p in summary["latency"]["percentiles"]:
        assert any(ln.strip().startswith(f"p{p['p']:g} ") for ln in lines), (p["p"], lines)


def test_failed_checks_get_one_line_each_with_cause_and_remedy(summary):
    """Each failed check is a line (folded to the width) with its cause and remedy; the verdict's
    sentence quotes the fix of the check it names, whose line then does not repeat it."""
    s = as_ok(summary)
    s["verdict"] = "not-measurable"
    first, second = s["checks"][0], next(ch for ch in s["checks"][1:] if ch["name"] != "exclusions")
    first |= {"ok": False, "detail": "the cause, with its figure", "remedy": "the remedy"}
    second |= {"ok": False, "detail": "another cause; its figures", "remedy": "another remedy"}
    lines = render(s, 1000)
    failed = [ln for ln in lines if ln.startswith("✗ ")]
    assert failed == [f"✗ {first['name']}: the cause, with its figure",
                      f"✗ {second['name']}: another cause — another remedy"], lines
    assert lines[0].startswith("verdict not-measurable — ") and lines[0].endswith(" — fix: the remedy"), lines[0]
    # --verbose: every check's whole text, and each failed one's remedy.
    full = render(s, 1000, verbose=True)
    assert f"✗ {first['name']}: the cause, with its figure — the remedy" in full
    assert f"✗ {second['name']}: another cause; its figures — another remedy" in full


@pytest.mark.parametrize("width", [40, 60, 100])
def test_nothing_is_truncated_at_any_width(summary, width):
    s = copy.deepcopy(summary)
    s["verdict"] = "not-measurable"
    text = "\n".join(render(s, width, verbose=True))
    assert "…" not in text, text
    assert "not-measurable" in text.replace("\n", ""), text


def test_verbose_adds_every_check(summary):
    short, full = render(summary, 100), render(summary, 100, verbose=True)
    assert len(full) > len(short)
    assert sum(ln.startswith(("✓ ", "✗ ")) for ln in full) == len(summary["checks"])


def test_a_pipe_gets_whole_lines_and_no_ellipsis():
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--verbose")  # COLUMNS=200
    assert r.returncode in MEASURED, r.stderr
    assert "…" not in r.stdout
    first = r.stdout.splitlines()[0]
    assert first.startswith(("verdict ok — ", "verdict imprecise — ", "verdict not-measurable — ")), first
    assert max(len(ln) for ln in r.stdout.splitlines()) <= 200


def test_a_real_run_fits_80_columns_off_a_terminal():
    """Issue 34: off a terminal COLUMNS is the width — every line of a real run's result (with
    --verbose: every check's whole text) within 80 columns, folded at spaces, continuation lines
    indented, one unit for its latencies; its warnings on stderr stay one line each (a log)."""
    r = subprocess.run([*CLI, "run", "--rate", "2k", "--duration", "1", "--verbose"], capture_output=True,
                       text=True, timeout=CLI_TIMEOUT_S, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode in MEASURED, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(ln for ln in lines if len(ln) > 80)
    assert lines[0].startswith("verdict ") and lines[1].startswith("  "), lines[:2]
    times = set(re.findall(r"\d (ns|µs|ms)(?![\w/])", r.stdout))
    assert len(times) == 1, times
    assert re.search(r"[\d,]+ req/s offered, [\d,]+ req/s sent", " ".join(ln.strip() for ln in lines))
    assert all(ln.startswith("warning: ") for ln in r.stderr.splitlines() if "warning" in ln)


def test_percentiles_are_reported_as_asked_with_those_thresholds_judge():
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--percentiles", "50,95,99.9",
                "--threshold", "p97<1s")
    assert r.returncode in (0, 1, 3), r.stderr
    s = json.loads(r.stdout)
    # The asked list, the --percentile (99) and the threshold's p97: each with its interval fields.
    assert [p["p"] for p in s["latency"]["percentiles"]] == [50, 95, 97, 99, 99.9]
    assert [p["p"] for p in s["latency"]["histogram"]["percentiles"]] == [50, 95, 97, 99, 99.9]
    assert s["thresholds"][0]["p"] == 97 and s["thresholds"][0]["status"] in ("pass", "inconclusive")
    assert s["config"]["percentiles"] == [50, 95, 97, 99, 99.9]


def test_p95_is_reported_by_default_and_a_p95_threshold_is_taken():
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--threshold", "p95<1s")
    assert r.returncode in (0, 1, 3), r.stderr
    s = json.loads(r.stdout)
    assert [p["p"] for p in s["latency"]["percentiles"]] == [50, 90, 95, 99, 99.9, 99.99]
    assert s["thresholds"][0]["status"] in ("pass", "inconclusive")


def test_the_workload_file_holds_the_command_settings(tmp_path):
    out = tmp_path / "from-file"
    wl = tmp_path / "w.toml"
    wl.write_text(f'rate = "2k"\nduration = "1s"\nkeep_stalls = true\nthreshold = ["p50<1s"]\n'
                  f'out = "{out}"\nsamples_format = "parquet"\npercentiles = [50, 99]\npin = false\n')
    r = run_cli("run", "--workload", str(wl), "--json")
    assert r.returncode in (0, 1, 3), r.stderr
    s = json.loads(r.stdout)
    assert s["config"]["keep_stalls"] is True and s["config"]["pin"] is False
    assert [t["threshold"] for t in s["thresholds"]] == ["p50<1s"]
    assert [p["p"] for p in s["latency"]["percentiles"]] == [50, 99]
    assert (out / "summary.json").exists() and (out / "samples.parquet").exists()
    # A flag still wins over the file.
    r = run_cli("run", "--workload", str(wl), "--json", "--bound-stalls", "--out", str(tmp_path / "flag"))
    assert json.loads(r.stdout)["config"]["keep_stalls"] is False


def test_a_wrong_type_in_the_workload_file_is_one_line(tmp_path):
    wl = tmp_path / "w.toml"
    wl.write_text("threshold = 5\n")
    r = run_cli("run", "--workload", str(wl))
    assert r.returncode == 2 and "threshold = 5 is not" in r.stderr and "p99<200us" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
