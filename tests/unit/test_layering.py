"""Layering rules (docs/architecture.md). The group coordinator is free of the server:
nothing under `logbus/coordinator/` imports the broker (`logbus.server`) or the storage
layer (`logbus.storage`); it reaches the log only through the `PartitionWriter` the broker
hands it. The pure cores (`protocol/`, `records/`) import no runtime package."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "logbus"
FORBIDDEN = ("logbus.server", "logbus.storage")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_coordinators_import_neither_the_server_nor_storage() -> None:
    modules = sorted((SRC / "coordinator").rglob("*.py"))
    assert modules
    offending = {
        f"{path.relative_to(SRC)}: {name}"
        for path in modules
        for name in imported_modules(path)
        if name.startswith(FORBIDDEN)
    }
    assert not offending, offending


def test_the_pure_cores_import_no_runtime_package() -> None:
    """`protocol/` and `records/` are values in, values out: they import neither the
    storage layer, the broker nor the client (docs/architecture.md)."""
    modules = sorted((SRC / "protocol").rglob("*.py")) + sorted((SRC / "records").rglob("*.py"))
    assert modules
    offending = {
        f"{path.relative_to(SRC)}: {name}"
        for path in modules
        for name in imported_modules(path)
        if name.startswith(("logbus.server", "logbus.storage", "logbus.client"))
    }
    assert not offending, offending
