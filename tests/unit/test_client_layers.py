"""The client's modules import each other without cycles, and the request layer
(`client/requests/`) depends on nothing of the producer, consumer, admin or Spark, so the
broker can use it for its own traffic; no module reads the Admin client's private
members (its helpers go through `Admin.calls`, an `AdminCalls`). Read from the source
(imports under `if TYPE_CHECKING:` do not run and do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import logbus

SRC = Path(logbus.__file__).parent.parent
CLIENT = SRC / "logbus" / "client"
# What client/requests may import from the rest of logbus.
REQUESTS_MAY_USE = (
    "logbus.protocol",
    "logbus.records",
    "logbus.client.requests",
    "logbus.client.connection",
    "logbus.client.errors",
    "logbus.client.metadata",
    "logbus.types",
)


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            skipped.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out.update(name for name in names if name in known or name.startswith("logbus"))
    return out


def _graph() -> dict[str, set[str]]:
    paths = {_module(p): p for p in CLIENT.rglob("*.py")}
    known = set(paths)
    return {name: _imports(path, known) for name, path in paths.items()}


def test_client_modules_import_no_cycle() -> None:
    full = _graph()
    graph = {name: (deps & set(full)) - {name} for name, deps in full.items()}
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        path.append(name)
        for dep in sorted(graph[name]):
            visit(dep)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_requests_depend_only_on_protocol_records_and_the_connection() -> None:
    for name, deps in _graph().items():
        if not name.startswith("logbus.client.requests"):
            continue
        for dep in deps:
            allowed = any(dep == ok or dep.startswith(ok + ".") for ok in REQUESTS_MAY_USE)
            assert allowed, f"{name} imports {dep}"


def _private_reads(tree: ast.AST) -> list[str]:
    """`admin._x`, `calls._x` and `<anything>.calls._x`: private members of the Admin
    client or of its AdminCalls read through a name other than `self`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id in ("admin", "calls")) or (
            isinstance(owner, ast.Attribute) and owner.attr == "calls"
        ):
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_no_module_reads_the_admin_clients_private_members() -> None:
    """The admin's helpers (transactions, leader elections) and the CLI use `Admin` and
    its `AdminCalls` (`admin.calls`) through their public members only."""
    assert sorted(_private_reads(ast.parse("admin._each(x)\nself.calls._config\n"))) == [
        "line 1: ._each",
        "line 2: ._config",
    ]
    offending = {
        f"{path.relative_to(SRC)}: {read}"
        for path in sorted((SRC / "logbus").rglob("*.py"))
        for read in _private_reads(ast.parse(path.read_text()))
    }
    assert not offending, offending
