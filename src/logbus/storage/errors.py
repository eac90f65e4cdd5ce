"""Typed storage errors, each carrying the Kafka error code a response should report.

The API layer maps an exception to its response with `exc.error_code`; nothing here
imports the protocol package, so the numbers are repeated from Kafka's error table.
"""

from __future__ import annotations

from typing import ClassVar


class StorageError(Exception):
    """Base class of every error the storage layer raises on purpose."""

    error_code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset below the log start or above the log end."""

    error_code = 1  # OFFSET_OUT_OF_RANGE


class CorruptRecordError(StorageError):
    """A batch failed its CRC, or its lengths are impossible (the producer's bytes are bad)."""

    error_code = 2  # CORRUPT_MESSAGE


class RecordTooLargeError(StorageError):
    """One batch is larger than the topic's max.message.bytes."""

    error_code = 10  # MESSAGE_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp is outside message.timestamp.before/after.max.ms of now."""

    error_code = 32  # INVALID_TIMESTAMP


class RecordListTooLargeError(StorageError):
    """The records of one append are larger than a whole segment."""

    error_code = 18  # RECORD_LIST_TOO_LARGE


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's sequence number is not the next one expected."""

    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(StorageError):
    """A batch repeats an earlier one (not raised by appends, which report duplicates in
    `AppendInfo.duplicate` as Kafka does; kept for callers that need the code)."""

    error_code = 46  # DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """A producer wrote with an epoch older than the last one seen for its id."""

    error_code = 47  # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    """A producer with an open transaction wrote a non-transactional batch."""

    error_code = 48  # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker came with a coordinator epoch older than the last one seen."""

    error_code = 52  # TRANSACTION_COORDINATOR_FENCED


class KafkaStorageError(StorageError):
    """A disk operation failed; the partition's log dir may be unusable."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class InvalidRecordError(StorageError):
    """A batch is well formed but breaks a rule (wrong magic, bad count, control batch
    from a client, missing key on a compacted topic). `record_errors` names the offending
    records as (index of the record in its batch, message), as Kafka's produce response
    reports them."""

    error_code = 87  # INVALID_RECORD

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


class InconsistentTopicIdError(StorageError):
    """`partition.metadata` names a different topic id than the one the caller expects."""

    error_code = 103  # INCONSISTENT_TOPIC_ID


class InconsistentBrokerMetadataError(KafkaStorageError):
    """`meta.properties` disagrees with the configured broker id or cluster id."""


class CorruptIndexError(KafkaStorageError):
    """An index file failed its sanity check; the segment rebuilds it from the log."""


class CorruptSnapshotError(KafkaStorageError):
    """A producer state snapshot failed its CRC or could not be parsed."""


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint file is malformed."""
