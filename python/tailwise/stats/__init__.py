"""Statistics of the coordinator: plain functions on numpy arrays, results as small types.

Everything statistical lives here, in one place, and leans on scipy and statsmodels rather than
hand-written formulas; each module's docstring derives its method and cites its references.

* quantiles: percentiles with distribution-free intervals, on every sample, widened to the
  effective sample size; censored samples; how many samples a percentile needs.
* independence: the integrated autocorrelation time of a percentile's indicator.
* arrivals: the schedule, the sends against it, the late sends.
* stationarity: the level, and transients holding the tail.
* histogram: HDR histograms as bucket arrays; model: the queueing model's ground truth.

Import the modules themselves: this package loads nothing. And each module imports scipy or
statsmodels inside the functions that call them (~1 s to load here): `tailwise model`, `report` and
`compare` do not pay for them, and a run's first request does not wait for them (issue 37).
"""

#: The percentiles a summary reports unless ``percentiles`` (--percentiles) says otherwise.
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9, 99.99)
#: A packet run's (udp+flow://), to p99.9999 as KBNets'17 reports a network function's tail.
PACKET_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 99.9999)
