"""What a person reads (output.py, live.py, the --help of every command) and the settings they
give (--percentiles, the workload file's command settings): compact by default, whole sentences,
never a truncated verdict, defaults in every --help."""

import copy
import io
import json

import pytest
import typer.main
from rich.console import Console

from conftest import run_cli
from tailwise.cli import _patch_help, app
from tailwise.output import print_summary


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict:
    """A real run's summary (whatever its verdict on this host)."""
    out = tmp_path_factory.mktemp("run") / "r"
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--out", str(out))
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def render(s: dict, width: int, verbose: bool = False) -> list[str]:
    buf = io.StringIO()
    print_summary(s, Console(file=buf, width=width, soft_wrap=False, color_system=None), verbose=verbose)
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
    s = as_ok(summary)
    s["verdict"] = "not-measurable"
    s["checks"][0] |= {"ok": False, "detail": "the cause, with its figure", "remedy": "the remedy"}
    lines = render(s, 1000)
    failed = [ln for ln in lines if ln.startswith("✗ ")]
    assert failed == [f"✗ {s['checks'][0]['name']}: the cause, with its figure — the remedy"], lines
    assert any("verdict not-measurable" in ln for ln in lines)


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
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--verbose")
    assert r.returncode in (0, 1), r.stderr
    assert "…" not in r.stdout
    first = r.stdout.splitlines()[0]
    assert "verdict ok" in first or "verdict not-measurable" in first, first


def test_every_help_names_values_and_shows_defaults():
    _patch_help()
    cli = typer.main.get_command(app)
    ctx = cli.make_context("tailwise", ["--help"], resilient_parsing=True)
    # Settings with no default to show: a file, a time that switches a mode on, a gate, the output.
    no_default = {"workload", "duration", "threshold", "out", "json_out", "quiet", "verbose", "help", "resume",
                  "slo", "rates", "label", "customers", "version", "target", "targets", "directory", "directories",
                  "service", "load"}
    for name, command in cli.commands.items():
        sub = command.make_context(name, [], resilient_parsing=True, parent=ctx)
        text = command.get_help(sub)
        assert "<" not in text.replace("<=", "").replace("'p99<", ""), (name, text)
        for param in command.get_params(sub):
            # A lone switch (--spin, --json) is off unless given; a required value has no default.
            switch = getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None)
            if param.name in no_default or param.hidden or switch or param.required:
                continue
            record = param.get_help_record(sub)
            assert record and "default" in record[1], (name, param.name, record)


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


class _FakeIntervals:
    """Every request so far: 99 at 10 µs and 1 at 1 ms (an HdrHistogram, as the engine gives it)."""

    def window(self, first, last, with_pending):
        from hdrh.histogram import HdrHistogram
        import base64

        h = HdrHistogram(1, 3_600_000_000_000, 3)
        h.record_value(10_000, 99)
        h.record_value(1_000_000)
        return base64.b64decode(h.encode())


class _FakeSession:
    def __init__(self):
        self.sent = self.received = 0
        self.intervals = _FakeIntervals()

    def snapshot(self):
        return {"elapsed_ns": 2_000_000_000, "sent": self.sent, "received": self.received, "errors": 0, "timeouts": 0}

    def elapsed_ns(self):
        return 2_000_000_000


def test_the_live_line_shows_rates_percentiles_so_far_and_the_ci_against_its_target():
    from tailwise.live import LiveLine
    from tailwise.methodology.controller import RoundInfo

    session = _FakeSession()
    live = LiveLine(Console(file=io.StringIO(), width=200), rate_rps=10_000, span_s=60, fixed=False, percentile=99)
    live.attach(session)
    first = live.text()
    assert first.startswith("measuring 2 s of ≤ 60 s") and "p50 10.0 µs, p99 10.0 µs so far" in first, first
    session.sent, session.received = 10_000, 9_990
    live.round(RoundInfo(1, 1.0, "confidence", 100, 100, 8_000.0, 4_000.0, ["confidence"]))
    line = live.text()
    assert "sent " in line and "/s, done " in line, line
    assert "p99 CI 8.0 µs (target 4.0 µs)" in line, line
    # A narrow terminal keeps the most important parts whole and drops the rest.
    narrow = LiveLine(Console(file=io.StringIO(), width=40), rate_rps=10_000, span_s=60, fixed=True, percentile=99)
    narrow.attach(session)
    assert narrow.text() == "measuring 2 s of 60 s"
