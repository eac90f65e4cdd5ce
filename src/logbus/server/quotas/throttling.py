"""Quotas applied to one request (Kafka's `KafkaApis` and `RequestHandlerHelper` throttling,
KIP-219), kept in one place so that no API handler knows about quotas:

- Produce records the request's size, Fetch from a consumer the response's size, every
  request not exempt the seconds the event loop spent on it (as `request_percentage`:
  100 is one whole event loop), CreateTopics / CreatePartitions / DeleteTopics the
  partitions they mutated.
- The largest throttle time earned is put in the response's `throttle_time_ms` (every
  response that has the field), the response is sent at once, and the connection is then
  not read for that time (the channel is muted).
- A throttled Fetch is answered empty and its bytes are taken back, as Kafka does.
- The strict versions of the mutation APIs (CreateTopics v6+, CreatePartitions v3+,
  DeleteTopics v5+) refuse every topic with THROTTLING_QUOTA_EXCEEDED while the client's
  mutation rate is over its quota (KIP-599); older versions are only throttled.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Coroutine, Generator
from functools import cache
from typing import TYPE_CHECKING, Any

from logbus.protocol import ApiKey, ErrorCode, schema
from logbus.server.quotas.entity import QuotaType
from logbus.server.quotas.manager import ClientQuotas

if TYPE_CHECKING:
    from logbus.controller.cluster_metadata import MetadataCache

# Requests between brokers are not limited by the request quota (Kafka exempts
# ClusterAction APIs), nor are the authentication exchanges.
EXEMPT: frozenset[int] = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION,
    ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
})
# KIP-219: from these versions on the client waits out throttle_time_ms itself, and the
# response is sent at once; to older versions the broker sends the response only once
# the throttle time has passed (APIs not listed: every version).
CLIENT_THROTTLES_SINCE: dict[int, int] = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4, ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2, ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2, ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1, ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1, ApiKey.DESCRIBE_ACLS: 1, ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1, ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1, ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.SASL_AUTHENTICATE: 1, ApiKey.CREATE_PARTITIONS: 1, ApiKey.DELETE_GROUPS: 1,
}


def client_throttles(api_key: int, version: int) -> bool:
    return version >= CLIENT_THROTTLES_SINCE.get(api_key, 0)


# (API, first strict version) of the controller mutation APIs.
STRICT_SINCE: dict[int, int] = {
    ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5,
}


class TimedCall:
    """Awaits a coroutine and adds up the time its steps ran on the event loop, not the
    time it waited (a parked produce, a long-poll fetch)."""

    def __init__(self, coro: Awaitable[Any]) -> None:
        assert isinstance(coro, Coroutine)
        self.coro = coro
        self.elapsed = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.elapsed += time.perf_counter() - start
                return stop.value
            self.elapsed += time.perf_counter() - start
            try:
                value = yield yielded
                error = None
            except BaseException as exc:  # cancellation goes to the coroutine
                value, error = None, exc


@cache
def throttle_field(api_key: int) -> tuple[int, int] | None:
    """The versions whose response has a top-level `throttle_time_ms`."""
    for spec in schema.response(api_key).fields:
        if spec[0] == "throttle_time_ms":
            versions: tuple[int, int] | None = spec[2]
            return versions
    return None


def set_throttle_time(api_key: int, version: int, response: dict[str, Any], ms: int) -> None:
    versions = throttle_field(api_key)
    if versions is not None and versions[0] <= version <= versions[1]:
        response["throttle_time_ms"] = max(int(response.get("throttle_time_ms", 0)), ms)


def is_replica_fetch(api_key: int, body: dict[str, Any]) -> bool:
    if api_key != ApiKey.FETCH:
        return False
    replica = body.get("replica_state", {}).get("replica_id", -1)
    return int(body.get("replica_id", -1)) >= 0 or int(replica) >= 0


class RequestQuota:
    """The quota bookkeeping of one request of (user, client id)."""

    def __init__(
        self, quotas: ClientQuotas, user: str, client_id: str, api_key: int, version: int,
        body: dict[str, Any],
    ) -> None:
        self.quotas = quotas
        self.user = user
        self.client_id = client_id
        self.api_key = api_key
        self.version = version
        self.body = body
        self.exempt = api_key in EXEMPT or is_replica_fetch(api_key, body)
        self._partitions_before: dict[str, int] = {}

    def cap_fetch(self) -> None:
        """A consumer's Fetch asks for no more than its quota lets through in one quota
        window (Kafka's `getMaxValueInQuotaWindow`: quota * (samples - 1) * window)."""
        if self.api_key != ApiKey.FETCH or self.exempt:
            return
        found = self.quotas.quota(QuotaType.FETCH, self.user, self.client_id)
        if found is None:
            return
        windows = self.quotas.windows
        most = max(1, int(min(found[0] * (windows.samples - 1) * windows.window_s, 2**31 - 1)))
        body = self.body
        if int(body.get("max_bytes", most)) > most:
            body["max_bytes"] = most
            body["min_bytes"] = min(int(body.get("min_bytes", 0)), most)

    # --- controller mutations ------------------------------------------------------------

    def _mutation_api(self) -> bool:
        return self.api_key in STRICT_SINCE and not self.body.get("validate_only", False)

    def refuse_if_over(self, metadata_cache: MetadataCache, now: float) -> dict[str, Any] | None:
        """A strict mutation request while the mutation quota is exceeded: the response
        refusing every topic; None to handle the request."""
        if not self._mutation_api():
            return None
        topics = metadata_cache.topics
        if self.api_key == ApiKey.CREATE_PARTITIONS:
            for item in self.body.get("topics", []):
                meta = topics.get(item["name"])
                self._partitions_before[item["name"]] = len(meta.partitions) if meta else 0
        elif self.api_key == ApiKey.DELETE_TOPICS:
            for name in _deleted_names(self.body):
                meta = topics.get(name)
                self._partitions_before[name] = len(meta.partitions) if meta else 0
        if self.version < STRICT_SINCE[self.api_key]:
            return None
        wait = self.quotas.throttle_time(
            QuotaType.CONTROLLER_MUTATION, self.user, self.client_id, now
        )
        if wait <= 0:
            return None
        return _refusal(self.api_key, self.body, int(wait * 1000))

    def _mutated(self, default_partitions: int, response: dict[str, Any]) -> int:
        if not self._mutation_api():
            return 0
        count = 0
        if self.api_key == ApiKey.CREATE_TOPICS:
            ok = {t["name"] for t in response.get("topics", []) if t.get("error_code") == 0}
            for item in self.body.get("topics", []):
                if item["name"] in ok:
                    n = int(item.get("num_partitions", -1))
                    if n < 0:
                        n = len(item.get("assignments", [])) or default_partitions
                    count += n
        elif self.api_key == ApiKey.CREATE_PARTITIONS:
            ok = {t["name"] for t in response.get("results", []) if t.get("error_code") == 0}
            for item in self.body.get("topics", []):
                if item["name"] in ok:
                    before = self._partitions_before.get(item["name"], 0)
                    count += max(0, int(item["count"]) - before)
        else:
            ok = {t.get("name") for t in response.get("responses", []) if t.get("error_code") == 0}
            count = sum(n for name, n in self._partitions_before.items() if name in ok)
        return count

    # --- after handling ------------------------------------------------------------------

    def throttle_ms(
        self, default_partitions: int, response: dict[str, Any] | None, request_size: int,
        loop_seconds: float, now: float,
    ) -> int:
        """Record what the request cost and return the throttle time it earned (ms);
        `default_partitions` (num.partitions) counts a created topic that named none."""
        quotas, user, client = self.quotas, self.user, self.client_id
        wait = 0.0
        if self.api_key == ApiKey.PRODUCE:
            wait = quotas.record(QuotaType.PRODUCE, user, client, request_size, now)
        if not self.exempt:
            share = loop_seconds * 100  # percent of one event loop
            wait = max(wait, quotas.record(QuotaType.REQUEST, user, client, share, now))
        if response is not None and self.api_key in STRICT_SINCE:
            mutated = self._mutated(default_partitions, response)
            if mutated:
                wait = max(
                    wait, quotas.record(QuotaType.CONTROLLER_MUTATION, user, client, mutated, now)
                )
        return int(wait * 1000)

    def fetch_throttle_ms(self, response_size: int, other_ms: int, now: float) -> int:
        """A consumer's Fetch: record the response's bytes; when it is throttled by this
        or by `other_ms` (the request quota), take them back (the caller answers
        empty)."""
        if self.exempt:
            return 0
        wait = self.quotas.record(QuotaType.FETCH, self.user, self.client_id, response_size, now)
        if wait > 0 or other_ms > 0:
            self.quotas.unrecord(QuotaType.FETCH, self.user, self.client_id, response_size, now)
        return int(wait * 1000)


def throttled_fetch_response(response: dict[str, Any], ms: int) -> dict[str, Any]:
    """Kafka's `getThrottledResponse`: no partitions, the session kept."""
    return {
        "throttle_time_ms": ms,
        "error_code": ErrorCode.NONE,
        "session_id": response.get("session_id", 0),
        "responses": [],
    }


def _deleted_names(body: dict[str, Any]) -> list[str]:
    names = [str(n) for n in body.get("topic_names", [])]
    names += [str(t["name"]) for t in body.get("topics", []) if t.get("name")]
    return names


def _refusal(api_key: int, body: dict[str, Any], ms: int) -> dict[str, Any]:
    error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    message = "The throttling quota has been exceeded."
    if api_key == ApiKey.CREATE_TOPICS:
        return {
            "throttle_time_ms": ms,
            "topics": [
                {
                    "name": t["name"], "error_code": error, "error_message": message,
                    "num_partitions": -1, "replication_factor": -1, "configs": None,
                }
                for t in body.get("topics", [])
            ],
        }
    if api_key == ApiKey.CREATE_PARTITIONS:
        return {
            "throttle_time_ms": ms,
            "results": [
                {"name": t["name"], "error_code": error, "error_message": message}
                for t in body.get("topics", [])
            ],
        }
    return {
        "throttle_time_ms": ms,
        "responses": [
            {"name": t.get("name"), "topic_id": t.get("topic_id"), "error_code": error,
             "error_message": message}
            for t in body.get("topics", [])
        ]
        + [
            {"name": name, "error_code": error, "error_message": message}
            for name in body.get("topic_names", [])
        ],
    }
