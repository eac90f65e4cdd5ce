"""The dependency order of logbus's packages (docs/architecture.md, "Allowed
dependencies"), read from the source with `ast`: every `import` and `from ... import`
counts, those under `if TYPE_CHECKING:` too (a type is a dependency of the reader).

From the bottom: `types.py`, `protocol/` and `records/` (values in, values out, no
I/O); `common/` (what the client and the broker share); `storage/` and
`coordinator/` (which reaches the log only through the `PartitionWriter` the broker
hands it); the client; the controller and the broker (`server/`), which use the client
for their own traffic; on top the APIs (`logbus`, `logbus.aio`) and the applications
(`cli/`, `console/`, `spark/`). `console/` and `spark/` are clients: they never import
the broker's side. A failure names each offending import with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import logbus

SRC = Path(logbus.__file__).parent

BOTTOM = frozenset({"types", "protocol", "records"})
CLIENT_SIDE = BOTTOM | {"common", "client"}
# What each part of logbus may import, besides itself. A top-level module is its own
# part (`types` for types.py, `logbus` for __init__.py).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "types": frozenset(),
    "protocol": BOTTOM,
    "records": BOTTOM,
    "common": BOTTOM,
    "storage": BOTTOM,
    "coordinator": BOTTOM,
    # KRaft's metadata image and its records: values only, for the controller and brokers.
    "metadata": BOTTOM,
    "client": CLIENT_SIDE,
    "controller": CLIENT_SIDE | {"metadata"},
    # KRaft's quorum: a replicated log on storage/, its peers reached with the client's
    # connections; below the broker, which runs it on the controller listener.
    "raft": CLIENT_SIDE | {"storage"},
    "server": CLIENT_SIDE | {"storage", "coordinator", "controller", "raft", "metadata"},
    "logbus": CLIENT_SIDE,
    "aio": CLIENT_SIDE,
    "console": CLIENT_SIDE | {"logbus", "aio"},
    "spark": CLIENT_SIDE | {"logbus", "aio"},
    "mirror": CLIENT_SIDE,
    "registry": CLIENT_SIDE | {"logbus", "aio"},
    "restproxy": CLIENT_SIDE | {"logbus", "aio", "registry"},
    "cli": frozenset(
        {
            "storage",
            "coordinator",
            "controller",
            "raft",
            "metadata",
            "server",
            "logbus",
            "aio",
            "console",
            "mirror",
            "registry",
            "restproxy",
        }
    )
    | CLIENT_SIDE,
}


class Import(NamedTuple):
    path: Path
    line: int
    module: str


def part_of(path: Path, root: Path = SRC) -> str:
    """The part a source file belongs to: its package, or its own name at the top."""
    rel = path.relative_to(root)
    if len(rel.parts) > 1:
        return rel.parts[0]
    return "logbus" if rel.stem == "__init__" else rel.stem


def part_imported(module: str, name: str) -> str | None:
    """The part of logbus an import reaches (None outside logbus): `logbus.x.y` is `x`;
    `from logbus import x` is `x` for a package or module, `logbus` for a name (but
    `__version__`, which every import of logbus loads anyway, is nobody's)."""
    parts = module.split(".")
    if parts[0] != "logbus" or (module == "logbus" and name.startswith("__")):
        return None
    if len(parts) > 1:
        return parts[1]
    if (SRC / name).is_dir() or (SRC / f"{name}.py").is_file():
        return name
    return "logbus"


def logbus_imports(path: Path) -> list[tuple[str, Import]]:
    """(part reached, the import) for every import of logbus in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: use absolute imports"
            targets = [(node.module or "", alias.name) for alias in node.names]
        else:
            continue
        for module, name in targets:
            part = part_imported(module, name)
            if part is not None:
                shown = f"{module}.{name}" if name else module
                found.append((part, Import(path, node.lineno, shown)))
    return found


def violations(files: list[Path], root: Path = SRC) -> list[str]:
    """One line per import against MAY_IMPORT: file (from `root`'s parent), line, import."""
    out = []
    for path in files:
        source = part_of(path, root)
        allowed = MAY_IMPORT[source] | {source}
        listing = ", ".join(sorted(MAY_IMPORT[source] - {source})) or "nothing of logbus"
        for part, imp in logbus_imports(path):
            if part not in allowed:
                out.append(
                    f"{imp.path.relative_to(root.parent)}:{imp.line} imports {imp.module}: "
                    f"{source} may import only {listing}"
                )
    return sorted(out)


def source_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_part_has_a_place_in_the_order() -> None:
    parts = {part_of(path) for path in source_files()}
    assert parts <= MAY_IMPORT.keys(), f"not in MAY_IMPORT: {parts - MAY_IMPORT.keys()}"
    # Each allowed part exists, so the table cannot drift from the tree.
    assert set().union(*MAY_IMPORT.values()) <= parts


def test_the_order_has_no_cycle() -> None:
    """The allowed imports themselves form layers: no part may reach itself back (but
    `types`, `protocol` and `records`, the bottom, may use each other)."""

    def reach(path: list[str]) -> None:
        part = path[-1]
        for dep in sorted(MAY_IMPORT[part] - {part}):
            if part in BOTTOM and dep in BOTTOM:
                continue
            assert dep not in path, f"cycle: {' -> '.join([*path, dep])}"
            reach([*path, dep])

    for part in MAY_IMPORT:
        reach([part])


def test_every_import_follows_the_order() -> None:
    offending = violations(source_files())
    assert not offending, "imports against the layering:\n" + "\n".join(offending)


def test_the_client_side_imports_nothing_of_the_broker() -> None:
    """The client, the Spark source and the console are clients: what they share with the
    broker lives in `common/` (stated on its own, whatever the table above allows)."""
    broker_side = {"server", "storage", "controller", "coordinator", "cli"}
    for part in ("common", "client", "spark", "console", "logbus", "aio"):
        assert not MAY_IMPORT[part] & broker_side, part
    offending = [
        f"{imp.path.relative_to(SRC.parent)}:{imp.line} imports {imp.module}"
        for path in source_files()
        if part_of(path) in ("common", "client", "spark", "console")
        for part, imp in logbus_imports(path)
        if part in broker_side
    ]
    assert not offending, offending


def test_the_bottom_does_no_io() -> None:
    """`protocol/` and `records/` turn bytes into values and back; sockets and event loops
    are the callers' (`common/network/frame_stream.py` drives the framing)."""
    io_modules = ("asyncio", "socket", "ssl", "selectors", "uvloop")
    offending = []
    for path in source_files():
        if part_of(path) not in ("protocol", "records"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            offending += [
                f"{path.relative_to(SRC.parent)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in io_modules
            ]
    assert not offending, offending


def test_a_violation_names_the_file_line_and_import(tmp_path: Path) -> None:
    """The failure message points at the import to remove."""
    root = tmp_path / "logbus"
    (root / "client").mkdir(parents=True)
    probe = root / "client" / "probe.py"
    probe.write_text(
        "from logbus.protocol import ApiKey\n"
        "if TYPE_CHECKING:\n"
        "    from logbus.server.broker import Broker\n"
    )
    assert violations([probe], root) == [
        "logbus/client/probe.py:3 imports logbus.server.broker.Broker: client may "
        "import only common, protocol, records, types"
    ]
