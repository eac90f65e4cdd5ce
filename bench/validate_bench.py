"""CPU cost of record validation on append (`storage.log_validator.analyze_records`), in
one process, no sockets: ns per record and us per batch for 1 KiB and 100 B records,
uncompressed and zstd, against the batch-level checks alone (header and CRC, what appends
did before records were validated), with the compiled record walker and the numpy one.

    python -m bench.validate_bench [--rounds 30]

Batch sizes: what librdkafka sends in P1 (batch.size 1 MB, linger.ms 5, 6 partitions: a
request carries one batch per partition of a few hundred to ~5,000 records, ~1,000 for
1 KiB values and ~2,000 for 100 B ones), ~1 MB batches, and batches of 1 and 10 records
(a client with linger.ms=0) for the fixed cost per batch. Values are P1's (half random
bytes, half text: ~2:1 under zstd). Each figure is the best of `--rounds` timings (the
machine's noise only ever adds).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.load_kafka import make_values
from logbus.records.batch import HEADER_SIZE, BatchHeader, crc_is_valid
from logbus.records.builder import build_batch
from logbus.records.compression import CompressionType, decompress_bounded
from logbus.records.validation import COMPILED, check_records, decompressed_limit
from logbus.storage.log_validator import analyze_records

MAX_MESSAGE_BYTES = 2 << 20
# (value size, records per batch)
BATCHES = [(1024, 1), (1024, 967), (1024, 1000), (100, 1), (100, 10), (100, 1862),
           (100, 9500)]


def header_and_crc(batch: bytes) -> None:
    """The checks an append made before records were validated."""
    header = BatchHeader.parse(batch)
    assert crc_is_valid(batch, header)


def validate(batch: bytes) -> None:
    """What an append checks (with the compiled walker, when it is built)."""
    analyze_records(batch, max_message_bytes=MAX_MESSAGE_BYTES, from_client=True)


def validate_numpy(batch: bytes) -> None:
    """The same with the numpy walker."""
    header = BatchHeader.parse(batch)
    assert crc_is_valid(batch, header)
    body = memoryview(batch)[HEADER_SIZE:]
    if header.compression:
        body = decompress_bounded(header.compression, body, decompressed_limit(MAX_MESSAGE_BYTES))
    check_records(body, header, want_keyless=False, compiled=False)


def best(action: Callable[[bytes], None], batch: bytes, rounds: int) -> float:
    """The shortest of `rounds` timings (each of enough calls to take ~2 ms), in s."""
    action(batch)  # warm up (imports, caches)
    start = time.perf_counter()
    action(batch)
    calls = max(1, int(0.002 / max(time.perf_counter() - start, 1e-7)))
    shortest = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            action(batch)
        shortest = min(shortest, (time.perf_counter() - start) / calls)
    return shortest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    walkers = [("compiled", validate)] if COMPILED else []
    walkers.append(("numpy", validate_numpy))
    print(f"{'value':>6} {'records':>7} {'codec':>5} {'check':>10} {'us/batch':>9} "
          f"{'ns/record':>9} {'extra ns/rec':>12}")
    for size, count in BATCHES:
        values = make_values(size)
        records = [(None, values[i % len(values)]) for i in range(count)]
        for codec in (CompressionType.NONE, CompressionType.ZSTD):
            batch = build_batch(records, compression=codec)
            base = best(header_and_crc, batch, args.rounds)
            rows = [("header+crc", base)]
            rows += [(name, best(action, batch, args.rounds)) for name, action in walkers]
            for name, seconds in rows:
                extra = "" if name == "header+crc" else f"{(seconds - base) / count * 1e9:12.0f}"
                print(f"{size:>4} B {count:>7} {codec.config_name:>5} {name:>10} "
                      f"{seconds * 1e6:>9.1f} {seconds / count * 1e9:>9.0f} {extra:>12}")


if __name__ == "__main__":
    main()
