"""Volumes per scale. `full` keeps the issue's volumes where 20 minutes on 2 cores allow and
reduces the rest (the reasons are in bench/README.md); `small` is for a quick look, `tiny`
for the smoke test."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class Scale:
    name: str
    produce_bytes: int  # P1/C1 with 1 KiB values (logbus and Redis)
    produce_small_bytes: int  # P1 with 100-byte values
    p2_bytes: int  # P2 variants
    nafka_bytes: int  # nafka is ~100x slower: a smaller volume, same value sizes
    latency_seconds: float  # L1 per run
    latency_rate: int  # L1 records/s
    request_seconds: float  # R1 per run
    client_records_1k: int  # CL, per client and direction
    client_records_100: int
    runs: int
    failover_kills: int = 10  # F1: kill -9 of a leader, this many times in its one run
    txn_bytes: int = 512 * MIB  # TX2's log, and TX1's "~1 MB" cadence per run
    txn_seconds: float = 6.0  # TX1 per run and row (the 100 ms and 10 ms cadences)
    defaults_records_1k: int = 300_000  # D1, D3 per client and direction
    defaults_records_100: int = 1_000_000
    many_partitions: int = 1_000  # S1: produce spread over this many partitions
    hosted_partitions: int = 10_000  # S1: partitions on one broker, restarted
    idle_connections: int = 1_000  # S1: idle connections open during a P1 load


SCALES = {
    "full": Scale("full", 2048 * MIB, 256 * MIB, 1024 * MIB, 16 * MIB, 20.0, 10_000, 8.0,
                  200_000, 400_000, 3),
    "small": Scale("small", 256 * MIB, 32 * MIB, 128 * MIB, 8 * MIB, 5.0, 10_000, 3.0,
                   20_000, 40_000, 3, txn_bytes=128 * MIB, txn_seconds=3.0,
                   defaults_records_1k=100_000, defaults_records_100=300_000),
    "tiny": Scale("tiny", 8 * MIB, 1 * MIB, 4 * MIB, 1 * MIB, 1.0, 1_000, 0.5,
                  1_000, 2_000, 1, failover_kills=1,
                  txn_bytes=10 * MIB, txn_seconds=0.5,
                  defaults_records_1k=2_000, defaults_records_100=4_000,
                  many_partitions=60, hosted_partitions=200, idle_connections=50),
}
