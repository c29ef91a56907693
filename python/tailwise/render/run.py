"""What `tailwise run` prints around its summary: the thresholds judged, where the results went,
and how a run that a signal stopped ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from tailwise.render.output import TimeUnit, err_console, fold, in_unit

if TYPE_CHECKING:  # read by attribute: the models load after the first request (measure/point._drive)
    from tailwise.results.documents.run import ThresholdResult


def print_thresholds(rows: list[ThresholdResult], unit: TimeUnit | None = None) -> None:
    """Each threshold judged, folded to stderr's width; its times in the summary's ``unit``."""
    for t in rows:
        colour = {"pass": "green", "fail": "red"}.get(t.status, "yellow")
        detail = in_unit(t.detail, unit) if unit else t.detail
        fold(err_console, f"threshold {escape(t.threshold)}: [{colour}]{t.status}[/] — {escape(detail)}")


def print_written(out: str) -> None:
    fold(err_console, f"results written to {out}/", markup=False)


def print_signalled(out: str | None, signal_name: str, interrupted: bool, elapsed_ns: float) -> None:
    """A signal came: during the measurement (``interrupted``: it stopped there) or after it."""
    kept = f"results kept in {out}/" if out else "nothing kept on disk (--out DIR keeps the results)"
    if interrupted:
        fold(err_console, f"tailwise: interrupted after {elapsed_ns / 1e9:.1f} s of measuring ({signal_name}); {kept}",
             markup=False)
    else:
        fold(err_console, f"tailwise: {signal_name} came after the measurement ended; it is complete; {kept}",
             markup=False)


def print_run_error(error: str, out: str | None) -> None:
    err_console.print(f"tailwise: {error}" + (f" (results so far in {out}/)" if out else ""), markup=False,
                      highlight=False, soft_wrap=True)  # an error: one line, as every error
