"""Issue 20: python/tailwise/_core.pyi names exactly what the extension exports — its functions,
classes, their methods and properties, its constants — with the same parameters (names, kinds,
defaults). Read with ``ast`` and ``inspect``, so that no type checker is needed to run it; mypy's
``python -m mypy.stubtest tailwise._core`` agrees where mypy is installed.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from tailwise import _core

STUB = Path(_core.__file__).with_name("_core.pyi")
TREE = ast.parse(STUB.read_text())

KINDS = {"posonly": inspect.Parameter.POSITIONAL_ONLY, "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
         "kwonly": inspect.Parameter.KEYWORD_ONLY}


def public(name: str) -> bool:
    """What the module offers: not private helpers (the stub's ``_Snapshot`` TypedDicts), but
    ``__version__``."""
    return not name.startswith("_") or name == "__version__"


def stub_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return names


STUBBED = stub_names(TREE.body)


def stub_params(fn: ast.FunctionDef, drop_first: bool) -> list[tuple[str, inspect._ParameterKind, object]]:
    """(name, kind, default) of each parameter; defaults as values, ``empty`` where there is none."""
    a = fn.args
    positional = [(p, "posonly") for p in a.posonlyargs] + [(p, "args") for p in a.args]
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    out = [(p.arg, KINDS[kind], d) for (p, kind), d in zip(positional, defaults)]
    out += [(p.arg, KINDS["kwonly"], inspect.Parameter.empty if d is None else ast.literal_eval(d))
            for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out[1:] if drop_first else out


def runtime_params(obj) -> list[tuple[str, inspect._ParameterKind, object]]:
    sig = inspect.signature(obj)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


def test_stub_names_exactly_the_modules_exports():
    exported = {name for name in vars(_core) if public(name)}
    assert {name for name in STUBBED if public(name)} == exported
    assert set(_core.__all__) == exported
    stub_all = ast.literal_eval(STUBBED["__all__"].value)
    assert sorted(stub_all) == sorted(_core.__all__)


def test_stub_constants_have_the_runtime_types():
    for name, node in STUBBED.items():
        if isinstance(node, ast.AnnAssign) and public(name):
            text = ast.unparse(node.annotation)
            kind = {"int": int, "str": str, "bool": bool}.get(text.removeprefix("Final[").removesuffix("]"), None)
            if kind is not None:
                assert type(getattr(_core, name)) is kind, (name, text)
            else:
                assert text.startswith(("Final[dict", "Final[list")), (name, text)
                assert type(getattr(_core, name)).__name__ in text, (name, text)


@pytest.mark.parametrize("name", sorted(n for n, v in vars(_core).items() if public(n) and inspect.isbuiltin(v)))
def test_stub_function_parameters(name):
    node = STUBBED[name]
    assert isinstance(node, ast.FunctionDef), name
    assert stub_params(node, drop_first=False) == runtime_params(getattr(_core, name))


@pytest.mark.parametrize("name", sorted(n for n, v in vars(_core).items() if public(n) and inspect.isclass(v)))
def test_stub_class_members_and_parameters(name):
    cls, node = getattr(_core, name), STUBBED[name]
    assert isinstance(node, ast.ClassDef), name
    members = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
    runtime = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    constructible = getattr(cls, "__text_signature__", None) is not None
    assert set(members) - {"__new__"} == set(runtime), name
    assert ("__new__" in members) == constructible, name
    if constructible:
        assert stub_params(members["__new__"], drop_first=True) == runtime_params(cls)
    for attr, value in runtime.items():
        is_property = inspect.isgetsetdescriptor(value)
        decorated = [ast.unparse(d) for d in members[attr].decorator_list]
        assert ("property" in decorated) == is_property, (name, attr)
        if not is_property:  # a static method has no self to drop
            assert stub_params(members[attr], drop_first="staticmethod" not in decorated) == runtime_params(value), \
                (name, attr)
