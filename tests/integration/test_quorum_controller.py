"""The KRaft controller on the metadata log (KIP-631) with three in-process voters over
loopback sockets: brokers register and heartbeat (fenced until caught up, fenced again
when their heartbeats stop, controlled shutdown through WantShutDown), topics created,
grown and deleted through the active controller land in every voter's image, a new
active controller after a kill has the same image, and a voter restarts from its snapshot
plus the log's tail. Requests are sent as a broker or an admin client would send them, on
the controller listener."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raft_quorum import CLUSTER_ID, WAIT, RaftQuorum

from logbus.client.connection import Connection
from logbus.metadata.image import MetadataImage
from logbus.metadata.records import decode_record
from logbus.protocol import ApiKey, ErrorCode
from logbus.raft.quorum_config import VoterAddress
from logbus.raft.snapshots import list_snapshots, read_snapshot_records
from logbus.server.kraft.broker_lifecycle import BrokerEndpoint, BrokerLifecycleManager, BrokerState
from logbus.server.kraft.quorum_controller import ControllerSettings, QuorumController

SESSION_MS = 2000
# A 2 s fetch timeout: a loaded machine's pauses do not make the quorum elect again
# behind a test's back (its leader is the active controller the test talks to).
FETCH_TIMEOUT_MS = 2000


def settings(**overrides: Any) -> ControllerSettings:
    chosen: dict[str, Any] = {"session_timeout_ms": SESSION_MS, "no_op_interval_ms": 200}
    return ControllerSettings(cluster_id=CLUSTER_ID, **(chosen | overrides))


def controller_quorum(tmp_path: Path, controller: ControllerSettings) -> RaftQuorum:
    return RaftQuorum(tmp_path, controller=controller, fetch_timeout_ms=FETCH_TIMEOUT_MS)


async def active_controller(quorum: RaftQuorum, above_epoch: int = -1) -> QuorumController:
    leader = await quorum.wait_for_leader(above_epoch=above_epoch)
    controller = quorum.controllers[leader.node_id]
    await quorum.wait_for(lambda: controller.is_active, "an active controller")
    return controller


async def request(
    quorum: RaftQuorum, node: int, api_key: ApiKey, body: dict[str, Any], version: int | None = None
) -> dict[str, Any]:
    conn = await Connection.connect("127.0.0.1", quorum.port(node), client_id="test-broker")
    try:
        return await conn.request(api_key, body, version)
    finally:
        await conn.close()


def registration(broker_id: int, incarnation: uuid.UUID | None = None) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "cluster_id": CLUSTER_ID,
        "incarnation_id": incarnation or uuid.UUID(int=broker_id),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9090 + broker_id,
                       "security_protocol": 0}],
        "features": [{"name": "metadata.version", "min_supported_version": 1,
                      "max_supported_version": 21}],
        "rack": None,
    }  # fmt: skip


def heartbeat(broker_id: int, epoch: int, offset: int, **flags: bool) -> dict[str, Any]:
    return {"broker_id": broker_id, "broker_epoch": epoch, "current_metadata_offset": offset,
            "want_fence": False, "want_shut_down": False, **flags}  # fmt: skip


async def register_and_unfence(quorum: RaftQuorum, node: int, brokers: list[int]) -> dict[int, int]:
    """Register `brokers` and heartbeat each until unfenced; their epochs."""
    epochs = {}
    for broker in brokers:
        answer = await request(quorum, node, ApiKey.BROKER_REGISTRATION, registration(broker))
        assert answer["error_code"] == 0, answer
        epochs[broker] = answer["broker_epoch"]
    for broker, epoch in epochs.items():
        answer = await request(
            quorum, node, ApiKey.BROKER_HEARTBEAT, heartbeat(broker, epoch, epoch)
        )
        assert answer["error_code"] == 0 and answer["is_caught_up"] and not answer["is_fenced"]
    return epochs


def create_topic(name: str, partitions: int = 3, factor: int = 3) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": partitions,
                        "replication_factor": factor}], "timeout_ms": 10_000}  # fmt: skip


async def every_image(
    quorum: RaftQuorum, predicate: Callable[[MetadataImage], bool], what: str
) -> None:
    await quorum.wait_for(
        lambda: all(predicate(c.image) for c in quorum.controllers.values()), what
    )


def test_a_topic_created_through_the_active_controller_is_in_every_image(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings()) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            await register_and_unfence(quorum, node, [1, 2, 3])
            answer = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("orders"))
            created = answer["topics"][0]
            assert created["error_code"] == 0 and created["num_partitions"] == 3
            await every_image(quorum, lambda i: i.topic("orders") is not None, "orders everywhere")
            images = [c.image for c in quorum.controllers.values()]
            topic = images[0].topic("orders")
            assert topic is not None and topic.topic_id == created["topic_id"]
            assert all(i.topic("orders") == topic for i in images)
            assert all(sorted(p.replicas) == [1, 2, 3] for p in topic.partitions.values())
            # Leaders spread over the brokers, each partition's first replica.
            assert sorted(p.leader for p in topic.partitions.values()) == [1, 2, 3]
            assert all(i.features == {"metadata.version": 21} for i in images)
            assert all(i.unfenced_brokers() == [1, 2, 3] for i in images)

            again = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("orders"))
            assert again["topics"][0]["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
            too_many = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("x", 1, 4))
            assert too_many["topics"][0]["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
            follower = next(n for n in quorum.nodes if n != node)
            refused = await request(quorum, follower, ApiKey.CREATE_TOPICS, create_topic("y"))
            assert refused["topics"][0]["error_code"] == ErrorCode.NOT_CONTROLLER
            assert all(c.image.topic("y") is None for c in quorum.controllers.values())

            elect = {"election_type": 0, "topic_partitions": None, "timeout_ms": 10_000}
            elected = await request(quorum, node, ApiKey.ELECT_LEADERS, elect)
            # Every partition is led by its preferred replica already: nothing to answer.
            assert elected["error_code"] == 0 and elected["replica_election_results"] == []
            grow = {"topics": [{"name": "orders", "count": 5, "assignments": None}],
                    "timeout_ms": 10_000, "validate_only": False}  # fmt: skip
            grown = await request(quorum, node, ApiKey.CREATE_PARTITIONS, grow)
            assert grown["results"][0]["error_code"] == 0
            await every_image(
                quorum, lambda i: len(i.topic("orders").partitions) == 5,  # type: ignore[union-attr]
                "five partitions everywhere",
            )  # fmt: skip
            deleted = await request(
                quorum, node, ApiKey.DELETE_TOPICS, {"topic_names": ["orders"], "timeout_ms": 0}, 5
            )
            assert deleted["responses"][0]["error_code"] == 0
            await every_image(quorum, lambda i: not i.topics, "orders deleted everywhere")

    asyncio.run(scenario())


def test_a_new_active_controller_after_a_kill_has_the_same_image(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings(session_timeout_ms=60_000)) as quorum:
            first = await active_controller(quorum)
            node = first.client.node_id
            await register_and_unfence(quorum, node, [1, 2, 3])
            for name in ("a", "b", "c"):
                answer = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic(name))
                assert answer["topics"][0]["error_code"] == 0
            before = first.image
            await quorum.kill(node)
            second = await active_controller(quorum, above_epoch=first.client.epoch)
            assert second.image.topics == before.topics
            assert second.image.brokers == before.brokers
            other = second.client.node_id
            answer = await request(quorum, other, ApiKey.CREATE_TOPICS, create_topic("d"))
            assert answer["topics"][0]["error_code"] == 0
            await quorum.start(node)  # the old leader comes back and catches up
            await every_image(
                quorum, lambda i: sorted(i.topic_ids) == ["a", "b", "c", "d"], "four topics"
            )

    asyncio.run(scenario())


def test_a_voter_restarts_from_its_snapshot_and_the_log_tail(tmp_path: Path) -> None:
    async def scenario() -> None:
        quorum_settings = settings(max_bytes_between_snapshots=1, session_timeout_ms=60_000)
        async with controller_quorum(tmp_path, quorum_settings) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            await register_and_unfence(quorum, node, [1, 2, 3])
            answer = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("early"))
            assert answer["topics"][0]["error_code"] == 0

            def snapshot_names(n: int) -> set[str]:
                log = quorum.nodes[n].metadata_log
                if log.snapshot_id is None:
                    return set()
                values = read_snapshot_records(log.dir, log.snapshot_id)
                records = [decode_record(v) for v in values]
                return {r.data["name"] for r in records if r.name == "TopicRecord"}

            await quorum.wait_for(
                lambda: all("early" in snapshot_names(n) for n in quorum.nodes),
                "a snapshot holding the topic on every voter",
            )
            for n in list(quorum.nodes):
                assert list_snapshots(quorum.nodes[n].metadata_log.dir)
            answer = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("late"))
            assert answer["topics"][0]["error_code"] == 0
            await every_image(quorum, lambda i: i.topic("late") is not None, "late everywhere")
            images = {n: c.image for n, c in quorum.controllers.items()}
            for n in list(quorum.nodes):
                await quorum.kill(n)
            for n in images:
                await quorum.start(n)
            await active_controller(quorum)
            await every_image(
                quorum, lambda i: i.topic("late") is not None and i.topic("early") is not None,
                "both topics after the restart",
            )  # fmt: skip
            for n, controller in quorum.controllers.items():
                assert controller.image.topics == images[n].topics
                assert controller.image.brokers == images[n].brokers

    asyncio.run(scenario())


def test_heartbeats_fence_unfence_and_shut_down_brokers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings()) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            epochs = await register_and_unfence(quorum, node, [1, 2, 3])
            answer = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("t", 6))
            assert answer["topics"][0]["error_code"] == 0
            shutting_down = asyncio.Event()

            async def keep_alive(broker: int) -> None:
                conn = await Connection.connect("127.0.0.1", quorum.port(node))
                try:
                    while True:
                        flags = {"want_shut_down": broker == 1 and shutting_down.is_set()}
                        beat = heartbeat(broker, epochs[broker], active.image.offset, **flags)
                        await conn.request(ApiKey.BROKER_HEARTBEAT, beat)
                        await asyncio.sleep(SESSION_MS / 10_000)
                finally:
                    await conn.close()

            beats = [asyncio.create_task(keep_alive(b)) for b in (1, 2)]
            try:
                # Broker 3 stops heartbeating: fenced, out of every ISR and leadership.
                await every_image(quorum, lambda i: i.brokers[3].fenced, "broker 3 fenced")
                partitions = active.image.topic("t").partitions.values()  # type: ignore[union-attr]
                assert all(3 not in p.isr and p.leader in (1, 2) for p in partitions)
                # Broker 1 asks to shut down: its leaderships move to broker 2.
                shutting_down.set()
                await every_image(quorum, lambda i: i.brokers[1].fenced, "broker 1 shut down")
                partitions = active.image.topic("t").partitions.values()  # type: ignore[union-attr]
                assert all(p.leader == 2 and p.isr == (2,) for p in partitions)
                last = await request(
                    quorum, node, ApiKey.BROKER_HEARTBEAT,
                    heartbeat(1, epochs[1], active.image.offset, want_shut_down=True),
                )  # fmt: skip
                assert last["should_shut_down"]
            finally:
                for task in beats:
                    task.cancel()
                await asyncio.gather(*beats, return_exceptions=True)
            # Broker 3 comes back: caught up, it is unfenced.
            back = await request(
                quorum, node, ApiKey.BROKER_HEARTBEAT,
                heartbeat(3, epochs[3], active.image.offset),
            )  # fmt: skip
            assert back["error_code"] == 0 and not back["is_fenced"]

    asyncio.run(scenario())


def test_stale_and_conflicting_broker_requests_change_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings(session_timeout_ms=60_000)) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            epochs = await register_and_unfence(quorum, node, [1, 2])
            before = active.image.brokers

            stale = await request(
                quorum, node, ApiKey.BROKER_HEARTBEAT, heartbeat(1, epochs[1] - 1, 10**6)
            )
            assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
            unknown = await request(quorum, node, ApiKey.BROKER_HEARTBEAT, heartbeat(9, 1, 1))
            assert unknown["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED
            other = registration(3) | {"cluster_id": "another-cluster-id-0"}
            refused = await request(quorum, node, ApiKey.BROKER_REGISTRATION, other)
            assert refused["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
            twin = registration(1, uuid.uuid4())  # broker 1 is alive: a second one is refused
            duplicate = await request(quorum, node, ApiKey.BROKER_REGISTRATION, twin)
            assert duplicate["error_code"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
            assert active.image.brokers == before

            created = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("t", 1, 2))
            topic_id = created["topics"][0]["topic_id"]
            await every_image(quorum, lambda i: i.topic("t") is not None, "t everywhere")
            p = active.image.topics[topic_id].partitions[0]
            follower = next(r for r in p.replicas if r != p.leader)

            def shrink(partition_epoch: int, leader_epoch: int) -> dict[str, Any]:
                return {
                    "broker_id": p.leader, "broker_epoch": epochs[p.leader],
                    "topics": [{"topic_id": topic_id, "partitions": [{
                        "partition_index": 0, "leader_epoch": leader_epoch,
                        "new_isr_with_epochs": [{"broker_id": p.leader, "broker_epoch": -1}],
                        "leader_recovery_state": 0, "partition_epoch": partition_epoch,
                    }]}],
                }  # fmt: skip

            old = await request(
                quorum, node, ApiKey.ALTER_PARTITION, shrink(p.partition_epoch - 1, p.leader_epoch)
            )
            error = old["topics"][0]["partitions"][0]["error_code"]
            assert error == ErrorCode.INVALID_UPDATE_VERSION
            fenced = await request(
                quorum, node, ApiKey.ALTER_PARTITION, shrink(p.partition_epoch, p.leader_epoch - 1)
            )
            error = fenced["topics"][0]["partitions"][0]["error_code"]
            assert error == ErrorCode.FENCED_LEADER_EPOCH
            assert active.image.topics[topic_id].partitions[0] == p
            done = await request(
                quorum, node, ApiKey.ALTER_PARTITION, shrink(p.partition_epoch, p.leader_epoch)
            )
            answer = done["topics"][0]["partitions"][0]
            assert answer["error_code"] == 0 and answer["isr"] == [p.leader]
            assert answer["partition_epoch"] == p.partition_epoch + 1
            await every_image(
                quorum, lambda i: follower not in i.topics[topic_id].partitions[0].isr,
                "the ISR shrunk everywhere",
            )  # fmt: skip
            gone = await request(quorum, node, ApiKey.UNREGISTER_BROKER, {"broker_id": follower})
            assert gone["error_code"] == 0
            await every_image(quorum, lambda i: follower not in i.brokers, "unregistered")
            again = await request(quorum, node, ApiKey.UNREGISTER_BROKER, {"broker_id": follower})
            assert again["error_code"] == ErrorCode.BROKER_ID_NOT_REGISTERED

    asyncio.run(scenario())


def test_configs_and_producer_id_blocks_through_the_active_controller(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings(session_timeout_ms=60_000)) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            epochs = await register_and_unfence(quorum, node, [1])
            configs = [{"name": "cleanup.policy", "value": "compact"}]
            topic = create_topic("t", 1, 1)
            topic["topics"][0]["configs"] = configs
            created = await request(quorum, node, ApiKey.CREATE_TOPICS, topic)
            assert created["topics"][0]["error_code"] == 0
            bad = create_topic("bad", 1, 1)
            bad["topics"][0]["configs"] = [{"name": "retention.ms", "value": "soon"}]
            refused = await request(quorum, node, ApiKey.CREATE_TOPICS, bad)
            assert refused["topics"][0]["error_code"] == ErrorCode.INVALID_CONFIG
            assert "retention.ms" in refused["topics"][0]["error_message"]

            def alter(*ops: tuple[str, int, str | None], name: str = "t") -> dict[str, Any]:
                return {"resources": [{"resource_type": 2, "resource_name": name, "configs": [
                    {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
                    "validate_only": False}  # fmt: skip

            answer = await request(
                quorum, node, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                alter(("retention.ms", 0, "1000"), ("cleanup.policy", 2, "delete")),
            )  # fmt: skip
            assert answer["responses"][0]["error_code"] == 0, answer
            expected = {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
            await every_image(
                quorum, lambda i: dict(i.configs.get((2, "t"), {})) == expected, "configs"
            )
            unknown = await request(
                quorum, node, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter(("x.y", 0, "1"))
            )
            assert unknown["responses"][0]["error_code"] == ErrorCode.INVALID_CONFIG
            missing = await request(
                quorum, node, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                alter(("retention.ms", 0, "1"), name="nope"),
            )  # fmt: skip
            assert missing["responses"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            deleted = await request(
                quorum, node, ApiKey.INCREMENTAL_ALTER_CONFIGS, alter(("retention.ms", 1, None))
            )
            assert deleted["responses"][0]["error_code"] == 0
            await every_image(
                quorum, lambda i: "retention.ms" not in i.configs.get((2, "t"), {}), "deleted"
            )

            starts = []
            for _ in range(2):
                block = await request(
                    quorum, node, ApiKey.ALLOCATE_PRODUCER_IDS,
                    {"broker_id": 1, "broker_epoch": epochs[1]},
                )  # fmt: skip
                assert block["error_code"] == 0 and block["producer_id_len"] == 1000
                starts.append(block["producer_id_start"])
            assert starts == [0, 1000]
            stale = await request(
                quorum, node, ApiKey.ALLOCATE_PRODUCER_IDS, {"broker_id": 1, "broker_epoch": 0}
            )
            assert stale["error_code"] == ErrorCode.STALE_BROKER_EPOCH
            # A new active controller goes on from the committed block, never back.
            first_epoch = active.client.epoch
            await quorum.kill(node)
            second = await active_controller(quorum, above_epoch=first_epoch)
            block = await request(
                quorum, second.client.node_id, ApiKey.ALLOCATE_PRODUCER_IDS,
                {"broker_id": 1, "broker_epoch": epochs[1]},
            )  # fmt: skip
            assert block["producer_id_start"] == 2000

    asyncio.run(scenario())


def test_acls_created_and_deleted_through_the_active_controller(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings()) as quorum:
            node = (await active_controller(quorum)).client.node_id

            def acl(principal: str, **extra: Any) -> dict[str, Any]:
                return {"resource_type": 2, "resource_name": "orders",
                        "resource_pattern_type": 3, "principal": principal, "host": "*",
                        "operation": 3, "permission_type": 3, **extra}  # fmt: skip

            creations = [acl("User:alice"), acl("User:bob"), acl("User:alice"),
                         acl("nobody")]  # fmt: skip
            answer = await request(quorum, node, ApiKey.CREATE_ACLS, {"creations": creations})
            codes = [r["error_code"] for r in answer["results"]]
            assert codes == [0, 0, 0, ErrorCode.INVALID_REQUEST]
            await every_image(quorum, lambda i: len(i.acls) == 2, "two ACLs everywhere")
            alice = {"resource_type_filter": 1, "resource_name_filter": None,
                     "pattern_type_filter": 1, "principal_filter": "User:alice",
                     "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
            deleted = await request(quorum, node, ApiKey.DELETE_ACLS, {"filters": [alice]})
            matched = deleted["filter_results"][0]["matching_acls"]
            assert [m["principal"] for m in matched] == ["User:alice"]
            await every_image(
                quorum, lambda i: [a.principal for a in i.acls.values()] == ["User:bob"],
                "alice's ACL deleted everywhere",
            )  # fmt: skip

    asyncio.run(scenario())


def test_quotas_and_scram_credentials_through_the_active_controller(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings()) as quorum:
            node = (await active_controller(quorum)).client.node_id
            alice = [{"entity_type": "user", "entity_name": "alice"}]

            def quota(
                entity: list[dict[str, Any]], key: str, value: float, remove: bool = False
            ) -> dict[str, Any]:
                op = {"key": key, "value": value, "remove": remove}
                return {"entries": [{"entity": entity, "ops": [op]}], "validate_only": False}

            answer = await request(
                quorum, node, ApiKey.ALTER_CLIENT_QUOTAS, quota(alice, "producer_byte_rate", 1024)
            )
            assert answer["entries"][0]["error_code"] == 0
            bad = await request(
                quorum, node, ApiKey.ALTER_CLIENT_QUOTAS, quota(alice, "no_such_quota", 1)
            )
            assert bad["entries"][0]["error_code"] == ErrorCode.INVALID_REQUEST
            entity = (("user", "alice"),)
            await every_image(
                quorum, lambda i: i.client_quotas == {entity: {"producer_byte_rate": 1024.0}},
                "alice's quota everywhere",
            )  # fmt: skip
            removed = await request(
                quorum, node, ApiKey.ALTER_CLIENT_QUOTAS,
                quota(alice, "producer_byte_rate", 0, remove=True),
            )  # fmt: skip
            assert removed["entries"][0]["error_code"] == 0
            await every_image(quorum, lambda i: not i.client_quotas, "the quota removed")

            upsert = {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"salt",
                      "salted_password": b"p" * 32}  # fmt: skip
            answer = await request(
                quorum, node, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                {"deletions": [], "upsertions": [upsert]},
            )  # fmt: skip
            assert answer["results"] == [{"user": "alice", "error_code": 0, "error_message": None}]
            await every_image(quorum, lambda i: ("alice", 1) in i.scram, "alice's credential")
            missing = await request(
                quorum, node, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                {"deletions": [{"name": "bob", "mechanism": 1}], "upsertions": []},
            )  # fmt: skip
            assert missing["results"][0]["error_code"] == ErrorCode.RESOURCE_NOT_FOUND
            gone = await request(
                quorum, node, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                {"deletions": [{"name": "alice", "mechanism": 1}], "upsertions": []},
            )  # fmt: skip
            assert gone["results"][0]["error_code"] == 0
            await every_image(quorum, lambda i: not i.scram, "alice's credential deleted")

    asyncio.run(scenario())


def test_an_observer_replays_the_metadata_log_as_a_broker_would(tmp_path: Path) -> None:
    async def scenario() -> None:
        quorum_settings = settings(max_bytes_between_snapshots=1, session_timeout_ms=60_000)
        async with controller_quorum(tmp_path, quorum_settings) as quorum:
            active = await active_controller(quorum)
            node = active.client.node_id
            await register_and_unfence(quorum, node, [1])
            created = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("a", 1, 1))
            assert created["topics"][0]["error_code"] == 0
            await quorum.wait_for(
                lambda: active.client.metadata_log.start_offset > 0, "the log start moved"
            )
            # Started late, past the leader's log start: it fetches the snapshot first.
            observer = await quorum.start_observer(10)
            await observer.wait_image(lambda i: i.topic("a") is not None, WAIT)
            assert observer.client.metadata_log.snapshot_id is not None
            assert observer.image.topic("a") == active.image.topic("a")
            created = await request(quorum, node, ApiKey.CREATE_TOPICS, create_topic("b", 1, 1))
            await observer.wait_image(lambda i: i.topic("b") is not None, WAIT)
            leader = quorum.nodes[node]
            assert 10 not in leader.config.voters
            await quorum.wait_for(lambda: 10 in leader.progress, "the leader tracks the observer")
            # The leader goes: the observer finds the next one and follows it.
            first_epoch = leader.epoch
            await quorum.kill(node)
            second = await active_controller(quorum, above_epoch=first_epoch)
            other = second.client.node_id
            created = await request(quorum, other, ApiKey.CREATE_TOPICS, create_topic("c", 1, 1))
            assert created["topics"][0]["error_code"] == 0
            await observer.wait_image(lambda i: i.topic("c") is not None, WAIT)
            assert observer.client.leader_id == other
            assert observer.image.topics == second.image.topics

    asyncio.run(scenario())


def test_brokers_keep_their_sessions_through_their_lifecycle_managers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with controller_quorum(tmp_path, settings()) as quorum:
            active = await active_controller(quorum)
            controllers = {v: VoterAddress(v, "127.0.0.1", quorum.port(v)) for v in quorum.ids}
            managers = {}
            for broker in (10, 11):
                loader = await quorum.start_observer(broker)
                endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker)
                managers[broker] = BrokerLifecycleManager(
                    broker, CLUSTER_ID, loader, controllers, [endpoint],
                    heartbeat_interval_ms=SESSION_MS // 6,
                )  # fmt: skip
                await managers[broker].start()
            try:
                for manager in managers.values():
                    await manager.wait_state(BrokerState.RUNNING, timeout=WAIT)
                await every_image(
                    quorum, lambda i: i.unfenced_brokers() == [10, 11], "10 and 11 unfenced"
                )
                topic = {"topics": [{"name": "t", "num_partitions": -1, "replication_factor": -1,
                                     "assignments": [{"partition_index": 0,
                                                      "broker_ids": [10, 11]}]}]}  # fmt: skip
                node = active.client.node_id
                created = await request(quorum, node, ApiKey.CREATE_TOPICS, topic)
                assert created["topics"][0]["error_code"] == 0, created
                # A broker that registers and never heartbeats is fenced; 10 and 11 are not.
                await register_silent_broker(quorum, node, 12)
                await every_image(quorum, lambda i: i.brokers[12].fenced, "12 fenced")
                assert active.image.unfenced_brokers() == [10, 11]

                assert await managers[10].controlled_shutdown(timeout=WAIT)
                await every_image(quorum, lambda i: i.brokers[10].fenced, "10 shut down")
                partition = active.image.topic("t").partitions[0]  # type: ignore[union-attr]
                assert (partition.leader, partition.isr) == (11, (11,))

                # The active controller goes: 11 heartbeats to the next one.
                first_epoch = active.client.epoch
                await quorum.kill(node)
                second = await active_controller(quorum, above_epoch=first_epoch)
                await register_silent_broker(quorum, second.client.node_id, 13)
                await every_image(quorum, lambda i: i.brokers[13].fenced, "13 fenced")
                assert second.image.unfenced_brokers() == [11]
                assert managers[11].state is BrokerState.RUNNING
            finally:
                for manager in managers.values():
                    await manager.close()

    asyncio.run(scenario())


async def register_silent_broker(quorum: RaftQuorum, node: int, broker: int) -> None:
    """A broker that registers, is unfenced, and never heartbeats again."""
    await quorum.wait_for(lambda: quorum.controllers[node].is_active, "an active controller")
    await register_and_unfence(quorum, node, [broker])


assert WAIT > SESSION_MS / 1000
