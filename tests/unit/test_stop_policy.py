"""The coordinator's stop policy (methodology/controller.py: ``stop_policy``), a pure function of
a round's figures: each rule, its order, and the edges of its thresholds — without a run."""

from dataclasses import replace

import pytest

from tailwise.methodology.controller import (BEHIND, HOPELESS, PATIENCE, RoundOutcome, next_streaks,
                                             stop_policy)
from tailwise.methodology.remedies import HeldSlots
from tailwise.methodology.words import held_words

#: A third round that goes on: the CI still narrowing, well within the time left.
GOING = RoundOutcome(n=3, state="confidence", failing=("confidence",), streaks={"load": 0, "arrivals": 0},
                     silent=False, never_sent=0, intended=30_000, samples_used=30_000, samples_needed=40_000,
                     elapsed_s=3.0, max_time_s=60.0)


def test_a_round_that_is_neither_done_nor_hopeless_goes_on():
    assert stop_policy(GOING) is None


def test_every_check_passing_stops_with_precision_reached():
    assert stop_policy(replace(GOING, state="done", failing=())) == "precision reached in round 3"


def test_the_client_steps_stop_after_patience_rounds_in_a_row_but_never_in_the_first():
    streaks = {"load": 0, "arrivals": 0}
    for _ in range(PATIENCE):
        streaks = next_streaks(streaks, "arrivals")
    assert streaks == {"load": 0, "arrivals": PATIENCE}
    r = replace(GOING, n=PATIENCE, state="arrivals", failing=("arrivals",), streaks=streaks)
    assert stop_policy(r) == f"arrivals failed in rounds 1–{PATIENCE}"
    assert stop_policy(replace(r, streaks={"load": 0, "arrivals": PATIENCE - 1})) is None
    # Another state in between starts the count again.
    assert next_streaks(streaks, "confidence") == {"load": 0, "arrivals": 0}


def test_a_silent_target_is_not_the_clients_failing():
    r = replace(GOING, state="load", failing=("rate",), streaks={"load": PATIENCE, "arrivals": 0},
                never_sent=20_000, silent=True)
    assert stop_policy(r) is None
    assert stop_policy(replace(r, silent=False)) == f"rate failed in rounds 1–{PATIENCE}"


@pytest.mark.parametrize("held", [None, HeldSlots(lost=120, timeout_s=1.0, held=40.0, slots=32, conns=8, outstanding=4)])
def test_a_client_that_could_not_send_a_tenth_stops_and_says_why(held):
    behind = int(BEHIND * 30_000) + 1
    r = replace(GOING, n=2, never_sent=behind, held=held)
    want = f"{behind:,} of 30,000 requests could not be sent within --timeout"
    assert stop_policy(r) == (f"{want}: {held_words(held)}" if held else
                              f"{want}: every slot (--conns × --outstanding) was held by requests the target had not "
                              "answered, or the connections were down")
    assert "fell behind" not in stop_policy(r)  # waiting for a slot is the target's doing (issue 32)
    assert stop_policy(replace(r, never_sent=behind - 1)) is None
    assert stop_policy(replace(r, n=1)) is None  # the first round's backlog is the start's


def test_precision_out_of_reach_needs_three_rounds_and_hopeless_times_the_time_left():
    # 10,000 samples/s; the time left is 57 s: out of reach when more than HOPELESS × 57 s are needed.
    edge = 30_000 + int(HOPELESS * 57 * 10_000)
    r = replace(GOING, samples_needed=edge + 10)
    assert stop_policy(r) == "precision out of reach within --max-time (round 3)"
    assert stop_policy(replace(r, samples_needed=edge - 10)) is None
    assert stop_policy(replace(r, n=2)) is None
    assert stop_policy(replace(r, state="stationarity")) is None  # only the CI's own step


def test_validity_is_judged_once_where_the_precision_decides_the_stop():
    """Optional stopping (issue 32): a run whose precision is reached while a validity check failed
    on what it saw stops there, not-measurable — it does not go on until more data dilutes the
    finding and the check passes. A check that failed for want of data (its remedy: run longer)
    does not stop it, nor does any failure in the first round (the start's figures)."""
    from tailwise.methodology.checks import Check
    from tailwise.methodology.controller import substantive_failures
    from tailwise.methodology.remedies import Advice, Longer, RunLonger

    r = replace(GOING, state="stationarity", failing=("stationarity",), precise=True, invalid=("stationarity",))
    assert stop_policy(r) == "precision reached in round 3; stationarity failed"
    assert stop_policy(replace(r, n=1)) is None
    assert stop_policy(replace(r, precise=False)) is None  # the precision still decides when to stop
    assert stop_policy(replace(r, invalid=())) is None
    checks = [Check("stationarity", False, "…", Advice.FIND_PAUSE), Check("arrivals", False, "…", RunLonger(Longer.SENDS)),
              Check("confidence", False, "…", Advice.LOOSEN_PRECISION), Check("rate", True, "…")]
    assert substantive_failures(checks) == ("stationarity",)
