"""The comparison of runs (``tailwise.compare/1``): ``tailwise compare --json`` and summary.json
under its --out.

One definition: render/compare.compare_doc writes it through these models, and
docs/schema/compare.schema.json is generated from them (``python -m tailwise.results.documents``).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Doc, F, Int, Num
from tailwise.results.documents.run import Tool
from tailwise.results.files import COMPARE_SCHEMA


class ComparedRun(Doc):
    dir: str = F(description="the run directory as given on the command line")
    label: str = F(description="--label, or the directory's name")
    target: str | None = F(description="the run summary's target")
    verdict: str | None = F(description="the run's verdict: ok, imprecise or not-measurable")
    confidence: Num | None = F(None, description="confidence level of the run's intervals", exclusiveMinimum=0, exclusiveMaximum=1)
    target_rps: Num | None = None
    achieved_rps: Num | None = None
    service: str | None = F(None, description="the run's --service setting")
    started_at: str | None = None


class RunPercentile(Doc):
    value_ns: Num | None
    low_ns: Num | None = F(description="lower bound of the confidence interval")
    high_ns: Num | None = F(description="upper bound of the confidence interval")
    censored: bool = F(None, description="the value is a lower bound (unanswered requests)")
    samples_needed: Int | None = F(None, description="effective samples the percentile would need, when it has no value")


class Difference(Doc):
    run: Int = F(None, description="index in runs of the run compared", minimum=1)
    label: str = F(None, description="that run's label")
    vs: Int = F(description="index in runs of the run it is compared with (the first: 0)", minimum=0)
    diff_ns: Num | None = F(description="value of the run minus value of the first; null when either is null")
    diff_rel: Num | None = F(description="diff_ns as a fraction of the first run's value (0.25 = 25 % higher)")
    ci_overlap: bool | None = F(description="true when the two confidence intervals share a point; false when they are disjoint, i.e. the difference is significant at the intervals' level; null when a bound is missing, or when either run is neither ok nor imprecise (not judged: see note)")


class ComparedPercentile(Doc):
    p: Num = F(description="the percentile, in percent", exclusiveMinimum=0, maximum=100)
    runs: list[RunPercentile] = F(description="One entry per run, in the order of the top-level runs; value and bounds null where the run's sample does not support the percentile.")
    diffs: list[Difference] = F(description="One entry per run after the first: that run minus the first.")


class Comparison(Doc):
    """The output of `tailwise compare DIR DIR ... --json` (and summary.json under its --out): each run's reported latency percentiles with their confidence intervals, the difference of each later run to the first, and whether the two intervals overlap. Written by python/tailwise/render/compare.py compare_doc through the models of python/tailwise/results/documents/compare.py, which this schema is generated from. Versioning: later versions of schema 1 add fields, never rename or retype one, so additional properties are allowed everywhere. A value that is unknown is null."""

    schema_: Literal["tailwise.compare/1"] = F(alias="schema")
    tool: Tool
    runs: list[ComparedRun] = F(description="The compared run directories, in the order given; the first is the baseline every difference is taken to.", minItems=2)
    percentiles: list[ComparedPercentile] = F(description="One entry per percentile any run reports, ascending.")
    note: str = F(None, description="how to read ci_overlap")


SCHEMA_FILE = ("compare.schema.json", Comparison, "urn:tailwise:schema:compare:1",
               f"tailwise comparison of runs ({COMPARE_SCHEMA})")
