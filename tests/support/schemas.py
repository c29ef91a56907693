"""The JSON schemas of docs/schema, for tests that check what a command wrote against its contract."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"


def assert_valid(doc: dict, schema: str) -> None:
    """``doc`` (as JSON would carry it) validates against docs/schema/<schema>.schema.json."""
    contract = json.loads((SCHEMA_DIR / f"{schema}.schema.json").read_text())
    jsonschema.Draft202012Validator(contract).validate(json.loads(json.dumps(doc)))
