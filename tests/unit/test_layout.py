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
    "errors": 0, "signals": 0, "_core": 0,
    "stats": 1,          # plain functions on numpy arrays
    "spec": 2,           # what to measure, parsed and validated
    "agent": 3,          # the engine driven: snapshots, pause, stop
    "methodology": 4,    # the checks, the analysis, the round loop
    "measure": 5,        # one point end to end
    "results": 5,        # what is written and read back
    "sweep": 6,          # many points
    "render": 7,         # the only printing and drawing
    "cli": 8,
    "__init__": 9, "__main__": 9,
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
