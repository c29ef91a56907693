"""Nothing measured is lost to a signal: SIGINT (also twice in quick succession), SIGTERM and SIGHUP
stop sending, the results directory is written whole with `interrupted: true`, and the exit
status is 128 + the signal. A run that fails before its first request leaves no directory; a
directory that already holds results is refused, or with --force replaced whole."""

import json
import signal
import time

import pytest
from support.cli import MEASURED, run_cli
from support.live_run import Run

#: What a run directory holds (docs/results.md), summary.json last.
RUN_FILES = {"summary.json", "config.json", "host.json", "samples.csv", "latency.hdr", "send_lag.hdr",
             "latency.hgrm", "latency.hlog", "latency-local.hlog"}
REPEATS = 10


def _signal_mid_run(tmp_path, sigs: tuple[int, ...], after_s: float, *mode: str):
    out = tmp_path / "r"
    # Bounded: the run ends by itself within --max-time/--duration even if no signal arrived.
    run = Run("--rate", "2k", *mode, "--out", str(out), json_out=False)
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + after_s - time.monotonic()))
    for i, sig in enumerate(sigs):
        if i:
            time.sleep(0.03)  # a double Ctrl-C: the second within 50 ms
        run.proc.send_signal(sig)
    return out, run.finish(timeout_s=60)


def _assert_kept(out, r, sig: int):
    assert r.returncode == 128 + sig, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tailwise: interrupted after ") and f"({signal.Signals(sig).name})" in last, last
    assert f"results kept in {out}/" in last, last
    names = {p.name for p in out.iterdir()}
    assert names == RUN_FILES, names  # complete, and no stage or temporary file left
    s = json.loads((out / "summary.json").read_text())
    assert s["interrupted"] is True and s["methodology"]["stopped"] == "interrupted"
    assert s["counters"]["sent"] > 0 and s["latency"]["histogram"]["count"] == s["counters"]["intended"]
    assert (out / "samples.csv").stat().st_size > 0


@pytest.mark.parametrize("sigs", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM,), (signal.SIGHUP,)],
                         ids=["SIGINTx2", "SIGTERM", "SIGHUP"])
def test_a_signal_mid_run_keeps_a_complete_results_directory(tmp_path, sigs):
    """Adaptive mode (the default), repeated at times spread over the first rounds (inside a round's
    analysis, its pause, between rounds): every time a complete directory."""
    for i in range(REPEATS):
        where = tmp_path / f"{i}"
        where.mkdir()
        out, r = _signal_mid_run(where, sigs, 0.3 + 0.2 * i, "--max-time", "30")
        _assert_kept(out, r, sigs[0])
        if len(sigs) > 1:
            assert "still finishing what was measured" in r.stderr, r.stderr


@pytest.mark.parametrize("sigs", [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM,), (signal.SIGHUP,)],
                         ids=["SIGINTx2", "SIGTERM", "SIGHUP"])
def test_a_signal_mid_run_in_fixed_mode_keeps_the_results(tmp_path, sigs):
    out, r = _signal_mid_run(tmp_path, sigs, 1.0, "--duration", "20")
    _assert_kept(out, r, sigs[0])
    s = json.loads((out / "summary.json").read_text())
    assert s["methodology"]["mode"] == "fixed" and s["rate"]["duration_s"] < 10


def test_a_signal_mid_sweep_keeps_the_points_and_the_one_interrupted(tmp_path):
    out = tmp_path / "sweep"
    run = Run("--rates", "2k:4k:3", "--duration", "3", "--out", str(out), json_out=False, command="sweep")
    run.wait_line("point 1 ·", timeout_s=60)
    time.sleep(1.5)  # inside the second point's schedule
    run.proc.send_signal(signal.SIGTERM)
    r = run.finish(timeout_s=60)
    assert r.returncode == 143, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    assert "sweep interrupted (SIGTERM)" in r.stderr and "--resume" in r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["interrupted"] is True and not s["complete"] and len(s["points"]) >= 1
    # The point being measured is kept apart, whole, and is not taken for a completed point.
    cut = list((out / "interrupted").iterdir()) if (out / "interrupted").is_dir() else []
    for p in cut:
        assert json.loads((p / "summary.json").read_text())["interrupted"] is True
    assert not any(p.name.startswith(".") for p in (out / "points").iterdir())


# --- a run that fails before its first request leaves nothing behind ------------------------------

def test_a_refused_run_leaves_no_directory(tmp_path):
    from support.servers import free_port

    port = free_port()
    new = tmp_path / "a" / "b"
    r = run_cli("run", f"synthetic://127.0.0.1:{port}", "--duration", "1", "--out", str(new))
    assert r.returncode == 2 and "cannot connect" in r.stderr
    assert not (tmp_path / "a").exists()
    given = tmp_path / "mine"
    given.mkdir()
    r = run_cli("run", f"synthetic://127.0.0.1:{port}", "--duration", "1", "--out", str(given))
    assert r.returncode == 2 and given.is_dir() and not list(given.iterdir())
    r = run_cli("sweep", f"synthetic://127.0.0.1:{port}", "--rates", "1k:2k:2", "--duration", "1",
                "--out", str(new))
    assert r.returncode == 2 and "cannot connect" in r.stderr and not (tmp_path / "a").exists()


# --- results directories stay consistent ------------------------------------------------------------

def test_a_directory_with_results_is_refused_or_replaced_whole_with_force(tmp_path):
    out = tmp_path / "r"
    assert run_cli("run", "--rate", "2k", "--duration", "1", "--out", str(out)).returncode in MEASURED
    # What `tailwise report` adds, and a file of the user's.
    for name in ("report.html", "ccdf.png", "ccdf.svg"):
        (out / name).write_text("old")
    (out / "notes.txt").write_text("mine")
    before = json.loads((out / "summary.json").read_text())["started_at"]
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--out", str(out))
    assert r.returncode == 2 and "already holds results" in r.stderr and "--force" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and (out / "report.html").exists()
    time.sleep(1.1)  # a new started_at
    r = run_cli("run", "--rate", "2k", "--duration", "1", "--out", str(out), "--force",
                "--samples-format", "parquet")
    assert r.returncode in MEASURED, r.stderr
    names = {p.name for p in out.iterdir()}
    assert names == RUN_FILES - {"samples.csv"} | {"samples.parquet", "notes.txt"}, names
    assert json.loads((out / "summary.json").read_text())["started_at"] != before
    # A sweep into a run's directory is refused too; with --force it replaces it whole.
    r = run_cli("sweep", "--rates", "2k:3k:2", "--duration", "1", "--out", str(out))
    assert r.returncode == 2 and "--force" in r.stderr
    r = run_cli("sweep", "--rates", "2k:3k:2", "--duration", "1", "--out", str(out), "--force", "--json")
    assert r.returncode in MEASURED, r.stderr
    assert {p.name for p in out.iterdir()} == {"summary.json", "config.json", "host.json", "points", "notes.txt"}
    r = run_cli("sweep", "--resume", str(out), "--force")
    assert r.returncode == 2 and "--force" in r.stderr
