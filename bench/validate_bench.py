"""CPU cost of record validation on append (`storage.log_validator.analyze_records`), in
one process, no sockets: ns per record and MB/s for ~1 MB batches of 1 KiB and 100 B
records, uncompressed and zstd, against the batch-level checks alone (header and CRC,
what appends did before records were validated).

    python -m bench.validate_bench [--rounds 30]

Each figure is the median of `--rounds` timings; the machine's noise shows in the
spread printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from logbus.records.batch import BatchHeader, crc_is_valid
from logbus.records.builder import build_batch
from logbus.records.compression import CompressionType
from logbus.storage.log_validator import analyze_records

BATCH_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 2 << 20


def header_and_crc(batch: bytes) -> None:
    """The checks an append made before records were validated."""
    header = BatchHeader.parse(batch)
    assert crc_is_valid(batch, header)


def validate(batch: bytes) -> None:
    analyze_records(batch, max_message_bytes=MAX_MESSAGE_BYTES, from_client=True)


def timed(action: Callable[[bytes], None], batch: bytes, rounds: int) -> list[float]:
    action(batch)  # warm up (imports, caches)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        action(batch)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print(f"{'records':>8} {'codec':>5} {'check':>12} {'ns/record':>10} {'MB/s':>8} {'spread':>16}")
    for size in (1024, 100):
        count = BATCH_BYTES // (size + 10)
        value = bytes(range(256)) * (size // 256 + 1)
        records = [(None, value[:size])] * count
        for codec in (CompressionType.NONE, CompressionType.ZSTD):
            batch = build_batch(records, compression=codec)
            for name, action in (("header+crc", header_and_crc), ("records", validate)):
                seconds = timed(action, batch, args.rounds)
                median = statistics.median(seconds)
                uncompressed_mb = count * (size + 10) / 1e6
                print(
                    f"{size:>6} B {codec.config_name:>5} {name:>12} "
                    f"{median / count * 1e9:>10.0f} {uncompressed_mb / median:>8.0f} "
                    f"{min(seconds) * 1e6:>7.0f}-{max(seconds) * 1e6:<7.0f}us"
                )


if __name__ == "__main__":
    main()
