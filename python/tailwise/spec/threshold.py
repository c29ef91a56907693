"""Latency thresholds on percentiles: ``--threshold 'p99<200us'`` (a CI gate) and ``--slo`` (what a
sweep searches for).

A threshold is judged on the percentile's confidence interval, never on the point estimate alone
(Lancet §4.3 reports percentiles with their CIs for this reason): it **passes** only when the whole
interval meets it — the upper bound for ``<``/``<=``, the lower bound for ``>``/``>=`` — it
**fails** when the whole interval misses it, and it is **inconclusive** when the interval straddles
the limit or the run could not bound the percentile at all (too few samples, an unbounded CI).
A percentile the samples cannot bound may still have a one-sided lower bound (``lower_bound_ns``,
stats/quantiles.py, at ``1 − α/2`` like each end of the interval): judged as the interval's low
end with no high end, so ``p99.99<1ms`` fails when the samples show ``p99.99 ≥ 2 ms``.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tailwise.errors import InputError
from tailwise.spec.units import fmt_ns
from tailwise.spec.units import parse_time_ns

if TYPE_CHECKING:  # the models load after the first request (measure/point._drive)
    from tailwise.results.documents.latency import Percentile
    from tailwise.results.documents.run import ThresholdResult

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_FORM = re.compile(r"^\s*p(\d+(?:\.\d+)?)\s*(<=|>=|<|>)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Threshold:
    p: float
    op: str
    limit_ns: int
    text: str

    @classmethod
    def parse(cls, text: str, *, what: str = "--threshold") -> Threshold:
        m = _FORM.match(text)
        if not m:
            raise InputError(f"{what} {text!r} is not a percentile limit",
                             f"write PERCENTILE OP TIME, e.g. {what} 'p99<200us' or {what} 'p99.9<=1ms'")
        p = float(m.group(1))
        if not 0.0 < p < 100.0:
            raise InputError(f"{what} {text!r}: p{m.group(1)} is outside (0, 100)", f"write e.g. {what} 'p99<200us'")
        limit = parse_time_ns(m.group(3), what=what, unit_required=True)
        return cls(p=p, op=m.group(2), limit_ns=limit, text=f"p{m.group(1)}{m.group(2)}{m.group(3)}")

    @property
    def upper(self) -> bool:
        """An upper limit on latency (``<``, ``<=``)."""
        return self.op in ("<", "<=")

    def judge(self, low_ns: float | None, high_ns: float | None) -> str:
        """pass / fail / inconclusive for a percentile's confidence interval [low, high]; an
        unknown bound (null: the sample cannot bound it) leaves the question open."""
        ok = _OPS[self.op]
        near, far = (high_ns, low_ns) if self.upper else (low_ns, high_ns)
        if near is not None and ok(near, self.limit_ns):
            return PASS
        if far is not None and not ok(far, self.limit_ns):
            return FAIL
        return INCONCLUSIVE

    def evaluate(self, percentiles: list[Percentile]) -> ThresholdResult:
        """This threshold against a summary's ``latency.percentiles`` (documents/latency.Percentile, read
        by attribute): the verdict, the interval it was judged on, and one line that says which it
        was and why."""
        row = next((x for x in percentiles if abs(x.p - self.p) < 1e-9), None)
        low, value, high = (row.low_ns, row.value_ns, row.high_ns) if row else (None, None, None)
        floor = row.lower_bound_ns if row is not None and low is None and high is None else None
        status = self.judge(low if floor is None else floor, high)
        ci = f"[{fmt_ns(low)}, {fmt_ns(high)}]"
        if row is None:
            detail = f"p{self.p:g} was not measured"
        elif floor is not None and status != INCONCLUSIVE:
            detail = (f"p{self.p:g} cannot be bounded from above, but its samples show p{self.p:g} ≥ {fmt_ns(floor)} "
                      f"(one-sided), which {'meets' if status == PASS else 'misses'} {self.text}")
        elif status == PASS:
            detail = f"p{self.p:g} {fmt_ns(value)}, CI {ci} meets {self.text} as a whole"
        elif status == FAIL:
            detail = f"p{self.p:g} {fmt_ns(value)}, CI {ci} misses {self.text} as a whole"
        elif low is None or high is None:
            detail = f"p{self.p:g} has no bounded CI {ci}: the run cannot tell whether {self.text} holds"
        else:
            detail = f"p{self.p:g} {fmt_ns(value)}, CI {ci} straddles {fmt_ns(self.limit_ns)}: measure longer or ask a narrower --ci"
        from tailwise.results.documents.run import ThresholdResult

        return ThresholdResult(threshold=self.text, p=self.p, op=self.op, limit_ns=self.limit_ns, status=status,
                               value_ns=value, low_ns=low, high_ns=high, detail=detail)


def parse_all(texts: list[str] | None, reported: set[float], *, what: str = "--threshold") -> list[Threshold]:
    """Parse each; refuse before the run a percentile the run will not report."""
    out = []
    for text in texts or ():
        t = Threshold.parse(text, what=what)
        if not any(abs(t.p - p) < 1e-9 for p in reported):
            listed = ", ".join(f"p{p:g}" for p in sorted(reported))
            raise InputError(f"{what} {text!r}: p{t.p:g} is not among the percentiles the run reports ({listed})",
                             f"report it: --percentiles {','.join(f'{p:g}' for p in sorted(reported | {t.p}))}")
        out.append(t)
    return out
