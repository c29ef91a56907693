"""What `tailwise doctor` prints, at the screen's width (render/output's ``screen_width``): below
``WIDE`` columns one entry per knob — its state and what it read, folded at spaces — with the fix
command on its own line, never split inside a command or a sysctl name; from ``WIDE`` columns a
table (knob, state, read, why it matters) and the fixes under it, each whole on its line; then a
line counting what to look at."""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tailwise.render.output import fold, fold_text, print_table, stdout_console

STATE_STYLE = {"ok": "green", "warn": "yellow", "unreadable": "red", "not-applicable": "dim"}
#: From this many columns the knobs are a table (with "why it matters"); below, a line each.
WIDE = 120
#: The programs a fix runs: a command starts at one of them and is never split across lines.
COMMANDS = frozenset({"sudo", "echo", "taskset", "cpupower", "ethtool", "sysctl", "ps", "tee", "cat", "modprobe"})


def command_spans(fix: str) -> tuple[tuple[int, int], ...]:
    """Where a fix's commands and kernel settings are (offsets): a command from its program's
    name to the end of its arguments (the word ending in "," or ";", or before a bracketed
    note; a bracketed command to its closing bracket); a run of ``name=value`` settings
    (``isolcpus=0-1 nohz_full=0-1``, ``intel_idle.max_cstate=1``)."""
    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", fix)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        start, _, word = words[i]
        bracketed = word.startswith("(")
        if word.lstrip("(") in COMMANDS:
            j = i
            while j + 1 < len(words):
                w = words[j][2]
                if (bracketed and ")" in w) or (not bracketed and w.endswith((",", ";"))):
                    break
                if not bracketed and words[j + 1][2].startswith("("):
                    break
                j += 1
            spans.append((start, words[j][1]))
            i = j + 1
        elif "=" in word.strip("(),;"):
            j = i
            while j + 1 < len(words) and "=" in words[j + 1][2] and not words[j][2].endswith((",", ";", ")")):
                j += 1
            spans.append((start, words[j][1]))
            i = j + 1
        else:
            i += 1
    return tuple(spans)


def _read(k: dict) -> str:
    read = k["value"] if k["state"] in ("ok", "warn") else ""
    if k["detail"]:
        read = f"{read} — {k['detail']}" if read else k["detail"]
    return read


def fix_lines(fix: str, width: int, *, lead: str = "  fix: ", indent: int = 4) -> list[Text]:
    """A fix as lines of ``width``: each command (``command_spans``, but a bracketed mention)
    ends its line and starts one unless only ``lead`` precedes it, whole even when longer than
    the line; the words between are folded at spaces, a ``name=value`` run never split."""
    pad = " " * indent
    paragraphs: list[tuple[str, bool]] = []  # (text, a command alone)
    current, at = lead, 0

    def close(text: str, command: bool = False) -> None:
        if text.strip():
            paragraphs.append((text, command))

    for a, b in command_spans(fix):
        if fix[a:b].split()[0] not in COMMANDS:
            continue  # a bracketed mention or a name=value run: kept whole, inside the prose
        prose = fix[at:a].strip()
        if prose:
            current += ("" if current.endswith(" ") else " ") + prose
        if current.strip() == lead.strip():
            close(current + fix[a:b], True)
        else:
            close(current)
            close(pad + fix[a:b], True)
        current, at = pad, b
    prose = fix[at:].strip()
    if prose:
        close(current + ("" if current.endswith(" ") else " ") + prose)
    lines: list[Text] = []
    for text, command in paragraphs:
        # A command is one unit from its first word to its end (after the lead, when it follows it).
        start = len(lead) if text.startswith(lead) else len(text) - len(text.lstrip())
        atoms = ((start, len(text)),) if command else ()
        lines += fold_text(Text(text), width, indent=indent, atoms=atoms + command_spans(text))
    return lines


def print_fix(console: Console, fix: str, *, lead: str = "  fix: ", indent: int = 4) -> None:
    """A fix on lines of its own (``fix_lines``): a command is never split and stands alone."""
    for line in fix_lines(fix, console.width, lead=lead, indent=indent):
        console.print(line, soft_wrap=True, highlight=False)


def print_doctor(doc: dict, console: Console | None = None) -> None:
    console = console or stdout_console()
    h = doc["host"]
    where = (f"interface {doc['interface']}" + (f" (route to {doc['target']})" if doc["target"] else " (default route)")
             if doc["interface"] else f"no interface: {doc['interface_note']}")
    fold(console, f"[bold]tailwise doctor[/] — {escape(h['hostname'])}, kernel {escape(h['kernel'])}, "
                  f"{h['usable_cores']} usable CPUs; {escape(where)}; tailwise's CPUs "
                  f"{','.join(map(str, doc['cpus']))}; /proc/stat sampled {doc['sample_s']:g} s")
    wide = console.width >= WIDE
    if wide:
        t = Table(show_lines=True)
        # Names and states whole; the prose columns wrap at spaces, none narrower than its
        # longest word (a path), so no word is folded while the terminal allows it (print_table).
        for col in ("knob", "state", "read", "why it matters"):
            t.add_column(col, overflow="fold")
        for k in doc["knobs"]:
            style = STATE_STYLE[k["state"]]
            t.add_row(k["name"], f"[{style}]{k['state']}[/]", escape(_read(k)), escape(k["why"]))
        print_table(console, t)
        fixes = [k for k in doc["knobs"] if k["fix"]]
        if fixes:
            fold(console, "fixes (each command whole on its line):", markup=False)
        for k in fixes:
            print_fix(console, k["fix"], lead=f"  {k['name']}: ")
    else:
        for k in doc["knobs"]:
            style = STATE_STYLE[k["state"]]
            fold(console, Text.assemble((k["name"], "bold"), " ", (k["state"], style), f": {_read(k)}"))
            if k["fix"]:
                print_fix(console, k["fix"])
    count = {s: sum(k["state"] == s for k in doc["knobs"]) for s in STATE_STYLE}
    why = "" if wide else "; why each knob matters: a terminal of 120 columns or more, or --json"
    fold(console, f"{count['warn']} to look at, {count['unreadable']} not readable here, {count['ok']} ok, "
                  f"{count['not-applicable']} not applicable (`tailwise doctor --json` for every figure read{why})",
         markup=False)
