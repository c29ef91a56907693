"""Statistics of the coordinator: plain functions on numpy arrays, results as small types.

Everything statistical lives here, in one place, and leans on scipy and statsmodels rather than
hand-written formulas (see shared/notes/statistics.md for the references and the pitfalls).

* quantiles: percentiles with distribution-free intervals, on every sample, widened to the
  effective sample size; censored samples; how many samples a percentile needs.
* independence: the integrated autocorrelation time of a percentile's indicator.
* arrivals: the schedule, the sends against it, the late sends.
* stationarity: the level, and transients holding the tail.
"""

from tailwise.stats.arrivals import ArrivalFit, arrival_fit
from tailwise.stats.independence import Independence, independence
from tailwise.stats.quantiles import (
    Percentile,
    estimate_percentile,
    order_statistic_ranks,
    percentile_ci,
    percentiles,
    samples_needed,
)
from tailwise.stats.stationarity import Stationarity, stationarity

__all__ = [
    "ArrivalFit",
    "Independence",
    "Percentile",
    "Stationarity",
    "arrival_fit",
    "estimate_percentile",
    "independence",
    "order_statistic_ranks",
    "percentile_ci",
    "percentiles",
    "samples_needed",
    "stationarity",
]
