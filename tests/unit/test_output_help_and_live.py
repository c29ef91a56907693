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
    # Settings with no default to show: a file, a time that switches a mode on, a gate, the output,
    # a UDP function's target and impairments (none unless given).
    no_default = {"workload", "duration", "threshold", "out", "json_out", "quiet", "verbose", "help", "resume",
                  "slo", "rates", "label", "customers", "version", "target", "targets", "directory", "directories",
                  "service", "load", "agents", "probe_agent", "token_file", "agent_tls_ca", "agent_tls_cert",
                  "agent_tls_key", "tls_cert", "tls_key", "tls_client_ca",
                  "udp_forward", "drop_every", "reorder_every", "duplicate_every",
                  "header", "body", "body_file", "requests_file", "redis_password_file"}
    # A group's commands (`deploy start`, …) are checked as the top-level ones.
    commands = [(name, command, ctx) for name, command in cli.commands.items()]
    for name, command, parent in commands:
        sub = command.make_context(name, [], resilient_parsing=True, parent=parent)
        commands += [(f"{name} {n}", c, sub) for n, c in getattr(command, "commands", {}).items()]
        text = command.get_help(sub)
        assert "<" not in text.replace("<=", "").replace("'p99<", ""), (name, text)
        for param in command.get_params(sub):
            # A lone switch (--spin, --json) is off unless given; a required value has no default.
            switch = getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None)
            if param.name in no_default or param.hidden or switch or param.required:
                continue
            record = param.get_help_record(sub)
            assert record and "default" in record[1], (name, param.name, record)


def test_run_and_sweep_show_each_default_from_its_one_definition():
    """Every option of `run` and `sweep` with a default shows exactly that default, as
    spec/workload.py, stats and spec/runspec.py define it: no help string keeps a copy of its own."""
    import re

    from tailwise.spec.runspec import AUTO_SAMPLES_PER_S, BUILTIN_SERVICE, DEFAULT_CI
    from tailwise.spec.workload import COMMAND_DEFAULTS, DEFAULTS
    from tailwise.stats import DEFAULT_PERCENTILES

    _patch_help()
    cli = typer.main.get_command(app)
    ctx = cli.make_context("tailwise", ["--help"], resilient_parsing=True)
    # The defaults computed where they are used (None in DEFAULTS), each from its constant.
    computed = {"percentiles": ",".join(f"{p:g}" for p in DEFAULT_PERCENTILES), "ci": DEFAULT_CI,
                "service": BUILTIN_SERVICE, "sample_every": f"as many as keeps ≤ {AUTO_SAMPLES_PER_S // 1000}k samples/s"}
    checked: dict[str, set[str]] = {"run": set(), "sweep": set()}
    for name in checked:
        command = cli.commands[name]
        for param in command.get_params(command.make_context(name, [], resilient_parsing=True, parent=ctx)):
            value = {**DEFAULTS, **COMMAND_DEFAULTS}.get(param.name)
            if value is None and param.name not in computed:
                continue
            if isinstance(value, bool):  # an on/off flag: the flag that gives the default
                want = (param.opts if value else param.secondary_opts)[0]
            elif value is None:
                want = computed[param.name]
            else:
                want = f"{value:g}" if isinstance(value, float) else str(value)
            shown = re.findall(r"\[default: ([^\]]+)\]", param.help or "")
            assert len(shown) == 1 and (shown[0] == want or shown[0].startswith(want + " ")
                                        or shown[0].startswith(want + ",")), (name, param.name, want, shown)
            checked[name].add(param.name)
    # Every setting with a default is an option of both (but --rate: a sweep has --rates, --steps).
    with_default = {n for n, v in {**DEFAULTS, **COMMAND_DEFAULTS}.items() if v is not None} | set(computed)
    assert checked["run"] == with_default - {"steps"}, checked["run"] ^ with_default
    assert checked["sweep"] == with_default - {"rate"}, checked["sweep"] ^ with_default


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
