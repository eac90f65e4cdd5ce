"""How the Admin client sends a call: where (the controller, partition leaders, group or
transaction coordinators, a resource's broker, every broker) and how often.

`AdminCalls` owns the admin's connections (`cluster`) and its retry settings
(`default.api.timeout.ms`, `retries`, `retry.backoff.ms`, `retry.backoff.max.ms`,
`request.timeout.ms`). A call on several items is an *attempt*: given the items still to
do, a result or a KafkaError per item. `each` runs it, again on the items that failed
with a retriable error (after fresh metadata and a backoff) while time and retries are
left, and raises `AdminBatchError` naming each item that failed for good. `Admin`
(`client.py`), `transactions.py` and `leader_elections.py` build their calls on these
methods only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from logbus.client import coordinator_lookup
from logbus.client.admin.types import AdminBatchError, ConfigResource, ResourceType
from logbus.client.cluster import Cluster
from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, KafkaTimeoutError
from logbus.client.requests.find_coordinator import GROUP_KEY
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
# One try at some items: given the items still to do and the milliseconds left, a result
# or error per item (an exception raised fails every one of them).
Attempt = Callable[[list[K], int], Awaitable[Mapping[K, V | KafkaError]]]

# Retriable in general, but an admin call names what it wants: a missing topic is an
# answer, not a reason to wait.
_FINAL = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
_BROKER_RESOURCES = (ResourceType.BROKER, ResourceType.BROKER_LOGGER)
_ONE = "call"  # the single item of a call that is not on several items


class AdminCalls:
    """The routing and retries of one started Admin client (`Admin.calls`)."""

    def __init__(self, cluster: Cluster, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self._config = config

    @property
    def request_timeout_ms(self) -> int:
        """`request.timeout.ms`: how long a broker may take to answer one request."""
        return int(self._config["request.timeout.ms"])

    # --- retries ------------------------------------------------------------------------

    async def each(
        self,
        items: Iterable[K],
        attempt: Attempt[K, V],
        timeout_ms: int | None,
    ) -> dict[K, V]:
        """Run `attempt` on the items, again on those that failed with a retriable error
        (after a backoff) while time and `retries` are left. Returns item -> result, or
        raises AdminBatchError naming each failed item."""
        config = self._config
        total_ms = config["default.api.timeout.ms"] if timeout_ms is None else timeout_ms
        if total_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, not {timeout_ms}")
        deadline = time.monotonic() + total_ms / 1000
        backoff = config["retry.backoff.ms"] / 1000
        retries_left = config["retries"]
        pending = list(dict.fromkeys(items))
        done: dict[K, V] = {}
        failed: dict[K, KafkaError] = {}
        while pending:
            left = deadline - time.monotonic()
            try:
                async with asyncio.timeout(left):
                    got: Mapping[K, V | KafkaError] = await attempt(pending, int(left * 1000))
            except TimeoutError:
                got = {}
            except KafkaError as exc:
                got = dict.fromkeys(pending, exc)
            retry: list[K] = []
            for item in pending:
                if item not in got:
                    failed[item] = KafkaTimeoutError(
                        f"{_label(item)}: timed out after {total_ms} ms"
                    )
                    continue
                result = got[item]
                if not isinstance(result, KafkaError):
                    done[item] = result
                elif not _retriable(result) or retries_left <= 0:
                    failed[item] = result
                elif time.monotonic() + backoff >= deadline:
                    failed[item] = KafkaTimeoutError(
                        f"{_label(item)}: gave up after {total_ms} ms: {result}"
                    )
                else:
                    retry.append(item)
            if retry:
                retries_left -= 1
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, config["retry.backoff.max.ms"] / 1000)
            pending = retry
        if failed:
            raise AdminBatchError(failed, done)
        return done

    async def single(self, call: Callable[[], Awaitable[V]], timeout_ms: int | None) -> V:
        """Run one call with the retries of `each`; raises its KafkaError."""

        async def attempt(_: list[str], __: int) -> dict[str, V | KafkaError]:
            return {_ONE: await call()}

        try:
            return (await self.each([_ONE], attempt, timeout_ms))[_ONE]
        except AdminBatchError as exc:
            raise exc.errors[_ONE] from None

    # --- routing ------------------------------------------------------------------------

    async def controller(self) -> Connection:
        """The controller's connection, after fresh metadata."""
        await self.cluster.refresh([])
        return await self.cluster.controller()

    async def on_each_broker(
        self,
        node_ids: Sequence[int] | None,
        call: Callable[[Connection], Awaitable[V]],
        timeout_ms: int | None,
    ) -> dict[int, V]:
        """`call` on each broker of `node_ids` (every broker of fresh metadata when None),
        retried as `each` retries: broker id -> its result, or AdminBatchError naming
        each broker that failed."""

        async def attempt(batch: list[int], _: int) -> dict[int, V | KafkaError]:
            out: dict[int, V | KafkaError] = {}
            for node_id in batch:
                try:
                    out[node_id] = await call(await self.cluster.node(node_id))
                except KafkaError as exc:
                    out[node_id] = exc
            return out

        md = await self.single(lambda: self.cluster.refresh([]), timeout_ms)
        wanted = sorted(md.brokers) if node_ids is None else list(dict.fromkeys(node_ids))
        return await self.each(wanted, attempt, timeout_ms)

    async def on_leaders(
        self,
        partitions: list[TopicPartition],
        call: Callable[
            [Connection, list[TopicPartition]], Awaitable[Mapping[Any, V | KafkaError]]
        ],
    ) -> dict[TopicPartition, V | KafkaError]:
        """Send `call` to the leader of each partition (one call per leader)."""
        md = await self.cluster.refresh(sorted({tp.topic for tp in partitions}))
        out: dict[TopicPartition, V | KafkaError] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            try:
                by_leader.setdefault(md.leader(tp.topic, tp.partition), []).append(tp)
            except KafkaError as exc:
                out[tp] = exc
        for leader, batch in by_leader.items():
            try:
                found = await call(await self.cluster.node(leader), batch)
            except KafkaError as exc:
                out.update(dict.fromkeys(batch, exc))
                continue
            out.update({tp: found_in(found, tp) for tp in batch})
        return out

    async def on_coordinators(
        self,
        keys: list[str],
        call: Callable[[Connection, int, list[str]], Awaitable[Mapping[str, V | KafkaError]]],
        key_type: int = GROUP_KEY,
    ) -> dict[str, V | KafkaError]:
        """Send `call` to the coordinator of each group (or, with TRANSACTION_KEY, of
        each transactional id): one call per coordinator, given its broker id."""
        out: dict[str, V | KafkaError] = {}
        by_node: dict[int, list[str]] = {}
        for key in keys:
            try:
                node_id = await coordinator_lookup.coordinator_id(
                    self.cluster, key, wait=0, key_type=key_type
                )
            except KafkaError as exc:
                out[key] = exc
                continue
            by_node.setdefault(node_id, []).append(key)
        if by_node:
            md = self.cluster.metadata
            if md is None or not set(by_node) <= set(md.brokers):
                await self.cluster.refresh([])
        for node_id, batch in by_node.items():
            try:
                found = await call(await self.cluster.node(node_id), node_id, batch)
            except KafkaError as exc:
                out.update(dict.fromkeys(batch, exc))
                continue
            out.update({key: found_in(found, key) for key in batch})
        return out

    def group_partitions(
        self,
        group_id: str,
        call: Callable[
            [Connection, list[TopicPartition]], Awaitable[Mapping[Any, KafkaError | None]]
        ],
    ) -> Attempt[TopicPartition, None]:
        """An attempt that sends `call` for some of a group's partitions to its
        coordinator."""

        async def attempt(
            batch: list[TopicPartition], _: int
        ) -> dict[TopicPartition, KafkaError | None]:
            conn = await coordinator_lookup.coordinator(self.cluster, group_id, wait=0)
            found = await call(conn, batch)
            return {tp: found_in(found, tp) for tp in batch}

        return attempt

    async def each_resource(
        self,
        resources: Iterable[ConfigResource],
        call: Callable[[Connection, ConfigResource], Awaitable[V]],
        timeout_ms: int | None,
    ) -> dict[ConfigResource, V]:
        """`call` for each resource, a broker's on that broker and the rest on any broker,
        retried as `each` retries."""

        async def attempt(
            batch: list[ConfigResource], _: int
        ) -> dict[ConfigResource, V | KafkaError]:
            return await self._on_resource_brokers(batch, call)

        return await self.each(resources, attempt, timeout_ms)

    async def _on_resource_brokers(
        self,
        resources: list[ConfigResource],
        call: Callable[[Connection, ConfigResource], Awaitable[V]],
    ) -> dict[ConfigResource, V | KafkaError]:
        by_node: dict[int | None, list[ConfigResource]] = {}
        out: dict[ConfigResource, V | KafkaError] = {}
        for r in resources:
            node: int | None = None
            if r.type in _BROKER_RESOURCES and r.name:
                try:
                    node = int(r.name)
                except ValueError:
                    out[r] = KafkaError(
                        ErrorCode.INVALID_REQUEST, f"{r}: a broker is named by its id"
                    )
                    continue
            by_node.setdefault(node, []).append(r)
        if any(node is not None for node in by_node):
            await self.cluster.refresh([])
        for node, batch in by_node.items():
            try:
                conn = await (
                    self.cluster.bootstrap() if node is None else self.cluster.node(node)
                )
            except KafkaError as exc:
                out.update(dict.fromkeys(batch, exc))
                continue
            # One request per resource, pipelined on the broker's connection.
            found = await asyncio.gather(*(call(conn, r) for r in batch), return_exceptions=True)
            for r, result in zip(batch, found, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, KafkaError):
                    raise result
                out[r] = result
        return out


def found_in(found: Mapping[Any, V | KafkaError], key: Any) -> V | KafkaError:
    """`found[key]`, or UNKNOWN_SERVER_ERROR when a response left the key out."""
    if key in found:
        return found[key]
    return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"the response left out {_label(key)}")


def _retriable(error: KafkaError) -> bool:
    return error.retriable and error.code not in _FINAL


def _label(item: Any) -> str:
    if item == _ONE:
        return "the call"
    if isinstance(item, TopicPartition):
        return f"{item.topic}-{item.partition}"
    return str(item)
