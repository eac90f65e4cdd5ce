"""Which registry process is the primary, the one that writes. As Confluent's registries
do, every process joins one Kafka consumer group (`schema.registry.group.id`, default
`schema-registry`); here the group's own assignor elects: each member subscribes to the
store topic, which has one partition, so exactly one member is assigned it, and that
member is the primary. Its client id carries its URL, so the others find it by
describing the group and forward writes to it. When the primary leaves or dies (its
session times out) the group gives the partition to another member, which claims the
store's writes (fencing the old primary's producer: `store.KafkaStore.claim_writes`) and
reads the store to its end before it writes. A primary that was only paused learns it
lost when the group or the store tells it, whichever comes first.

The entry point is `PrimaryElection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from logbus.client.admin import Admin
from logbus.client.consumer import Consumer, ConsumerRebalanceListener
from logbus.client.errors import KafkaError
from logbus.client.types import TopicPartition
from logbus.registry.errors import RegistryError

log = logging.getLogger(__name__)

CLIENT_ID_PREFIX = "logbus-schema-registry "


class _Listener(ConsumerRebalanceListener):
    def __init__(self, election: PrimaryElection) -> None:
        self.election = election

    async def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        if assigned:
            # never fetched: the partition is held for what it says, not read
            self.election.consumer.pause(*assigned)
            await self.election.became_primary()

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        if revoked:
            self.election.is_primary = False
            log.info("no longer the primary")


class PrimaryElection:
    """This process's membership in the registries' group. `is_primary` says whether it
    writes; `primary_url()` names the one that does. Started once, closed once; used from
    the event loop's tasks."""

    def __init__(
        self,
        client_settings: Mapping[str, Any],
        topic: str,
        url: str,
        group_id: str = "schema-registry",
        on_primary: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client_settings = dict(client_settings)
        self.topic = topic
        self.url = url
        self.group_id = group_id
        self.is_primary = False
        self._on_primary = on_primary
        self.consumer = Consumer(
            {
                **self.client_settings,
                "group.id": group_id,
                "client.id": CLIENT_ID_PREFIX + url,
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1000,
            }
        )
        self._admin = Admin(self.client_settings)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._admin.start()
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=_Listener(self))
        self._task = asyncio.create_task(self._keep_membership(), name="registry-election")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.is_primary = False
        await self.consumer.close()
        await self._admin.close()

    async def became_primary(self) -> None:
        """Claim the store's writes (which fences the previous primary), then write."""
        if self._on_primary is not None:
            try:
                await self._on_primary()
            except (KafkaError, RegistryError) as exc:
                log.warning("elected the primary but could not claim the store: %s", exc)
                return
        self.is_primary = True
        log.info("elected the primary (%s)", self.url)

    def lost_writes(self) -> None:
        """The store refused our write: another registry claimed it (we were paused or
        cut off past our group session, and the group has not told us yet)."""
        if self.is_primary:
            self.is_primary = False
            log.info("fenced: no longer the primary")

    async def _keep_membership(self) -> None:
        while True:
            try:
                await self.consumer.poll(timeout_ms=1000)
            except KafkaError as exc:
                log.warning("the registries' group: %s", exc)
                await asyncio.sleep(1)

    async def wait_for_primary(self, seconds: float) -> str | None:
        """The primary's URL, waiting up to `seconds` while the group elects one
        (a member joining or leaving makes the group rebalance: for a moment, none is)."""
        try:
            async with asyncio.timeout(seconds):
                while True:
                    url = await self.primary_url()
                    if url is not None:
                        return url
                    await asyncio.sleep(0.2)
        except TimeoutError:
            return None

    async def primary_url(self) -> str | None:
        """The primary's URL (ours when we are it); None while there is none, or while
        the group names us but we do not write (we were fenced and the group has not
        moved on yet, or we are still claiming the store)."""
        if self.is_primary:
            return self.url
        try:
            groups = await self._admin.describe_consumer_groups([self.group_id])
        except KafkaError as exc:
            log.warning("describing the registries' group: %s", exc)
            return None
        for member in groups[self.group_id].members:
            if member.assignment.get(self.topic) and member.client_id.startswith(
                CLIENT_ID_PREFIX
            ):
                url = member.client_id.removeprefix(CLIENT_ID_PREFIX)
                return None if url == self.url else url
        return None
