"""Planning on the driver: which topic-partitions a query reads and their offsets.

`OffsetReader` owns a private event loop and a `Cluster` and offers blocking calls:
the partitions named by `subscribe`, `subscribePattern` or `assign`; the earliest and
latest offsets of each (ListOffsets, sent to each partition's leader); and the concrete
start and end offsets a batch query's options stand for (`earliest`, `latest`, offsets
JSON, timestamps). Made per batch query, or once per streaming query and closed by
`close()`. Not safe to share between threads.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaConnectionError, KafkaError
from logbus.client.metadata import ClusterMetadata
from logbus.client.requests.list_offsets import list_offsets_info
from logbus.protocol import ErrorCode
from logbus.spark.options import (
    EARLIEST,
    LATEST,
    ClientSettings,
    LogbusSparkError,
    ReadOptions,
)
from logbus.types import TopicPartition

T = TypeVar("T")
TP = TopicPartition


def describe(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


class OffsetReader:
    """Blocking metadata and offset look-ups for the planner (see the module docstring)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._loop = asyncio.new_event_loop()
        self._cluster: Cluster | None = None

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    async def _connected(self) -> Cluster:
        if self._cluster is None:
            try:
                self._cluster = await Cluster.connect(
                    self.settings.bootstrap_servers,
                    client_id=self.settings.client_id,
                    connect_timeout=self.settings.connect_timeout_ms / 1000,
                    request_timeout=self.settings.request_timeout_ms / 1000,
                    security=self.settings.security(),
                )
            except (ValueError, KafkaConnectionError) as exc:
                # None of the servers answers: a wrong address more likely than a fault,
                # so say so now rather than retry (retries are for a cluster met before).
                raise LogbusSparkError(f"option 'kafka.bootstrap.servers': {exc}") from None
        return self._cluster

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._cluster is not None:
            self._run(self._cluster.close())
            self._cluster = None
        self._loop.close()

    # --- partitions -------------------------------------------------------------------

    def topic_partitions(self, options: ReadOptions, *, missing_ok: bool = False) -> list[TP]:
        """The partitions the query reads, sorted. A topic named by `subscribe` or `assign`
        that does not exist is an error unless `missing_ok` (a stream waits for it)."""
        return self._run(self._topic_partitions(options, missing_ok))

    async def _metadata(self, topics: list[str] | None) -> ClusterMetadata:
        """Metadata of `topics` (all with None), retried as `_list_offsets` is."""
        budget = self.settings.retry_budget()
        while True:
            try:
                return await (await self._connected()).refresh(topics)
            except KafkaError as exc:
                if not await budget.pause(exc):
                    raise LogbusSparkError(
                        f"cannot read the cluster's metadata: {budget.describe(exc)}"
                    ) from None

    async def _topic_partitions(self, options: ReadOptions, missing_ok: bool) -> list[TP]:
        if options.subscribe_pattern is not None:
            md = await self._metadata(None)
            pattern = re.compile(options.subscribe_pattern)
            return sorted(
                TopicPartition(name, p)
                for name, info in md.topics.items()
                if not info.is_internal and info.error_code == ErrorCode.NONE
                and pattern.fullmatch(name)
                for p in info.partitions
            )
        topics = list(options.assign) if options.assign is not None else list(options.subscribe)
        md = await self._metadata(topics)
        found: list[TP] = []
        for topic in topics:
            info = md.topics.get(topic)
            if info is None or info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                if missing_ok:
                    continue
                raise LogbusSparkError(
                    f"option {options.strategy!r}: topic {topic!r} does not exist"
                )
            if info.error_code != ErrorCode.NONE:
                raise LogbusSparkError(
                    f"option {options.strategy!r}: topic {topic!r}: "
                    f"{KafkaError(info.error_code)}"
                )
            if options.assign is not None:
                for p in options.assign[topic]:
                    if p not in info.partitions:
                        raise LogbusSparkError(
                            f"option 'assign': partition {topic}-{p} does not exist "
                            f"(the topic has {len(info.partitions)} partitions)"
                        )
                    found.append(TopicPartition(topic, p))
            else:
                found.extend(TopicPartition(topic, p) for p in info.partitions)
        return sorted(found)

    # --- offsets ----------------------------------------------------------------------

    def list_offsets(self, requests: Mapping[TP, int]) -> dict[TP, int]:
        """ListOffsets: -2 earliest, -1 latest, else a timestamp (-1 back if none)."""
        return self._run(self._list_offsets(requests))

    async def _list_offsets(self, requests: Mapping[TP, int]) -> dict[TP, int]:
        """Retried, with fresh metadata, while the errors are retriable (a leader killed,
        an election under way) and `kafka.default.api.timeout.ms` has not passed."""
        if not requests:
            return {}
        budget = self.settings.retry_budget()
        while True:
            try:
                return await self._list_offsets_once(await self._connected(), requests)
            except KafkaError as exc:
                if not await budget.pause(exc):
                    raise LogbusSparkError(
                        f"cannot list offsets: {budget.describe(exc)}"
                    ) from None

    async def _list_offsets_once(
        self, cluster: Cluster, requests: Mapping[TP, int]
    ) -> dict[TP, int]:
        md = await cluster.refresh(sorted({t for t, _ in requests}))
        by_leader: dict[int, dict[TP, int]] = {}
        for tp, ts in requests.items():
            by_leader.setdefault(md.leader(*tp), {})[tp] = ts
        results: dict[TP, int] = {}
        for node, asked in by_leader.items():
            conn = await cluster.node(node)
            # read_committed: "latest" is the last stable offset.
            found = await list_offsets_info(
                conn, asked, isolation_level=self.settings.isolation_level
            )
            for tp, value in found.items():
                if isinstance(value, KafkaError):
                    raise value
                results[tp] = value.offset
        return results

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.list_offsets(dict.fromkeys(tps, EARLIEST))

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self.list_offsets(dict.fromkeys(tps, LATEST))

    # --- what the options stand for ---------------------------------------------------

    def starting_offsets(self, options: ReadOptions, tps: list[TP]) -> dict[TP, int]:
        """Concrete start offsets of `tps` (timestamps, then JSON, then earliest/latest),
        checked against what the log still holds."""
        earliest, latest = self.earliest(tps), self.latest(tps)
        if options.starting_timestamp is not None:
            wanted = self._by_timestamp(
                "startingTimestamp",
                dict.fromkeys(tps, options.starting_timestamp),
                latest,
                options.by_timestamp_strategy == "latest",
            )
        elif options.starting_by_timestamp is not None:
            stamps = _per_partition(
                "startingOffsetsByTimestamp", options.starting_by_timestamp, tps
            )
            wanted = self._by_timestamp(
                "startingOffsetsByTimestamp", stamps, latest,
                options.by_timestamp_strategy == "latest",
            )
        elif isinstance(options.starting, dict):
            wanted = _per_partition("startingOffsets", options.starting, tps)
        else:
            wanted = dict.fromkeys(tps, EARLIEST if options.starting == "earliest" else LATEST)
        return {
            tp: _check(
                "startingOffsets", tp, wanted[tp], earliest[tp], latest[tp],
                options.fail_on_data_loss,
            )
            for tp in tps
        }

    def ending_offsets(self, options: ReadOptions, tps: list[TP]) -> dict[TP, int]:
        earliest, latest = self.earliest(tps), self.latest(tps)
        if options.ending_timestamp is not None:
            wanted = self._by_timestamp(
                "endingTimestamp", dict.fromkeys(tps, options.ending_timestamp), latest, True
            )
        elif options.ending_by_timestamp is not None:
            stamps = _per_partition("endingOffsetsByTimestamp", options.ending_by_timestamp, tps)
            wanted = self._by_timestamp("endingOffsetsByTimestamp", stamps, latest, True)
        elif isinstance(options.ending, dict):
            wanted = _per_partition("endingOffsets", options.ending, tps)
        else:
            wanted = dict.fromkeys(tps, LATEST)
        return {
            tp: _check(
                "endingOffsets", tp, wanted[tp], earliest[tp], latest[tp],
                options.fail_on_data_loss,
            )
            for tp in tps
        }

    def _by_timestamp(
        self, name: str, stamps: dict[TP, int], latest: dict[TP, int], none_is_latest: bool
    ) -> dict[TP, int]:
        found = self.list_offsets(stamps)
        out: dict[TP, int] = {}
        for tp, offset in found.items():
            if offset < 0:
                if not none_is_latest:
                    raise LogbusSparkError(
                        f"option {name!r}: no record of {describe(tp)} has a timestamp at or "
                        f"after {stamps[tp]} (set startingOffsetsByTimestampStrategy=latest "
                        "to start at the end instead)"
                    )
                offset = latest[tp]
            out[tp] = offset
        return out


def _per_partition(name: str, given: dict[str, dict[int, int]], tps: list[TP]) -> dict[TP, int]:
    """The value a JSON option gives each partition; every partition must be named."""
    wanted: dict[TP, int] = {}
    known = set(tps)
    for topic, parts in given.items():
        for p, value in parts.items():
            if (topic, p) not in known:
                raise LogbusSparkError(
                    f"option {name!r} names {topic}-{p}, which this query does not read"
                )
            wanted[TopicPartition(topic, p)] = value
    missing = [describe(tp) for tp in tps if tp not in wanted]
    if missing:
        raise LogbusSparkError(
            f"option {name!r} must give every partition read; missing: {', '.join(missing)}"
        )
    return wanted


def _check(
    name: str, tp: TP, wanted: int, earliest: int, latest: int, fail_on_data_loss: bool
) -> int:
    """Turn -2/-1 into offsets and check an explicit offset against the log's range."""
    if wanted == EARLIEST:
        return earliest
    if wanted == LATEST:
        return latest
    if wanted < earliest:
        if fail_on_data_loss:
            raise LogbusSparkError(
                f"option {name!r}: offset {wanted} of partition {describe(tp)} is out of "
                f"range: the earliest offset still in the log is {earliest} (records were "
                "removed by retention); set failOnDataLoss=false to start there instead"
            )
        return earliest
    if wanted > latest:
        if fail_on_data_loss:
            raise LogbusSparkError(
                f"option {name!r}: offset {wanted} of partition {describe(tp)} is out of "
                f"range: the latest offset is {latest}; set failOnDataLoss=false to stop there "
                "instead"
            )
        return latest
    return wanted
