"""The transactional producer's methods (`transactional.id`), mixed into
`logbus.aio.Producer`: thin calls into its `TransactionManager`
(`transaction_manager.py`), which holds the state and talks to the coordinators."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from logbus.client.errors import KafkaError
from logbus.client.producer.transaction_manager import TransactionManager
from logbus.client.requests.transactions import TxnOffset
from logbus.client.types import ConsumerGroupMetadata, TopicPartition
from logbus.protocol import ErrorCode


class TransactionalProducer:
    """`init_transactions`, `begin_transaction`, `send_offsets_to_transaction`,
    `commit_transaction`, `abort_transaction` (the Producer provides what is declared
    here)."""

    _txn: TransactionManager | None
    _max_block: float

    def _check_open(self) -> Any:
        raise NotImplementedError

    async def _flush_all(self, *, first: bool = False) -> None:
        raise NotImplementedError

    def _transactions(self) -> TransactionManager:
        self._check_open()
        if self._txn is None:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                "transactions need a transactional.id in the producer's configuration",
            )
        return self._txn

    def _timeout(self, timeout: float | None) -> float:
        return self._max_block if timeout is None else timeout

    async def init_transactions(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Get this transactional id's producer id and epoch from its coordinator, which
        fences any earlier producer with the same id and aborts (or completes) its open
        transaction. Once, before the first transaction; `timeout` (seconds, default
        max.block.ms) raises KafkaTimeoutError, after which it may be called again."""
        await self._transactions().initialize(self._timeout(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction: records sent from now on are committed or aborted together."""
        self._transactions().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> None:
        """Commit a consumer's offsets as part of the transaction (consume-transform-
        produce): `offsets` maps partitions to the next offset to read (an int, or an
        OffsetAndMetadata); `group_metadata` is the consumer's `group_metadata()`."""
        group = (
            ConsumerGroupMetadata(group_metadata)
            if isinstance(group_metadata, str)
            else group_metadata
        )
        txn_offsets = {TopicPartition(*tp): _txn_offset(o) for tp, o in offsets.items()}
        await self._transactions().send_offsets(txn_offsets, group, self._timeout(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Send every record of the transaction, then commit it. A record that failed
        raises TransactionAbortableError (abort next); ProducerFencedError is fatal."""
        await self._transactions().commit(
            functools.partial(self._flush_all, first=True), self._timeout(timeout)
        )

    async def abort_transaction(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Abort the transaction: records not yet sent fail with TransactionAbortedError,
        those written are never shown to read_committed consumers."""
        await self._transactions().abort(self._timeout(timeout))


def _txn_offset(value: Any) -> TxnOffset:
    if isinstance(value, int):
        return TxnOffset(value)
    leader_epoch = getattr(value, "leader_epoch", None)
    return TxnOffset(
        value.offset,
        getattr(value, "metadata", "") or "",
        -1 if leader_epoch is None else leader_epoch,
    )
