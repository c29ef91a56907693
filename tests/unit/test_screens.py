"""Every screen at the width it is shown on (issue 34, item 2), rendered in process from saved
summaries (tests/unit/screens/: real runs, a real sweep, `tailwise doctor --json` here and with its
knobs set to warn with the fixes host/doctor.py writes): `tailwise run` ok, imprecise and
not-measurable (the host's pauses; a closed loop, the client's), the sweep, compare, doctor — at 80
and 120 columns off a terminal (COLUMNS), each with and without --verbose where it has one.

Asserted: no line wider than the screen (but a fix command longer than it, whole on its own line);
no word broken (the words at 80 and 120 are the words of a screen wide enough for every line); one
unit for every latency on a screen; rates with "/s"; the verdict's one sentence with its most
likely cause and fix; a short form by default and each check's whole text with --verbose; doctor
one entry per knob below 120 columns, a table from 120, its commands and sysctl names whole. And the
width rule itself: a terminal's width (a pty), else COLUMNS, else 100. A real run and doctor at
80 columns: tests/e2e/test_output.py, tests/e2e/test_doctor.py."""

from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import struct
import termios
from pathlib import Path

import pytest
from rich.cells import cell_len

from tailwise.render.compare import Entry, compare_doc, print_compare
from tailwise.render.doctor import COMMANDS, WIDE, command_spans, print_doctor
from tailwise.render.output import fold_text, in_unit, print_summary, screen_width, short_text, table_unit
from tailwise.render.sweep import print_sweep
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import SweepSummary

SCREENS = Path(__file__).parent / "screens"
RUNS = {"run-ok": None, "run-imprecise": "the client", "run-not-measurable": "the host",
        "run-closed-loop": "the client"}
WIDTHS = (80, 120)
#: Wide enough that nothing on any screen here is folded: the words of a screen as written.
WHOLE = 1000
BOX = set("┏┳┓┃┡╇┩│├┼┤└┴┘━─")


def load(name: str) -> dict:
    return json.loads((SCREENS / f"{name}.json").read_text())


def typed(doc: dict) -> Summary:
    """A run's summary as the commands hand it to the screens: its model, read by attribute."""
    return Summary.model_validate(doc)


def screen(monkeypatch, capsys, width: int, show, *args, **kwargs) -> list[str]:
    """What ``show(*args)`` prints on stdout off a terminal with COLUMNS=width."""
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    show(*args, **kwargs)
    return capsys.readouterr().out.splitlines()


def words(lines: list[str]) -> set[str]:
    return {w for line in lines for w in line.split() if not set(w) <= BOX}


def commands(doc: dict) -> list[str]:
    """Every command of doctor's fixes (what a user pastes), as written."""
    return [k["fix"][a:b].rstrip(";,") for k in doc["knobs"] if k["fix"] for a, b in command_spans(k["fix"])
            if k["fix"][a:b].split()[0] in COMMANDS]


def assert_fits(lines: list[str], width: int, whole: tuple[str, ...] = ()) -> None:
    """No line wider than ``width``, but one that is a command of ``whole`` standing alone."""
    wide = [ln for ln in lines if cell_len(ln) > width and ln.strip().rstrip(";,") not in whole]
    assert not wide, f"{len(wide)} lines wider than {width}:\n" + "\n".join(wide)


def assert_unbroken(lines: list[str], reference: list[str]) -> None:
    """The same words as the screen drawn wide enough for every line: none cut in two, none lost."""
    got, want = words(lines), words(reference)
    assert got == want, f"broken or missing: {sorted(want - got)[:10]}; fragments: {sorted(got - want)[:10]}"


def unfold(lines: list[str]) -> str:
    """A folded paragraph (its first line and the indented ones after it) as one line."""
    out = [lines[0]]
    for ln in lines[1:]:
        if not ln.startswith("  "):
            break
        out.append(ln.strip())
    return " ".join(out)


TIME = re.compile(r"\d (ns|µs|ms)(?![\w/])|\((ns|µs|ms)\)")


def units(lines: list[str]) -> set[str]:
    return {a or b for line in lines for a, b in TIME.findall(line)}


# ------------------------------------------------------------------------------- tailwise run

@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("verbose", [False, True], ids=["short", "verbose"])
@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_fits_the_screen_whole_in_one_unit(monkeypatch, capsys, name, verbose, width):
    s = load(name)
    before = copy.deepcopy(s)
    lines = screen(monkeypatch, capsys, width, print_summary, typed(s), verbose=verbose)
    assert_fits(lines, width)
    assert_unbroken(lines, screen(monkeypatch, capsys, WHOLE, print_summary, typed(s), verbose=verbose))
    # One unit for every latency on the screen (the table's), the checks' sentences included.
    assert len(units(lines)) == 1, units(lines)
    # Rates per second, counts without a rate's unit.
    head = next(ln for ln in screen(monkeypatch, capsys, WHOLE, print_summary, typed(s)) if " req/s offered, " in ln)
    assert re.search(r"· [\d,]+ req/s offered, [\d,]+ req/s sent, [\d,]+ req/s completed over [\d.]+ s$", head), head
    assert re.search(r"^requests: [\d,]+ sent, [\d,]+ received, ", "\n".join(lines), re.M)
    assert s == before, "rendering changed the summary"


@pytest.mark.parametrize("name", list(RUNS))
def test_the_verdict_is_one_sentence_with_its_likely_cause_and_fix(monkeypatch, capsys, name):
    s = load(name)
    lines = screen(monkeypatch, capsys, 80, print_summary, typed(s))
    sentence = unfold(lines)
    assert sentence.startswith(f"verdict {s['verdict']} — "), sentence
    who = RUNS[name]
    if who is None:
        assert "every check passed" in sentence and "fix:" not in sentence, sentence
        return
    assert f"most likely {who}" in sentence, sentence
    fix = (s["precision"]["remedy"]["words"] if s["verdict"] == "imprecise" else
           next(ch["remedy"] for ch in s["checks"] if not ch["ok"] and ch["remedy"]))
    assert sentence.endswith(f" — fix: {in_unit(fix, table_unit(typed(s)))}"), sentence


def everything(s: dict) -> dict:
    """A summary with every optional line a run can print: keys, a probe, packets, agents and
    their barrier, the server's own count (differing), its error, error reasons, an engine error."""
    s = copy.deepcopy(s)
    s["config"]["workload"] = {"keys": 10_000, "key_size": "16", "value_size": "64", "popularity": "uniform",
                               "set_fraction": 0.1, "mean_key_bytes": 16.0, "mean_value_bytes": 64.0}
    s["counters"] |= {"gets": 9_000, "hits": 8_000, "misses": 1_000, "sets": 1_000, "stored": 1_000, "never_sent": 12}
    s["hit_ratio"] = 8 / 9
    s["probe"] = {"conns": 4, "rate_rps": 1_000.0, "counters": None}
    s["packets"] = {"sent": 200_000, "received": 199_990, "rate_pps": 100_000.0, "bits_per_s": 51.2e6,
                    "size_bytes": 64, "lost": 10, "loss_ratio": 5e-5, "reordered": 3, "reorder_max": 2,
                    "duplicates": 0, "flows": 16, "payload_bytes": 18, "sent_pps": 100_005.0,
                    "resolution_ns": 100, "max_loss": 0.001}
    s["agents"] = [{"address": f"10.0.0.{i}:7000", "role": "symmetric", "rate_rps": 5_000.0, "achieved_rps": 4_990.0,
                    "threads": 1, "conns": 8, "timed": True,
                    "clock_offset_ns": -12_345.0 * i, "clock_rtt_ns": 80_000.0, "counters": {"errors": 0, "timeouts": i},
                    "error": "it stopped answering: no reply for 2 s" if i == 2 else None} for i in (1, 2)]
    s["barrier"] = {"asked_ns": 1_000_000, "spread_ns": 150_000.0, "clock_uncertainty_ns": 40_000.0, "late_ns": 90_000.0}
    s["target_stats"] = {"target": "memcached://127.0.0.1:11211", "source": "memcached stats", "before": {}, "after": {},
                         "delta": {"gets": 9_001, "sets": 1_000, "hits": 8_000, "misses": 1_001, "connections": 3}, "agrees": False,
                         "error": "stats after the run: the connection was refused"}
    s["error_reasons"] = [{"reason": "SERVER_ERROR out of memory storing object", "count": 3},
                          {"reason": "no reply within 1,000 ms", "count": 2}]
    s["error"] = "the target stopped answering at 1.9 s (no reply for 1 s on every connection)"
    s["by_request"] = by_request(s)
    return s


def by_request(s: dict) -> list[dict]:
    """Two kinds of request, made of the run's own percentiles: the gets as they are, the sets
    twice as slow and too few for the highest percentiles (unsupported: value null, a lower bound)."""
    def scaled(p: dict, k: float, supported: bool) -> dict:
        if not supported:
            return p | {"value_ns": None, "low_ns": None, "high_ns": None, "samples_needed": 3_688,
                        "lower_bound_ns": (p["low_ns"] or p["value_ns"] or 1_000) * k}
        return p | {key: (p[key] * k if p.get(key) is not None else None) for key in ("value_ns", "low_ns", "high_ns")}

    ps = s["latency"]["percentiles"]
    n = s["latency"]["samples"]
    return [{"name": "get", "share": 0.9, "count": n - n // 10, "percentiles": ps},
            {"name": "set", "share": 0.1, "count": n // 10,
             "percentiles": [scaled(p, 2.0, p["p"] < 99.9) for p in ps]}]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("verbose", [False, True], ids=["short", "verbose"])
def test_every_line_a_run_can_print_fits(monkeypatch, capsys, verbose, width):
    s = everything(load("run-not-measurable"))
    lines = screen(monkeypatch, capsys, width, print_summary, typed(s), verbose=verbose)
    assert_fits(lines, width)
    assert_unbroken(lines, screen(monkeypatch, capsys, WHOLE, print_summary, typed(s), verbose=verbose))
    assert len(units(lines)) == 1, units(lines)
    text = " ".join(ln.strip() for ln in lines)
    for said in ("keys: 9,000 gets", "probe's requests only (4 conns × 1 at 1,000 req/s)", "packets: 200,000 sent",
                 "agent 10.0.0.2:7000 (symmetric): share 5,000 req/s, sent 4,990 req/s", "barrier: the agents",
                 "differs from ours", "error ×3: SERVER_ERROR out of memory", "run stopped early: the target"):
        assert said in text, said


@pytest.mark.parametrize("width", WIDTHS)
def test_each_kind_of_request_has_its_lines_under_the_whole_run_s_table(monkeypatch, capsys, width):
    s = load("run-ok")
    assert "per kind" not in " ".join(screen(monkeypatch, capsys, width, print_summary, typed(s))), "one kind: none"
    s["by_request"] = by_request(s)
    lines = screen(monkeypatch, capsys, width, print_summary, typed(s))
    assert_fits(lines, width)
    assert_unbroken(lines, screen(monkeypatch, capsys, WHOLE, print_summary, typed(s)))
    assert len(units(lines)) == 1, units(lines)
    top = next(i for i, ln in enumerate(lines) if ln.startswith("per kind of request"))
    assert top > next(i for i, ln in enumerate(lines) if ln.startswith("percentile ")), "under the whole run's table"
    end = next(i for i, ln in enumerate(lines) if ln.startswith("requests: "))
    rows = lines[top + 2:end]  # under the sentence and the table's header
    text = "\n".join(rows)
    assert re.search(r"^get\s+90\.0%\s+p50 ", text, re.M) and re.search(r"^set\s+10\.0%\s+p50 ", text, re.M), text
    shown = [next(w for w in ln.split() if re.fullmatch(r"p[\d.]+", w)) for ln in rows if re.search(r"(^|\s)p[\d.]+\s", ln)]
    assert shown == ["p50", "p99", "p99.9"] * 2, text
    # The sets' p99.9 is unsupported: what it needs and its one-sided bound, never a value.
    p999 = text[text.index("set"):]
    p999 = p999[p999.index("p99.9"):]
    assert "needed" in p999 and "≥ " in p999, p999


def test_a_failed_check_is_short_by_default_and_whole_with_verbose(monkeypatch, capsys):
    s = load("run-not-measurable")
    failed = next(ch for ch in s["checks"] if not ch["ok"])
    short, full = (" ".join(ln.strip() for ln in screen(monkeypatch, capsys, 80, print_summary, typed(s), verbose=v))
                   for v in (False, True))
    assert f"✗ {failed['name']}: {short_text(failed['detail'])}" in short
    assert failed["detail"] not in short and failed["detail"] in full, failed["detail"]
    assert failed["remedy"] in full
    # Every check, whole, with --verbose; the default names the failed ones only.
    for ch in s["checks"]:
        assert f" {ch['name']}: " in full
    assert short.count("✓ ") == 0 and "--verbose: each check's figures" in short


def test_the_percentile_rows_stay_one_line_at_80_columns(monkeypatch, capsys):
    """The issue's "needed" alone on a line: every row of the table is one line at 80 columns."""
    for name in RUNS:
        s = load(name)
        lines = screen(monkeypatch, capsys, 80, print_summary, typed(s))
        top = next(i for i, ln in enumerate(lines) if ln.startswith("percentile "))
        end = next(i for i, ln in enumerate(lines) if ln.startswith("requests: "))
        rows = lines[top + 1:end]
        assert [ln.split()[0] for ln in rows] == [f"p{p['p']:g}" for p in s["latency"]["percentiles"]], (name, rows)


# ------------------------------------------------------------------------------ sweep, compare

@pytest.mark.parametrize("width", WIDTHS)
def test_a_sweep_fits_the_screen(monkeypatch, capsys, width):
    doc = load("sweep")
    doc["knee"] = {**doc["knee"], "disturbed": [{"rate_rps": p["rate_rps"], "host_stall_share": 0.02}
                                                for p in doc["points"][1:]]}
    lines = screen(monkeypatch, capsys, width, print_sweep, SweepSummary.model_validate(doc))
    assert_fits(lines, width)
    assert_unbroken(lines, screen(monkeypatch, capsys, WHOLE, print_sweep, SweepSummary.model_validate(doc)))
    assert len(units(lines)) == 1, units(lines)
    text = "\n".join(lines)
    for p in doc["points"]:
        assert f"{p['rate_rps']:,.0f}" in text
    assert {"load", "sent", "req/s", f"p{doc['percentile']:g}"} <= words(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_fits_the_screen(monkeypatch, capsys, width):
    entries = [Entry(Path("results") / name, name.removeprefix("run-"), typed(load(name))) for name in RUNS]
    doc = compare_doc(entries)
    lines = screen(monkeypatch, capsys, width, print_compare, doc)
    assert_fits(lines, width)
    assert_unbroken(lines, screen(monkeypatch, capsys, WHOLE, print_compare, doc))
    assert len(units(lines)) == 1, units(lines)
    assert sum("(first)" in ln for ln in lines) == len(doc.percentiles)


# ------------------------------------------------------------------------------------- doctor

@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["doctor", "doctor-warn"])
def test_doctor_fits_the_screen_and_keeps_its_commands_whole(monkeypatch, capsys, name, width):
    doc = load(name)
    lines = screen(monkeypatch, capsys, width, print_doctor, doc)
    cmds = commands(doc)
    assert_fits(lines, width, whole=tuple(cmds))
    # The same layout drawn wide enough that nothing folds: a line per knob below WIDE, a table from it.
    reference = WIDE - 1 if width < WIDE else WHOLE
    assert_unbroken(lines, screen(monkeypatch, capsys, reference, print_doctor, doc))
    # Every command on one line, whole; every sysctl name whole.
    for cmd in cmds:
        assert any(cmd in ln for ln in lines), (cmd, lines)
    sysctls = {w.strip("(),;") for k in doc["knobs"] for w in f"{k['fix'] or ''} {k['value']}".split()
               if w.startswith("net.")}
    for name_ in sysctls:
        assert any(name_ in ln.split() or any(name_ in w for w in ln.split()) for ln in lines), name_


def test_doctor_below_120_columns_is_one_entry_per_knob_and_its_fix_below(monkeypatch, capsys):
    doc = load("doctor-warn")
    lines = screen(monkeypatch, capsys, 80, print_doctor, doc)
    assert not BOX & set("".join(lines)), "a table below 120 columns"
    for k in doc["knobs"]:
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{k['name']} {k['state']}: "))
        entry = [lines[at]]
        for ln in lines[at + 1:]:
            if not ln.startswith("  "):
                break
            entry.append(ln)
        fixes = [ln for ln in entry if ln.startswith("  fix:")]
        assert len(fixes) == (1 if k["fix"] else 0), (k["name"], entry)
    # The 203 lines at 80 columns: about two per knob and one per fix now.
    assert len(lines) <= 4 * len(doc["knobs"]) + 4, len(lines)
    # A fix command stands alone: nothing of the fix's prose after it on its line.
    sysctl = next(ln for ln in lines if "sysctl" in ln or "ethtool -C" in ln)
    assert sysctl.strip().removeprefix("fix: ") in commands(doc), sysctl


def test_doctor_from_120_columns_is_a_table_with_the_fixes_under_it(monkeypatch, capsys):
    doc = load("doctor-warn")
    lines = screen(monkeypatch, capsys, 120, print_doctor, doc)
    for k in doc["knobs"]:
        assert any(ln.startswith(f"│ {k['name']} ") for ln in lines), k["name"]
        assert any("why it matters" in ln for ln in lines)
    for cmd in commands(doc):
        assert any(cmd in ln for ln in lines), cmd


# ------------------------------------------------------------------------- the width rule

def test_the_width_is_the_terminal_s_then_columns_then_100(monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    with open(tmp_path / "out", "w") as pipe:
        assert screen_width(pipe) == 100
        monkeypatch.setenv("COLUMNS", "80")
        assert screen_width(pipe) == 80
    main, sub = os.openpty()
    try:
        fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 93, 0, 0))
        with os.fdopen(sub, "w", closefd=False) as tty:
            assert tty.isatty() and screen_width(tty) == 93  # the terminal's, over COLUMNS
    finally:
        os.close(main)
        os.close(sub)


def test_folding_never_breaks_a_word_or_a_protected_span():
    text = "fix: sudo sysctl -w net.core.busy_read=50 net.core.busy_poll=50 (for a server here that blocks)"
    a = text.index("sudo")
    b = text.index(" (for")
    lines = [ln.plain for ln in fold_text(text, 30, indent=4, atoms=((a, b),))]
    assert lines == ["fix:", "    " + text[a:b], "    (for a server here that", "    blocks)"], lines
    long_word = "x" * 50
    assert [ln.plain for ln in fold_text(f"a {long_word} b", 20)] == ["a", "  " + long_word, "  b"]
