"""The controller of a cluster on ZooKeeper (Kafka's `KafkaController` in ZooKeeper mode).

Every broker runs one; the one that creates the ephemeral `/controller` node is active,
the others watch that node and try again when it disappears. Winning bumps
`/controller_epoch` in the same transaction (`multi`) as the creation, and every later
write of partition state or topic deletion is a `multi` that first checks the epoch node's
version, so the writes of a controller that lost its session without noticing (a zombie)
fail; it then resigns.

All of it runs on the controller event thread (`ControllerEventManager`): watch and
session callbacks only enqueue events; the broker's event loop submits its requests and
awaits them. The active controller watches `/brokers/ids` (broker failure and start),
`/brokers/topics` (topics written by any broker), `/admin/delete_topics` and
`/log_dir_event_notification` (a broker's failed log dir: `log_dir_events.py`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from logbus.client.requests.controller import ControlResult
from logbus.controller.assignment import ControllerError, assign_replicas
from logbus.controller.broker_registration import BrokerRegistration, registered_brokers
from logbus.controller.cluster_metadata import BrokerInfo, PartitionState, TopicMetadata
from logbus.controller.controller import (
    Controller,
    NewTopic,
    TopicResult,
    ensure_cluster_id,
    state_json,
    write_topic_znodes,
)
from logbus.controller.controller_events import ControllerEventManager
from logbus.controller.election import NO_LEADER, on_brokers_lost
from logbus.controller.log_dir_events import offline_replica_state, take_log_dir_events
from logbus.controller.metadata_store import (
    BadVersion,
    CheckVersion,
    Create,
    Delete,
    MetadataStore,
    NodeExists,
    NoNode,
    Op,
    SessionEvent,
    SetData,
)
from logbus.controller.reassignment import resume_reassignments
from logbus.controller.topic_validation import INTERNAL_TOPICS
from logbus.protocol import ApiKey, ErrorCode
from logbus.types import TopicPartition

log = logging.getLogger(__name__)

CONTROLLER_PATH = "/controller"
EPOCH_PATH = "/controller_epoch"


class ControllerMovedError(Exception):
    """This broker is not (or no longer) the active controller."""


class ClusterController(Controller):
    """A `Controller` that competes for `/controller` and fences its writes. Controller
    thread only (except `startup`, `on_session_event` and the watch callbacks, which
    enqueue)."""

    def __init__(
        self,
        store: MetadataStore,
        channel: object,
        broker: BrokerInfo,
        events: ControllerEventManager,
        registration: BrokerRegistration,
        *,
        on_registered: Callable[[int], None] = lambda epoch: None,
        **options: object,
    ) -> None:
        super().__init__(store, channel, broker, **options)  # type: ignore[arg-type]
        self.events = events
        self.registration = registration
        self.on_registered = on_registered
        self.active = False
        self.epoch_zk_version = -1
        self.brokers: dict[int, tuple[BrokerInfo, int]] = {}
        self._expired = False
        if hasattr(channel, "on_response"):
            # The broker's answers to LeaderAndIsr tell which replicas are on a failed dir.
            channel.on_response = self._on_control_response

    # --- election -------------------------------------------------------------------------

    def startup(self) -> None:
        """Start competing for `/controller` (any thread)."""
        self.store.add_session_listener(self.on_session_event)
        self.events.put(self._elect, "Startup")

    def on_session_event(self, event: SessionEvent) -> None:
        """ZooKeeper's session callback (its thread): hand over to the controller thread."""
        if event is SessionEvent.EXPIRED:
            self._expired = True
            self.events.put(self._on_session_expired, "Expire")
        elif event is SessionEvent.CONNECTED:
            self.events.put(self._on_connected, "Reconnected")

    def _on_session_expired(self) -> None:
        log.warning("ZooKeeper session of broker %d expired", self.broker.broker_id)
        self._resign()

    def _on_connected(self) -> None:
        """After a new session: register again (a new broker epoch) and compete again.
        After a reconnection within the same session: catch up with what changed while
        the connection was down (an event that failed then may not have set its watch
        again)."""
        if not self._expired and self.registration.epoch >= 0:
            if self.active:
                self._on_broker_change()
                self._on_topic_change()
                self._on_topic_deletion()
            else:
                self._on_controller_change()
            return
        self._expired = False
        try:
            if not self.registration.is_registered():
                epoch = self.registration.register()
                log.info(
                    "broker %d registered again (broker epoch %d)", self.broker.broker_id, epoch
                )
                self.on_registered(epoch)
        except Exception:
            log.exception("cannot register broker %d again", self.broker.broker_id)
        self._elect()

    def _controller_watch(self, _path: str) -> None:
        self.events.put(self._on_controller_change, "ControllerChange")

    def _on_controller_change(self) -> None:
        owner = self.active_controller_id()
        if self.active and owner != self.broker.broker_id:
            self._resign()
        if owner == -1 or not self.store.exists(CONTROLLER_PATH, watch=self._controller_watch):
            self._elect()

    def active_controller_id(self) -> int:
        try:
            data, _ = self.store.get(CONTROLLER_PATH)
        except NoNode:
            return -1
        return int(json.loads(data).get("brokerid", -1))

    def _elect(self) -> None:
        """Try to become the controller: create `/controller` and bump the epoch in one
        transaction; on losing, watch `/controller`."""
        if self.active:
            return
        try:
            data, version = self.store.get(EPOCH_PATH)
        except NoNode:
            with contextlib.suppress(NodeExists):
                self.store.create(EPOCH_PATH, b"0")
            data, version = self.store.get(EPOCH_PATH)
        epoch = int(data or b"0") + 1
        me = {
            "version": 1,
            "brokerid": self.broker.broker_id,
            "timestamp": str(int(time.time() * 1000)),
        }
        try:
            self.store.multi(
                [
                    Create(CONTROLLER_PATH, json.dumps(me).encode(), ephemeral=True),
                    SetData(EPOCH_PATH, str(epoch).encode(), version),
                ]
            )
        except (NodeExists, BadVersion):
            if self._won_unawares():
                data, version = self.store.get(EPOCH_PATH)
                epoch, version = int(data), version - 1
            else:
                if not self.store.exists(CONTROLLER_PATH, watch=self._controller_watch):
                    self.events.put(self._elect, "Reelect")
                return
        self.epoch = epoch
        self.epoch_zk_version = version + 1
        self.active = True
        self.store.exists(CONTROLLER_PATH, watch=self._controller_watch)
        log.info("broker %d is the controller (epoch %d)", self.broker.broker_id, epoch)
        try:
            self._on_failover()
        except ControllerMovedError:
            log.warning("broker %d lost the controllership during failover", self.broker.broker_id)
        except Exception:
            log.exception("controller failover failed; resigning")
            self._resign(delete_node=True)

    def _won_unawares(self) -> bool:
        """Whether `/controller` was created by this broker's own session (a transaction
        retried after its answer was lost on a dropped connection): its ephemeral owner is
        the session that owns this broker's registration. The epoch was bumped in the
        same transaction."""
        try:
            owner = self.store.stat(CONTROLLER_PATH).ephemeral_owner
            mine = self.store.stat(self.registration.path).ephemeral_owner
        except NoNode:
            return False
        return (
            owner != 0 and owner == mine and self.active_controller_id() == (self.broker.broker_id)
        )

    def _resign(self, delete_node: bool = False) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller (epoch %d)", self.broker.broker_id, self.epoch)
        self.active = False
        self.epoch_zk_version = -1
        channel = self.channel
        for broker_id in list(self.brokers):
            channel.remove_broker(broker_id)  # type: ignore[attr-defined]
        self.brokers = {}
        self.topics = {}
        self.reassignments = {}
        self.shutting_down = set()
        if delete_node and self.active_controller_id() == self.broker.broker_id:
            with contextlib.suppress(NoNode):
                self.store.delete(CONTROLLER_PATH)

    def resign_and_release(self) -> None:
        """Controlled shutdown of the controller: stop acting and free `/controller`."""
        was_active = self.active
        self.active = True  # so that _resign does its work once
        self._resign(delete_node=was_active)
        self.active = False

    # --- fencing --------------------------------------------------------------------------

    def _check_active(self) -> None:
        if not self.active:
            raise ControllerMovedError("this broker is not the active controller")

    def _fenced(self, ops: Sequence[Op]) -> None:
        """Apply `ops` only if `/controller_epoch` is still at the version this controller
        set; otherwise resign and raise ControllerMovedError."""
        self._check_active()
        try:
            self.store.multi([CheckVersion(EPOCH_PATH, self.epoch_zk_version), *ops])
        except BadVersion:
            self._check_epoch()
            raise

    def _check_epoch(self) -> None:
        """After a refused compare-and-set: if `/controller_epoch` moved on, another
        broker is the controller (resign, ControllerMovedError); else the node itself
        changed."""
        try:
            _, version = self.store.get(EPOCH_PATH)
        except NoNode:
            version = -1
        if version != self.epoch_zk_version:
            log.warning(
                "controller epoch moved on (zk version %d, ours %d): resigning",
                version,
                self.epoch_zk_version,
            )
            self._resign()
            raise ControllerMovedError("another broker became the controller") from None

    def _write_states(
        self, writes: Sequence[tuple[str, int, PartitionState]]
    ) -> list[PartitionState | None]:
        """Each write fenced by the controller epoch as `_write_state`'s, all sent before
        the first answer is awaited (Kafka's controller pipelines them too)."""
        self._check_active()
        fence = CheckVersion(EPOCH_PATH, self.epoch_zk_version)
        outcomes = self.store.multi_each([
            [fence, SetData(
                f"/brokers/topics/{topic}/partitions/{partition}/state",
                json.dumps(state_json(state)).encode(), state.version,
            )]
            for topic, partition, state in writes
        ])  # fmt: skip
        if any(isinstance(outcome, BadVersion) for outcome in outcomes):
            self._check_epoch()
        return [
            None if outcome is not None else PartitionState(
                state.leader, state.leader_epoch, state.isr, state.replicas,
                state.controller_epoch, state.version + 1,
            )
            for (_topic, _partition, state), outcome in zip(writes, outcomes, strict=True)
        ]  # fmt: skip

    def _write_state(
        self, topic: str, partition: int, state: PartitionState, create: bool
    ) -> PartitionState:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        data = json.dumps(state_json(state)).encode()
        if create:
            # The parents are plain nodes (never the topic's own node: a deleted topic
            # must not come back).
            for parent in (
                f"/brokers/topics/{topic}/partitions",
                f"/brokers/topics/{topic}/partitions/{partition}",
            ):
                with contextlib.suppress(NodeExists):
                    self.store.create(parent, b"", make_parents=False)
            try:
                expected = self.store.stat(path).version
            except NoNode:
                self._fenced([Create(path, data)])
                return PartitionState(
                    state.leader, state.leader_epoch, state.isr, state.replicas,
                    state.controller_epoch, 0,
                )  # fmt: skip
        else:
            expected = state.version
        self._fenced([SetData(path, data, expected)])
        return PartitionState(
            state.leader, state.leader_epoch, state.isr, state.replicas,
            state.controller_epoch, expected + 1,
        )  # fmt: skip

    def _set_topic_node(self, path: str, data: bytes, version: int) -> None:
        self._fenced([SetData(path, data, version)])

    def _delete_topic_znodes(self, name: str) -> None:
        self._check_active()
        nodes: list[str] = []

        def walk(path: str) -> None:
            try:
                for child in self.store.children(path):
                    walk(f"{path}/{child}")
            except NoNode:
                return
            nodes.append(path)

        for root in (f"/brokers/topics/{name}", f"/config/topics/{name}"):
            walk(root)
        ops: list[Op] = [Delete(path) for path in nodes]
        if self.store.exists(f"/admin/delete_topics/{name}"):
            ops.append(Delete(f"/admin/delete_topics/{name}"))
        self._fenced(ops)

    # --- state ----------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerInfo]:
        if self.active:
            return [info for info, _ in self.brokers.values()]
        return [info for info, _ in registered_brokers(self.store, self.broker.listener).values()]

    def _read_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        self.store.children("/brokers/ids", watch=self._brokers_watch)
        return registered_brokers(self.store, self.broker.listener)

    def _on_failover(self) -> None:
        """Become the active controller: load everything, watch, elect leaders of
        partitions without a live one, and send every broker the full state."""
        self.cluster_id = ensure_cluster_id(self.store)
        self.brokers = self._read_brokers()
        channel = self.channel
        channel.set_controller(self.broker.broker_id, self.epoch)  # type: ignore[attr-defined]
        for info, broker_epoch in self.brokers.values():
            channel.add_broker(info, broker_epoch)  # type: ignore[attr-defined]
        self.topics = {}
        self.reassignments = {}
        for name in self._topic_names():
            try:
                self.topics[name] = self._load_topic(name)
            except NoNode:
                continue
        for name in self._deletion_names():
            self._complete_delete(name)
        live = set(self.brokers)
        for topic in list(self.topics.values()):
            # Replicas on brokers that are not alive leave the ISR (Kafka's replica state
            # machine marks them offline at failover), then leaderless partitions elect.
            unclean = self.unclean_enabled(topic)
            for p, state in list(topic.partitions.items()):
                if state.leader_epoch < 0:
                    continue
                dead = {r for r in (*state.isr, state.leader) if r not in live and r >= 0}
                new = on_brokers_lost(state, dead, live, unclean, self.epoch) if dead else None
                if new is not None:
                    self.count_election(state, new)
                    topic.partitions[p] = self._write_state(topic.name, p, new, create=False)
            self._elect_leaders(topic, list(topic.partitions))
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])
        self._on_log_dir_events()
        # The previous controller may have completed a reassignment without its
        # StopReplica reaching the removed replicas.
        self._delete_strays(set(self.brokers))
        resume_reassignments(self)

    def _topic_names(self) -> list[str]:
        try:
            return self.store.children("/brokers/topics", watch=self._topics_watch)
        except NoNode:
            self.store.create("/brokers/topics", b"")
            return self.store.children("/brokers/topics", watch=self._topics_watch)

    def _deletion_names(self) -> list[str]:
        try:
            return self.store.children("/admin/delete_topics", watch=self._deletions_watch)
        except NoNode:
            with contextlib.suppress(NodeExists):
                self.store.create("/admin/delete_topics", b"")
            return self.store.children("/admin/delete_topics", watch=self._deletions_watch)

    # --- watches --------------------------------------------------------------------------

    def _brokers_watch(self, _path: str) -> None:
        self.events.put(self._on_broker_change, "BrokerChange")

    def _topics_watch(self, _path: str) -> None:
        self.events.put(self._on_topic_change, "TopicChange")

    def _deletions_watch(self, _path: str) -> None:
        self.events.put(self._on_topic_deletion, "TopicDeletion")

    def _log_dir_events_watch(self, _path: str) -> None:
        self.events.put(self._on_log_dir_events, "LogDirEventNotification")

    def _on_log_dir_events(self) -> None:
        """Brokers whose log dirs failed get LeaderAndIsr for every replica they hold;
        their KAFKA_STORAGE_ERROR answers name the replicas to take offline."""
        if not self.active:
            return
        for broker_id in sorted(take_log_dir_events(self.store, self._log_dir_events_watch)):
            if broker_id not in self.brokers:
                continue
            log.info("controller: a log dir of broker %d failed", broker_id)
            for topic in self.topics.values():
                hosted = [p for p, s in topic.partitions.items() if broker_id in s.replicas]
                if hosted:
                    self.channel.send_leader_and_isr(broker_id, topic, hosted)

    def _on_control_response(
        self, broker_id: int, api_key: ApiKey, result: ControlResult
    ) -> None:
        """The channel's listener (event loop): storage errors go to the controller."""
        offline = [
            tp for tp, code in result.failed().items() if code == ErrorCode.KAFKA_STORAGE_ERROR
        ]
        if api_key == ApiKey.LEADER_AND_ISR and offline:
            self.events.put(
                lambda: self._on_offline_replicas(broker_id, offline), "OfflineReplicas"
            )

    def _on_offline_replicas(self, broker_id: int, offline: list[TopicPartition]) -> None:
        """Kafka's OfflineReplica transition: out of the ISR, other leaders elected."""
        if not self.active:
            return
        live = set(self.brokers) - self.shutting_down
        by_topic: dict[str, list[int]] = {}
        for tp in offline:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for name, partitions in by_topic.items():
            topic = self.topics.get(name)
            if topic is None:
                continue
            unclean = self.unclean_enabled(topic)
            changed: dict[int, list[int]] = {}
            for p in partitions:
                state = topic.partitions.get(p)
                new = None if state is None else offline_replica_state(
                    state, broker_id, live, unclean, self.epoch
                )
                if state is None or new is None:
                    continue
                self.count_election(state, new)
                topic.partitions[p] = new = self._write_state(name, p, new, create=False)
                log.info("controller: replica %d of %s-%d is offline; leader %d, isr %s",
                         broker_id, name, p, new.leader, list(new.isr))  # fmt: skip
                for replica in new.replicas:
                    if replica in live and replica != broker_id:
                        changed.setdefault(replica, []).append(p)
            for replica, parts in changed.items():
                self.channel.send_leader_and_isr(replica, topic, parts)
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])

    def _on_broker_change(self) -> None:
        if not self.active:
            return
        current = self._read_brokers()
        old = self.brokers
        dead = [b for b in old if b not in current or current[b][1] != old[b][1]]
        new = [b for b in current if b not in old or current[b][1] != old[b][1]]
        self.brokers = current
        # A broker that stopped, or registered again, is no longer shutting down.
        self.shutting_down -= {*dead, *new}
        for broker_id in dead:
            self.channel.remove_broker(broker_id)  # type: ignore[attr-defined]
        for broker_id in new:
            self.channel.add_broker(*current[broker_id])  # type: ignore[attr-defined]
        if dead:
            log.info("controller: brokers %s are gone", sorted(dead))
            self._on_brokers_failed(set(dead))
        if new:
            log.info("controller: brokers %s started", sorted(new))
            self._on_brokers_started(set(new))

    def _on_brokers_failed(self, dead: set[int]) -> None:
        # A broker that came back with a new epoch (its session expired: a zombie) is
        # handled as dead first, as Kafka does: it leads nothing until it is a follower
        # that caught up again.
        live = set(self.brokers) - dead - self.shutting_down
        for topic in list(self.topics.values()):
            unclean = self.unclean_enabled(topic)
            changed: dict[int, list[int]] = {}
            for p, state in list(topic.partitions.items()):
                new = on_brokers_lost(state, dead, live, unclean, self.epoch)
                if new is None:
                    continue
                self.count_election(state, new)
                topic.partitions[p] = new = self._write_state(topic.name, p, new, create=False)
                if new.leader == NO_LEADER:
                    log.warning("partition %s-%d is offline (no live in-sync replica)",
                                topic.name, p)  # fmt: skip
                for replica in new.replicas:
                    if replica in live:
                        changed.setdefault(replica, []).append(p)
            for broker_id, parts in changed.items():
                self.channel.send_leader_and_isr(broker_id, topic, parts)
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])

    def _on_brokers_started(self, new: set[int]) -> None:
        """A started broker gets the full metadata and LeaderAndIsr for its replicas;
        offline partitions it can lead are elected."""
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])
        for topic in list(self.topics.values()):
            hosted = [p for p, s in topic.partitions.items() if new & set(s.replicas)]
            if hosted:
                self._elect_leaders(topic, hosted)
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])
        self._delete_strays(new)

    def _delete_strays(self, brokers: set[int]) -> None:
        """Tell brokers to delete the replicas they may still hold of partitions no longer
        assigned to them: a reassignment removed them while they were down, or the
        StopReplica sent then was lost with the controller that sent it."""
        for broker_id in brokers:
            for topic in list(self.topics.values()):
                strays = [
                    p
                    for p, s in topic.partitions.items()
                    if broker_id not in s.replicas and s.leader_epoch >= 0
                ]
                if strays:
                    self.channel.send_stop_replica(broker_id, topic.name, strays, True)

    def _on_topic_change(self) -> None:
        if not self.active:
            return
        names = self._topic_names()
        added: list[TopicMetadata] = []
        for name in names:
            if name in self.topics:
                continue
            try:
                topic = self._load_topic(name)
            except NoNode:
                continue
            self.topics[name] = topic
            self._elect_leaders(topic, list(topic.partitions))
            added.append(topic)
        if added:
            log.info("controller: new topics %s", [t.name for t in added])
            self.channel.send_update_metadata(self.live_brokers(), added, [])

    def _on_topic_deletion(self) -> None:
        if not self.active:
            return
        for name in self._deletion_names():
            if name in self.topics:
                self._complete_delete(name)
            else:
                with contextlib.suppress(NoNode):
                    self._fenced([Delete(f"/admin/delete_topics/{name}")])

    def on_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """A topic's dynamic configs changed: remember them; when unclean election was
        just enabled, elect the topic's offline partitions now (Kafka does the same)."""
        topic = self.topics.get(name)
        if topic is None:
            return
        topic.configs = dict(configs)
        self._elect_offline_unclean(topic)

    def on_unclean_default(self, enabled: bool) -> None:
        """The broker-wide unclean.leader.election.enable changed (dynamic config)."""
        self.unclean_default = enabled
        for topic in list(self.topics.values()):
            self._elect_offline_unclean(topic)

    def _elect_offline_unclean(self, topic: TopicMetadata) -> None:
        if not self.active or not self.unclean_enabled(topic):
            return
        offline = [
            p
            for p, s in topic.partitions.items()
            if s.leader == NO_LEADER or s.leader not in self.brokers
        ]
        if offline:
            self._elect_leaders(topic, offline)
            self.channel.send_update_metadata(self.live_brokers(), [topic], [])

    # --- requests from the broker ---------------------------------------------------------

    def shutdown(self) -> None:
        """Nothing to do here: `resign_and_release` runs on the controller thread and the
        broker's registration ends with its ZooKeeper session."""


def admin_create_topic(
    store: MetadataStore,
    spec: NewTopic,
    known_brokers: list[BrokerInfo],
    default_partitions: int,
    default_replication_factor: int,
) -> TopicResult:
    """Write a new topic's znodes from a broker that is not the controller (Kafka's
    `AdminZkClient.createTopic`, used for auto-creation): the active controller sees it
    through its `/brokers/topics` watch and elects its leaders. Blocking."""
    partitions = default_partitions if spec.num_partitions == -1 else spec.num_partitions
    rf = default_replication_factor if spec.replication_factor == -1 else spec.replication_factor
    brokers = [info for info, _ in registered_brokers(store).values()] or known_brokers
    if store.exists(f"/admin/delete_topics/{spec.name}"):
        return TopicResult(
            spec.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' is being deleted."
        )
    try:
        assignment = spec.assignments or assign_replicas(
            [b.broker_id for b in brokers],
            partitions,
            rf,
            racks={b.broker_id: b.rack for b in brokers},
        )
    except ControllerError as exc:
        return TopicResult(spec.name, exc.error, exc.message)
    topic = TopicMetadata(
        spec.name, uuid.uuid4(), is_internal=spec.name in INTERNAL_TOPICS, configs=spec.configs
    )
    try:
        write_topic_znodes(store, topic, assignment)
    except NodeExists:
        return TopicResult(
            spec.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists."
        )
    return TopicResult(
        spec.name, ErrorCode.NONE, None, topic.topic_id, len(assignment),
        len(next(iter(assignment.values()))),
    )  # fmt: skip
