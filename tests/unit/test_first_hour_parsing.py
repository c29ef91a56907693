"""A new user's first hour (issue 10), the parts that run in process: one parser for times and
rates (Python and the data plane), every example in --help accepted by its option's parser, and
scripts/test's suites summarised. The command lines of that hour are in tests/e2e/test_first_hour.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tailwise import _core
from tailwise.errors import InputError
from tailwise.spec.units import parse_rate, parse_time_ns

ROOT = Path(__file__).resolve().parents[2]


# --- units: one parser ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,ns", [
    ("3", 3_000_000_000), ("0.5", 500_000_000), ("3s", 3_000_000_000), ("500ms", 500_000_000),
    ("10us", 10_000), ("10µs", 10_000), ("250ns", 250), ("2m", 120_000_000_000), ("1.5h", 5_400_000_000_000),
    ("2 m", 120_000_000_000), (".5s", 500_000_000), (7, 7_000_000_000),
])
def test_times_accept_every_unit(text, ns):
    assert parse_time_ns(text) == ns


@pytest.mark.parametrize("text,says", [
    ("-5s", "must be positive"), ("0", "must be positive"), ("5x", "unknown time unit 'x'"), ("soon", "is not a time"),
])
def test_bad_times_say_what_is_wrong(text, says):
    with pytest.raises(InputError) as e:
        parse_time_ns(text, what="--max-time")
    assert says in e.value.line() and "--max-time" in e.value.line()


#: Every time unit of the options and workload files, with its size in ns.
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "min": 60e9, "h": 3600e9}


def test_the_data_plane_reads_times_with_the_same_units():
    """Service times (fixed:T, parsed in Rust) take exactly the units of the options."""
    for unit, scale in TIME_UNITS.items():
        _, mean_ns = _core.parse_dist(f"fixed:3{unit}")
        assert mean_ns == pytest.approx(3 * scale), unit
        assert parse_time_ns(f"3{unit}") == pytest.approx(3 * scale), unit


@pytest.mark.parametrize("text,rps", [("5000", 5000), ("50k", 50_000), ("50K", 50_000), ("1.5M", 1_500_000),
                                      ("2e4", 20_000), (300, 300)])
def test_rates_accept_k_and_m(text, rps):
    assert parse_rate(text) == rps


# --- scripts/test runs every suite ---------------------------------------------------------------

def test_scripts_test_runs_every_suite_and_summarises():
    script = (f"source {ROOT / 'scripts' / 'suites.sh'}; suite first false; suite second true; "
              "suite third false; suites_summary")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["FAILED", "ok", "FAILED"], lines
    assert "second" in lines[1] and "third" in lines[2]
    ok = subprocess.run(["bash", "-c", f"source {ROOT / 'scripts' / 'suites.sh'}; suite one true; suites_summary"],
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0 and ok.stdout.strip().startswith("ok      one")


# --- the examples in --help ----------------------------------------------------------------------

def test_every_example_in_the_help_texts_parses():
    """The values `--help` shows as examples or defaults are accepted by the parser of their option."""
    import re

    import typer

    from tailwise.cli.main import app
    from tailwise.spec.runspec import parse_ci
    from tailwise.spec.units import parse_dist

    parsers = {"rate": parse_rate, "ci": parse_ci, **{n: parse_time_ns for n in
                                                      ("max_time", "duration", "timeout", "late", "warmup")}}
    checked = 0
    for cmd in typer.main.get_command(app).commands.values():
        for param in cmd.params:
            text = getattr(param, "help", None) or ""
            if param.name in parsers:
                shown = [t for group in re.findall(r"\(([^)]*)\)", text) for t in group.split(", ")]
                shown += re.findall(r"\[default: ([^\]]+)\]", text) + re.findall(r"default ([0-9][^\s;,)]*)", text)
                for example in (t.strip() for t in shown if re.match(r"^[0-9.]", t.strip())):
                    parsers[param.name](example)
                    checked += 1
            if param.name == "service":
                for example in re.findall(r"\b(?:fixed|exp|bimodal|lognormal|uniform):[0-9][^\s,;)\]]*", text):
                    parse_dist(example)
                    checked += 1
    assert checked >= 15, checked
