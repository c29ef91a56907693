"""What a person reads, made in process: every --help names its values and shows its defaults, and
the live line shows rates, the percentiles so far and the CI against its target. The summaries of
real runs: tests/e2e/test_output.py."""

import io

import typer.main
from rich.console import Console

from tailwise.cli.main import _patch_help, app


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
    from tailwise.render.live import LiveLine
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
