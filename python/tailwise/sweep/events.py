"""What a running sweep tells its caller, as values: the caller's callback shows them (render/sweep.py
turns them into lines), so the sweep itself prints nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailwise.results.documents.sweep import Point
from tailwise.warning import AnyWarning


@dataclass(frozen=True)
class Resuming:
    """A resumed sweep read back the points its directory held."""

    out: Path
    n_points: int


@dataclass(frozen=True)
class PointDone:
    """A point measured and written whole."""

    #: The point as the sweep's summary lists it (search.point_row).
    row: Point
    #: Measurements so far, every attempt counted.
    n_done: int
    elapsed_s: float
    #: The attempt of the same load measured next (its CI was inconclusive), or None.
    again: int | None
    #: At most how long the points left take; None when none is left.
    eta_s: float | None


@dataclass(frozen=True)
class Warned:
    """A warning: about the machine (measure/point.py `prepare`), given once before the first point;
    or about the disk, after a point (`Measurement.file_problems`)."""

    warning: AnyWarning


#: What `Sweep` emits.
Event = Resuming | PointDone | Warned
