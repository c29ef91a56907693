"""What every document model shares: the base class, JSON's number types, and the JSON schema
written from the models (docs/schema/*.schema.json are generated from them, never edited).

A model validates what the code hands it and keeps every value as given (an int stays an int, a
float a float: JSON's types are the contract), and writes back only the keys that were set, so a
field that may be absent (``Field(None)`` on a type without null) stays absent. Keys no model
declares are kept too (schema 1: later versions add fields, so readers allow them); tests validate
real documents with ``STRICT`` to hold the writers to the declared fields.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationInfo, WithJsonSchema, model_validator
from pydantic.json_schema import GenerateJsonSchema

#: Validation context that refuses keys a model does not declare (tests: ``Model.model_validate(doc, context=STRICT)``).
STRICT = {"strict_keys": True}
UTC_TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _plain(v: Any) -> Any:
    """numpy scalars as Python's, as files.dumps writes them."""
    return v.item() if isinstance(v, np.generic) else v


#: JSON's integer (an int, or a float without fraction as JSON Schema counts it) and number: kept as given.
Int = Annotated[int | float, BeforeValidator(_plain), WithJsonSchema({"type": "integer"})]
Num = Annotated[int | float, BeforeValidator(_plain), WithJsonSchema({"type": "number"})]
#: A count in a map of names (counters, causes).
Count = Annotated[int | float, BeforeValidator(_plain), WithJsonSchema({"type": "integer", "minimum": 0})]
UtcTime = Annotated[str, WithJsonSchema({"type": "string", "pattern": UTC_TIME})]


def F(*default: Any, description: str | None = None, alias: str | None = None, **schema: Any) -> Any:
    """A field with its description and JSON Schema keywords (minimum, …) that only the schema
    carries: the writer never refuses a value the contract does not promise to hold."""
    return Field(*default, description=description, alias=alias, json_schema_extra=schema or None)


class Doc(BaseModel):
    """One object of a document."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)
    #: Keys beyond the declared ones are part of the contract (a map of names: counters, causes).
    open_keys: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _declared_only(cls, data: Any, info: ValidationInfo) -> Any:
        if info.context and info.context.get("strict_keys") and isinstance(data, dict) and not cls.open_keys:
            declared = {f.alias or name for name, f in cls.model_fields.items()}
            if unknown := sorted(set(data) - declared):
                raise ValueError(f"{cls.__name__} does not declare {', '.join(unknown)}")
        return data

    def to_json(self) -> dict:
        """The document as the writers write it: the keys set, numpy-free, NaN left to files.dumps."""
        return self.model_dump(by_alias=True, exclude_unset=True)


@cache
def _adapter(model: type[Doc], name: str) -> TypeAdapter:
    return TypeAdapter(model.model_fields[name].annotation)


def amend(doc: Doc, **fields: Any) -> Doc:
    """Set top-level fields of a document already built, each validated as its model declares it
    (an undeclared name raises KeyError): the typed way to add what is known only after the
    document was built (a run's thresholds, a sweep point's place). Returns ``doc``."""
    for name, value in fields.items():
        setattr(doc, name, _adapter(type(doc), name).validate_python(value))
    return doc


# --------------------------------------------------------------------------- the JSON schema

def _def_name(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _tidy(node: Any, root: bool = False) -> Any:
    """pydantic's schema as a person writes one: no titles or defaults, ``"type": [X, "null"]``
    for a nullable scalar, snake_case $defs; the same constraints."""
    if isinstance(node, list):
        return [_tidy(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _tidy(sub) for name, sub in value.items()}
        elif key == "$defs":
            out[key] = {_def_name(name): _tidy(sub) for name, sub in value.items()}
        elif key == "$ref":
            out[key] = "#/$defs/" + _def_name(value.rsplit("/", 1)[1])
        elif key in ("title", "default") and not root:
            continue
        elif (key, value) in (("additionalProperties", True), ("items", {})):
            continue
        else:
            out[key] = _tidy(value)
    if out.get("pattern") == UTC_TIME:  # one definition in $defs, as a person writes it
        del out["type"], out["pattern"]
        out = {"$ref": "#/$defs/utc_time"} | out
    branches = out.get("anyOf")
    if branches and all(set(b) <= {"type", "items"} and isinstance(b.get("type"), str) for b in branches) \
            and sum("items" in b for b in branches) <= 1 and "type" not in out:
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
        for b in branches:
            out.update({k: v for k, v in b.items() if k != "type"})
    return out


class _Generate(GenerateJsonSchema):
    def handle_ref_overrides(self, json_schema: dict) -> dict:
        return json_schema  # a field keeps its own description beside its type's


def json_schema(model: type[Doc], schema_id: str, title: str) -> dict:
    """``model``'s JSON Schema (draft 2020-12) with its header: the file docs/schema holds."""
    raw = _tidy(model.model_json_schema(by_alias=True, schema_generator=_Generate), root=True)
    raw.pop("title", None)
    defs = raw.pop("$defs", {})
    defs["utc_time"] = {"type": "string", "pattern": UTC_TIME}
    head = {"$schema": DRAFT, "$id": schema_id, "title": title, "description": raw.pop("description")}
    return head | raw | {"$defs": dict(sorted(defs.items()))}
