"""`logbus dump-log` as a subprocess over files written by the real storage layer."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from logbus.storage.cleaner import Cleaner
from logbus.storage.log import Log
from logbus.storage.log_cleaner import CleanerConfig, LogCleaner
from logbus.storage.log_config import LogConfig
from logbus.storage.offset_map import OffsetMap
from logbus.storage.throttler import Throttler

CLI = [sys.executable, "-m", "logbus.cli.main", "dump-log"]


def dump(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def batch(
    pairs: list[tuple[bytes | None, bytes | None]], compression: int = 0, sequence: int = 0
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=5,
        producer_epoch=1,
        base_sequence=sequence,
        batch_size=1 << 30,
    )
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=1000 + i, key=key, value=value, headers=[("h", b"1")])
    return bytes(builder.build())


def write_log(tmp_path: Path) -> Log:
    log = Log(tmp_path / "events-0", LogConfig(index_interval_bytes=100), now_ms=0)
    for i in range(6):
        log.append_as_leader(batch([(b"k%d" % i, b"value-%d" % i), (b"x", b"y" * 50)], 0, 2 * i), 0)
    return log


def test_dump_a_segment_its_records_and_its_indexes(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    log.close()
    segment = tmp_path / "events-0" / "00000000000000000000.log"
    out = dump(segment)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 6
    first = batches[0]
    for field in (
        "baseOffset: 0 lastOffset: 1 count: 2",
        "baseSequence: 0 lastSequence: 1 producerId: 5 producerEpoch: 1",
        "isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty",
        "position: 0 CreateTime: 1001",
        "magic: 2 compresscodec: none",
        "isvalid: true",
    ):
        assert field in first
    assert not any(line.startswith("|") for line in lines)

    deep = dump(segment, "--print-data-log").stdout.splitlines()
    records = [line for line in deep if line.startswith("| offset:")]
    assert len(records) == 12
    assert records[0] == (
        "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 7 sequence: 0 headerKeys: [h] "
        "key: k0 payload: value-0"
    )
    shallow = dump(segment, "--deep-iteration").stdout
    assert "keySize: 2" in shallow and "payload:" not in shallow

    index = dump(segment.with_suffix(".index"))
    assert index.returncode == 0, index.stderr
    entries = re.findall(r"offset: (\d+) position: (\d+)", index.stdout)
    assert entries and "Mismatches" not in index.stdout
    time_index = dump(segment.with_suffix(".timeindex"))
    assert "timestamp: " in time_index.stdout and "Mismatches" not in time_index.stdout
    sanity = dump(segment.with_suffix(".index"), "--index-sanity-check")
    assert "passed sanity check." in sanity.stdout


def test_dump_reports_index_mismatches_and_damaged_batches(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    log.close()
    directory = tmp_path / "events-0"
    segment = directory / "00000000000000000000.log"
    index = segment.with_suffix(".index")
    raw = bytearray(index.read_bytes())
    struct.pack_into(">i", raw, 0, 4)  # first entry now claims the wrong offset
    index.write_bytes(bytes(raw))
    verify = dump(index, "--verify-index-only")
    assert "Mismatches in :" in verify.stdout
    assert "  Index offset: 4, log offset:" in verify.stdout
    assert "position:" not in verify.stdout

    data = bytearray(segment.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    segment.write_bytes(bytes(data) + b"\x00\x00\x00")
    out = dump(segment).stdout
    assert out.count("isvalid: false") == 1
    assert "Found 3 invalid bytes at the end of 00000000000000000000.log" in out


def test_dump_a_cleaned_segment_snapshot_and_checkpoint(tmp_path: Path) -> None:
    log = Log(tmp_path / "compacted-0", LogConfig(cleanup_policy="compact"), now_ms=0)
    log.append_as_leader(batch([(b"a", b"1"), (b"b", b"1")]), 0)
    log.append_as_leader(batch([(b"a", None)], sequence=2), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(CleanerConfig(), [tmp_path], lambda: [(("compacted", 0), log, tmp_path)])
    assert cleaner.clean_filthiest_log(Cleaner(OffsetMap(1 << 20), Throttler(1e12)), 5000)
    log.close()
    out = dump(tmp_path / "compacted-0" / "00000000000000000000.log", "--print-data-log").stdout
    assert "deleteHorizonMs: OptionalLong[86405000]" in out
    assert "| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 0 sequence: 1" not in out
    assert "| offset: 2 CreateTime: 1000 keySize: 1 valueSize: -1 sequence: 2" in out
    snapshot = next((tmp_path / "compacted-0").glob("*.snapshot"))
    snap = dump(snapshot)
    assert "producerId: 5 producerEpoch: 1" in snap.stdout and snap.returncode == 0
    checkpoint = dump(tmp_path / "cleaner-offset-checkpoint")
    assert checkpoint.stdout.splitlines()[1:] == ["version: 0 entries: 1", "compacted 0 3"]


def test_unreadable_and_unknown_files_fail_with_a_message(tmp_path: Path) -> None:
    missing = dump(tmp_path / "00000000000000000000.log")
    assert missing.returncode == 1
    assert "cannot read" in missing.stderr and "No such file" in missing.stderr
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    unknown = dump(other)
    assert unknown.returncode == 1 and "unknown file type" in unknown.stderr
    bad_index = tmp_path / "00000000000000000000.index"
    bad_index.write_bytes(b"\x00" * 5)
    corrupt = dump(bad_index)
    assert corrupt.returncode == 1 and "not a multiple of 8" in corrupt.stderr
    usage = dump(tmp_path / "x.log", "--max-bytes", "0")
    assert usage.returncode == 2 and "must be at least 1" in usage.stderr
