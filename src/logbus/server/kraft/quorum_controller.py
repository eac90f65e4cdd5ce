"""The KRaft controller on the metadata log (Kafka's `QuorumController`, KIP-631): every
voter replays the committed records of `__cluster_metadata` into its `MetadataImage`;
the voter that leads the Raft quorum is the active controller once it has replayed every
record before its epoch, and turns requests into metadata records.

- Reads: its `MetadataLoader` follows the high watermark (loading the latest snapshot
  first when the log starts past what it replayed) and keeps the committed image; every
  voter writes a snapshot of its image
  (`RaftClient.create_snapshot`) once the log has grown by
  `metadata.log.max.record.bytes.between.snapshots`.
- Writes (active controller only): a decision of `controller/cluster_control.py`,
  `controller/replication_control.py` or `controller/config_control.py` is taken on the
  image of everything appended so far (committed or not), its records are appended as
  one batch, and the answer leaves once they are committed. A voter that is not the
  active controller answers NOT_CONTROLLER, and so does one that loses its epoch before
  the records commit.
- Timers (active controller): a NoOpRecord every `metadata.max.idle.interval.ms`
  (KIP-835), and a broker whose heartbeats stop for `broker.session.timeout.ms` fenced.

The entry point is `QuorumController`; `apis()` gives the `RaftServer` the requests it
serves. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from logbus.controller import (
    acl_control,
    cluster_control,
    config_control,
    election_control,
    quota_control,
    replication_control,
    scram_control,
)
from logbus.controller.assignment import ControllerError
from logbus.controller.control_result import ControllerResult, then
from logbus.controller.replication_control import TopicDefaults
from logbus.metadata.image import EMPTY_IMAGE, ConfigResource, MetadataImage, QuotaEntity
from logbus.metadata.image_writer import snapshot_values
from logbus.metadata.records import encode_record
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.acl_types import AclBinding, AclBindingFilter, AclError
from logbus.raft.raft_client import NotLeaderError, RaftClient
from logbus.raft.raft_server import ControllerApi
from logbus.server.api.acls import binding_of, filter_of
from logbus.server.api.client_quotas import QuotaRequestError, parse_entity
from logbus.server.api.client_quotas import apply_ops as apply_quota_ops
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.config.broker_config_def import BROKER_CONFIG_DEF
from logbus.server.config.config_admin import (
    AlterOp,
    ConfigUpdateError,
    apply_ops,
    check_broker_update,
    check_topic_update,
)
from logbus.server.config.topic_config import TOPIC_CONFIG_DEF
from logbus.server.kraft.metadata_loader import MetadataLoader

if TYPE_CHECKING:
    from logbus.protocol.messages.alter_client_quotas_request import EntryData

__all__ = ["CONTROLLER_API_VERSIONS", "ControllerSettings", "QuorumController"]

logger = logging.getLogger(__name__)

NO_OP_RECORD: Final = encode_record("NoOpRecord", {})

CONTROLLER_API_VERSIONS: Final[Mapping[int, tuple[int, int]]] = {
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 1),
    ApiKey.UNREGISTER_BROKER: (0, 0),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}
"""The versions of each API the active controller serves beside the quorum's (what a
KRaft broker forwarding a request may send it)."""


@dataclass(frozen=True)
class ControllerSettings:
    cluster_id: str
    session_timeout_ms: int = 9000
    no_op_interval_ms: int = 500
    max_bytes_between_snapshots: int = 20 * 1024 * 1024
    topic_defaults: TopicDefaults = field(default_factory=TopicDefaults)
    commit_timeout_ms: int = 30_000
    # The controller's own settings, which topic configs are checked against (the
    # defaults of a broker when not given).
    static_config: BrokerConfig | None = None


def change_configs(
    settings: ControllerSettings, image: MetadataImage
) -> config_control.ConfigChanger:
    """IncrementalAlterConfigs' operations applied and checked as in ZooKeeper mode
    (`server/config/config_admin.py`)."""

    def change(
        resource: ConfigResource, current: Mapping[str, str], ops: list[dict[str, Any]]
    ) -> dict[str, str]:
        alter = [AlterOp(o["name"], o["config_operation"], o["value"]) for o in ops]
        is_topic = resource.type == config_control.TOPIC
        try:
            new = apply_ops(current, alter, TOPIC_CONFIG_DEF if is_topic else BROKER_CONFIG_DEF)
            if is_topic:
                check_topic_update(new, settings.static_config or BrokerConfig())
            else:
                default = ConfigResource(config_control.BROKER, "")
                check_broker_update(
                    new, per_broker=bool(resource.name), static={},
                    dynamic_default=image.configs.get(default, {}),
                    dynamic_per_broker=image.configs.get(resource, {}),
                )  # fmt: skip
        except ConfigUpdateError as exc:
            raise ControllerError(exc.error, exc.message) from exc
        return new

    return change


Decision = Callable[[MetadataImage], ControllerResult]
# The answer to a request refused whole with an error code (its shape is the API's).
Refusal = Callable[[ErrorCode], dict[str, Any]]


class QuorumController:
    """One voter's controller: its committed image, and while it is the active
    controller, the image of everything it appended and its brokers' session clocks.
    `start()` then `close()`."""

    def __init__(self, client: RaftClient, settings: ControllerSettings) -> None:
        self.client = client
        self.settings = settings
        self.loader = MetadataLoader(client, after_replay=self._after_replay)
        self._pending: MetadataImage | None = None
        self._active_epoch = -1
        self._sessions: dict[int, float] = {}
        self._size_at_snapshot = 0
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await self.loader.start()
        self._size_at_snapshot = self.client.metadata_log.log.size_in_bytes
        self._tasks = [
            asyncio.get_running_loop().create_task(self._tick(), name="controller-timers")
        ]

    async def close(self) -> None:
        await self.loader.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    @property
    def is_active(self) -> bool:
        return (
            self._pending is not None
            and self.client.is_leader
            and self.client.epoch == self._active_epoch
        )

    @property
    def image(self) -> MetadataImage:
        """The committed image (every record below the high watermark)."""
        return self.loader.image

    async def wait_image(self, predicate: Callable[[MetadataImage], bool], timeout: float) -> None:  # noqa: ASYNC109
        """Wait until the committed image satisfies `predicate`."""
        await self.loader.wait_image(predicate, timeout)

    # --- replay ---------------------------------------------------------------------------

    def _after_replay(self) -> None:
        self._check_leadership()
        self._maybe_snapshot()

    def _check_leadership(self) -> None:
        client = self.client
        if client.is_leader and client.epoch != self._active_epoch:
            if self.image.offset >= client.epoch_start_offset:
                self._activate()
        elif not client.is_leader and self._pending is not None:
            logger.info("controller %d is no longer the active controller", client.node_id)
            self._pending, self._active_epoch = None, -1

    def _activate(self) -> None:
        client = self.client
        self._pending = self.image
        self._active_epoch = client.epoch
        now = time.monotonic()
        self._sessions = dict.fromkeys(self.image.brokers, now)
        logger.info(
            "controller %d is the active controller in epoch %d (metadata offset %d)",
            client.node_id, client.epoch, self.image.offset,
        )  # fmt: skip
        bootstrap = cluster_control.bootstrap_records(self.image)
        if bootstrap:
            self._append(ControllerResult(bootstrap))

    def _maybe_snapshot(self) -> None:
        log = self.client.metadata_log
        size = log.log.size_in_bytes
        if size - self._size_at_snapshot < self.settings.max_bytes_between_snapshots:
            return
        end = self.image.offset + 1
        if end <= (log.snapshot_id.end_offset if log.snapshot_id is not None else 0):
            return
        snapshot = self.client.create_snapshot(end, snapshot_values(self.image))
        self._size_at_snapshot = log.log.size_in_bytes
        logger.info("controller %d wrote snapshot %s", self.client.node_id, snapshot)

    # --- writes -------------------------------------------------------------------------

    def _append(self, result: ControllerResult) -> int | None:
        """Append a decision's records as one batch; the offset of the last, or None
        when there is nothing to write."""
        assert self._pending is not None
        if not result.records:
            return None
        values = [encode_record(r.name, r.data, r.version) for r in result.records]
        pending = then(self._pending, result.records)  # records that cannot replay never go out
        last = self.client.append(values)
        self._pending = pending
        return last

    async def write(self, decide: Decision, refuse: Refusal) -> dict[str, Any]:
        """Decide on the image of everything appended, append, wait for the commit; the
        decision's answer, or `refuse`'s: NOT_CONTROLLER when this voter is not (or stops
        being) the active controller, REQUEST_TIMED_OUT when the records are not
        committed in time, UNKNOWN_SERVER_ERROR (and nothing written) for a decision
        that fails."""
        if not self.is_active or self._pending is None:
            return refuse(ErrorCode.NOT_CONTROLLER)
        try:
            result = decide(self._pending)
            last = self._append(result)
        except NotLeaderError:
            return refuse(ErrorCode.NOT_CONTROLLER)
        except Exception:
            logger.exception("controller %d: a request failed", self.client.node_id)
            return refuse(ErrorCode.UNKNOWN_SERVER_ERROR)
        if last is not None:
            try:
                await self.client.wait_committed(last, self.settings.commit_timeout_ms / 1000)
            except NotLeaderError:
                return refuse(ErrorCode.NOT_CONTROLLER)
            except TimeoutError:
                return refuse(ErrorCode.REQUEST_TIMED_OUT)
        return result.response

    # --- timers ---------------------------------------------------------------------------

    async def _tick(self) -> None:
        interval = self.settings.no_op_interval_ms
        period = min(interval or 500, self.settings.session_timeout_ms / 4) / 1000
        last_no_op = time.monotonic()
        while True:
            await asyncio.sleep(period)
            if not self.is_active:
                continue
            try:
                self._fence_expired()
                if interval > 0 and time.monotonic() - last_no_op >= interval / 1000:
                    self.client.append([NO_OP_RECORD])
                    last_no_op = time.monotonic()
            except NotLeaderError:
                continue

    def _fence_expired(self) -> None:
        assert self._pending is not None
        deadline = time.monotonic() - self.settings.session_timeout_ms / 1000
        for broker_id, broker in sorted(self._pending.brokers.items()):
            if not broker.fenced and self._sessions.get(broker_id, 0.0) < deadline:
                logger.info(
                    "controller %d fences broker %d: no heartbeat for %d ms",
                    self.client.node_id, broker_id, self.settings.session_timeout_ms,
                )  # fmt: skip
                self._append(ControllerResult(cluster_control.fence(self._pending, broker_id)))

    # --- the requests -------------------------------------------------------------------

    def apis(self) -> dict[int, ControllerApi]:
        handlers: dict[int, Callable[[dict[str, Any], int], Any]] = {
            ApiKey.BROKER_REGISTRATION: self.broker_registration,
            ApiKey.BROKER_HEARTBEAT: self.broker_heartbeat,
            ApiKey.UNREGISTER_BROKER: self.unregister_broker,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.ALTER_PARTITION: self.alter_partition,
            ApiKey.ELECT_LEADERS: self.elect_leaders,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.ALLOCATE_PRODUCER_IDS: self.allocate_producer_ids,
            ApiKey.CREATE_ACLS: self.create_acls,
            ApiKey.DELETE_ACLS: self.delete_acls,
            ApiKey.ALTER_CLIENT_QUOTAS: self.alter_client_quotas,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter_user_scram_credentials,
        }
        return {key: ControllerApi(CONTROLLER_API_VERSIONS[key], h) for key, h in handlers.items()}

    async def broker_registration(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        broker_id = body["broker_id"]
        session_alive = (
            time.monotonic() - self._sessions.get(broker_id, 0.0)
            < self.settings.session_timeout_ms / 1000
        )

        def decide(image: MetadataImage) -> ControllerResult:
            return cluster_control.register_broker(
                image, body, cluster_id=self.settings.cluster_id,
                next_offset=self.client.metadata_log.end_offset, session_alive=session_alive,
            )  # fmt: skip

        answer = await self.write(decide, lambda e: {"error_code": int(e), "broker_epoch": -1})
        if answer["error_code"] == 0:
            self._sessions[broker_id] = time.monotonic()
        return answer

    async def broker_heartbeat(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        if self.is_active and body["broker_id"] in (self._pending or EMPTY_IMAGE).brokers:
            self._sessions[body["broker_id"]] = time.monotonic()
        return await self.write(
            lambda image: cluster_control.heartbeat(image, body),
            lambda e: {"error_code": int(e), "is_fenced": True},
        )

    async def unregister_broker(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        answer = await self.write(
            lambda image: cluster_control.unregister_broker(image, body),
            lambda e: {"error_code": int(e)},
        )
        if answer["error_code"] == 0:
            self._sessions.pop(body["broker_id"], None)
        return answer

    def _check_topic_configs(self, configs: dict[str, str]) -> None:
        try:
            check_topic_update(configs, self.settings.static_config or BrokerConfig())
        except ConfigUpdateError as exc:
            raise ControllerError(exc.error, exc.message) from exc

    async def create_topics(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        defaults = self.settings.topic_defaults
        return await self.write(
            lambda image: replication_control.create_topics(
                image, body, defaults, self._check_topic_configs
            ),
            lambda e: {
                "topics": [{"name": t["name"], "error_code": int(e)} for t in body["topics"]]
            },
        )

    async def delete_topics(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        def refuse(error: ErrorCode) -> dict[str, Any]:
            named = [{"name": n, "error_code": int(error)} for n in body.get("topic_names") or ()]
            named += [{**t, "error_code": int(error)} for t in body.get("topics") or ()]
            return {"responses": named}

        return await self.write(
            lambda image: replication_control.delete_topics(image, body), refuse
        )

    async def create_partitions(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        return await self.write(
            lambda image: replication_control.create_partitions(image, body),
            lambda e: {
                "results": [{"name": t["name"], "error_code": int(e)} for t in body["topics"]]
            },
        )

    async def alter_partition(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        return await self.write(
            lambda image: replication_control.alter_partition(image, body),
            lambda e: {"error_code": int(e), "topics": []},
        )

    async def elect_leaders(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        return await self.write(
            lambda image: election_control.elect_leaders(image, body),
            lambda e: {"error_code": int(e), "replica_election_results": []},
        )

    async def incremental_alter_configs(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        def decide(image: MetadataImage) -> ControllerResult:
            change = change_configs(self.settings, image)
            return config_control.incremental_alter_configs(image, body, change)

        def refuse(error: ErrorCode) -> dict[str, Any]:
            return {
                "responses": [
                    {"resource_type": r["resource_type"], "resource_name": r["resource_name"],
                     "error_code": int(error)}
                    for r in body["resources"]
                ]
            }  # fmt: skip

        return await self.write(decide, refuse)

    async def allocate_producer_ids(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        return await self.write(
            lambda image: config_control.allocate_producer_ids(image, body),
            lambda e: {"error_code": int(e)},
        )

    async def create_acls(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        """CreateAcls as a broker forwards it (the broker checked who may)."""
        bindings: list[AclBinding | str] = []
        for creation in body["creations"]:
            try:
                bindings.append(binding_of(creation))
            except AclError as exc:
                bindings.append(f"Invalid ACL: {exc}")
        return await self.write(
            lambda image: acl_control.create_acls(image, bindings),
            lambda e: {"results": [{"error_code": int(e)} for _ in body["creations"]]},
        )

    async def delete_acls(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        filters: list[AclBindingFilter | str] = []
        for raw in body["filters"]:
            try:
                filters.append(filter_of(raw))
            except AclError as exc:
                filters.append(str(exc))
        return await self.write(
            lambda image: acl_control.delete_acls(image, filters),
            lambda e: {
                "filter_results": [
                    {"error_code": int(e), "matching_acls": []} for _ in body["filters"]
                ]
            },
        )

    async def alter_client_quotas(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        def refuse(error: ErrorCode) -> dict[str, Any]:
            return {
                "entries": [
                    {"error_code": int(error), "entity": e["entity"]} for e in body["entries"]
                ]
            }

        return await self.write(
            lambda image: quota_control.alter_client_quotas(image, body, check_quota_entry),
            refuse,
        )

    async def alter_user_scram_credentials(
        self, body: dict[str, Any], version: int
    ) -> dict[str, Any]:
        def refuse(error: ErrorCode) -> dict[str, Any]:
            entries = [*(body.get("deletions") or ()), *(body.get("upsertions") or ())]
            users = dict.fromkeys(e["name"] for e in entries)
            return {"results": [{"user": u, "error_code": int(error)} for u in users]}

        return await self.write(
            lambda image: scram_control.alter_user_scram_credentials(image, body), refuse
        )


def check_quota_entry(entry: dict[str, Any]) -> tuple[QuotaEntity, dict[str, float | None]]:
    """An AlterClientQuotas entry checked as in ZooKeeper mode (`server/api/client_quotas.py`):
    its entity as the image keys it and each key's new value (None: removed)."""
    try:
        entity = parse_entity(entry["entity"])
        apply_quota_ops({}, cast("EntryData", entry))  # the keys and values, checked
    except QuotaRequestError as exc:
        raise ValueError(str(exc)) from exc
    key: QuotaEntity = tuple(sorted(entity.components()))
    return key, {op["key"]: None if op["remove"] else float(op["value"]) for op in entry["ops"]}
