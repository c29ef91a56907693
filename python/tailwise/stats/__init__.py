"""Statistics of the coordinator: plain functions on numpy arrays, results as small types.

Everything statistical lives here, in one place, and leans on scipy rather than hand-written
formulas (see shared/notes/statistics.md for the references and the pitfalls).
"""

from tailwise.stats.quantiles import Percentile, order_statistic_ranks, percentile_ci, percentiles

__all__ = ["Percentile", "order_statistic_ranks", "percentile_ci", "percentiles"]
