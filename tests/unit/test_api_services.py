"""The API handlers see narrow services, never the broker (docs/architecture.md): no
module under `logbus/server/api/` reads a `.broker` attribute (the request context has
none) or imports `logbus.server.broker`; handlers use `ctx.services` and `ctx.config`."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from logbus.server.api import RequestContext

API = Path(__file__).resolve().parents[2] / "src" / "logbus" / "server" / "api"


def broker_reads(source: str) -> list[int]:
    """The lines of `source` that read an attribute named `broker`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr == "broker"
    ]


def broker_imports(source: str) -> list[int]:
    """The lines of `source` that import the broker module."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names.append(str(node.module))
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if "logbus.server.broker" in names:
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_a_handler_reading_the_broker() -> None:
    assert broker_reads("def handle(ctx):\n    return ctx.broker.config\n") == [2]
    assert broker_reads("def handle(ctx):\n    return ctx.services.broker_id\n") == []
    assert broker_imports("if X:\n    from logbus.server.broker import Broker\n") == [2]
    assert broker_imports("from logbus.server import broker\n") == [1]
    assert broker_imports("from logbus.server.services import BrokerServices\n") == []


def test_no_api_module_reads_or_imports_the_broker() -> None:
    modules = sorted(API.rglob("*.py"))
    assert len(modules) > 20
    offending = {
        f"{path.name}:{line}"
        for path in modules
        for line in broker_reads(path.read_text()) + broker_imports(path.read_text())
    }
    assert not offending, offending


def test_the_request_context_carries_no_broker() -> None:
    fields = {field.name for field in dataclasses.fields(RequestContext)}
    assert "services" in fields and "config" in fields
    assert "broker" not in fields
