"""The host's sources of jitter (``tailwise.doctor/1``): ``tailwise doctor --json``.

One definition: ``report`` writes it through these models, and docs/schema/doctor.schema.json is
generated from them (``python -m tailwise.results.documents``). Each knob's entry is the same
``Knob`` that every run summary's ``host.knobs`` carries.
"""

from __future__ import annotations

from typing import Literal

from tailwise import __version__
from tailwise.results.documents.base import Doc, F, Int, Num
from tailwise.results.documents.config import Host, Knob
from tailwise.results.documents.run import Tool
from tailwise.results.files import DOCTOR_SCHEMA


class Doctor(Doc):
    """`tailwise doctor --json`: the host's sources of jitter that move a µs-scale tail (KBNets'17 §4.2 and the peers' tuning guides), one entry per knob, each with what it read, its state, why it matters and the command that would fix it. Read without root: what could not be read is unreadable, with the reason. Written by python/tailwise/cli/doctor.py through the models of python/tailwise/results/documents/doctor.py, which this schema is generated from. Versioning: later versions add fields and knobs, never rename or retype one; additional properties are allowed."""

    schema_: Literal["tailwise.doctor/1"] = F(alias="schema", description="This document's schema and its version.")
    tool: Tool
    host: Host = F(description="The machine examined (without knobs: they are the top-level knobs).")
    target: str | None = F(description="The TARGET given (its route names the interface), or null.")
    interface: str | None = F(description="The interface to the target, or without a TARGET the default route's; null when there is none (interface_note says why).")
    interface_note: str | None = F(description="Why there is no interface; null when there is one.")
    cpus: list[Int] = F(description="The CPUs a `tailwise run` with default settings would pin its threads to (the engine's from the highest allowed CPU down, the built-in server's worker from the lowest up without a TARGET).")
    sample_s: Num = F(description="How long /proc/stat was sampled for steal, other tenants' CPU and the SMT siblings' load.", minimum=0)
    knobs: list[Knob] = F(description="One entry per knob, in a fixed order.", minItems=1)


def report(*, host: dict, target: str | None, interface: str | None, interface_note: str | None, cpus,
           sample_s: float, knobs: list[dict]) -> dict:
    """The doctor's document, validated by its model."""
    doc = {"schema": DOCTOR_SCHEMA, "tool": {"name": "tailwise", "version": __version__}, "host": host,
           "target": target, "interface": interface, "interface_note": interface_note, "cpus": sorted(cpus),
           "sample_s": sample_s, "knobs": knobs}
    return Doctor.model_validate(doc).to_json()


SCHEMA_FILE = ("doctor.schema.json", Doctor, "urn:tailwise:schema:doctor:1", f"tailwise doctor output ({DOCTOR_SCHEMA})")
