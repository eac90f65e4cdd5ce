#!/usr/bin/env python3
"""Generate logbus's message tables from Apache Kafka's message definitions.

Reads `<kafka-protocol>/message/*.json`, `<kafka-protocol>/internal-records/*.json`, the
share coordinator's `share-records/ShareSnapshot*.json` (`__share_group_state`) and the
KRaft metadata records, `metadata-records/*.json` (`__cluster_metadata`), and
writes `src/logbus/protocol/messages/`: one module per message holding the facts only
(names, types, version ranges, tags, defaults) as plain tuples, plus an index module.
Prose (`about`) and comments are left behind. Run it with `make gen`.

`tools/message_versions/<Name>.json` holds the project's own definition of a message whose
current clients speak a version newer than the reference (KIP-932's share-group APIs at
version 1, as librdkafka 2.16 and Kafka 4.1+ send them): facts only, in the same schema
language; when present it is read instead of the reference's file of that name, and a
message the reference lacks altogether (DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets, API keys 90-92 of Kafka 4.1) is read from there alone.

Each module also declares the body's types for mypy: one `TypedDict` per struct, named as
Kafka names it (the message itself, e.g. `FetchRequest`, and its structs, e.g. `FetchTopic`),
with snake_case keys. They are `total=False`: decoding fills every key, and encoding takes
a missing key as its default, so a builder writes only what it sets. Arrays are `list`s,
nullable fields `X | None`, `records` fields `logbus.protocol.types.Records`.

`apis.py` pairs each API key with its request's and its response's TypedDict
(`FETCH: Api[FetchRequest, FetchResponse]`), so the client's `send` checks a body and
types the answer by the one constant it is given.

`--check` regenerates into a temporary folder and compares it with the committed tables:
exit status 1 and a summary of what differs when they do not match (CI runs it as a test,
tests/unit/test_gen_messages.py).

Field tuples have the shape (see `logbus.protocol.schema.Field`):
    (name, type, versions, nullable_versions, tag, tagged_versions, flexible_versions,
     default, fields)
where version ranges are (low, high) pairs with high 32767 for "N+", and `fields` is a
tuple of nested field tuples for struct and struct-array types (else None).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

OPEN = 32767
ROOT = Path(__file__).resolve().parent.parent
NEWER_VERSIONS = ROOT / "tools" / "message_versions"
OUT = ROOT / "src" / "logbus" / "protocol" / "messages"
PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "uuid",
    "bytes",
    "records",
}


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        in_string = False
        cut = len(line)
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                in_string = not in_string
            elif not in_string and line.startswith("//", i):
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return s.lower()


def version_range(spec: str | None) -> tuple[int, int] | None:
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), OPEN)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def default_value(ftype: str, raw: Any) -> Any:
    if raw is not None and not isinstance(raw, str):
        raw = str(raw).lower()
    if ftype.startswith("[]"):
        return None if raw == "null" else ()
    if raw == "null":
        return None
    if ftype == "bool":
        return raw == "true"
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(raw, 0) if raw else 0
    if ftype == "float64":
        return float(raw) if raw else 0.0
    if ftype == "string":
        return raw or ""
    if ftype in ("bytes", "records"):
        return b""
    if ftype == "uuid":
        return "uuid0"
    return None  # a struct: built from its own fields' defaults


def convert_fields(
    fields: list[dict[str, Any]], structs: dict[str, list[dict[str, Any]]]
) -> tuple[Any, ...]:
    out = []
    for f in fields:
        ftype: str = f["type"]
        elem = ftype[2:] if ftype.startswith("[]") else ftype
        sub = None
        if elem not in PRIMITIVES:
            sub_fields = f.get("fields") or structs.get(elem)
            if sub_fields is None:
                raise SystemExit(f"unknown struct type {elem} in field {f['name']}")
            sub = convert_fields(sub_fields, structs)
            ftype = "[]struct" if ftype.startswith("[]") else "struct"
        out.append(
            (
                snake(f["name"]),
                ftype,
                version_range(f.get("versions") or f["taggedVersions"]),
                version_range(f.get("nullableVersions")),
                None if f.get("tag") is None else int(f["tag"]),  # some are strings
                version_range(f.get("taggedVersions")),
                version_range(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit",
                default_value(ftype, f.get("default")),
                sub,
            )
        )
    return tuple(out)


def collect_structs(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    structs: dict[str, list[dict[str, Any]]] = {}
    for s in spec.get("commonStructs", []):
        structs[s["name"]] = s["fields"]

    def walk(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            if "fields" in f:
                elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
                structs.setdefault(elem, f["fields"])
                walk(f["fields"])

    walk(spec["fields"])
    return structs


PY_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "uuid": "UUID",
    "bytes": "bytes",
    "records": "Records",
}


def typed_dicts(name: str, spec: dict[str, Any], structs: dict[str, list[dict[str, Any]]]) -> str:
    """The TypedDicts of one message, each struct once (as collect_structs resolves it)
    and before the first class that uses it; the message's own last."""
    if name in structs:
        raise SystemExit(f"{name}: a struct has the message's own name")
    classes: dict[str, str] = {}  # filled as each class is finished: inner ones first

    def declare(cls: str, fields: list[dict[str, Any]]) -> None:
        lines = []
        for f in fields:
            ftype: str = f["type"]
            is_array = ftype.startswith("[]")
            py = ftype[2:] if is_array else ftype
            if py in PY_TYPES:
                py = PY_TYPES[py]
            elif py not in classes:
                declare(py, f.get("fields") or structs[py])
            if is_array:
                py = f"list[{py}]"
            if version_range(f.get("nullableVersions")) is not None:
                py = f"{py} | None"
            lines.append(f"    {snake(f['name'])}: {py}\n")
        body = "".join(lines) or "    pass\n"
        classes[cls] = f"\n\nclass {cls}(TypedDict, total=False):\n{body}"

    declare(name, spec["fields"])
    return "".join(classes.values())


def render(value: Any, indent: int = 0) -> str:
    pad = "    " * indent
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(v, tuple) and len(v) == 9 for v in value)
    ):
        inner = "".join(f"{pad}    {render(v, indent + 1)},\n" for v in value)
        return "(\n" + inner + pad + ")"
    if isinstance(value, tuple) and len(value) == 9 and isinstance(value[0], str):
        parts = [render(v, indent) for v in value]
        return "(" + ", ".join(parts) + ")"
    if value == "uuid0":
        return "UUID0"
    return repr(value)


def generate(proto_dir: Path, out: Path = OUT) -> int:
    """Write every message table, the index and the enums into `out`; return the count."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.py"):
        old.unlink()
    index: list[tuple[str, str, int | None, str]] = []
    messages = sorted((proto_dir / "message").glob("*.json"))
    known = {path.name for path in messages}
    # messages the reference predates altogether (KIP-932's share-group offsets APIs)
    messages += [p for p in NEWER_VERSIONS.glob("*.json") if p.name not in known]
    sources = (
        sorted(messages, key=lambda path: path.name)
        + sorted((proto_dir / "internal-records").glob("*.json"))
        + sorted((proto_dir / "share-records").glob("ShareSnapshot*.json"))
        + sorted((proto_dir / "metadata-records").glob("*.json"))
    )
    for path in sources:
        path = NEWER_VERSIONS / path.name if (NEWER_VERSIONS / path.name).exists() else path
        spec = json.loads(strip_comments(path.read_text()))
        name = spec["name"]
        structs = collect_structs(spec)
        fields = convert_fields(spec["fields"], structs)
        module = snake(name)
        valid = version_range(spec["validVersions"])
        flexible = version_range(spec.get("flexibleVersions", "none"))
        types = typed_dicts(name, spec, structs)
        records_import = (
            "\nfrom logbus.protocol.types import Records\n" if ": Records" in types
            or "[Records]" in types else ""
        )
        text = (
            f'"""{name}: generated by tools/gen_messages.py from Kafka\'s message '
            'definitions."""\n\n'
            "from typing import TypedDict\n"
            "from uuid import UUID\n"
            f"{records_import}\n"
            "UUID0 = UUID(int=0)\n"
            f"NAME = {name!r}\n"
            f"TYPE = {spec['type']!r}\n"
            f"API_KEY = {spec.get('apiKey')!r}\n"
            f"VALID_VERSIONS = {valid!r}\n"
            f"FLEXIBLE_VERSIONS = {flexible!r}\n"
            f"FIELDS = {render(fields)}\n"
            f"{types}"
        )
        (out / f"{module}.py").write_text(text)
        index.append((name, module, spec.get("apiKey"), spec["type"]))
    lines = [
        '"""Index of the generated message tables (tools/gen_messages.py)."""',
        "",
        "# (message name, module, api key or None, message type)",
        "MESSAGES = (",
    ]
    lines += [f"    {entry!r}," for entry in index]
    lines += [")", ""]
    (out / "__init__.py").write_text("\n".join(lines))
    write_enums(proto_dir, index, out)
    write_apis(index, out)
    return len(index)


def upper_snake(name: str) -> str:
    return snake(name).upper()


def write_enums(
    proto_dir: Path, index: list[tuple[str, str, int | None, str]], out: Path
) -> None:
    api_lines = [
        '"""API keys: generated by tools/gen_messages.py from Kafka\'s message definitions."""',
        "",
        "from enum import IntEnum",
        "",
        "",
        "class ApiKey(IntEnum):",
    ]
    for name, _module, key, mtype in sorted(index, key=lambda e: (e[2] is None, e[2] or 0)):
        if mtype == "request" and key is not None:
            api_lines.append(f"    {upper_snake(name[: -len('Request')])} = {key}")
    (out / "api_keys.py").write_text("\n".join(api_lines) + "\n")

    err_lines = [
        '"""Error codes: generated by tools/gen_messages.py from Kafka\'s error code table."""',
        "",
        "from enum import IntEnum",
        "",
        "",
        "class ErrorCode(IntEnum):",
    ]
    retriable = []
    for row in (proto_dir / "error-codes.csv").read_text().splitlines()[1:]:
        code, name, _exc, retry = row.split(",")
        err_lines.append(f"    {name} = {int(code)}")
        if retry.strip() == "true":
            retriable.append(name)
    err_lines += ["", "", "RETRIABLE = frozenset({"]
    err_lines += [f"    ErrorCode.{n}," for n in retriable]
    err_lines += ["})", ""]
    (out / "error_codes.py").write_text("\n".join(err_lines))


def write_apis(index: list[tuple[str, str, int | None, str]], out: Path) -> None:
    """`apis.py`: each API key paired with its request's and its response's TypedDict, so
    code sending a request is checked against both by mypy (the types are imported for
    mypy only: at run time each constant holds just its key)."""
    requests = {key: (name, module) for name, module, key, mtype in index if mtype == "request"}
    responses = {key: (name, module) for name, module, key, mtype in index if mtype == "response"}
    keys = sorted(k for k in requests if k is not None and k in responses)
    lines = [
        '"""Each API key paired with its request and response TypedDicts: generated by',
        'tools/gen_messages.py from Kafka\'s message definitions."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import TYPE_CHECKING, Generic, TypeVar",
        "",
        "from logbus.protocol.messages.api_keys import ApiKey",
        "",
        "if TYPE_CHECKING:",
    ]
    for key in keys:
        for name, module in (requests[key], responses[key]):
            lines.append(f"    from logbus.protocol.messages.{module} import {name}")
    lines += [
        "",
        'Req = TypeVar("Req")',
        'Resp = TypeVar("Resp")',
        "",
        "",
        "class Api(Generic[Req, Resp]):",
        '    """An API key typed with its request\'s (`Req`) and its response\'s (`Resp`)',
        '    TypedDicts; at run time only the key."""',
        "",
        '    __slots__ = ("key",)',
        "",
        "    def __init__(self, key: ApiKey) -> None:",
        "        self.key = key",
        "",
        "    def __repr__(self) -> str:",
        '        return f"Api({self.key!r})"',
        "",
        "",
    ]
    for key in keys:
        request, response = requests[key][0], responses[key][0]
        constant = upper_snake(request[: -len("Request")])
        lines.append(
            f"{constant}: Api[{request}, {response}] = Api(ApiKey.{constant})"
        )
    (out / "apis.py").write_text("\n".join(lines) + "\n")


def compare(expected: Path, actual: Path) -> list[str]:
    """What differs between two generated folders, one line per file (plus the start of a
    unified diff for the first few changed files); empty when they match."""
    want = {p.name for p in expected.glob("*.py")}
    have = {p.name for p in actual.glob("*.py")}
    report = [f"missing: {actual / name}" for name in sorted(want - have)]
    report += [f"not generated (stale): {actual / name}" for name in sorted(have - want)]
    shown = 0
    for name in sorted(want & have):
        new = (expected / name).read_text().splitlines(keepends=True)
        old = (actual / name).read_text().splitlines(keepends=True)
        if new == old:
            continue
        report.append(f"differs: {actual / name}")
        if shown < 3:
            shown += 1
            diff = list(difflib.unified_diff(old, new, f"committed/{name}", f"generated/{name}"))
            report += ["    " + line.rstrip("\n") for line in diff[:20]]
            if len(diff) > 20:
                report.append(f"    ... {len(diff) - 20} more diff lines")
    return report


def check(proto_dir: Path, out: Path = OUT) -> list[str]:
    """Regenerate into a temporary folder and compare with `out` (see compare)."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(proto_dir, Path(tmp))
        return compare(Path(tmp), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "proto_dir",
        nargs="?",
        type=Path,
        default=ROOT.parent / "shared" / "kafka-protocol",
        help="Kafka's protocol folder (message/, internal-records/, error-codes.csv)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        help="the generated package folder to write or check (default: %(default)s)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare a fresh generation with the committed tables; exit 1 when they differ",
    )
    args = parser.parse_args(argv)
    if not (args.proto_dir / "message").is_dir():
        print(f"error: {args.proto_dir} has no message/ folder of Kafka JSON definitions",
              file=sys.stderr)
        return 2
    if args.check:
        problems = check(args.proto_dir, args.out)
        if problems:
            print(f"{args.out} does not match its generator (run `make gen`):", file=sys.stderr)
            print("\n".join(problems), file=sys.stderr)
            return 1
        print(f"{args.out} matches its generator")
        return 0
    count = generate(args.proto_dir, args.out)
    print(f"wrote {count} message tables to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
