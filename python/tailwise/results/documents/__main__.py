"""Regenerate docs/schema/*.schema.json from the document models: ``python -m tailwise.results.documents [DIR]``
(DIR: docs/schema of this checkout by default)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tailwise.results.documents import calibrate, compare, doctor, run, sweep
from tailwise.results.documents.base import json_schema

FILES = (run.SCHEMA_FILE, sweep.SCHEMA_FILE, compare.SCHEMA_FILE, calibrate.SCHEMA_FILE, doctor.SCHEMA_FILE)


def schemas() -> dict[str, str]:
    """Each generated schema file's name and text."""
    return {name: json.dumps(json_schema(model, schema_id, title), indent=2, ensure_ascii=False) + "\n"
            for name, model, schema_id, title in FILES}


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(__file__).resolve().parents[4] / "docs" / "schema"
    for name, text in schemas().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
