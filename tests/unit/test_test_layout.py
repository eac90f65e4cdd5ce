"""The test suites' layout (tests/README.md): set-ups shared between test modules live in
helper modules and conftest fixtures, never in another test module, and nothing edits
`sys.path` (pyproject.toml's `pythonpath` names the helper folders). Importing a test
module runs its module-level code a second time under another name, and a `conftest`
import finds whichever conftest.py was loaded last."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SYS_PATH_EDITS = {"insert", "append", "extend", "remove", "clear", "pop", "__setitem__"}


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def collected_module_names() -> set[str]:
    """What pytest collects as test modules (python_files' defaults), and conftest."""
    names = {"conftest"}
    for path in python_files():
        if path.name.startswith("test_") or path.stem.endswith("_test"):
            names.add(path.stem)
    return names


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def sys_path_edits(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        if (  # sys.path.insert(...), sys.path.append(...), ...
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SYS_PATH_EDITS
            and is_sys_path(node.func.value)
        ):
            yield node.lineno
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:  # sys.path = ..., sys.path += ..., sys.path[0] = ...
                if is_sys_path(target) or (
                    isinstance(target, ast.Subscript) and is_sys_path(target.value)
                ):
                    yield node.lineno
        elif (  # site.addsitedir(...)
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "addsitedir"
        ):
            yield node.lineno


def problems(path: Path, source: str, test_modules: set[str]) -> list[str]:
    tree = ast.parse(source, str(path))
    where = path.relative_to(TESTS) if path.is_relative_to(TESTS) else path
    found = [
        f"{where}:{line}: imports the test module {name!r}: move what it shares into a "
        "helper module or a conftest fixture"
        for line, name in imported_modules(tree)
        if name.split(".")[0] in test_modules
    ]
    found += [
        f"{where}:{line}: edits sys.path: name the folder in pyproject.toml's pythonpath"
        for line in sys_path_edits(tree)
    ]
    return found


def test_no_test_module_imports_another_and_nothing_edits_sys_path() -> None:
    names = collected_module_names()
    found = [
        problem
        for path in python_files()
        for problem in problems(path, path.read_text(encoding="utf-8"), names)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from test_cli import ok",
        "import test_cli",
        "from conftest import RunningBroker",
        "def f():\n    from test_cli import ok",
        "import sys\nsys.path.insert(0, 'x')",
        "import sys\nsys.path.append('x')",
        "import sys\nsys.path = ['x']",
        "import sys\nsys.path += ['x']",
        "import sys\nsys.path[0] = 'x'",
        "import site\nsite.addsitedir('x')",
    ],
)
def test_the_check_finds_each_kind(source: str) -> None:
    assert problems(TESTS / "unit" / "example.py", source, {"conftest", "test_cli"})


@pytest.mark.parametrize(
    "source",
    [
        "from cli_runs import ok",
        "import brokers",
        "from logbus.client import loop_thread",
        "import sys\nprint(sys.path)",
        "import os, sys\nos.environ['PYTHONPATH'] = os.pathsep.join(sys.path)",
    ],
)
def test_the_check_lets_helpers_be(source: str) -> None:
    assert problems(TESTS / "unit" / "example.py", source, {"conftest", "test_cli"}) == []


def test_test_modules_have_unique_names() -> None:
    """The suites have no __init__.py: pytest imports each test module under its bare file
    name, so two test_x.py in two folders collide ("import file mismatch")."""
    seen: dict[str, Path] = {}
    for path in python_files():
        if path.name.startswith("test_") or path.stem.endswith("_test"):
            assert path.stem not in seen, f"{path} and {seen[path.stem]} share a name"
            seen[path.stem] = path
