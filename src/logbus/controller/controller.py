"""The controller: owns topic creation and deletion, partition creation and leader
election, writes the outcome to the metadata store in ZooKeeper's layout, and tells
brokers through the channel.

Store layout (as Kafka's ZooKeeper mode): `/brokers/ids/<id>` (ephemeral),
`/brokers/topics/<topic>` (assignment and topic id), `.../partitions/<p>/state`
(leader, leader_epoch, isr, controller_epoch), `/config/topics/<topic>`, `/controller`,
`/controller_epoch`, `/cluster/id`. One instance per broker; only the one holding
`/controller` acts. Not thread-safe: called from the broker's event loop.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

from logbus.controller.assignment import (
    ControllerError,
    assign_replicas,
    check_replication_factor,
)
from logbus.controller.channel import ControllerChannel
from logbus.controller.cluster_metadata import (
    BrokerInfo,
    PartitionState,
    TopicMetadata,
    broker_from_registration,
    topic_id_from_str,
    topic_id_to_str,
)
from logbus.controller.election import elect
from logbus.controller.metadata_store import BadVersion, MetadataStore, NodeExists, NoNode
from logbus.controller.reassignment import ReplicaAssignment, resume_reassignments
from logbus.controller.topic_admin import (
    EXCESSIVE_PARTITIONS_MESSAGE,
    MAX_PARTITIONS_PER_REQUEST,
    NewTopic,
    PartitionCreation,
    TopicChecks,
    TopicResult,
)
from logbus.controller.topic_validation import INTERNAL_TOPICS
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition

ZERO_UUID = UUID(int=0)
UNCLEAN = "unclean.leader.election.enable"

__all__ = [
    "EXCESSIVE_PARTITIONS_MESSAGE",
    "MAX_PARTITIONS_PER_REQUEST",
    "Controller",
    "ControllerError",
    "NewTopic",
    "PartitionCreation",
    "TopicResult",
    "assign_replicas",
    "check_replication_factor",
    "ensure_cluster_id",
    "stored_topic_configs",
]

def state_json(state: PartitionState) -> dict[str, object]:
    """A partition state node's JSON, as Kafka writes it."""
    return {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }


def write_topic_znodes(
    store: MetadataStore, topic: TopicMetadata, assignment: dict[int, list[int]]
) -> None:
    """Write a new topic as Kafka's `AdminZkClient` does: its configs at
    `/config/topics/<topic>`, then its assignment and id at `/brokers/topics/<topic>` (the
    node the controller watches). NodeExists if the topic exists."""
    if store.exists(f"/brokers/topics/{topic.name}"):
        raise NodeExists(topic.name)
    config_path = f"/config/topics/{topic.name}"
    config = {"version": 1, "config": topic.configs}
    if store.exists(config_path):
        store.set_json(config_path, config)
    elif topic.configs:
        store.create_json(config_path, config)
    store.create_json(
        f"/brokers/topics/{topic.name}",
        {
            "version": 3,
            "topic_id": topic_id_to_str(topic.topic_id),
            "partitions": {str(p): r for p, r in assignment.items()},
            "adding_replicas": {},
            "removing_replicas": {},
        },
    )


def ensure_cluster_id(store: MetadataStore) -> str:
    """The cluster id at `/cluster/id`, generated (Kafka's base64 form) on first start."""
    try:
        return str(json.loads(store.get("/cluster/id")[0])["id"])
    except NoNode:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        try:
            store.create_json("/cluster/id", {"version": "1", "id": cluster_id})
        except NodeExists:  # another broker starting at the same time made it first
            return str(json.loads(store.get("/cluster/id")[0])["id"])
        return cluster_id


def stored_topic_configs(store: MetadataStore, topic: str) -> dict[str, str]:
    """A topic's dynamic configs as `/config/topics/<topic>` holds them."""
    try:
        value = store.get_json(f"/config/topics/{topic}")
    except NoNode:
        return {}
    assert isinstance(value, dict)
    return dict(value.get("config", {}))


class Controller(TopicChecks):
    def __init__(
        self,
        store: MetadataStore,
        channel: ControllerChannel,
        broker: BrokerInfo,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        validate_configs: object = None,
        max_broker_partitions: int = (1 << 31) - 1,
        unclean_default: bool = False,
    ) -> None:
        self.store = store
        self.channel = channel
        self.broker = broker
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.epoch = 0
        self.cluster_id = ""
        self.topics: dict[str, TopicMetadata] = {}
        self._validate_configs = validate_configs
        # Partition replicas one broker may host (max.broker.partitions).
        self.max_broker_partitions = max_broker_partitions
        # unclean.leader.election.enable of the broker, for topics without an override.
        self.unclean_default = unclean_default
        # Kafka's ControllerStats: leaders elected for existing partitions, and those of
        # them chosen outside the ISR (read by the broker's metrics).
        self.leader_elections = 0
        self.unclean_leader_elections = 0
        # Brokers in a controlled shutdown: never elected leader, nor added to an ISR,
        # until they register again.
        self.shutting_down: set[int] = set()
        # Ongoing partition reassignments, as the topic znodes hold them (KIP-455).
        self.reassignments: dict[TopicPartition, ReplicaAssignment] = {}

    # --- start-up -------------------------------------------------------------------------

    def start(self) -> None:
        """Register this broker, become controller, load topics and elect leaders."""
        with self.store.batch():
            self._start()

    def _start(self) -> None:
        self.cluster_id = ensure_cluster_id(self.store)
        self._register_broker()
        self._elect_self()
        for name in (
            self.store.children("/brokers/topics") if self.store.exists("/brokers/topics") else []
        ):
            self.topics[name] = self._load_topic(name)
        if self.store.exists("/admin/delete_topics"):
            for name in self.store.children("/admin/delete_topics"):
                self._complete_delete(name)
        for topic in self.topics.values():
            self._elect_leaders(topic, list(topic.partitions))
        self.channel.send_update_metadata(self.live_brokers(), list(self.topics.values()), [])
        resume_reassignments(self)

    def _register_broker(self) -> None:
        b = self.broker
        path = f"/brokers/ids/{b.broker_id}"
        value = {
            "listener_security_protocol_map": {
                ep.listener: ep.security_protocol for ep in b.all_endpoints()
            },
            "endpoints": [f"{ep.listener}://{ep.host}:{ep.port}" for ep in b.all_endpoints()],
            "rack": b.rack,
            "jmx_port": -1,
            "port": b.port,
            "host": b.host,
            "version": 5,
            "timestamp": str(int(time.time() * 1000)),
        }
        if self.store.exists(path):
            raise ControllerError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker id {b.broker_id} is already registered"
            )
        self.store.create_json(path, value, ephemeral=True)

    def _elect_self(self) -> None:
        try:
            self.store.create_json(
                "/controller",
                {
                    "version": 1,
                    "brokerid": self.broker.broker_id,
                    "timestamp": str(int(time.time() * 1000)),
                },
                ephemeral=True,
            )
        except NodeExists:
            return
        try:
            data, version = self.store.get("/controller_epoch")
            self.epoch = int(data) + 1
            self.store.set("/controller_epoch", str(self.epoch).encode(), version)
        except NoNode:
            self.epoch = 1
            self.store.create("/controller_epoch", b"1")

    def live_brokers(self) -> list[BrokerInfo]:
        out = []
        for child in self.store.children("/brokers/ids"):
            value = json.loads(self.store.get(f"/brokers/ids/{child}")[0])
            out.append(broker_from_registration(int(child), value, self.broker.listener))
        return out

    def _load_topic(self, name: str) -> TopicMetadata:
        value = self.store.get_json(f"/brokers/topics/{name}")
        assert isinstance(value, dict)
        topic = TopicMetadata(
            name, topic_id_from_str(value["topic_id"]), is_internal=name in INTERNAL_TOPICS
        )
        for p, replicas in value["partitions"].items():
            state_path = f"/brokers/topics/{name}/partitions/{p}/state"
            try:
                data, version = self.store.get(state_path)
                state = json.loads(data)
                topic.partitions[int(p)] = PartitionState(
                    state["leader"],
                    state["leader_epoch"],
                    tuple(state["isr"]),
                    tuple(replicas),
                    state.get("controller_epoch", 0),
                    version,
                )
            except NoNode:
                topic.partitions[int(p)] = PartitionState(-1, -1, (), tuple(replicas))
        self._load_reassignments(name, value)
        topic.configs = stored_topic_configs(self.store, name)
        return topic

    def _load_reassignments(self, name: str, value: dict[str, Any]) -> None:
        adding = value.get("adding_replicas") or {}
        removing = value.get("removing_replicas") or {}
        for p, replicas in value["partitions"].items():
            tp = TopicPartition(name, int(p))
            assignment = ReplicaAssignment(
                tuple(replicas), tuple(adding.get(p, ())), tuple(removing.get(p, ()))
            )
            if assignment.is_being_reassigned:
                self.reassignments[tp] = assignment
            else:
                self.reassignments.pop(tp, None)

    def write_assignment(self, name: str, changes: Mapping[int, ReplicaAssignment]) -> None:
        """Write partitions' replicas (with those being added and removed) to the topic
        znode, as Kafka 2.4+ keeps them; a compare-and-set on the node's version."""
        path = f"/brokers/topics/{name}"
        data, version = self.store.get(path)
        value = json.loads(data)
        adding = value.setdefault("adding_replicas", {})
        removing = value.setdefault("removing_replicas", {})
        for p, assignment in changes.items():
            key = str(p)
            value["partitions"][key] = list(assignment.replicas)
            for moving, values in ((adding, assignment.adding), (removing, assignment.removing)):
                if values:
                    moving[key] = list(values)
                else:
                    moving.pop(key, None)
        self._set_topic_node(path, json.dumps(value).encode(), version)

    def _set_topic_node(self, path: str, data: bytes, version: int) -> None:
        self.store.set(path, data, version)

    # --- leadership -----------------------------------------------------------------------

    def unclean_enabled(self, topic: TopicMetadata) -> bool:
        """unclean.leader.election.enable of a topic: its override, else the broker's."""
        value = topic.configs.get(UNCLEAN)
        if value is None:
            return self.unclean_default
        return value.strip().lower() == "true"

    def _elect_leaders(self, topic: TopicMetadata, partitions: list[int]) -> None:
        """Elect a leader for partitions without a live leader (from the live ISR; outside
        it only where unclean election is enabled), bump the leader epoch, write the state
        with a compare-and-set, and tell the replicas."""
        live = {b.broker_id for b in self.live_brokers()} - self.shutting_down
        unclean = self.unclean_enabled(topic)
        changed: dict[int, list[int]] = {}
        for p in partitions:
            state = topic.partitions[p]
            new = elect(state, live, unclean, self.epoch)
            if new is not None:
                self.count_election(state, new)
                topic.partitions[p] = new = self._write_state(
                    topic.name, p, new, create=state.leader_epoch < 0
                )
            else:
                new = state
            for replica in new.replicas:
                if replica in live:
                    changed.setdefault(replica, []).append(p)
        for broker_id, parts in changed.items():
            self.channel.send_leader_and_isr(broker_id, topic, parts)

    def count_election(self, old: PartitionState, new: PartitionState) -> None:
        """Count a leader change of an existing partition (ControllerStats)."""
        if old.leader_epoch >= 0 and new.leader >= 0 and new.leader != old.leader:
            self.leader_elections += 1
            if new.leader not in old.isr:
                self.unclean_leader_elections += 1

    def _write_states(
        self, writes: Sequence[tuple[str, int, PartitionState]]
    ) -> list[PartitionState | None]:
        """Write several existing partitions' state nodes, each a compare-and-set on its
        version: the written state, or None for a write that lost a race (the node
        changed or went). A controller whose store allows it sends them all at once."""
        written: list[PartitionState | None] = []
        for topic, partition, state in writes:
            try:
                written.append(self._write_state(topic, partition, state, create=False))
            except (BadVersion, NoNode):
                written.append(None)
        return written

    def _write_state(
        self, topic: str, partition: int, state: PartitionState, create: bool
    ) -> PartitionState:
        """Write a partition's state node (compare-and-set on its version unless
        `create`); returns the state with the node's new version (the partition epoch)."""
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        value = json.dumps(state_json(state)).encode()
        if create and not self.store.exists(path):
            self.store.create(path, value)
            version = 0
        else:
            version = self.store.set(path, value, state.version if not create else -1)
        return replace(state, version=version)

    # --- topic administration -------------------------------------------------------------

    def create_topic(self, spec: NewTopic) -> TopicResult:
        """Create a topic at once (internal and auto-created topics, which are small);
        CreateTopics goes through `register_topic` and `start_partitions` instead."""
        creation = self.register_topic(spec)
        if isinstance(creation, TopicResult):
            return creation
        self.start_partitions(creation, creation.new_partitions)
        return self.finish_creation(creation)

    def register_topic(self, spec: NewTopic) -> PartitionCreation | TopicResult:
        """Validate a new topic and write it (assignment, id, configs) to the store; its
        partitions have no leader until `start_partitions`. An error is a TopicResult."""
        with self.store.batch():
            checked = self.validate_new_topic(spec)
            if checked.error != ErrorCode.NONE:
                return checked
            try:
                assignment = spec.assignments or self.assign(
                    checked.num_partitions, checked.replication_factor
                )
            except ControllerError as exc:
                return TopicResult(spec.name, exc.error, exc.message)
            topic = TopicMetadata(
                spec.name,
                uuid.uuid4(),
                is_internal=spec.name in INTERNAL_TOPICS,
                configs=dict(spec.configs),
            )
            try:
                write_topic_znodes(self.store, topic, assignment)
            except NodeExists:
                return TopicResult(
                    spec.name,
                    ErrorCode.TOPIC_ALREADY_EXISTS,
                    f"Topic '{spec.name}' already exists.",
                )
        for p, replicas in assignment.items():
            topic.partitions[p] = PartitionState(-1, -1, tuple(replicas), tuple(replicas))
        self.topics[spec.name] = topic
        result = TopicResult(
            spec.name,
            ErrorCode.NONE,
            None,
            topic.topic_id,
            len(assignment),
            len(next(iter(assignment.values()))),
        )
        return PartitionCreation(topic, range(len(assignment)), result)

    def start_partitions(self, creation: PartitionCreation, partitions: range) -> bool:
        """Elect leaders of some of the new partitions (brokers create their logs on the
        LeaderAndIsr). False, and nothing done, if the topic was deleted meanwhile."""
        topic = creation.topic
        if self.topics.get(topic.name) is not topic:
            return False
        with self.store.batch():
            self._elect_leaders(topic, list(partitions))
        return True

    def finish_creation(self, creation: PartitionCreation) -> TopicResult:
        """Tell every broker about the topic's new partitions (UpdateMetadata)."""
        topic = creation.topic
        if self.topics.get(topic.name) is not topic:
            return TopicResult(
                topic.name,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic '{topic.name}' was deleted while its partitions were created.",
            )
        self.channel.send_update_metadata(self.live_brokers(), [topic], [])
        return creation.result

    def delete_topic(self, name: str) -> TopicResult:
        topic = self.topics.get(name)
        if topic is None:
            return TopicResult(
                name,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        with self.store.batch():
            path = f"/admin/delete_topics/{name}"
            if not self.store.exists(path):
                self.store.create(path, b"")
        self._complete_delete(name)
        return TopicResult(name, topic_id=topic.topic_id)

    def _complete_delete(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        for tp in [tp for tp in self.reassignments if tp.topic == name]:
            del self.reassignments[tp]
        if topic is not None:
            by_broker: dict[int, list[int]] = {}
            for p, state in topic.partitions.items():
                for r in state.replicas:
                    by_broker.setdefault(r, []).append(p)
            for broker_id, parts in by_broker.items():
                self.channel.send_stop_replica(broker_id, name, parts, True)
        self._delete_topic_znodes(name)
        self.channel.send_update_metadata(self.live_brokers(), [], [name])

    def _delete_topic_znodes(self, name: str) -> None:
        with self.store.batch():
            for path in (f"/brokers/topics/{name}", f"/config/topics/{name}"):
                if self.store.exists(path):
                    self.store.delete(path, recursive=True)
            if self.store.exists(f"/admin/delete_topics/{name}"):
                self.store.delete(f"/admin/delete_topics/{name}")

    def register_partitions(
        self, name: str, total: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> PartitionCreation | TopicResult:
        """Validate an increase of a topic's partition count to `total` and, unless
        `validate_only`, write the new assignment to the store; the new partitions have no
        leader until `start_partitions`. With `validate_only` nothing is built: only the
        counts and the replication arithmetic are checked."""
        topic = self.topics.get(name)
        if topic is None:
            return TopicResult(
                name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        current = len(topic.partitions)
        if total <= current:
            return TopicResult(
                name,
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than "
                f"the requested {total}."
                if total < current
                else f"Topic already has {current} partitions.",
            )
        added = total - current
        if added > MAX_PARTITIONS_PER_REQUEST:
            return TopicResult(name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS_MESSAGE)
        rf = len(next(iter(topic.partitions.values())).replicas)
        try:
            if assignments is not None:
                if len(assignments) != added:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Increasing the number of partitions by {added} but "
                        f"{len(assignments)} assignments provided.",
                    )
                new = {current + i: list(r) for i, r in enumerate(assignments)}
                self._check_assignment(new, current)
                if any(len(r) != rf for r in new.values()):
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Inconsistent replication factor, expected {rf}",
                    )
                self._check_broker_limit(Counter(b for r in new.values() for b in r))
            else:
                live = len(self.live_brokers())
                check_replication_factor(rf, live)
                self._check_broker_limit(self._spread(added, rf, live))
                if validate_only:
                    return TopicResult(name)
                new = self.assign(added, rf, first_partition=current)
        except ControllerError as exc:
            return TopicResult(name, exc.error, exc.message)
        if validate_only:
            return TopicResult(name)
        with self.store.batch():
            data, version = self.store.get(f"/brokers/topics/{name}")
            value = json.loads(data)
            value["partitions"].update({str(p): r for p, r in new.items()})
            self.store.set_json(f"/brokers/topics/{name}", value, version)
        for p, replicas in new.items():
            topic.partitions[p] = PartitionState(-1, -1, tuple(replicas), tuple(replicas))
        return PartitionCreation(topic, range(current, total), TopicResult(name))

    def shutdown(self) -> None:
        for path in (f"/brokers/ids/{self.broker.broker_id}", "/controller"):
            try:
                if path == "/controller":
                    owner = json.loads(self.store.get(path)[0]).get("brokerid")
                    if owner != self.broker.broker_id:
                        continue
                self.store.delete(path)
            except NoNode:
                pass
