"""The package's layout shows its architecture: data flows one way, from the commands down.

Each package of python/tailwise has a layer; a module may import only from its own package or
from packages of a lower layer (ARCHITECTURE.md, "Layout"). `render` is the only package that
prints or draws, so nothing below it imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tailwise"

#: Lowest first. errors, signals and the extension are used by every layer.
LAYERS = {
    "errors": 0, "signals": 0, "warning": 0, "_core": 0,
    "stats": 1,          # plain functions on numpy arrays
    "host": 1,           # this host's facts and tuning knobs, read from /proc and /sys
    "spec": 2,           # what to measure, parsed and validated
    "results": 2,        # plain types of what was measured; what is written and read back
    "driver": 3,         # the engine driven: snapshots, pause, stop
    "agents": 4,         # agents on other hosts: service, client, group, deploy
    "methodology": 5,    # the checks, the analysis, the round loop, the summary made of them
    "measure": 6,        # one point end to end
    "sweep": 7,          # many points
    "render": 8,         # the only printing and drawing
    "cli": 9,
    "__init__": 10, "__main__": 10,
}

#: Imports against the flow that remain, each with its reason. Empty is the goal.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _imports(path: Path) -> set[str]:
    """The tailwise packages a module imports, at the top or inside functions."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tailwise":
            parts = node.module.split(".")
            out |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names if a.name != "__version__"}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("tailwise.")}
    return out


def test_results_know_no_methodology_and_no_agent():
    """The data model is results' own (issue 35): plain types that every layer above reads, made by
    none of them. Stated apart from the layer numbers so that a renumbering cannot lose it."""
    below = {"methodology", "measure", "driver", "agents", "sweep", "render", "cli"}
    wrong = [f"{p.relative_to(PACKAGE)} imports {dep}" for p in sorted((PACKAGE / "results").rglob("*.py"))
             for dep in _imports(p) & below]
    assert not wrong, "results/ must own its types: " + "; ".join(wrong)


def test_every_module_is_in_a_layer():
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        assert top in LAYERS, f"{path}: put it in a package of ARCHITECTURE.md's layout (and LAYERS here)"


def test_imports_flow_down_only():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        me, name = rel.parts[0], ".".join(rel.parts)
        for dep in _imports(path) - {me}:
            if LAYERS.get(dep, -1) > LAYERS[me] and (name, dep) not in EXCEPTIONS:
                wrong.append(f"{name} imports {dep}")
    assert not wrong, "imports against the layers (move the code down, or emit an event): " + "; ".join(wrong)


def test_the_exceptions_are_still_needed():
    for (name, dep), why in EXCEPTIONS.items():
        path = PACKAGE.joinpath(*name.split(".")).with_suffix(".py")
        assert dep in _imports(path), f"{name} no longer imports {dep}: remove the exception ({why})"


#: Fields of the summaries (documents/run.Summary, documents/sweep.SweepSummary) that no other document
#: or configuration of tailwise has: a string subscript or ``.get`` of one of them is a summary read by key.
SUMMARY_ONLY = {"verdict", "latency", "send_lag", "checks", "methodology", "target_stats", "thresholds",
                "host_pauses", "delayed", "precision", "exclusions", "knee", "saturation", "capacity_rps", "points",
                "achieved_rps", "completed_rps"}
#: Modules that read those names from something that is not a summary, with why.
NOT_A_SUMMARY = {"methodology/summarize.py": "it makes the summary: it reads the analysis' own figures (to_dict)"}


def _summary_keys(path: Path) -> list[str]:
    """Where a module reads one of ``SUMMARY_ONLY`` by string: ``x["verdict"]`` or ``x.get("verdict")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if key in SUMMARY_ONLY:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} [{key!r}]")
    return found


def test_the_summary_is_read_by_attribute_outside_results():
    """Issue 35: the summary travels as its model; a renamed field then fails where it is read, not
    in a user's hands. Only results/ (which writes and loads the JSON, and the notebook API that
    hands it out as JSON) reads it by key; the model's producers build it from plain data."""
    wrong = [hit for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] != "results"
             and str(path.relative_to(PACKAGE)) not in NOT_A_SUMMARY for hit in _summary_keys(path)]
    assert not wrong, "read these through the model's attributes: " + "; ".join(wrong)


def _module_imports() -> dict[str, set[str]]:
    """Each module of the package (dotted) with the modules of the package it imports, at the top
    or inside functions (``from tailwise.a import b`` names ``tailwise.a`` and, when it is one,
    the module ``tailwise.a.b``)."""
    root = PACKAGE.parent
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tailwise":
                named |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
        graph[name] = {m for m in named if m in modules and m != name}
    return graph


def test_no_module_imports_one_that_imports_it_back():
    """No import circle between modules either, within a package as across them (issue 35; the
    crate's own: crates/tailwise-core/tests/layout.rs). A circle makes a module's import order matter
    and a change to one side a change to both. Strongly connected components of the import graph
    (Tarjan), each of more than one module, are the circles."""
    graph = _module_imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while (w := stack.pop()) != v:
                circle.append(w)
            if circle:
                circles.append(sorted([v, *circle]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "import circles (move what both need down, or into a module of its own): " + "; ".join(
        " ↔ ".join(c) for c in circles)
