"""The warnings in words (tailwise/warning.py holds them as values): the one place their text is
written, composed when shown, as hyperfine's ``output/warnings.rs`` writes its own."""

from __future__ import annotations

from rich.text import Text

from tailwise.render.output import err_console, fold, is_quiet
from tailwise.warning import (HostKnob, JournalGivenUp, SamplesNotKept, ServerShares, SpinnersShare, TimeCapped,
                              AnyWarning)

#: Where the disk problems point.
FREE_SPACE = "free space where --out points"


def words(w: AnyWarning) -> tuple[str, str]:
    """A warning's cause and remedy, each one clause."""
    match w:
        case TimeCapped(env, value, cap_s):
            return f"{env}={value} shortens this run to {cap_s:g} s", f"unset {env} to measure as asked"
        case ServerShares(spinning, workers, cores):
            return (f"{spinning} spinning engine thread(s) and {workers} server worker(s) share {cores} CPUs",
                    "the server sleeps between requests and the tail includes preemption: use fewer "
                    "--threads/--workers or --poll block")
        case SpinnersShare(spinning, cores):
            return f"{spinning} spinning engine threads on {cores} CPUs", f"use --threads {cores} or fewer, or --poll block"
        case HostKnob(name, detail, fix):
            return f"host {name}: {detail}", f"{fix} (see `tailwise doctor`: {name})"
        case SamplesNotKept(out, why):
            return (f"every sampled request could not be kept on disk during the run ({why}): {out}'s samples file "
                    "holds the statistics' rows only", FREE_SPACE)
        case JournalGivenUp(out, why):
            return (f"what the agents sent could not be kept on disk as it came ({why}): the run went on, {out}'s "
                    "samples file holds the statistics' rows only, and had the coordinator died it would have lost "
                    "the run", FREE_SPACE)
    raise TypeError(f"not a warning: {w!r}")


def warn(w: AnyWarning) -> None:
    """A warning on stderr, folded to its width (continuation lines indented); nothing with --quiet."""
    if not is_quiet():
        cause, remedy = words(w)
        fold(err_console, Text.assemble(("warning:", "yellow"), f" {cause} — {remedy}"))
