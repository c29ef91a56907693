"""What `tailwise run` prints around its summary: the thresholds judged, where the results went,
and how a run that a signal stopped ended."""

from __future__ import annotations

from tailwise.render.output import err_console


def print_thresholds(rows: list[dict]) -> None:
    for t in rows:
        colour = {"pass": "green", "fail": "red"}.get(t["status"], "yellow")
        err_console.print(f"threshold {t['threshold']}: [{colour}]{t['status']}[/] — {t['detail']}")


def print_written(out: str) -> None:
    err_console.print(f"results written to {out}/")


def print_signalled(out: str | None, signal_name: str, interrupted: bool, elapsed_ns: float) -> None:
    """A signal came: during the measurement (``interrupted``: it stopped there) or after it."""
    kept = f"results kept in {out}/" if out else "nothing kept on disk (--out DIR keeps the results)"
    if interrupted:
        err_console.print(f"tailwise: interrupted after {elapsed_ns / 1e9:.1f} s of measuring ({signal_name}); {kept}")
    else:
        err_console.print(f"tailwise: {signal_name} came after the measurement ended; it is complete; {kept}")


def print_run_error(error: str, out: str | None) -> None:
    err_console.print(f"tailwise: {error}" + (f" (results so far in {out}/)" if out else ""))
