"""The exit statuses of every command (README's "Reading the result", docs/run.md's "Exit status"), and how a measuring command ends
on a stop signal that came before its first request."""

from __future__ import annotations

import sys
from typing import Callable

EXIT_OK, EXIT_NOT_MEASURABLE, EXIT_ERROR, EXIT_THRESHOLD, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Valid, but the asked percentile's interval is wider than --ci (the verdict ``imprecise``).
EXIT_IMPRECISE = 4
#: A run's exit status by its verdict (an error, a threshold and a signal come first: cli/run.py).
VERDICT_EXIT = {"ok": EXIT_OK, "imprecise": EXIT_IMPRECISE, "not-measurable": EXIT_NOT_MEASURABLE}


def measuring(body: Callable[[], int]) -> int:
    """A measuring command's body (`run`, `sweep`) with SIGINT, SIGTERM and SIGHUP handled from its
    first line (signals.py). A signal before the first request ends it here, in one line, with 128 +
    the signal: raised further, typer would turn that KeyboardInterrupt into a silent exit 130."""
    from tailwise import signals

    with signals.handled():
        try:
            return body()
        except signals.Interrupted as e:
            print(f"tailwise: interrupted ({e}) before the first request was sent; nothing was measured",
                  file=sys.stderr)
            return e.exit_code
