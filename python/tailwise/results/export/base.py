"""What every exporter shares: the measurement it writes from (``RunFiles``), the interface
(``Exporter``), the manager that writes them all into a stage (``ExportManager``), and the one
function that installs a results directory (``install_results``)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tailwise.results.files import STAGE, check_out_dir, remove_entry, result_entries
from tailwise.results.measured import AgentResult

if TYPE_CHECKING:  # the models load after the first request (measure/point._drive)
    from tailwise.results.documents.run import Summary


@dataclass(frozen=True)
class RunFiles:
    """What one measurement's results directory is written from: its summary, the engine's result
    (rows, histograms, interval histograms), which rows the statistics used (``used``: None when
    not known row by row), the samples file's format, and the in-process agent's interval-log tag."""

    summary: Summary
    result: AgentResult
    used: np.ndarray | None = None
    samples_format: str = "csv"
    tag: str = "local"


class Exporter(Protocol):
    """One kind of file of a results directory: writes it (or them, or none for a run without
    any) into ``directory`` and returns the paths written."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]: ...


def install_results(stage: Path, out: Path) -> None:
    """Move a staged results directory into ``out``, replacing whole what tailwise wrote there
    before; summary.json last, so that a directory with one is complete. The one function that
    installs a results directory."""
    for p in result_entries(out):
        if p != stage:
            remove_entry(p)
    names = sorted((p.name for p in stage.iterdir()), key=lambda n: n == "summary.json")
    for n in names:
        (stage / n).replace(out / n)
    stage.rmdir()


@dataclass(frozen=True)
class ExportManager:
    """The exporters of a results directory, in the order they write (summary.json among them:
    moved in last whatever its place, ``install_results``)."""

    exporters: tuple[Exporter, ...]

    def write(self, out_dir: str | Path, run: RunFiles) -> list[Path]:
        """Write every file into a stage inside ``out_dir`` and install it whole (files.check_out_dir
        made sure it can be written). Whether an existing directory may be replaced is the
        command's to decide (--force). Returns the paths, as installed."""
        final = check_out_dir(out_dir)
        stage = final / STAGE
        if stage.exists():
            shutil.rmtree(stage)  # a stage left by a write that was killed
        stage.mkdir()
        written: list[Path] = []
        for exporter in self.exporters:
            written += exporter.write(stage, run)
        install_results(stage, final)
        return [final / p.name for p in written]
