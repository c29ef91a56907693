"""Warnings are values (tailwise/warning.py) whose words are composed when shown (render/warning.py),
as hyperfine's output/warnings.rs: every kind has a cause and a remedy, and --quiet shows none."""

from __future__ import annotations

import typing

import pytest

from tailwise import warning as w
from tailwise.render import output
from tailwise.render.warning import words, warn

KINDS = [w.TimeCapped("TAILWISE_TIME_CAP", "3s", 3.0), w.ServerShares(2, 1, 2), w.SpinnersShare(3, 2),
         w.HostKnob("governor", "CPU 0 powersave", "cpupower frequency-set -g performance"),
         w.SamplesNotKept("out", "out/collected/samples-local.bin: no space left on device"),
         w.JournalGivenUp("out", "no space left on device")]


def test_every_kind_has_its_words():
    assert {type(k) for k in KINDS} == set(typing.get_args(w.AnyWarning)), "a kind without a test here"
    for kind in KINDS:
        cause, remedy = words(kind)
        assert cause and remedy and "\n" not in cause + remedy, kind


def test_the_words_carry_the_figures():
    assert words(w.SpinnersShare(3, 2)) == ("3 spinning engine threads on 2 CPUs", "use --threads 2 or fewer, or --poll block")
    assert words(KINDS[0])[0] == "TAILWISE_TIME_CAP=3s shortens this run to 3 s"
    cause, remedy = words(KINDS[3])
    assert cause == "host governor: CPU 0 powersave" and remedy.endswith("(see `tailwise doctor`: governor)")


def test_a_warning_is_one_line_on_stderr_and_none_when_quiet(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    warn(KINDS[2])
    assert capsys.readouterr().err.strip() == "warning: 3 spinning engine threads on 2 CPUs — use --threads 2 or fewer, or --poll block"
    output.set_quiet(True)
    try:
        warn(KINDS[2])
        assert capsys.readouterr().err == ""
    finally:
        output.set_quiet(False)


def test_a_value_that_is_no_warning_is_refused():
    with pytest.raises(TypeError):
        words("a sentence")  # type: ignore[arg-type]
