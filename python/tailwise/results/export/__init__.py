"""A results directory, written by one exporter per kind of file (as hyperfine's ``export/``: one
interface, one module per format, one manager that writes them all).

Every exporter writes its files into a stage (``.tailwise-stage`` inside the directory) and
``install_results`` moves the stage in whole, replacing what tailwise wrote there before, summary.json
last: a directory with a summary.json is complete (docs/results.md). The documents (summary.json,
config.json, host.json) are written by ``jsonfiles`` for every command that writes one — run, sweep,
compare and calibrate — and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tailwise.results.export.base import ExportManager, Exporter, RunFiles, install_results

if TYPE_CHECKING:  # the exporters and the models load when a run is written, not before it starts
    import numpy as np

    from tailwise.results.documents.run import Summary
    from tailwise.results.measured import AgentResult

__all__ = ["ExportManager", "Exporter", "RunFiles", "install_results", "write_run"]


def write_run(out_dir: str | Path, summary: Summary, result: AgentResult, used: np.ndarray | None = None,
              samples_format: str = "csv", tag: str = "local") -> list[Path]:
    """One measurement's results directory (docs/results.md): summary.json, the samples (with a
    ``used`` column: 1 where the sample went into the statistics), both histograms, the .hgrm
    percentile distribution, the interval logs (the whole run's, untagged, and each agent's,
    tagged: ``tag`` for the in-process one), a packet run's CSVs, the config and the host facts."""
    from tailwise.results.export import histograms, intervals, jsonfiles, packets, samples

    manager = ExportManager((samples.SamplesFile(), histograms.HdrFiles(), histograms.Hgrm(), intervals.IntervalLogs(),
                             packets.PacketsCsv(), packets.PacketHistCsv(), jsonfiles.SUMMARY, jsonfiles.CONFIG,
                             jsonfiles.HOST))
    return manager.write(out_dir, RunFiles(summary, result, used, samples_format, tag))
