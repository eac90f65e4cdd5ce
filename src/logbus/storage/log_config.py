"""Per-log settings: the storage-relevant topic configs under snake_case names.

The server maps Kafka's names (`segment.bytes`, `flush.ms`, ...) onto these fields; the
defaults are Kafka's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_MAX = (1 << 63) - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Immutable settings of one log; replace the whole value to change a config."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    # Compaction (read by the log cleaner at the start of every pass).
    delete_retention_ms: int = 86400000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    # Read by the partition for acks=all (Kafka keeps it in the log config too).
    min_insync_replicas: int = 1
    # Most random time taken off segment_ms for each new segment, to spread rolls.
    segment_jitter_ms: int = 0
    # "producer" stores batches as produced; a codec name (or "uncompressed") makes the
    # leader rewrite batches that use another codec.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    # CreateTime timestamps further than these from the broker's clock are rejected.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    # Accepted for compatibility; logbus never preallocates log files.
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    message_downconversion_enable: bool = True

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact(self) -> bool:
        return "compact" in _policies(self.cleanup_policy)

    @property
    def delete(self) -> bool:
        return "delete" in _policies(self.cleanup_policy)


def _policies(value: str) -> set[str]:
    return {part.strip() for part in value.split(",") if part.strip()}
