"""`Precision`: what the user asks of the statistics — the percentile whose interval must be this
narrow, at this confidence, within this time — the methodology's goal (methodology/analysis.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tailwise.spec.units import parse_time_ns
from tailwise.spec.workload import DEFAULTS
from tailwise.stats import DEFAULT_PERCENTILES

if TYPE_CHECKING:
    from tailwise.spec.load import LoadSpec


@dataclass(frozen=True)
class Precision:
    """What the user asks for: a percentile, the CI width (absolute or relative), confidence; and
    the time budget and the warm-up bound; and the percentiles to report (``percentile`` among them).
    The defaults are the settings' (spec/workload.py `DEFAULTS`)."""

    percentile: float = float(DEFAULTS["percentile"])
    ci_ns: float | None = None
    ci_rel: float | None = None
    confidence: float = float(DEFAULTS["confidence"])
    max_time_s: float = parse_time_ns(DEFAULTS["max_time"]) / 1e9
    warmup_ns: int = parse_time_ns(DEFAULTS["warmup"])
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    #: Packet mode: the loss ratio the loss check allows (--max-loss); None for other protocols.
    max_loss: float | None = None

    def open_ended(self, spec: LoadSpec) -> LoadSpec:
        """``spec`` as the methodology runs it: its schedule as long as the time budget, the rounds
        deciding when it ends."""
        return replace(spec, duration_ns=int(self.max_time_s * 1e9))

    @property
    def reported(self) -> list[float]:
        """The percentiles a summary reports: those asked and the one whose CI must meet --ci."""
        return sorted({*self.percentiles, self.percentile})
