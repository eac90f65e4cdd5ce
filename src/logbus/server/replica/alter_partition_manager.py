"""The leader's side of ISR changes: AlterPartition requests to the controller (Kafka's
`DefaultAlterPartitionManager`, ZooKeeper mode 2.7+).

A partition has at most one change in flight; `submit` refuses a second. Changes queued
while a request is in flight go out together in the next one. The controller is the
broker the metadata cache names (`controller_id`), reached over the inter-broker
listener with the client's request layer. A request-wide error (NOT_CONTROLLER,
STALE_BROKER_EPOCH, a lost connection) sends the changes again after
replica.fetch.backoff.ms, as long as their partition still waits for them; a
partition-level answer (the new ISR and partition epoch, or FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, ...) goes to the submitter's callback.
Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.alter_partition import IsrChange, alter_partition
from logbus.client.security import PLAINTEXT, ClientSecurity
from logbus.protocol import ErrorCode
from logbus.server.replica.partition import Partition
from logbus.types import TopicPartition

logger = logging.getLogger(__name__)

# Partition-level answers after which the same change is sent again: a controller that
# is not (or no longer) the active one, or one that did not get to the partition.
RETRIABLE = frozenset(
    {ErrorCode.NOT_CONTROLLER, ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.UNKNOWN_SERVER_ERROR}
)

# (error, leader epoch, ISR, partition epoch) as the controller answered
AlterPartitionCallback = Callable[[ErrorCode, int, tuple[int, ...], int], None]
# the controller's broker id and address, if known
ControllerEndpoint = Callable[[], "tuple[int, str, int] | None"]


@dataclass(slots=True)
class _Item:
    part: Partition
    proposed: tuple[int, ...]
    change: IsrChange
    callback: AlterPartitionCallback

    @property
    def wanted(self) -> bool:
        """Whether the partition still waits for this change."""
        return self.part.pending_isr == self.proposed


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        controller: ControllerEndpoint,
        broker_epoch: Callable[[], int] = lambda: -1,
        retry_backoff_ms: int = 1000,
        request_timeout_ms: int = 30000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.security = security
        self.controller = controller
        self.broker_epoch = broker_epoch
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._unsent: dict[TopicPartition, _Item] = {}
        self._in_flight: dict[TopicPartition, _Item] = {}
        self._wake = asyncio.Event()
        self._conn: Connection | None = None
        self._conn_to = -1
        self._task: asyncio.Task[None] | None = None

    def submit(
        self, part: Partition, proposed: tuple[int, ...], callback: AlterPartitionCallback
    ) -> bool:
        """Queue a proposed ISR for `part`; False if one is already queued or in flight."""
        tp = TopicPartition(part.topic, part.index)
        if tp in self._unsent or tp in self._in_flight:
            return False
        epochs = {r: s.broker_epoch for r, s in part.remote.items()}
        change = IsrChange(
            part.topic_id, part.leader_epoch, proposed, part.partition_epoch, epochs
        )
        self._unsent[tp] = _Item(part, proposed, change, callback)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"alter-partition-{self.broker_id}"
            )
        self._wake.set()
        return True

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._close()

    async def _close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _connection(self) -> Connection | None:
        found = self.controller()
        if found is None:
            return None
        controller_id, host, port = found
        if self._conn is not None and (self._conn.closed or self._conn_to != controller_id):
            await self._close()
        if self._conn is None:
            timeout = self.request_timeout_ms / 1000
            self._conn = await Connection.connect(
                host,
                port,
                client_id=f"broker-{self.broker_id}-alter-partition",
                connect_timeout=timeout,
                request_timeout=timeout,
                security=self.security,
            )
            self._conn_to = controller_id
        return self._conn

    async def _run(self) -> None:
        backoff = self.retry_backoff_ms / 1000
        while True:
            if not self._unsent:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = {tp: item for tp, item in self._unsent.items() if item.wanted}
            self._unsent = {}
            if not batch:
                continue
            self._in_flight = batch
            try:
                retry = await self._send(batch)
            finally:
                self._in_flight = {}
            if retry:
                for tp, item in retry.items():
                    self._unsent.setdefault(tp, item)
                await asyncio.sleep(backoff)

    async def _send(self, batch: dict[TopicPartition, _Item]) -> dict[TopicPartition, _Item]:
        """Send one request; returns the changes to send again."""
        try:
            conn = await self._connection()
            if conn is None:
                logger.info("AlterPartition: no controller known; retrying")
                return batch
            response = await alter_partition(
                conn,
                self.broker_id,
                self.broker_epoch(),
                {tp: item.change for tp, item in batch.items()},
            )
        except (KafkaError, OSError) as exc:
            logger.info("AlterPartition to the controller failed: %s; retrying", exc)
            await self._close()
            return batch
        if response.error_code != ErrorCode.NONE:
            logger.info(
                "AlterPartition refused: %s; retrying", ErrorCode(response.error_code).name
            )
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                await self._close()
            return batch
        retry: dict[TopicPartition, _Item] = {}
        for tp, item in batch.items():
            result = response.partitions[tp]
            if isinstance(result, KafkaError):
                code = ErrorCode(result.code)
                if code in RETRIABLE:
                    retry[tp] = item
                    continue
                item.callback(code, -1, (), -1)
            else:
                item.callback(
                    ErrorCode.NONE, result.leader_epoch, result.isr, result.partition_epoch
                )
        return retry
