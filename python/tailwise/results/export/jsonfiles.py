"""The JSON documents of a results directory: summary.json (a run's, a sweep's, a comparison's or a
calibration's), config.json and host.json. Each is written atomically (files.write_json) from its
model, and only here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tailwise.results.documents.base import Doc
from tailwise.results.export.base import RunFiles
from tailwise.results.files import write_json


@dataclass(frozen=True)
class JsonFile:
    """One JSON document: ``of`` picks it from a run (``write``); ``write_doc`` writes any document
    of its name (a sweep's, a comparison's, a calibration's)."""

    name: str
    of: Callable[[RunFiles], Doc | dict]

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        return [self.write_doc(directory, self.of(run))]

    def write_doc(self, directory: str | Path, doc: Doc | dict) -> Path:
        path = Path(directory) / self.name
        write_json(path, doc.to_json() if isinstance(doc, Doc) else doc)
        return path


SUMMARY = JsonFile("summary.json", lambda run: run.summary)
CONFIG = JsonFile("config.json", lambda run: run.summary.config)
HOST = JsonFile("host.json", lambda run: run.summary.host)
