"""What `tailwise doctor` prints: one table row per knob — what it read, its state, why it matters,
the fix — and a line counting what to look at."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

STATE_STYLE = {"ok": "green", "warn": "yellow", "unreadable": "red", "not-applicable": "dim"}


def print_doctor(doc: dict, console: Console | None = None) -> None:
    console = console or Console()
    h = doc["host"]
    where = (f"interface {doc['interface']}" + (f" (route to {doc['target']})" if doc["target"] else " (default route)")
             if doc["interface"] else f"no interface: {doc['interface_note']}")
    console.print(f"[bold]tailwise doctor[/] — {escape(h['hostname'])}, kernel {escape(h['kernel'])}, "
                  f"{h['usable_cores']} usable CPUs; {escape(where)}; tailwise's CPUs "
                  f"{','.join(map(str, doc['cpus']))}; /proc/stat sampled {doc['sample_s']:g} s")
    t = Table(show_lines=True)
    for col in ("knob", "state", "read", "why it matters", "fix"):
        t.add_column(col, overflow="fold")
    for k in doc["knobs"]:
        read = k["value"] if k["state"] in ("ok", "warn") else ""
        if k["detail"]:
            read = f"{read} — {k['detail']}" if read else k["detail"]
        style = STATE_STYLE[k["state"]]
        t.add_row(k["name"], f"[{style}]{k['state']}[/]", escape(read), escape(k["why"]), escape(k["fix"] or "—"))
    console.print(t)
    count = {s: sum(k["state"] == s for k in doc["knobs"]) for s in STATE_STYLE}
    console.print(f"{count['warn']} to look at, {count['unreadable']} not readable here, {count['ok']} ok, "
                  f"{count['not-applicable']} not applicable (`tailwise doctor --json` for every figure read)")
