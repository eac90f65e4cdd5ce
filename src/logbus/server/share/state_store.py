"""A share partition leader's way to the share coordinator (Kafka's `Persister`): the state
of `(group, topic, partition)` is kept by the leader of the `__share_group_state` partition
its key hashes to. When that is this broker, the local `ShareCoordinator` is called; else
ReadShareGroupState / WriteShareGroupState go to that broker on the inter-broker listener.
NOT_COORDINATOR, a coordinator still loading, or a broker not answering are retried (the
leader comes from the metadata cache, which a leader change updates) until
`request_timeout_ms`; then the call fails with a `ShareStateError`.

A group coordinator uses it too, for many partitions of one group at once (`summaries`,
`delete`: DescribeShareGroupOffsets, DeleteShareGroupOffsets): one ReadShareGroupStateSummary
or DeleteShareGroupState per share coordinator, retried for the partitions that got a
retriable error, each partition's own error kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from uuid import UUID

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError
from logbus.client.requests.share_state import (
    StatePartitions,
    StateSummary,
    delete_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from logbus.client.security import PLAINTEXT, ClientSecurity
from logbus.controller.cluster_metadata import MetadataCache
from logbus.coordinator.share.share_partition import RecordState, StateBatch
from logbus.coordinator.share.state_coordinator import ShareCoordinator, ShareStateError
from logbus.coordinator.share.state_records import (
    SHARE_STATE_TOPIC,
    SavedState,
    ShareStateKey,
    state_partition_for,
)
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

V = TypeVar("V")
NO_STATE = StateSummary(ErrorCode.NONE, 0, -1, -1)

RETRY_BACKOFF_S = 0.1
RETRIABLE = frozenset({
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
})


class CoordinatorStateStore:
    """`ShareStateStore` over the share coordinators of the cluster. Owned by the broker's
    event loop; `close()` drops its connections."""

    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        local: ShareCoordinator,
        listener: Callable[[], str],
        request_timeout_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self.local = local
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.security: ClientSecurity = PLAINTEXT
        self._conns: dict[int, Connection] = {}

    def _key(self, key: tuple[str, str, int]) -> ShareStateKey:
        group_id, topic, partition = key
        meta = self.cache.topics.get(topic)
        if meta is None:
            raise ShareStateError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return ShareStateKey(group_id, meta.topic_id, partition)

    def _leader(self, key: ShareStateKey) -> int | None:
        meta = self.cache.topics.get(SHARE_STATE_TOPIC)
        if meta is None or not meta.partitions:
            return None
        state = meta.partitions.get(state_partition_for(key, len(meta.partitions)))
        if state is None or state.leader < 0:
            return None
        return state.leader

    async def read(self, key: tuple[str, str, int]) -> SavedState | None:
        state_key = self._key(key)
        result: SavedState | None = None

        async def attempt() -> ErrorCode:
            nonlocal result
            leader = self._leader(state_key)
            if leader is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if leader == self.broker_id:
                result = self.local.read(state_key)
                return ErrorCode.NONE
            answer = await read_share_group_state(
                await self._connection(leader), state_key.group_id, state_key.topic_id,
                state_key.partition, -1,
            )
            error = ErrorCode(answer["error_code"])
            if error == ErrorCode.NONE and answer["start_offset"] >= 0:
                result = SavedState(
                    answer["start_offset"], answer["state_epoch"],
                    [StateBatch(b["first_offset"], b["last_offset"],
                                RecordState(b["delivery_state"]), b["delivery_count"])
                     for b in answer["state_batches"]],
                )
            return error

        await self._retrying(attempt)
        return result

    async def write(self, key: tuple[str, str, int], state: SavedState) -> None:
        state_key = self._key(key)

        async def attempt() -> ErrorCode:
            leader = self._leader(state_key)
            if leader is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if leader == self.broker_id:
                await self.local.write(state_key, state)
                return ErrorCode.NONE
            return await write_share_group_state(
                await self._connection(leader), state_key.group_id, state_key.topic_id,
                state_key.partition, state.state_epoch, state.leader_epoch, state.start_offset,
                [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                  "delivery_state": int(b.state), "delivery_count": b.delivery_count}
                 for b in state.batches],
            )

        await self._retrying(attempt)

    async def summaries(self, keys: list[ShareStateKey]) -> dict[ShareStateKey, StateSummary]:
        """Each key's start offset, state epoch and leader epoch (`NO_STATE` where none
        is kept), or the error its share coordinator answered."""

        async def local(key: ShareStateKey) -> StateSummary:
            state = self.local.read(key)
            if state is None:
                return NO_STATE
            return StateSummary(
                ErrorCode.NONE, state.state_epoch, state.leader_epoch, state.start_offset
            )

        async def remote(
            conn: Connection, group_id: str, partitions: StatePartitions
        ) -> dict[tuple[UUID, int], StateSummary]:
            return await read_share_group_state_summary(conn, group_id, partitions)

        def failed(error: ErrorCode) -> StateSummary:
            return StateSummary(error, 0, -1, -1)

        return await self._on_coordinators(
            keys, local, remote, failed, lambda s: s.error, NO_STATE
        )

    async def delete(self, keys: list[ShareStateKey]) -> dict[ShareStateKey, ErrorCode]:
        """Delete the state kept for each key; each key's error (NONE once deleted)."""

        async def local(key: ShareStateKey) -> ErrorCode:
            await self.local.delete(key)
            return ErrorCode.NONE

        async def remote(
            conn: Connection, group_id: str, partitions: StatePartitions
        ) -> dict[tuple[UUID, int], ErrorCode]:
            return await delete_share_group_state(conn, group_id, partitions)

        return await self._on_coordinators(
            keys, local, remote, lambda e: e, lambda e: e, ErrorCode.NONE
        )

    async def _on_coordinators(
        self,
        keys: list[ShareStateKey],
        local: Callable[[ShareStateKey], Awaitable[V]],
        remote: Callable[
            [Connection, str, StatePartitions], Awaitable[dict[tuple[UUID, int], V]]
        ],
        failed: Callable[[ErrorCode], V],
        error_of: Callable[[V], ErrorCode],
        absent: V,
    ) -> dict[ShareStateKey, V]:
        """`local` for the keys this broker's share coordinator keeps, one `remote` call
        per other coordinator (keys of one group), until no key has a retriable error or
        `request_timeout_ms` has passed."""
        results: dict[ShareStateKey, V] = {}
        if SHARE_STATE_TOPIC not in self.cache.topics:
            return dict.fromkeys(keys, absent)  # no share group ever kept a state
        pending = list(keys)
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while pending:
            by_leader: dict[int | None, list[ShareStateKey]] = {}
            for key in pending:
                by_leader.setdefault(self._leader(key), []).append(key)
            for leader, batch in by_leader.items():
                results.update(await self._on_coordinator(leader, batch, local, remote, failed))
            pending = [k for k in pending if error_of(results[k]) in RETRIABLE]
            if pending and time.monotonic() >= deadline:
                break
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return results

    async def _on_coordinator(
        self,
        leader: int | None,
        keys: list[ShareStateKey],
        local: Callable[[ShareStateKey], Awaitable[V]],
        remote: Callable[
            [Connection, str, StatePartitions], Awaitable[dict[tuple[UUID, int], V]]
        ],
        failed: Callable[[ErrorCode], V],
    ) -> dict[ShareStateKey, V]:
        if leader is None:
            return dict.fromkeys(keys, failed(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if leader == self.broker_id:
            found: dict[ShareStateKey, V] = {}
            for key in keys:
                try:
                    found[key] = await local(key)
                except ShareStateError as exc:
                    found[key] = failed(exc.error)
            return found
        found = {}
        for group_id in {k.group_id for k in keys}:
            partitions: StatePartitions = {}
            for key in keys:
                if key.group_id == group_id:
                    partitions.setdefault(key.topic_id, []).append(key.partition)
            try:
                answered = await remote(await self._connection(leader), group_id, partitions)
            except ShareStateError as exc:
                answered = {}
                error = exc.error
            except (KafkaError, OSError, TimeoutError) as exc:
                log.debug("share state request failed: %s", exc)
                answered = {}
                error = ErrorCode.NETWORK_EXCEPTION
            else:
                error = ErrorCode.UNKNOWN_SERVER_ERROR  # a partition left out of the answer
            for key in keys:
                if key.group_id == group_id:
                    answer = answered.get((key.topic_id, key.partition))
                    found[key] = failed(error) if answer is None else answer
        return found

    async def _retrying(self, attempt: Callable[[], object]) -> None:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            try:
                error = await attempt()  # type: ignore[misc]
            except ShareStateError as exc:
                error = exc.error
            except (KafkaError, OSError, TimeoutError) as exc:
                log.debug("share state request failed: %s", exc)
                error = ErrorCode.NETWORK_EXCEPTION
            if error == ErrorCode.NONE:
                return
            if error not in RETRIABLE or time.monotonic() >= deadline:
                raise ShareStateError(error)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _connection(self, broker_id: int) -> Connection:
        conn = self._conns.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        info = self.cache.brokers.get(broker_id)
        if info is None:
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        endpoint = info.endpoint(self.listener())
        timeout = self.request_timeout_ms / 1000
        conn = await Connection.connect(
            endpoint.host, endpoint.port,
            client_id=f"broker-{self.broker_id}-share-state",
            connect_timeout=timeout, request_timeout=timeout, security=self.security,
        )
        old = self._conns.get(broker_id)
        if old is not None and old is not conn:
            await old.close()
        self._conns[broker_id] = conn
        return conn

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()
