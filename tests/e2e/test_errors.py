"""Bad input and failing targets: one clear line, exit status 2, nothing measured is lost."""

import json
import signal
import socket
import subprocess
import time

import pytest
from support.cli import run_cli
from support.live_run import Run


#: Progress on stderr (the run's start, one line per round) is not part of an error, nor are the
#: host's warnings before it (`tailwise doctor`'s knobs that matter for the run, on a busy machine).
PROGRESS = ("measuring ", "round ", "warning: ")


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith(PROGRESS)]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_target():
    port = _free_port()
    _one_line_error(run_cli("run", f"synthetic://127.0.0.1:{port}", "--rate", "100", "--duration", "1"),
                    "cannot connect", f"127.0.0.1:{port}", "refused", "tailwise serve")


@pytest.mark.parametrize("target,needle", [
    ("127.0.0.1:7000", "has no scheme"),
    ("gopher://127.0.0.1:7000", "unknown protocol 'gopher'"),
    ("synthetic://127.0.0.1", "names no port"),
    ("synthetic://127.0.0.1:99999", "malformed"),
    ("synthetic://:7000", "names no host"),
])
def test_malformed_target(target, needle):
    _one_line_error(run_cli("run", target, "--rate", "100", "--duration", "1"), needle)


@pytest.mark.parametrize("service,needles", [
    ("pareto:10us", ["unknown distribution 'pareto'", "fixed:10us, exp:10us"]),
    ("fixed:10", ["no unit", "10us"]),
    ("lognormal:10us", ["wrong number of fields", "lognormal:10us:1.0"]),
])
def test_unknown_or_bad_distribution(service, needles):
    _one_line_error(run_cli("run", "--rate", "100", "--duration", "1", "--service", service), *needles)


def test_impossible_rate_for_one_thread():
    _one_line_error(run_cli("run", "--rate", "1e12", "--duration", "1"), "per engine thread", "--threads")


@pytest.mark.parametrize("rate", ["0", "-5", "abc", "nan"])
def test_non_positive_rate(rate):
    _one_line_error(run_cli("run", "--rate", rate, "--duration", "1"), "rate")


def test_bad_flag_values_are_one_line_too():
    _one_line_error(run_cli("run", "--threads", "0"), "--threads")
    _one_line_error(run_cli("run", "--conns", "1", "--threads", "2"), "--conns")
    _one_line_error(run_cli("run", "--duration", "soon"), "--duration")
    _one_line_error(run_cli("run", "--arrival", "gamma"), "--arrival")
    _one_line_error(run_cli("run", "--no-such-flag"), "no-such-flag")
    _one_line_error(run_cli("serve", "--listen", "localhost:http"), "--listen")


def _killed_mid_run(serve, out, after_s: float, *mode: str):
    """A run of `tailwise serve` at 2,000 req/s into ``out``, the server killed ``after_s`` after
    the schedule started (the CLI's start-up varies by machine): (the server, the finished run)."""
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "2000", *mode, "--out", str(out), json_out=False)
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + after_s - time.monotonic()))
    srv.stop(signal.SIGKILL)
    return srv, run.finish()


def test_server_that_dies_mid_run_keeps_the_results(tmp_path, serve):
    out = tmp_path / "partial"
    _, r = _killed_mid_run(serve, out, 1.5, "--duration", "6")
    line = _one_line_error(r, "closed the connection")
    assert str(out) in line
    s = json.loads((out / "summary.json").read_text())
    assert s["verdict"] == "not-measurable"
    assert "closed the connection" in s["error"] and "unreachable" in s["error"]
    # The run ends once the target has stayed away for 2 s (reconnecting meanwhile), not at its end.
    measured_s = s["rate"]["duration_s"]
    assert 0 < measured_s < 5.5
    # What was measured before the kill is all there, and every request due while the target was
    # away is in the statistics at the time it waited, not lost.
    c = s["counters"]
    assert c["received"] >= 100 and c["reconnects"] == 0
    assert abs(c["intended"] / measured_s / 2000 - 1) < 0.2, (measured_s, c, s["rate"], s["engine"])
    assert s["latency"]["histogram"]["count"] == c["intended"]
    assert c["never_sent"] + c["unfinished"] + c["timeouts"] + c["errors"] > 0
    assert (out / "samples.csv").stat().st_size > 0


def test_unwritable_out_dir_is_one_line_and_refused_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker / "sub", blocker):  # under a file, and a file itself
        r = run_cli("run", "--rate", "500", "--duration", "30", "--out", str(out))
        _one_line_error(r, "cannot create output directory", "--out")
        # Refused before the first request: nothing was measured (and nothing lost).
        assert "measuring" not in r.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: room for a results directory's checks, not for its files."""
    where = tmp_path / "small"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _filled_but_whole(r, warned: str, out) -> None:
    """A run whose disk filled: its summary whole on stdout, one warning starting ``warned``, one
    line saying ``out`` was not written, status 2."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    s = json.loads(r.stdout)
    assert s["latency"]["samples"] > 0 and s["counters"]["received"] == s["counters"]["sent"]
    assert "Traceback" not in r.stderr
    warning = [ln for ln in r.stderr.splitlines() if ln.startswith(warned)]
    assert len(warning) == 1 and "no space left on device" in warning[0], r.stderr
    line = _one_line_error(r, "was not written", "no space left on device", "--out")
    assert str(out) in line
    assert not (out / "summary.json").exists()


def test_a_disk_that_fills_during_the_run_loses_no_figure(small_disk):
    # The rows spooled during the run fill the disk first, then the results directory's files: the
    # run goes on, and its summary is printed whole, with one line for each file problem.
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--json", "--out", str(small_disk / "run"))
    _filled_but_whole(r, "warning: every sampled request", small_disk / "run")
    assert not (small_disk / "run" / ".tailwise-stage").exists(), "the half-written stage is gone"


def test_a_disk_that_fills_during_a_run_on_agents_loses_no_figure(small_disk, tmp_path):
    # What the agents send is journaled as it comes (collected/): the journal fills the disk, is
    # given up with a warning, and the run goes on to print its summary whole.
    from support.agents import agent_process, token_file

    token = token_file(tmp_path)
    out = small_disk / "run"
    with agent_process("--token-file", str(token)) as (_, port, _):
        r = run_cli("run", "--agents", f"127.0.0.1:{port}", "--token-file", str(token), "--rate", "5k",
                    "--duration", "2", "--json", "--out", str(out))
    _filled_but_whole(r, "warning: what the agents sent", out)
    assert not (out / "collected").exists()


def test_a_disk_that_fills_during_a_sweep_keeps_the_point_measured(small_disk):
    # The first point cannot be written: the sweep stops with one line that carries the point's
    # figures and says how to go on; what was printed on stdout is the sweep's summary.
    out = small_disk / "sweep"
    r = run_cli("sweep", "--rates", "2k,4k", "--duration", "1", "--json", "--out", str(out))
    assert r.returncode == 2, (r.returncode, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["stopped"] == "error" and doc["points"] == []
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("tailwise: ")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for needle in ("at 2,000 req/s: the point was measured (p50 ", "p99 ", f"but {out} could not hold it",
                   "no space left on device", "free space there", f"--resume {out}"):
        assert needle in lines[0], lines[0]
    assert not list((out / "points").glob(".*.tmp")), "the half-written point is gone"


@pytest.mark.parametrize("args,needles", [
    (("--mix", "9-1"), ("--mix 9-1 is not GET:SET", "--mix 9:1")),
    (("--key-size", "gev:1:0:1"), ("key size", "gev:1:0:1", "gpareto")),
    (("--value", "fixed:0"), ("value size", "1 byte")),
    (("--popularity", "hot"), ("unknown key popularity 'hot'", "zipf:0.99")),
    (("--keys", "0"), ("--keys 0",)),
    (("--arrival", "gamma"), ("unknown arrival process 'gamma'", "lognormal")),
])
def test_bad_workload_flags(args, needles):
    _one_line_error(run_cli("run", "memcached://127.0.0.1:9", "--duration", "1", *args), *needles)


def test_key_flags_with_a_keyless_protocol():
    _one_line_error(run_cli("run", "http://127.0.0.1:9/", "--keys", "10", "--duration", "1"),
                    "--keys does not apply to http://", "memcached and redis")


@pytest.mark.parametrize("content,needles", [
    (None, ("does not exist", "examples/workload.toml")),
    ("rate = ", ("not valid TOML",)),
    ('rat = "10k"', ("unknown setting rat", "did you mean rate?")),
    ("conns = \"many\"", ("conns = 'many' is not an integer",)),
    ("targets = [1]", ("targets = [1] is not a list of URLs",)),
])
def test_bad_workload_file(tmp_path, content, needles):
    path = tmp_path / "w.toml"
    if content is not None:
        path.write_text(content + "\n")
    _one_line_error(run_cli("run", "--workload", str(path), "--duration", "1"), *needles)


def test_every_example_workload_file_is_valid():
    from pathlib import Path

    from tailwise.spec.workload import Workload, load_file, resolve

    files = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))
    assert files
    for f in files:
        Workload.from_settings(resolve({}, load_file(str(f))))


def test_server_that_dies_mid_run_in_adaptive_mode_is_named_like_in_fixed_mode(tmp_path, serve):
    """The default mode gave exit 1 and 'the client fell behind its schedule … add --threads' when
    a round came after the backlog had built up but before the engine gave the target up: the
    client's stop rules now wait while the target answers nothing, and the engine names it."""
    out = tmp_path / "partial"
    # 2.5 s in: the third round (~3.8 s) sees > 10 % never sent, 2 s of absence come later.
    srv, r = _killed_mid_run(serve, out, 2.5, "--max-time", "30")
    line = _one_line_error(r, "closed the connection", "unreachable", srv.addr)
    assert str(out) in line and "fell behind" not in line
    s = json.loads((out / "summary.json").read_text())
    assert s["verdict"] == "not-measurable" and srv.addr in s["error"]
    assert s["methodology"]["stopped"].startswith("the engine stopped: ")
    assert s["counters"]["received"] >= 100 and (out / "samples.csv").stat().st_size > 0
    assert "fell behind" not in json.dumps(s["checks"])


def test_unanswered_datagrams_are_named_as_what_held_the_slots():
    """Lost datagrams hold their slot until --timeout: with 2 % lost at 2,000 req/s and a 1 s
    timeout, 40 slots of 32 are held on average: the rate and arrivals checks say so, with the
    figure, instead of blaming the server's speed or the client."""
    from tailwise.spec.load import LoadSpec, protocol
    from tailwise.methodology.checks import Check
    from tailwise.methodology.controller import Ending, adjust_remedies, held_slots
    from tailwise.methodology.remedies import Advice, FreeHeldSlots
    from tailwise.methodology.words import held_words, remedy_words

    udp = LoadSpec(targets=["127.0.0.1:9"], rate_rps=2000, duration_ns=3_000_000_000, protocol=protocol("udp"))
    counters = {"timeouts": 120, "sent": 6000}
    held = held_slots(udp, counters, 3.0)
    said = held_words(held)
    assert held and "held by unanswered datagrams" in said and "120" in said and "40 of the 32 slots" in said
    assert held_slots(LoadSpec(targets=["127.0.0.1:9"], rate_rps=2000, duration_ns=1, protocol=protocol("synthetic")),
                      counters, 3.0) is None
    assert held_slots(udp, {"timeouts": 10}, 3.0) is None  # 3 slots of 32: not what limited the rate
    checks = [Check("rate", False, "sent …", Advice.SERVER_BEHIND),
              Check("arrivals", False, "late …", Advice.CLIENT_BEHIND_SCHEDULE),
              Check("errors", False, "120 timeouts", Advice.FIX_SERVER)]
    out = adjust_remedies(checks, Ending.DURATION, 3.0, 60.0, held)
    assert all(c.remedy == FreeHeldSlots(held) for c in out[:2])
    assert all("held by unanswered datagrams" in remedy_words(c.remedy) for c in out[:2])
    assert not any("did not keep up" in remedy_words(c.remedy) or "add --threads" in remedy_words(c.remedy)
                   for c in out[:2])
    assert out[2].remedy == Advice.FIX_SERVER
