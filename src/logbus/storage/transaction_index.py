"""The transaction index (`.txnindex`) of one segment: the aborted transactions whose
ABORT marker lies in the segment, in Kafka's byte format.

Each entry is 34 bytes, big-endian: version int16 (0), producer id int64, first offset
int64, last offset int64 (the marker's offset), last stable offset int64 (the partition's
LSO when the transaction completed). A read_committed fetch collects from the indexes of
the segments it reads the aborted transactions that overlap the fetched range, and the
consumer drops their records.

Aborts are rare, so the file is opened for each append and read whole when needed; the
entries are cached once read.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from logbus.storage.errors import CorruptIndexError

if TYPE_CHECKING:
    from logbus.storage.segment import LogSegment

TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a range; `is_complete` when an entry of this index
    reached the upper bound (later segments cannot add any)."""

    aborted: list[AbortedTxn]
    is_complete: bool


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(TXN_INDEX_VERSION, *txn)


def decode_entries(data: bytes, path: Path | str = "<bytes>") -> list[AbortedTxn]:
    """Parse a whole index; raise CorruptIndexError on a partial entry or unknown version."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            f"transaction index {path} has {len(data)} bytes, not a multiple of {ENTRY_SIZE}"
        )
    out = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
        if version != TXN_INDEX_VERSION:
            raise CorruptIndexError(f"transaction index {path} has entry version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The `.txnindex` file of one segment (created on the first abort)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            try:
                self._entries = decode_entries(data, self.path)
            except CorruptIndexError:
                # Keep the whole entries; a torn tail (crash mid-append) is dropped.
                whole = len(data) - len(data) % ENTRY_SIZE
                self._entries = decode_entries_lenient(data[:whole])
        return self._entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} is not after the last one "
                f"of {self.path} ({entries[-1].last_offset})"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, encode_entry(txn))
        finally:
            os.close(fd)
        entries.append(txn)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """The aborted transactions with a record in [fetch_offset, upper_bound)."""
        found = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions whose marker is at or after `offset`."""
        entries = self._load()
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            self._rewrite(kept)

    def reset(self) -> None:
        """Empty the index (its segment is being recovered and the index rebuilt)."""
        self._entries = []
        self.path.unlink(missing_ok=True)

    def replace(self, entries: list[AbortedTxn]) -> None:
        self._rewrite(list(entries))

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.reset()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(encode_entry(e) for e in entries))
        os.replace(tmp, self.path)
        self._entries = entries

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = None


def decode_entries_lenient(data: bytes) -> list[AbortedTxn]:
    """Whole entries of any version (used after a torn append)."""
    return [
        AbortedTxn(pid, first, last, lso) for _v, pid, first, last, lso in _ENTRY.iter_unpack(data)
    ]


def collect_aborted_transactions(
    segments: Sequence[LogSegment], base_offsets: Sequence[int], start: int, upper_bound: int
) -> list[AbortedTxn]:
    """Kafka's `collectAbortedTransactions`: the aborted transactions with records in
    [start, upper_bound), from the index of the segment holding `start` onward until an
    index says later ones cannot add any."""
    out: list[AbortedTxn] = []
    first = max(0, bisect_right(base_offsets, start) - 1)
    for segment in segments[first:]:
        result = segment.txn_index.collect_aborted(start, upper_bound)
        out.extend(result.aborted)
        if result.is_complete or segment.base_offset >= upper_bound:
            break
    return out
