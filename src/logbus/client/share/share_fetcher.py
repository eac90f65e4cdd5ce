"""A share consumer's traffic with partition leaders (KIP-932; Kafka's
ShareConsumeRequestManager): one share session per leader, ShareFetch requests that carry
the acknowledgements waiting for that leader and acquire records, ShareAcknowledge
requests that carry acknowledgements alone (commits, and the last one of a session when
the consumer closes).

The entry point is `ShareFetcher`. Each session's requests go one at a time (a lock), each
with the session's next epoch: 0 opens the session, the broker expects 1, 2, ... after it,
and -1 closes it. A session the broker no longer knows (or a broken connection) starts
again at 0; the acknowledgements that were riding on the failed request fail, and the
records the old session held are the broker's to deliver again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from logbus.client.cluster import Cluster
from logbus.client.consumer.fetcher import METADATA_ERRORS, Deserializer
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.requests.share_groups import share_acknowledge, share_fetch
from logbus.client.share.acknowledgements import AcknowledgementTracker, PendingAcknowledgements
from logbus.client.share.records import AcquiredRange, ShareConsumerRecord, read_delivery
from logbus.client.types import TopicPartition
from logbus.protocol import ErrorCode

log = logging.getLogger(__name__)

FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
# Answers meaning the broker has no (usable) session of this member: open a new one.
_SESSION_ERRORS = frozenset(
    {
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.UNKNOWN_MEMBER_ID,
    }
)
# Errors a poll raises to the application: retrying cannot help.
_FATAL = frozenset(
    {
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)

AckResults = dict[TopicPartition, KafkaError | None]
"""Each partition's acknowledgement outcome: None when the broker applied them."""
AckCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None], Any]


@dataclass(slots=True)
class ShareSession:
    """This member's share session with one broker: the epoch its next request carries
    and the partitions the session holds."""

    node_id: int
    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.partitions.clear()


@dataclass(slots=True)
class _Acquired:
    """Records a fetch acquired from one partition that no poll has returned yet (from
    `start` on)."""

    node_id: int
    tp: TopicPartition
    records: list[ShareConsumerRecord]
    start: int = 0


@dataclass(frozen=True, slots=True)
class FetchSettings:
    group_id: str
    max_records: int
    max_bytes: int
    check_crcs: bool
    key_deserializer: Deserializer | None
    value_deserializer: Deserializer | None


class ShareFetcher:
    """The member's share sessions (one per leader), the acknowledgements whose outcome
    is known but not yet told to the application (`completed`), and the acquisition lock
    timeout the brokers last gave. Owned by one share consumer; one event loop."""

    def __init__(
        self, cluster: Cluster, settings: FetchSettings, member_id: Callable[[], str],
        tracker: AcknowledgementTracker,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self._member_id = member_id
        self.tracker = tracker
        self.sessions: dict[int, ShareSession] = {}
        self.completed: list[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = []
        self.acquisition_lock_timeout_ms: int | None = None
        self.member_unknown = False  # a broker answered UNKNOWN_MEMBER_ID
        self._stale_metadata = False
        self.troubled = False  # the last fetch() met an error (the poll backs off)
        self._error: BaseException | None = None  # raised by the next fetch()
        # Acquired and not returned yet. A broker acquires whole batches (MaxRecords may be
        # exceeded up to a batch boundary, Kafka's batch-optimized mode); a poll returns at
        # most max.poll.records and the rest waits for the next, its locks running.
        self._acquired: deque[_Acquired] = deque()

    # --- fetching ---------------------------------------------------------------------

    async def fetch(
        self, assignment: Iterable[TopicPartition], topics: Sequence[str], max_wait_ms: int
    ) -> list[ShareConsumerRecord]:
        """Records acquired for this member, at most `max_records`: those a previous fetch
        acquired beyond that first; else one ShareFetch to each leader of an assigned
        partition (and each broker owed acknowledgements), concurrently."""
        self.troubled = False
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if self._acquired:
            return self._hand_over()
        by_node = await self._by_leader(list(assignment), topics)
        nodes = set(by_node) | self.tracker.nodes() | {
            node for node, session in self.sessions.items() if session.partitions
        }
        answers = await asyncio.gather(
            *(self._fetch_node(node, by_node.get(node, []), max_wait_ms) for node in nodes),
            return_exceptions=True,
        )
        records = self._hand_over()
        errors = [answer for answer in answers if isinstance(answer, BaseException)]
        if errors and not records:
            raise errors[0]
        if errors:
            # the records other brokers delivered are the application's now: the error
            # waits for the next poll
            self._error = errors[0]
        return records

    def _hand_over(self) -> list[ShareConsumerRecord]:
        """Up to `max_records` of the records acquired, oldest first, now the
        application's to acknowledge."""
        out: list[ShareConsumerRecord] = []
        room = self.settings.max_records
        while self._acquired and room > 0:
            acquired = self._acquired[0]
            taken = acquired.records[acquired.start:acquired.start + room]
            acquired.start += len(taken)
            if acquired.start >= len(acquired.records):
                self._acquired.popleft()
            self.tracker.delivered(acquired.node_id, acquired.tp, taken, ())
            out += taken
            room -= len(taken)
        return out

    def _drop_acquired(self, node_id: int | None = None) -> None:
        """The share session that acquired them is over (the broker released them)."""
        self._acquired = deque(a for a in self._acquired if node_id not in (None, a.node_id))

    async def _by_leader(
        self, assignment: list[TopicPartition], topics: Sequence[str]
    ) -> dict[int, list[TopicPartition]]:
        md = self.cluster.metadata
        if self._stale_metadata or md is None or any(
            tp.topic not in md.topics for tp in assignment
        ):
            self._stale_metadata = False
            try:
                md = await self.cluster.refresh(
                    sorted(set(topics) | {tp.topic for tp in assignment})
                )
            except KafkaConnectionError:
                self._stale_metadata = self.troubled = True  # no broker answered: later
                if self.cluster.metadata is None:
                    return {}
                md = self.cluster.metadata
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in assignment:
            try:
                by_node.setdefault(md.leader(tp.topic, tp.partition), []).append(tp)
            except KafkaError:
                self._stale_metadata = self.troubled = True  # no leader: look again
        return by_node

    def _ids(self) -> tuple[dict[str, UUID], dict[UUID, str]]:
        md = self.cluster.metadata
        ids = {} if md is None else {name: t.topic_id for name, t in md.topics.items()}
        return ids, {topic_id: name for name, topic_id in ids.items()}

    async def _fetch_node(
        self, node_id: int, partitions: list[TopicPartition], max_wait_ms: int
    ) -> None:
        session = self.sessions.setdefault(node_id, ShareSession(node_id))
        async with session.lock:
            pending, _ = self._take_acks(session)
            ids, names = self._ids()
            wanted = [tp for tp in partitions if tp.topic in ids]
            forgotten = [tp for tp in session.partitions - set(wanted) if tp.topic in ids]
            if session.epoch == 0 and not wanted:
                session.partitions.clear()
                return
            try:
                conn = await self.cluster.node(node_id)
                response = await share_fetch(
                    conn, self.settings.group_id, self._member_id(), session.epoch,
                    [(ids[tp.topic], tp.partition) for tp in wanted],
                    _by_ids(pending, ids),
                    max_wait_ms=max_wait_ms, max_bytes=self.settings.max_bytes,
                    max_records=self.settings.max_records,
                    forgotten=[(ids[tp.topic], tp.partition) for tp in forgotten],
                )
            except KafkaError as exc:
                if not _unreachable(exc):
                    raise
                self._session_lost(session, pending, exc)
                return
            except asyncio.CancelledError:
                # the broker may have taken the request: the session's epoch is unknown
                self._session_lost(session, pending, KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, "the share fetch was cancelled"
                ))
                raise
            code = response["error_code"]
            if code != ErrorCode.NONE:
                self._refused(session, pending, KafkaError(code, response["error_message"]))
                return
            session.advance()
            session.partitions = set(wanted)
            if response.get("acquisition_lock_timeout_ms", 0) > 0:
                self.acquisition_lock_timeout_ms = response["acquisition_lock_timeout_ms"]
            self._read_answers(node_id, response["responses"], names, pending)

    def _take_acks(
        self, session: ShareSession
    ) -> tuple[list[PendingAcknowledgements], AckResults]:
        """The acknowledgements waiting for the session's broker, and those that failed
        already: records of a session that is gone (the broker released them)."""
        pending = self.tracker.take(session.node_id)
        if session.epoch == 0 and pending:
            error = KafkaError(
                ErrorCode.SHARE_SESSION_NOT_FOUND, "the share session that delivered them ended"
            )
            self._fail(pending, error)
            return [], {p.tp: error for p in pending}
        return pending, {}

    def _read_answers(
        self, node_id: int, responses: Sequence[Any], names: dict[UUID, str],
        pending: list[PendingAcknowledgements],
    ) -> None:
        acks = {p.tp: p for p in pending}
        fatal: KafkaError | None = None
        for topic in responses:
            name = names.get(topic["topic_id"])
            for answer in topic["partitions"]:
                if name is None:
                    self._stale_metadata = True
                    continue
                tp = TopicPartition(name, answer["partition_index"])
                done = acks.pop(tp, None)
                if done is not None:
                    code = answer["acknowledge_error_code"]
                    self._complete(done, None if code == ErrorCode.NONE else KafkaError(
                        code, answer["acknowledge_error_message"]
                    ))
                code = answer["error_code"]
                if code in METADATA_ERRORS:
                    self._stale_metadata = self.troubled = True
                elif code in _FATAL:
                    fatal = KafkaError(code, answer["error_message"] or f"ShareFetch of {tp}")
                elif code != ErrorCode.NONE:
                    log.info("share fetch of %s: %s", tp, ErrorCode(code).name)
                if answer["acquired_records"]:
                    self._delivered(node_id, tp, answer)
        self._fail(list(acks.values()), KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR, "the broker did not answer these acknowledgements"
        ))
        if fatal is not None:
            raise fatal

    def _delivered(self, node_id: int, tp: TopicPartition, answer: Any) -> None:
        settings = self.settings
        delivery = read_delivery(
            tp, answer["records"],
            [AcquiredRange(r["first_offset"], r["last_offset"], r["delivery_count"])
             for r in answer["acquired_records"]],
            check_crcs=settings.check_crcs,
            key_deserializer=settings.key_deserializer,
            value_deserializer=settings.value_deserializer,
        )
        self.tracker.delivered(node_id, tp, (), delivery.gaps)
        if delivery.records:
            self._acquired.append(_Acquired(node_id, tp, delivery.records))

    # --- acknowledging ----------------------------------------------------------------

    async def acknowledge(self, *, closing: bool = False) -> AckResults:
        """Send the acknowledgements waiting, with ShareAcknowledge, and return each
        partition's outcome. `closing`: every open session gets its last request (epoch
        -1), which also releases the records it still holds."""
        nodes = self.tracker.nodes()
        if closing:
            nodes |= {node for node, s in self.sessions.items() if s.epoch > 0}
            self._drop_acquired()  # the last request of each session releases them
        results: AckResults = {}
        answers = await asyncio.gather(*(self._acknowledge_node(n, closing) for n in nodes))
        for answer in answers:
            results.update(answer)
        return results

    async def _acknowledge_node(self, node_id: int, closing: bool) -> AckResults:
        session = self.sessions.setdefault(node_id, ShareSession(node_id))
        async with session.lock:
            pending, failed = self._take_acks(session)
            if session.epoch == 0:
                return failed
            ids, names = self._ids()
            epoch = FINAL_EPOCH if closing else session.epoch
            try:
                conn = await self.cluster.node(node_id)
                response = await share_acknowledge(
                    conn, self.settings.group_id, self._member_id(), epoch,
                    _by_ids(pending, ids),
                )
            except KafkaError as exc:
                if not _unreachable(exc):
                    raise
                self._session_lost(session, pending, exc)
                return {p.tp: exc for p in pending}
            if closing:
                session.reset()
            code = response["error_code"]
            if code != ErrorCode.NONE:
                error = KafkaError(code, response["error_message"])
                self._refused(session, pending, error)
                return {p.tp: error for p in pending}
            if not closing:
                session.advance()
            return self._read_acknowledged(response["responses"], names, pending)

    def _read_acknowledged(
        self, responses: Sequence[Any], names: dict[UUID, str],
        pending: list[PendingAcknowledgements],
    ) -> AckResults:
        acks = {p.tp: p for p in pending}
        results: AckResults = {}
        for topic in responses:
            name = names.get(topic["topic_id"])
            for answer in topic["partitions"]:
                done = acks.pop(TopicPartition(name or "", answer["partition_index"]), None)
                if done is None:
                    continue
                code = answer["error_code"]
                error = None if code == ErrorCode.NONE else KafkaError(
                    code, answer["error_message"]
                )
                self._complete(done, error)
                results[done.tp] = error
        missing = KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR, "the broker did not answer these acknowledgements"
        )
        self._fail(list(acks.values()), missing)
        results.update(dict.fromkeys(acks, missing))
        return results

    # --- outcomes ---------------------------------------------------------------------

    def _complete(self, done: PendingAcknowledgements, error: KafkaError | None) -> None:
        self.completed.append(({done.tp: done.offsets}, error))

    def _fail(self, pending: Iterable[PendingAcknowledgements], error: KafkaError) -> None:
        for done in pending:
            self._complete(done, error)

    def _session_lost(
        self, session: ShareSession, pending: list[PendingAcknowledgements], error: KafkaError
    ) -> None:
        log.info("share session with broker %d lost: %s", session.node_id, error)
        session.reset()
        self._drop_acquired(session.node_id)
        self._fail(pending, error)
        self._stale_metadata = self.troubled = True

    def _refused(
        self, session: ShareSession, pending: list[PendingAcknowledgements], error: KafkaError
    ) -> None:
        self._fail(pending, error)
        self.troubled = True
        if error.code in _SESSION_ERRORS:
            session.reset()
            self._drop_acquired(session.node_id)
            if error.code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_unknown = True
            return
        if error.code in _FATAL:
            raise error
        log.info("share request to broker %d refused: %s", session.node_id, error)
        self._stale_metadata = True


def _by_ids(
    pending: Sequence[PendingAcknowledgements], ids: dict[str, UUID]
) -> dict[tuple[UUID, int], list[tuple[int, int, list[int]]]]:
    return {
        (ids[p.tp.topic], p.tp.partition): p.batches for p in pending if p.tp.topic in ids
    }


def _unreachable(error: KafkaError) -> bool:
    """The broker could not be asked, or gave no answer (it may be gone from the cluster):
    the session with it is over."""
    return (
        isinstance(error, KafkaConnectionError)
        or error.retriable
        or error.code == ErrorCode.BROKER_NOT_AVAILABLE
    )
