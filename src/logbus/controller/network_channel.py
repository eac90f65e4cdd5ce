"""The controller's channel to brokers over the wire (Kafka's ControllerChannelManager).

Every request goes to its broker over Kafka's protocol, the controller's own broker
included, stamped with the controller's id and epoch (`set_controller`) and the
destination's broker epoch (`add_broker`), so a broker can refuse what a deposed
controller, or one that knew an earlier incarnation of it, still sends.

Threads: the controller runs on a thread of its own in a cluster, so every public method
except `close()` may be called from any thread: it hands its work to the broker's event
loop (given at construction) with `call_soon_threadsafe`, in call order. The arguments are
copied on the calling thread, so the controller may change its objects afterwards.

Per destination broker, one ordered queue and one sender task (Kafka's RequestSendThread):
one request in flight at a time, in the order they were made. A request that cannot be
delivered (no connection, connection lost, timed out) is retried, with a backoff, for as
long as the broker is registered; `remove_broker` drops its queue. A response that
carries an error is logged and reported to `on_response`, not retried.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from logbus.client.connection import Connection
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.requests.controller import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    ControlHeader,
    ControlResult,
    leader_and_isr,
    stop_replica,
    update_metadata,
)
from logbus.client.security import PLAINTEXT, ClientSecurity
from logbus.controller.cluster_metadata import BrokerInfo, TopicMetadata
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.errors import ProtocolError

log = logging.getLogger(__name__)

ResponseListener = Callable[[int, ApiKey, ControlResult], None]
"""Called on the event loop with (broker id, API, result) for every answered request."""


@dataclass(slots=True)
class _Request:
    api_key: ApiKey
    send: Callable[[Connection], Awaitable[ControlResult]]


@dataclass(slots=True)
class _Destination:
    info: BrokerInfo
    epoch: int
    queue: collections.deque[_Request] = field(default_factory=collections.deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    conn: Connection | None = None


def _copy(topic: TopicMetadata) -> TopicMetadata:
    return TopicMetadata(
        topic.name, topic.topic_id, dict(topic.partitions), dict(topic.configs), topic.is_internal
    )


class NetworkChannel:
    """Implements `ControllerChannel` by sending Kafka's controller requests."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        listener_name: str | None = None,
        client_id: str = "logbus-controller",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retry_backoff: float = 0.05,
        max_retry_backoff: float = 1.0,
        on_response: ResponseListener | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """`listener_name`: the inter-broker listener (`inter.broker.listener.name`), whose
        endpoint of each broker is connected to; `request_timeout`: seconds to wait for an
        answer (`controller.socket.timeout.ms`)."""
        self._loop = loop
        self.security = security  # the inter-broker listener's TLS and SASL
        self.listener_name = listener_name
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.on_response = on_response
        self.controller_id = -1
        self.controller_epoch = 0
        self._brokers: dict[int, _Destination] = {}
        # The newest state this channel sent of each topic: the partitions of a deleted
        # topic (UpdateMetadata) and the leader epochs of StopReplica come from here.
        self._topics: dict[str, TopicMetadata] = {}
        self._closed = False

    # --- thread-safe API --------------------------------------------------------------

    def set_controller(self, controller_id: int, controller_epoch: int) -> None:
        """Stamp every request made from now on with this controller id and epoch."""
        self._call(self._set_controller, controller_id, controller_epoch)

    def add_broker(self, info: BrokerInfo, broker_epoch: int) -> None:
        """Send to this broker from now on. Adding it again with another epoch or endpoint
        (it restarted) drops what was queued for its previous incarnation."""
        self._call(self._add_broker, info, broker_epoch)

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to a broker: its queued requests are dropped, its connection closed."""
        self._call(self._remove_broker, broker_id)

    def send_leader_and_isr(
        self, broker_id: int, topic: TopicMetadata, partitions: list[int]
    ) -> None:
        self._call(self._leader_and_isr, broker_id, _copy(topic), list(partitions))

    def send_update_metadata(
        self, brokers: list[BrokerInfo], topics: list[TopicMetadata], deleted: list[str]
    ) -> None:
        """To every registered broker: `brokers` as the live brokers, every partition of
        `topics`, and the partitions of `deleted` with leader LEADER_DURING_DELETE."""
        self._call(self._update_metadata, list(brokers), [_copy(t) for t in topics], list(deleted))

    def send_stop_replica(
        self, broker_id: int, topic: str, partitions: list[int], delete: bool
    ) -> None:
        self._call(self._stop_replica, broker_id, topic, list(partitions), delete)

    # --- on the event loop --------------------------------------------------------------

    async def close(self) -> None:
        """Stop every sender and close every connection. Call on the event loop."""
        self._closed = True
        destinations = list(self._brokers.values())
        self._brokers.clear()
        for dest in destinations:
            self._stop(dest)
        for dest in destinations:
            if dest.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await dest.task

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        if self._closed:
            return
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the broker is gone
            log.debug("controller channel: event loop closed, %s dropped", fn.__name__)

    def _set_controller(self, controller_id: int, controller_epoch: int) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch

    def _add_broker(self, info: BrokerInfo, broker_epoch: int) -> None:
        if self._closed:
            return
        current = self._brokers.get(info.broker_id)
        if current is not None:
            if current.info == info and current.epoch == broker_epoch:
                return
            self._stop(current)
        dest = _Destination(info, broker_epoch)
        dest.task = self._loop.create_task(
            self._run(dest), name=f"controller-channel-{info.broker_id}"
        )
        self._brokers[info.broker_id] = dest

    def _remove_broker(self, broker_id: int) -> None:
        dest = self._brokers.pop(broker_id, None)
        if dest is not None:
            self._stop(dest)

    def _stop(self, dest: _Destination) -> None:
        dest.queue.clear()
        if dest.task is not None:
            dest.task.cancel()

    def _header(self, dest: _Destination) -> ControlHeader:
        return ControlHeader(self.controller_id, self.controller_epoch, dest.epoch)

    def _destination(self, broker_id: int, api_key: ApiKey) -> _Destination | None:
        dest = self._brokers.get(broker_id)
        if dest is None:
            log.debug("%s for broker %d dropped: not a live broker", api_key.name, broker_id)
        return dest

    @staticmethod
    def _enqueue(dest: _Destination, request: _Request) -> None:
        dest.queue.append(request)
        dest.wakeup.set()

    def _leader_and_isr(self, broker_id: int, topic: TopicMetadata, partitions: list[int]) -> None:
        self._remember(topic)
        dest = self._destination(broker_id, ApiKey.LEADER_AND_ISR)
        if dest is None:
            return
        leaders = {topic.partitions[p].leader for p in partitions}
        live_leaders = [d.info for b, d in self._brokers.items() if b in leaders]
        header, entries = self._header(dest), [(topic, partitions)]
        listener = self.listener_name

        def send(conn: Connection) -> Awaitable[ControlResult]:
            return leader_and_isr(conn, header, entries, live_leaders, listener=listener)

        self._enqueue(dest, _Request(ApiKey.LEADER_AND_ISR, send))

    def _update_metadata(
        self, brokers: list[BrokerInfo], topics: list[TopicMetadata], deleted: list[str]
    ) -> None:
        for topic in topics:
            self._remember(topic)
        gone = [t for t in (self._topics.pop(name, None) for name in deleted) if t is not None]
        if len(gone) < len(deleted):
            # Their partitions were never sent by this channel: nothing to announce.
            log.info(
                "controller channel: deleted topics never announced: %s",
                sorted(set(deleted) - {t.name for t in gone}),
            )
        for dest in self._brokers.values():
            header = self._header(dest)

            def send(conn: Connection, header: ControlHeader = header) -> Awaitable[ControlResult]:
                return update_metadata(conn, header, brokers, topics, gone)

            self._enqueue(dest, _Request(ApiKey.UPDATE_METADATA, send))

    def _stop_replica(
        self, broker_id: int, topic: str, partitions: list[int], delete: bool
    ) -> None:
        dest = self._destination(broker_id, ApiKey.STOP_REPLICA)
        if dest is None:
            return
        known = self._topics.get(topic)

        def epoch(p: int) -> int:
            if delete:
                return EPOCH_DURING_DELETE
            state = known.partitions.get(p) if known is not None else None
            return state.leader_epoch if state is not None else NO_EPOCH

        entries = {topic: [(p, epoch(p)) for p in partitions]}
        header = self._header(dest)

        def send(conn: Connection) -> Awaitable[ControlResult]:
            return stop_replica(conn, header, entries, delete)

        self._enqueue(dest, _Request(ApiKey.STOP_REPLICA, send))

    def _remember(self, topic: TopicMetadata) -> None:
        known = self._topics.get(topic.name)
        if known is None or known.topic_id != topic.topic_id:
            self._topics[topic.name] = _copy(topic)
        else:
            known.partitions.update(topic.partitions)

    # --- the sender of one broker -------------------------------------------------------

    async def _run(self, dest: _Destination) -> None:
        backoff = self.retry_backoff
        failing = False
        try:
            while True:
                while not dest.queue:
                    dest.wakeup.clear()
                    await dest.wakeup.wait()
                request = dest.queue[0]
                try:
                    if dest.conn is None or dest.conn.closed:
                        dest.conn = await self._connect(dest.info)
                    result = await request.send(dest.conn)
                except KafkaConnectionError as exc:
                    (log.debug if failing else log.warning)(
                        "controller channel: %s to broker %d not delivered, will retry: %s",
                        request.api_key.name,
                        dest.info.broker_id,
                        exc,
                    )
                    failing = True
                    await self._drop_connection(dest)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.max_retry_backoff)
                    continue
                except (KafkaError, ProtocolError) as exc:
                    log.warning(
                        "controller channel: %s to broker %d failed: %s",
                        request.api_key.name,
                        dest.info.broker_id,
                        exc,
                    )
                    dest.queue.popleft()
                    continue
                except Exception:  # a bug must not stop this broker's queue for good
                    log.exception(
                        "controller channel: %s to broker %d failed",
                        request.api_key.name,
                        dest.info.broker_id,
                    )
                    dest.queue.popleft()
                    await self._drop_connection(dest)
                    continue
                if failing:
                    log.info("controller channel: broker %d reachable again", dest.info.broker_id)
                failing, backoff = False, self.retry_backoff
                dest.queue.popleft()
                self._report(dest.info.broker_id, request.api_key, result)
        finally:
            await self._drop_connection(dest)

    async def _connect(self, info: BrokerInfo) -> Connection:
        endpoint = info.endpoint(self.listener_name)
        return await Connection.connect(
            endpoint.host,
            endpoint.port,
            client_id=self.client_id,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            max_in_flight=1,
            security=self.security,
        )

    @staticmethod
    async def _drop_connection(dest: _Destination) -> None:
        conn, dest.conn = dest.conn, None
        if conn is not None:
            await conn.close()

    def _report(self, broker_id: int, api_key: ApiKey, result: ControlResult) -> None:
        failed = result.failed()
        if result.error != ErrorCode.NONE or failed:
            shown = ", ".join(f"{t}-{p}: {e.name}" for (t, p), e in sorted(failed.items())[:10])
            log.warning(
                "controller channel: broker %d answered %s with %s%s",
                broker_id,
                api_key.name,
                result.error.name,
                f" ({shown})" if shown else "",
            )
        if self.on_response is not None:
            try:
                self.on_response(broker_id, api_key, result)
            except Exception:
                log.exception("controller channel: response listener failed")
