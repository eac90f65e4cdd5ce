"""Errors a client sees: a Kafka error code from the broker, or a broken connection."""

from __future__ import annotations

from logbus.protocol import RETRIABLE, ErrorCode


def error_name(code: int) -> str:
    """The protocol name of an error code (`UNKNOWN_TOPIC_OR_PARTITION`), or its number."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


class KafkaError(Exception):
    """An error the broker reported with an error code (and perhaps a message).

    `retriable` says whether sending the same request again may succeed (Kafka's
    RetriableException family).
    """

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.message = message
        super().__init__(self.__str__())

    @property
    def name(self) -> str:
        return error_name(self.code)

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE

    def __str__(self) -> str:
        if self.message:
            return f"{self.name}: {self.message}"
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {self.message!r})"


class KafkaConnectionError(KafkaError, ConnectionError):
    """The connection to a broker could not be made, broke, or was closed (our side or
    theirs). Requests that were in flight on it fail with this error."""

    def __init__(self, message: str, code: int = ErrorCode.NETWORK_EXCEPTION) -> None:
        KafkaError.__init__(self, code, message)

    @property
    def retriable(self) -> bool:
        return True

    def __str__(self) -> str:
        return self.message or self.name


class KafkaTimeoutError(KafkaConnectionError):
    """A request got no response in time; the connection is closed, as the Java client does,
    because the broker may be stuck and later responses would arrive out of step."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.REQUEST_TIMED_OUT)


def check(code: int, message: str | None = None) -> None:
    """Raise KafkaError unless `code` is NONE."""
    if code != ErrorCode.NONE:
        raise KafkaError(code, message)


class LocalError(KafkaError):
    """An error of the client's own, not the broker's: no error code of its own
    (UNKNOWN_SERVER_ERROR), the message says it all, and trying again will not help."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)

    @property
    def retriable(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.message or self.name


class ClientClosedError(LocalError):
    """The client was closed: the call cannot be served, or the records it held were
    dropped unsent (what `close(timeout=0)` does to what is still buffered)."""


class SerializationError(LocalError, ValueError):
    """A key or value the configured serializer could not turn into bytes (Kafka's
    SerializationException); raised by `send()` before anything is buffered."""


# --- transactions (KIP-98) ------------------------------------------------------------


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional.id has started (a newer epoch): this
    one can do nothing more but close (fatal, as Kafka's ProducerFencedException)."""

    def __init__(self, message: str | None = None, code: int = ErrorCode.PRODUCER_FENCED) -> None:
        super().__init__(code, message)

    @property
    def retriable(self) -> bool:
        return False


class TransactionAbortableError(KafkaError):
    """The current transaction failed (a send, an offset commit, ...): it can only be
    aborted, after which the producer starts new transactions as before. `code` is the
    error the transaction failed with."""

    @property
    def retriable(self) -> bool:
        return False


class InvalidTxnStateError(KafkaError):
    """A transactional method called in a state that does not allow it (send outside a
    transaction, commit before begin, ...), or the coordinator's INVALID_TXN_STATE."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.INVALID_TXN_STATE, message)

    @property
    def retriable(self) -> bool:
        return False


class TransactionAbortedError(LocalError):
    """A record of a transaction that was aborted before it was sent (Kafka's
    TransactionAbortedException): it is not written."""
