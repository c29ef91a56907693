"""Three verdicts, one rule (issue 32; methodology/verdict.py): every combination of failed checks
against the rule, the exit statuses, and the summary's ``precision`` object — its figures, its
words and its schema."""

from __future__ import annotations

import itertools
from pathlib import Path
import json

import jsonschema
import pytest

from support.schemas import SCHEMA_DIR
from tailwise.cli.exits import EXIT_ERROR, EXIT_IMPRECISE, EXIT_NOT_MEASURABLE, EXIT_OK, EXIT_THRESHOLD
from tailwise.cli.run import exit_code
from tailwise.methodology.checks import Check
from tailwise.methodology.verdict import (INFORMATION, PRECISION, VALIDITY, Context, Verdict, precision_report,
                                          verdict_of)
from tailwise.results.documents.run import Summary, ThresholdResult
from tailwise.spec.precision import Precision
from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile

ALL = (*VALIDITY, *PRECISION, *INFORMATION)


def _checks(failed: set[str]) -> list[Check]:
    return [Check(name, name not in failed, "…") for name in ALL]


def test_every_check_is_placed_once():
    assert len(set(ALL)) == len(ALL)
    from tailwise.methodology.analysis import CHECKS

    assert {name for _, name, _ in CHECKS} == set(ALL)


@pytest.mark.parametrize("k", range(len(ALL) + 1))
def test_the_verdict_of_every_combination_of_failed_checks(k):
    """The table, exhaustively: any validity check failed → not-measurable; else any precision
    check failed → imprecise; else ok (an information check — exclusions — never decides). An
    engine error or an interrupt → not-measurable."""
    for failed in map(set, itertools.combinations(ALL, k)):
        want = (Verdict.NOT_MEASURABLE if failed & set(VALIDITY) else
                Verdict.IMPRECISE if failed & set(PRECISION) else Verdict.OK)
        assert verdict_of(_checks(failed)) is want, failed
        assert verdict_of(_checks(failed), error="the target went away") is Verdict.NOT_MEASURABLE
        assert verdict_of(_checks(failed), interrupted=True) is Verdict.NOT_MEASURABLE


def test_a_check_the_rule_does_not_know_counts_as_validity():
    assert verdict_of([Check("something-new", False, "…")]) is Verdict.NOT_MEASURABLE


@pytest.mark.parametrize("verdict,code", [("ok", EXIT_OK), ("imprecise", EXIT_IMPRECISE),
                                          ("not-measurable", EXIT_NOT_MEASURABLE)])
def test_exit_status_by_verdict_then_threshold_then_error(verdict, code):
    assert (EXIT_OK, EXIT_NOT_MEASURABLE, EXIT_ERROR, EXIT_THRESHOLD, EXIT_IMPRECISE) == (0, 1, 2, 3, 4)
    def summary(error=None, *statuses):
        return Summary.model_construct(verdict=verdict, error=error,
                                       thresholds=[ThresholdResult.model_construct(status=s) for s in statuses])

    assert exit_code(summary(), None) == code
    # A failed or inconclusive threshold wins over any verdict; an engine error over both.
    assert exit_code(summary(None, "inconclusive"), None) == EXIT_THRESHOLD
    assert exit_code(summary("gone"), None) == EXIT_ERROR


# --- the precision object ---------------------------------------------------------------------

def _validate(doc: dict) -> None:
    schema = json.loads((SCHEMA_DIR / "summary.schema.json").read_text())
    sub = {"$schema": schema.get("$schema"), "$defs": schema["$defs"], "$ref": "#/$defs/precision_report"}
    jsonschema.Draft202012Validator(sub).validate(json.loads(json.dumps(doc)))


def _ind(tau: float) -> Independence:
    return Independence(ok=True, tau=tau, n=10_000, n_effective=10_000 / tau, rho_lag1=0.0, lags=1, threshold=0.05,
                        detail="…")


P50 = Percentile(50.0, 20_000.0, 19_500.0, 20_500.0, n_effective=5_000.0, value_low=20_000.0, sampling_low=19_500.0,
                 sampling_high=20_500.0)
CTX = Context(measured_s=20.0, max_time_s=60.0, fixed=False, engine_stalls=120, engine_longest_ns=6_600_000,
              target_stalls=4, target_longest_ns=1_300_000, quieter="use --poll spin")


def test_reached_says_so_and_names_which_percentiles_met_it():
    p99 = Percentile(99.0, 100_000.0, 96_000.0, 104_000.0, n_effective=3_000.0, value_low=100_000.0,
                     sampling_low=96_000.0, sampling_high=104_000.0)
    doc = precision_report([P50, p99], p99, Precision(ci_rel=0.1), {50.0: _ind(1.0), 99.0: _ind(1.5)}, CTX)
    _validate(doc)
    assert doc["reached"] is True and doc["remedy"] is None
    assert [r["met"] for r in doc["percentiles"]] == [True, True]
    assert doc["percentiles"][1] == {"p": 99.0, "width_ns": 8_000.0, "allowed_ns": 10_000.0, "met": True}
    assert doc["detail"].startswith("p99 reached") and "p50/p99 met it" in doc["detail"]


def test_sampling_that_more_time_narrows_asks_for_more_time_with_the_figure():
    # Width 2 × the allowed 10 %: (2)² × 20 s × 1.1 = 88 s, within 4 × 60 s.
    p99 = Percentile(99.0, 100_000.0, 90_000.0, 110_000.0, n_effective=400.0, value_low=100_000.0,
                     sampling_low=90_000.0, sampling_high=110_000.0)
    doc = precision_report([P50, p99], p99, Precision(ci_rel=0.1), {50.0: _ind(1.0), 99.0: _ind(25.0)}, CTX)
    _validate(doc)
    assert doc["reached"] is False
    w = doc["width"]
    assert w["dominated_by"] == "sampling" and w["sampling_ns"] == 20_000.0 and w["tau"] == 25.0
    # Clustered, with stalls of the engine and the built-in server: likely host pauses, with figures.
    assert w["cause"] == "host-pauses" and "120 times" in w["words"] and "6.60 ms" in w["words"]
    assert doc["remedy"] == {"kind": "more-time", "words": "more time with the same load: --max-time 88s (about 88 s)"}
    assert "p50 met it, p99 did not" in doc["detail"] and doc["remedy"]["words"] in doc["detail"]


def test_out_of_reach_falls_back_to_a_lower_percentile_then_a_wider_ci():
    p99 = Percentile(99.0, 100_000.0, 20_000.0, 500_000.0, n_effective=50.0, value_low=100_000.0,
                     sampling_low=20_000.0, sampling_high=500_000.0)
    doc = precision_report([P50, p99], p99, Precision(ci_rel=0.1), {50.0: _ind(1.0), 99.0: _ind(200.0)}, CTX)
    _validate(doc)
    assert doc["remedy"] == {"kind": "lower-percentile", "words": "a lower percentile: p50 met it (--percentile 50)"}
    wide50 = Percentile(50.0, 20_000.0, 10_000.0, 30_000.0, n_effective=50.0, value_low=20_000.0, sampling_low=10_000.0,
                        sampling_high=30_000.0)
    doc = precision_report([wide50, p99], p99, Precision(ci_rel=0.1), {50.0: _ind(1.0), 99.0: _ind(200.0)}, CTX)
    assert doc["remedy"] == {"kind": "wider-ci", "words": "a wider --ci: this run's p99 interval is --ci 480% wide"}


def test_the_clients_stalls_ask_for_a_quieter_host_not_for_time():
    """Sampling alone is within the 10 µs asked; the delayed requests' lower bounds pull the low end
    down by 30 µs: more samples cannot narrow that."""
    p99 = Percentile(99.0, 100_000.0, 66_000.0, 104_000.0, n_effective=3_000.0, value_low=70_000.0,
                     sampling_low=96_000.0, sampling_high=104_000.0)
    doc = precision_report([P50, p99], p99, Precision(ci_ns=10_000.0), {50.0: _ind(1.0), 99.0: _ind(1.0)}, CTX)
    _validate(doc)
    assert doc["width"]["dominated_by"] == "client-stalls" and doc["width"]["widening_ns"] == 30_000.0
    assert doc["width"]["cause"] is None  # τ < 2: not clustered
    assert doc["remedy"] == {"kind": "quieter-host", "words": "use --poll spin"}


def test_an_unsupported_percentile_is_imprecise_with_its_one_sided_bound_and_fixed_runs_ask_for_duration():
    p99 = Percentile(99.0, None, None, None, n_effective=200.0, samples_needed=368, lower_bound=80_000.0)
    ctx = Context(measured_s=10.0, max_time_s=60.0, fixed=True)
    doc = precision_report([P50, p99], p99, Precision(ci_rel=0.1), {50.0: _ind(1.0), 99.0: _ind(50.0)}, ctx)
    _validate(doc)
    assert doc["reached"] is False and doc["percentiles"][1]["width_ns"] is None
    assert "≥ 80.0 µs (no upper bound)" in doc["detail"] and "200 effective" not in doc["detail"]
    assert "n_eff ≈ 200, 368 needed" in doc["width"]["words"] and doc["width"]["cause"] == "queueing"
    # 368 / 200 × 1.2 × 10 s × 1.1 ≈ 25 s of --duration.
    assert doc["remedy"] == {"kind": "more-time", "words": "more time with the same load: --duration 25s (about 25 s)"}


def test_no_precision_asked_is_said_and_never_falls_short():
    p99 = Percentile(99.0, None, None, None, n_effective=200.0, samples_needed=368, lower_bound=80_000.0)
    doc = precision_report([P50, p99], p99, Precision(), {50.0: _ind(1.0), 99.0: _ind(1.0)},
                           Context(measured_s=3.0, max_time_s=60.0, fixed=True))
    _validate(doc)
    assert doc["reached"] is None and doc["width"] is None and doc["remedy"] is None
    assert all(r["met"] is None and r["allowed_ns"] is None for r in doc["percentiles"])
    assert "no precision was asked" in doc["detail"]


@pytest.mark.parametrize("name,css,words", [("ok", "verdict ok", "every check passed"),
                                             ("imprecise", "verdict imprecise", "every interval is sound"),
                                             ("not-measurable", "verdict bad", "cannot be trusted")])
def test_the_report_page_leads_with_the_verdict_in_its_colour(name, css, words):
    """report.html: ok in green, imprecise in amber with what made the width, not-measurable in red."""
    from tailwise.render.report.page import _templates, verdict
    from tailwise.results.documents.run import Summary

    doc = json.loads((Path(__file__).parent / "screens" / "run-ok.json").read_text())  # a real run's
    doc["verdict"] = name
    doc["checks"] = [c | {"ok": c["name"] != "confidence" or name == "ok"} for c in doc["checks"]]
    doc["precision"]["detail"] = "p99 [80 µs, 1.56 ms] is wider than asked"
    summary = Summary.model_validate(doc)
    html = _templates().from_string('{% from "macros.html.j2" import verdict %}{{ verdict(v) }}').render(
        v=verdict(summary))
    assert f'class="{css}"' in html and words in html
    assert ("p99 [80 µs, 1.56 ms] is wider than asked" in html) == (name == "imprecise")
    css_file = (Path(__file__).resolve().parents[2] / "python/tailwise/render/templates/report.css").read_text()
    assert ".verdict.imprecise{" in css_file and "#b00020" not in css_file.split(".verdict.imprecise{")[1].split("}")[0]
