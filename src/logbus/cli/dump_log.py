"""`logbus dump-log FILE...`: print what a segment, index, producer snapshot or checkpoint
file holds, like Kafka's `kafka-dump-log.sh` (DumpLogSegments).

- `.log`: one line per batch (offsets, position, timestamps, size, codec, CRC validity,
  producer fields), and with `--deep-iteration` or `--print-data-log` one line per record
  (`--print-data-log` adds keys and values). Bytes at the end that are not a whole batch
  are reported.
- `.index` / `.timeindex`: one line per entry, checked against the `.log` beside them;
  mismatches are listed at the end (`--verify-index-only` prints only those, and
  `--index-sanity-check` only checks the file's shape).
- `.snapshot`: the producer entries; `*-checkpoint` files: their entries.

Files are only read, never changed, so a running broker's files may be dumped. A file that
cannot be read is reported on stderr and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import TextIO

from logbus.records.batch import (
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    crc_is_valid,
    peek_offset_and_length,
)
from logbus.records.compression import CompressionType
from logbus.records.control import ControlType, decode_control_key, decode_end_txn_marker
from logbus.records.reader import decode_batch
from logbus.records.record import Record

_INT32_MAX = (1 << 31) - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class DumpError(Exception):
    """A file that cannot be dumped (the message says why)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dump-log",
        help="print the batches and records of segment, index and snapshot files",
        description="Print the contents of log segment (.log), index (.index, .timeindex), "
        "producer snapshot (.snapshot) and checkpoint files, as Kafka's kafka-dump-log.sh.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="files to dump")
    parser.add_argument(
        "--deep-iteration",
        action="store_true",
        help="print every record, not only the batches",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="print record keys and values (implies --deep-iteration)",
    )
    parser.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="only check that index files are well formed",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    parser.add_argument(
        "--max-bytes",
        type=_max_bytes,
        default=_INT32_MAX,
        metavar="N",
        help=f"read at most N bytes of each .log file (default: {_INT32_MAX})",
    )
    parser.set_defaults(func=run)


def _max_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    status = 0
    for name in args.files:
        path = Path(name)
        print(f"Dumping {path}", file=out)
        try:
            dump_file(path, args, out)
        except DumpError as exc:
            print(f"logbus dump-log: {exc}", file=sys.stderr)
            status = 1
    return status


def dump_file(path: Path, args: argparse.Namespace, out: TextIO) -> None:
    name = path.name
    if name.endswith(".log"):
        _dump_log(path, args, out)
    elif name.endswith(".index"):
        _dump_offset_index(path, args, out)
    elif name.endswith(".timeindex"):
        _dump_time_index(path, args, out)
    elif name.endswith(".snapshot"):
        _dump_snapshot(path, out)
    elif name.endswith("checkpoint"):
        _dump_checkpoint(path, out)
    else:
        raise DumpError(
            f"{path}: unknown file type (expected .log, .index, .timeindex, .snapshot or "
            "a checkpoint file)"
        )


def _read(path: Path, limit: int | None = None) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read() if limit is None else f.read(limit)
    except OSError as exc:
        raise DumpError(f"cannot read {path}: {exc.strerror or exc}") from None


def _base_offset(path: Path) -> int:
    head = path.name.split(".", 1)[0]
    if not head.isdigit():
        raise DumpError(f"{path}: the file name does not start with a base offset")
    return int(head)


# -- .log -----------------------------------------------------------------------------------


def iter_log_batches(data: bytes) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(position, header, bytes) of each whole batch; stops at the first incomplete one."""
    view = memoryview(data)
    position = 0
    while len(view) - position >= HEADER_SIZE:
        _, length = peek_offset_and_length(view, position)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or position + size > len(view):
            return
        try:
            header = BatchHeader.parse(view, position)
        except InvalidBatch:
            return
        yield position, header, view[position : position + size]
        position += size


def _dump_log(path: Path, args: argparse.Namespace, out: TextIO) -> None:
    data = _read(path, args.max_bytes)
    deep = args.deep_iteration or args.print_data_log
    print(f"Log starting offset: {_base_offset(path)}", file=out)
    end = 0
    for position, header, batch in iter_log_batches(data):
        end = position + header.size
        valid = crc_is_valid(batch, header)
        print(_batch_line(position, header, valid), file=out)
        if not deep:
            continue
        try:
            records = decode_batch(batch, verify_crc=False)[1]
        except InvalidBatch as exc:
            print(f"| unreadable records: {exc}", file=out)
            continue
        for index, record in enumerate(records):
            print(_record_line(header, record, index, args.print_data_log), file=out)
    if end < len(data) and len(data) < args.max_bytes:
        print(f"Found {len(data) - end} invalid bytes at the end of {path.name}", file=out)


def _batch_line(position: int, h: BatchHeader, valid: bool) -> str:
    horizon = (
        f"OptionalLong[{h.base_timestamp}]"
        if h.attributes & DELETE_HORIZON_FLAG
        else "OptionalLong.empty"
    )
    timestamp_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    codec = CompressionType(h.compression).config_name if h.compression <= 4 else h.compression
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon} "
        f"position: {position} {timestamp_type}: {h.max_timestamp} size: {h.size} "
        f"magic: {h.magic} compresscodec: {codec} crc: {h.crc} isvalid: {str(valid).lower()}"
    )


def _record_line(h: BatchHeader, record: Record, index: int, with_data: bool) -> str:
    timestamp_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    sequence = -1 if h.base_sequence < 0 else (h.base_sequence + index) % (_INT32_MAX + 1)
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    header_keys = ",".join(key for key, _ in record.headers)
    line = (
        f"| offset: {record.offset} {timestamp_type}: {record.timestamp} keySize: {key_size} "
        f"valueSize: {value_size} sequence: {sequence} headerKeys: [{header_keys}]"
    )
    if h.is_control:
        try:
            control = decode_control_key(record.key)
            marker = decode_end_txn_marker(record.value)
            kind = ControlType(control.type).name if control.type in (0, 1) else control.type
            line += f" endTxnMarker: {kind} coordinatorEpoch: {marker.coordinator_epoch}"
        except ValueError:
            line += " controlRecord: unreadable"
    elif with_data:
        if record.key is not None:
            line += f" key: {_text(record.key)}"
        if record.value is not None:
            line += f" payload: {_text(record.value)}"
    return line


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# -- indexes ------------------------------------------------------------------------------


def _index_entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    data = _read(path)
    if len(data) % entry.size:
        raise DumpError(
            f"{path}: corrupt index: its size {len(data)} is not a multiple of {entry.size}"
        )
    return list(entry.iter_unpack(data))


def _log_beside(path: Path) -> Path:
    return path.with_name(f"{path.name.split('.', 1)[0]}.log")


def _dump_offset_index(path: Path, args: argparse.Namespace, out: TextIO) -> None:
    base = _base_offset(path)
    raw = _index_entries(path, _OFFSET_ENTRY)
    entries: list[tuple[int, int]] = []
    for i, (relative, position) in enumerate(raw):
        if i > 0 and relative == 0:
            break  # the preallocated, unused tail of an active segment's index
        entries.append((base + relative, position))
    if args.index_sanity_check:
        _sanity(path, [o for o, _ in entries], [p for _, p in entries], out)
        return
    log_path = _log_beside(path)
    data = _read(log_path) if log_path.exists() else None
    mismatches: list[str] = []
    for offset, position in entries:
        if data is not None:
            found = next(iter_log_batches(data[position:]), None)
            last = -1 if found is None else found[1].last_offset
            if last != offset:
                mismatches.append(f"  Index offset: {offset}, log offset: {last}")
        if not args.verify_index_only:
            print(f"offset: {offset} position: {position}", file=out)
    if data is None:
        print(f"{log_path.name} not found: entries not checked against the log", file=out)
    if mismatches:
        print(f"Mismatches in :{path}", file=out)
        for line in mismatches:
            print(line, file=out)


def _dump_time_index(path: Path, args: argparse.Namespace, out: TextIO) -> None:
    base = _base_offset(path)
    entries: list[tuple[int, int]] = []
    for i, (timestamp, relative) in enumerate(_index_entries(path, _TIME_ENTRY)):
        if i > 0 and timestamp == 0 and relative == 0:
            break
        entries.append((timestamp, base + relative))
    if args.index_sanity_check:
        _sanity(path, [o for _, o in entries], [t for t, _ in entries], out)
        return
    log_path = _log_beside(path)
    data = _read(log_path) if log_path.exists() else None
    errors: list[str] = []
    previous = -1
    for timestamp, offset in entries:
        if data is not None:
            batch = next((h for _, h, _ in iter_log_batches(data) if h.last_offset >= offset), None)
            if batch is None or batch.last_offset != offset:
                found = -1 if batch is None else batch.last_offset
                errors.append(f"  Indexed offset: {offset}, found log offset: {found}")
            elif batch.max_timestamp != timestamp:
                errors.append(
                    f"  Index timestamp: {timestamp}, log timestamp: {batch.max_timestamp}"
                )
            if previous >= timestamp:
                errors.append(
                    f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}"
                )
        previous = timestamp
        if not args.verify_index_only:
            print(f"timestamp: {timestamp} offset: {offset}", file=out)
    if data is None:
        print(f"{log_path.name} not found: entries not checked against the log", file=out)
    if errors:
        print(f"Mismatches in :{path}", file=out)
        for line in errors:
            print(line, file=out)


def _sanity(path: Path, offsets: list[int], second: list[int], out: TextIO) -> None:
    if any(b < a for a, b in pairwise(offsets)) or any(b < a for a, b in pairwise(second)):
        print(f"{path} failed sanity check: entries are not in increasing order", file=out)
    else:
        print(f"{path} passed sanity check.", file=out)


# -- snapshots and checkpoints ------------------------------------------------------------------


def _dump_snapshot(path: Path, out: TextIO) -> None:
    from logbus.storage.errors import CorruptSnapshotError
    from logbus.storage.producer_state import decode_snapshot

    try:
        entries = decode_snapshot(_read(path))
    except CorruptSnapshotError as exc:
        raise DumpError(f"{path}: {exc}") from None
    for e in entries:
        txn = "None" if e.current_txn_first_offset is None else e.current_txn_first_offset
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {e.last_timestamp}"
        )
        for b in e.batches:
            line += (
                f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} "
                f"lastOffset: {b.last_offset} offsetDelta: {b.offset_delta} "
                f"timestamp: {b.timestamp}"
            )
        print(line, file=out)


def _dump_checkpoint(path: Path, out: TextIO) -> None:
    lines = _read(path).decode("utf-8", "replace").splitlines()
    if len(lines) < 2 or not lines[0].isdigit() or not lines[1].isdigit():
        raise DumpError(f"{path}: not a checkpoint file (no version and count lines)")
    print(f"version: {lines[0]} entries: {lines[1]}", file=out)
    for line in lines[2:]:
        print(line, file=out)
