"""Consumer instances of the v2 API: each a logbus asyncio `Consumer` in a group, made by
`POST /consumers/{group}`, used by later requests naming it, deleted by `DELETE` or
expired after `consumer.instance.timeout.ms` without a request (as Confluent's proxy
expires them). Requests to one instance run one at a time (its lock); a long poll waits
on the event loop and never blocks the others.

The entry point is `ConsumerManager`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from logbus.client.consumer import Consumer
from logbus.client.errors import KafkaError
from logbus.common.config_def import ConfigError
from logbus.restproxy import errors
from logbus.restproxy.formats import BINARY, FORMATS

log = logging.getLogger(__name__)

# The settings of a create request the proxy passes to the consumer (Confluent's names)
_PASSED = {
    "auto.offset.reset": "auto.offset.reset",
    "auto.commit.enable": "enable.auto.commit",
    "fetch.min.bytes": "fetch.min.bytes",
}


@dataclass
class ConsumerInstance:
    group: str
    name: str
    embedded: str
    consumer: Consumer
    request_timeout_ms: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.last_used = time.monotonic()


class ConsumerManager:
    """Every consumer instance of this proxy process, by (group, name). Owned by the app;
    `close()` closes them all."""

    def __init__(
        self,
        client_settings: Mapping[str, Any],
        *,
        instance_timeout_ms: int = 300_000,
        request_timeout_ms: int = 1000,
    ) -> None:
        self.client_settings = dict(client_settings)
        self.instance_timeout = instance_timeout_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._expiry: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expiry = asyncio.create_task(self._expire(), name="consumer-expiry")

    async def close(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        for key in list(self.instances):
            await self._remove(key)

    async def create(self, group: str, body: Any) -> ConsumerInstance:
        if not isinstance(body, dict):
            raise errors.bad_request("The request body must be a JSON object")
        name = body.get("name") or f"rest-consumer-{uuid.uuid4()}"
        embedded = str(body.get("format") or BINARY).lower()
        if embedded not in FORMATS:
            raise errors.invalid_consumer_config(f"unknown format {embedded!r}")
        if (group, name) in self.instances:
            raise errors.consumer_already_exists()
        settings = {
            # a records request answers with what one poll returns: many records a poll
            # spare requests (max_bytes still bounds the answer)
            "max.poll.records": 10_000,
            **self.client_settings,
            "group.id": group,
            "client.id": f"rest-proxy-{name}",
        }
        for ours, theirs in _PASSED.items():
            if body.get(ours) is not None:
                settings[theirs] = str(body[ours])
        request_timeout = body.get("consumer.request.timeout.ms", self.request_timeout_ms)
        try:
            consumer = Consumer(settings)
            request_timeout = int(request_timeout)
        except (ConfigError, ValueError) as exc:
            raise errors.invalid_consumer_config(str(exc)) from None
        try:
            await consumer.start()
        except KafkaError as exc:
            await consumer.close()
            raise errors.kafka_error(str(exc)) from None
        instance = ConsumerInstance(group, str(name), embedded, consumer, request_timeout)
        self.instances[(group, instance.name)] = instance
        return instance

    def get(self, group: str, name: str) -> ConsumerInstance:
        instance = self.instances.get((group, name))
        if instance is None:
            raise errors.consumer_instance_not_found()
        instance.touch()
        return instance

    async def delete(self, group: str, name: str) -> None:
        if (group, name) not in self.instances:
            raise errors.consumer_instance_not_found()
        await self._remove((group, name))

    async def _remove(self, key: tuple[str, str]) -> None:
        instance = self.instances.pop(key, None)
        if instance is None:
            return
        async with instance.lock:
            try:
                await instance.consumer.close()
            except KafkaError as exc:
                log.warning("closing consumer %s of group %s: %s", key[1], key[0], exc)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(min(self.instance_timeout / 4, 5.0))
            now = time.monotonic()
            for key, instance in list(self.instances.items()):
                if now - instance.last_used > self.instance_timeout and not instance.lock.locked():
                    log.info("consumer %s of group %s expired", key[1], key[0])
                    await self._remove(key)
