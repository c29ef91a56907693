"""Issue 20: each document is one set of typed models that writes both the JSON and its schema.

docs/schema/summary.schema.json, sweep.schema.json and compare.schema.json are generated from the models; these tests
fail when the committed files and the models disagree, and hold the models to writing values as
given (JSON's types are the contract) and only the keys they declare.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from tailwise.results.documents.__main__ import schemas
from tailwise.results.documents.base import STRICT, amend
from tailwise.results.documents.run import Counters, Summary, Warmup, Window

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_the_schema_files_are_the_models(name):
    committed = (SCHEMA_DIR / name).read_text()
    assert committed == schemas()[name], (
        f"docs/schema/{name} and the models of python/tailwise/results/documents disagree: "
        "regenerate it with `python -m tailwise.results.documents` (never edit it by hand)")


def test_values_are_written_as_given():
    """An int stays an int and a float a float (a p99 of 1234.0 is written 1234.0, as before);
    numpy scalars become Python's; NaN is left to files.dumps (null)."""
    w = Warmup.model_validate({"span_s": 1, "bound_s": np.float64(0.5), "max_share": 0.1, "samples": np.int64(7),
                               "p99_ns": 1234.0})
    out = w.to_json()
    assert out == {"span_s": 1, "bound_s": 0.5, "max_share": 0.1, "samples": 7, "p99_ns": 1234.0}
    assert [type(out[k]) for k in ("span_s", "bound_s", "samples", "p99_ns")] == [int, float, int, float]
    assert np.isnan(Warmup.model_validate(w.to_json() | {"span_s": float("nan")}).to_json()["span_s"])


def test_absent_keys_stay_absent():
    """A field that may be absent (the window's every-request figures without interval
    histograms) is written only when it was given."""
    assert Window.model_validate({"start_ns": 0, "end_ns": 10}).to_json() == {"start_ns": 0, "end_ns": 10}


def test_undeclared_keys_are_kept_but_refused_in_strict_validation():
    """Readers allow later fields (schema 1), so an undeclared key is kept rather than lost; a
    strict validation (tests of real documents) refuses it, so that no writer adds one silently."""
    doc = {"span_s": 1.0, "bound_s": 0.5, "max_share": 0.1, "samples": 7, "p99_ns": None, "later_field": 3}
    assert Warmup.model_validate(doc).to_json()["later_field"] == 3
    with pytest.raises(ValidationError, match="later_field"):
        Warmup.model_validate(doc, context=STRICT)
    # A map of names (counters) takes any name, strictly too.
    counts = dict.fromkeys(Counters.model_fields, 0) | {"a_new_counter": 1}
    assert Counters.model_validate(counts, context=STRICT).to_json()["a_new_counter"] == 1


def test_amend_sets_declared_fields_only():
    doc: dict = {}
    amend(doc, Summary, thresholds=[], sweep={"index": 1, "rate_rps": 2e3, "grid_size": 3})
    assert doc == {"thresholds": [], "sweep": {"index": 1, "rate_rps": 2e3, "grid_size": 3}}
    with pytest.raises(KeyError):
        amend(doc, Summary, not_a_field=1)
    with pytest.raises(ValidationError):
        amend(doc, Summary, thresholds=[{"threshold": "p99<1ms"}])  # a threshold without its verdict
