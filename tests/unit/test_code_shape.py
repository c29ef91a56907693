"""The code's shape (issue 20): short functions, typed problems, no branch on a message's text.

* No function over 80 lines in Python or Rust outside tests; `LONG_FUNCTIONS` lists the
  exceptions, each with its reason (empty is the goal).
* `engine/thread.rs` ≤ 400 lines: the timing loop only, its parts in their own modules.
* No `Result<_, String>` in the data plane: problems are typed (`error::Problem`).
* No code that decides on a message's text: a problem's kind is its type, its remedy a value.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "python" / "tailwise"
CRATES = ROOT / "crates"
MAX_LINES = 80

#: Functions allowed to be longer, "file:function" → why.
LONG_FUNCTIONS: dict[str, str] = {}


def _python_functions():
    for path in sorted(PYTHON.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(ROOT), node.name, node.end_lineno - node.lineno + 1


_FN = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+\"C\"\s+)?fn\s+(\w+)")


def _code(line: str) -> str:
    """A Rust line without its strings, character literals and comment, for counting braces."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(?:\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def _rust_sources():
    """Each Rust source of the crates with its lines outside tests (test files, benches and the
    `#[cfg(test)]` module that closes a file are left out)."""
    for path in sorted(CRATES.rglob("*.rs")):
        if path.name in ("tests.rs", "testutil.rs") or path.name.endswith("_tests.rs") or "benches" in path.parts:
            continue
        lines = path.read_text().splitlines()
        end = next((i for i, line in enumerate(lines) if line.strip() == "#[cfg(test)]"), len(lines))
        yield path, lines[:end]


def _rust_functions():
    for path, lines in _rust_sources():
        i = 0
        while i < len(lines):
            m = _FN.match(lines[i])
            if m and not _code(lines[i]).rstrip().endswith(";"):
                depth, j, opened = 0, i, False
                while j < len(lines):
                    code = _code(lines[j])
                    depth += code.count("{") - code.count("}")
                    opened |= "{" in code
                    if opened and depth == 0:
                        break
                    j += 1
                yield path.relative_to(ROOT), m.group(1), j - i + 1
                i = j
            i += 1


def test_no_function_over_80_lines():
    long = [f"{path}:{name} ({n} lines)" for path, name, n in [*_python_functions(), *_rust_functions()]
            if n > MAX_LINES and f"{path}:{name}" not in LONG_FUNCTIONS]
    assert not long, "split these functions into steps of their own (or list one in LONG_FUNCTIONS with why): " + "; ".join(long)


def test_the_listed_long_functions_still_exist_and_are_long():
    found = {f"{path}:{name}": n for path, name, n in [*_python_functions(), *_rust_functions()]}
    for key, why in LONG_FUNCTIONS.items():
        assert found.get(key, 0) > MAX_LINES, f"{key} is short now (or gone): remove it from LONG_FUNCTIONS ({why})"


def test_engine_thread_is_the_loop_only():
    n = len((CRATES / "tailwise-core" / "src" / "engine" / "thread.rs").read_text().splitlines())
    assert n <= 400, f"engine/thread.rs has {n} lines: move a part that owns its state into engine/"


def test_no_string_errors_in_the_data_plane():
    found = [f"{p.relative_to(ROOT)}:{i}" for p, lines in _rust_sources()
             for i, line in enumerate(lines, 1)
             if re.search(r"Result<[^;{]*,\s*String>", _code(line))]
    assert not found, "return a typed error (thiserror, error::Problem) instead of a String: " + ", ".join(found)


#: Deciding on a message's text: a string test on an error's or a reason's words.
TEXT_BRANCH = [
    re.compile(r"""\b(?:e|\w*(?:msg|message|why|reason|remedy|problem|detail|err|error|failure))\s*\.\s*"""
               r"""(?:starts_with|ends_with|contains|startswith|endswith|partition|split|find)\s*\(\s*b?["']"""),
    re.compile(r"""["'][^"']+["']\s+(?:not\s+)?in\s+(?:str\(\s*e\s*\)|\w*\.?(?:remedy|problem|message|msg|why|reason|detail))\b"""),
    re.compile(r"""str\(\s*e\s*\)\s*\.\s*(?:partition|split|startswith|endswith|find)\s*\("""),
]


def test_no_code_branches_on_a_message_text():
    found = []
    sources = [(p, p.read_text().splitlines()) for p in sorted(PYTHON.rglob("*.py"))] + list(_rust_sources())
    for path, lines in sources:
        for i, line in enumerate(lines, 1):
            if line.strip().startswith(("#", "//")):
                continue
            if any(p.search(line) for p in TEXT_BRANCH):
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "decide on a type or a field, never on a message's words:\n" + "\n".join(found)


def test_comments_cite_only_the_repository_or_public_sources():
    # ../shared (the design notes kept beside the checkout) is not in the repository: a reader of
    # the code cannot follow such a citation.
    found = [f"{p.relative_to(ROOT)}:{i}" for base in (PYTHON, CRATES, ROOT / "tests", ROOT / "bench")
             for p in sorted([*base.rglob("*.py"), *base.rglob("*.rs")])
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\bshared/(?:notes|papers|DESIGN)|\bshared notes\b|\b(?:platform|statistics|peers)\.md\b", line)
             and p.name != "test_code_shape.py"]
    assert not found, "cite the repository or a public source instead of ../shared: " + ", ".join(found)
