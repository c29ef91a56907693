"""Latency per kind of request (issue 36): gets and sets (memcached, Redis), or each request of an
http:// requests file, with their own percentiles beside the whole run's (mutilate reports gets
and sets apart).

Each kind's percentiles are the whole run's computation (methodology/steps.estimate) on the
kind's samples in the same window: the same censoring, the same lower bounds for the requests the
client delayed (an ``INFLATED`` or ``ENGINE_STALL`` request of a kind keeps the interval the whole
run gives it), the same effective sample size from the kind's own sequence, and a percentile the
kind's samples are too few to bound is unsupported exactly as the whole run's is (no value, the
samples it needs, its one-sided lower bound). They are information: the verdict and every check
stay on the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise.methodology.steps import estimate
from tailwise.results.rows import Flag
from tailwise.spec.load import LoadSpec
from tailwise.spec.precision import Precision
from tailwise.stats.quantiles import Percentile

#: Protocols whose requests are gets and sets (the workload's --mix).
KEY_VALUE = ("memcached", "memcached+binary", "memcached+udp", "redis")
#: How a sample's kind is read: its ``SET`` flag, or its ``request`` index.
BY_SET, BY_REQUEST = "set", "request"


@dataclass(frozen=True)
class Kinds:
    """A run's kinds of request, named, and how a sample says which it is (``by``)."""

    names: tuple[str, ...]
    by: str

    def masks(self, samples: np.ndarray) -> list[np.ndarray]:
        """Per kind, which of ``samples`` (``SAMPLE_DTYPE``) are of it. Rows without the field
        (an engine before issue 36) are all of the first kind."""
        if self.by == BY_SET:
            is_set = (samples["flags"].astype(np.int64) & int(Flag.SET)) != 0
            return [~is_set, is_set]
        names = samples.dtype.names or ()
        index = samples["request"] if "request" in names else np.zeros(len(samples), np.uint16)
        return [index == i for i in range(len(self.names))]


def kinds_of(spec: LoadSpec) -> Kinds | None:
    """The kinds of a run: "get" and "set" when a key-value workload mixes them; each request's
    "METHOD path" (with " #INDEX" after a name two requests share) for several http:// requests;
    None with one kind."""
    scheme = spec.protocol.get("scheme")
    if scheme in KEY_VALUE and 0.0 < spec.workload.set_fraction < 1.0:
        return Kinds(("get", "set"), BY_SET)
    requests = spec.protocol.get("requests") or []
    if scheme == "http" and len(requests) > 1:
        names = [f"{r['method']} {r['path']}" for r in requests]
        names = [f"{n} #{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]
        return Kinds(tuple(names), BY_REQUEST)
    return None


@dataclass(frozen=True)
class KindLatency:
    """One kind's figures: its samples in the window, their share of the window's, its percentiles."""

    name: str
    count: int
    share: float
    percentiles: list[Percentile]

    def as_json(self) -> dict:
        return {"name": self.name, "share": self.share, "count": self.count,
                "percentiles": [p.as_json() for p in self.percentiles]}


def by_kind(kinds: Kinds, samples: np.ndarray, used: np.ndarray, lat: np.ndarray, censored: np.ndarray,
            lower_used: np.ndarray | None, precision: Precision) -> list[KindLatency]:
    """Each kind's percentiles over its samples among ``used`` (the window the whole run's came
    from): ``lat``, ``censored`` over every sample, ``lower_used`` (the delayed requests' lower
    bounds, None: none) over the used ones, as methodology/steps.estimate reads them."""
    total = int(used.sum())
    out = []
    for name, mask in zip(kinds.names, kinds.masks(samples)):
        mine = mask[used]
        lower = None if lower_used is None else lower_used[mine]
        est = estimate(lat[used][mine], censored[used][mine], lower, precision)
        count = int(mine.sum())
        out.append(KindLatency(name, count, count / total if total else 0.0, est.percentiles))
    return out
