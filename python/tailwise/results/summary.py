"""The summary of a run (schema ``tailwise.summary/1``): its histograms read as Java HdrHistogram
reads them, what is added to it after it is built (``amend``), and a results directory's summary
read back as its model (``load_summary``). The files of a results directory: results/export/.

Field names are a contract: later versions add fields, never rename them. Unknown values are
``null``, never 0 and never NaN (which is not JSON).
"""

from __future__ import annotations

import base64
from pathlib import Path

from hdrh.histogram import HdrHistogram
from pydantic import ValidationError

from tailwise import _core
from tailwise.errors import InputError
from tailwise.results.documents import base as documents_base
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import SweepSummary
from tailwise.results.files import RUN_SCHEMA, load_summary_json
from tailwise.stats import DEFAULT_PERCENTILES
from tailwise.stats.histogram import java_rank

#: A timing-loop iteration longer than this counts as a stall (the engine's own: engine/thread.rs).
STALL_NS: int = _core.STALL_NS


def decode_histogram(raw: bytes) -> HdrHistogram:
    """HdrHistogram V2 compressed bytes (from the engine) → an hdrh histogram."""
    return HdrHistogram.decode(base64.b64encode(raw))


def values_at_percentiles(h: HdrHistogram, ps) -> list[int]:
    """Percentiles p (0–100) of a histogram as Java HdrHistogram's ``getValueAtPercentile`` reads
    them (and its log processor, and stats/histogram.py): the highest value equivalent to the
    ⌈p/100 · N⌉-th smallest (the lowest for p = 0); 0 when empty. hdrh 0.10 rounds that rank to the
    nearest instead, which can give the value one request lower: a percentile better than the
    requests measured. One walk of the histogram for all of them."""
    n = h.get_total_count()
    ranks = [java_rank(p, n) for p in ps]
    values = [0] * len(ps)
    pending = sorted(range(len(ps)), key=lambda i: ranks[i])
    if n == 0:
        return values
    for item in h.get_recorded_iterator():
        while pending and item.total_count_to_this_value >= ranks[pending[0]]:
            i = pending.pop(0)
            v = item.value_iterated_to
            values[i] = h.get_lowest_equivalent_value(v) if ps[i] == 0 else h.get_highest_equivalent_value(v)
        if not pending:
            break
    return values


def value_at_percentile(h: HdrHistogram, p: float) -> int:
    """One percentile, as ``values_at_percentiles`` reads it."""
    return values_at_percentiles(h, [p])[0]


def hist_json(h: HdrHistogram, ps=DEFAULT_PERCENTILES) -> dict:
    n = h.get_total_count()
    if n == 0:
        return {"count": 0, "min_ns": None, "mean_ns": None, "max_ns": None,
                "percentiles": [{"p": p, "value_ns": None} for p in ps]}
    return {
        "count": n,
        "min_ns": h.get_min_value(),
        "mean_ns": h.get_mean_value(),
        "max_ns": h.get_max_value(),
        "percentiles": [{"p": p, "value_ns": v} for p, v in zip(ps, values_at_percentiles(h, ps))],
    }


def hist_params() -> dict:
    """The HDR histogram's parameters, so that latency.hdr can be read back exactly."""
    lowest, highest, digits = _core.histogram_params()
    return {"unit": "ns", "lowest_ns": lowest, "highest_ns": highest, "significant_digits": digits}


def amend(summary: Summary, **fields) -> Summary:
    """Add to a built summary what is known only after it (``target_stats``, ``thresholds``,
    ``sweep``, ``agents``), each validated as the model declares it."""
    return documents_base.amend(summary, **fields)


def load_summary(directory: str | Path) -> Summary | SweepSummary:
    """summary.json of a run or sweep directory as its model (documents/run.Summary or
    documents/sweep.SweepSummary): what render, sweep and compare read, by attribute. InputError
    (one line, naming the first field that does not fit) when there is none or it is not one."""
    doc = load_summary_json(directory)
    model = Summary if doc["schema"] == RUN_SCHEMA else SweepSummary
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the document"
        raise InputError(f"{Path(directory) / 'summary.json'}: {where}: {first['msg'].lower()}",
                         "give the --out directory of a complete tailwise run or sweep, as tailwise wrote it") from None
