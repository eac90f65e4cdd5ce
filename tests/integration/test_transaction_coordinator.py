"""The transaction coordinator on a real broker, through raw requests at every served
version: FindCoordinator for transactions, InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (with WriteTxnMarkers to the partition's
leader), DescribeTransactions, ListTransactions; the abort of a timed-out transaction;
state reloaded after kill -9."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_wire import wait_for
from logbus.client.connection import Connection
from logbus.protocol import ApiKey, ErrorCode

E = ErrorCode
TIMEOUT = 20
SMALL = {
    "transaction_state_log_num_partitions": "3",
    "offsets_topic_num_partitions": "3",
}


def raw(bootstrap: str, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    host, port = bootstrap.rsplit(":", 1)

    async def send() -> dict[str, Any]:
        async with await Connection.connect(host, int(port)) as conn:
            return await conn.request(api_key, body, version)

    return asyncio.run(send())


class Txn:
    """Raw transactional requests of one transactional id."""

    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60_000) -> None:
        self.bootstrap = bootstrap
        self.id = transactional_id
        self.timeout_ms = timeout_ms
        self.pid = -1
        self.epoch = -1

    def find(self) -> dict[str, Any]:
        return wait_for(
            lambda: (
                r
                if (
                    r := raw(
                        self.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": self.id, "key_type": 1}
                    )
                )["error_code"]
                == E.NONE
                else None
            )
        )

    def init(self, version: int = 4, expected: tuple[int, int] | None = None) -> dict[str, Any]:
        pid, epoch = expected or (-1, -1)
        return raw(
            self.bootstrap,
            ApiKey.INIT_PRODUCER_ID,
            version,
            {
                "transactional_id": self.id,
                "transaction_timeout_ms": self.timeout_ms,
                "producer_id": pid,
                "producer_epoch": epoch,
            },
        )

    def init_ok(self) -> dict[str, Any]:
        """InitProducerId, retried while the coordinator loads or aborts (as clients do)."""
        retriable = (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR)
        response = wait_for(
            lambda: r if (r := self.init())["error_code"] not in retriable else None
        )
        assert response["error_code"] == E.NONE, response
        self.pid, self.epoch = response["producer_id"], response["producer_epoch"]
        return response

    def add(
        self, partitions: dict[str, list[int]], version: int = 3, epoch: int | None = None
    ) -> dict[tuple[str, int], int]:
        epoch = self.epoch if epoch is None else epoch
        topics = [{"name": t, "partitions": ps} for t, ps in partitions.items()]
        if version >= 4:
            response = raw(
                self.bootstrap,
                ApiKey.ADD_PARTITIONS_TO_TXN,
                version,
                {
                    "transactions": [
                        {
                            "transactional_id": self.id,
                            "producer_id": self.pid,
                            "producer_epoch": epoch,
                            "verify_only": False,
                            "topics": topics,
                        }
                    ]
                },
            )
            assert response["error_code"] == E.NONE
            (result,) = response["results_by_transaction"]
            assert result["transactional_id"] == self.id
            results = result["topic_results"]
        else:
            response = raw(
                self.bootstrap,
                ApiKey.ADD_PARTITIONS_TO_TXN,
                version,
                {
                    "v3_and_below_transactional_id": self.id,
                    "v3_and_below_producer_id": self.pid,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": topics,
                },
            )
            results = response["results_by_topic_v3_and_below"]
        return {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in results
            for p in t["results_by_partition"]
        }

    def end(self, committed: bool, version: int = 3, epoch: int | None = None) -> int:
        response = raw(
            self.bootstrap,
            ApiKey.END_TXN,
            version,
            {
                "transactional_id": self.id,
                "producer_id": self.pid,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "committed": committed,
            },
        )
        return int(response["error_code"])

    def describe(self) -> dict[str, Any]:
        response = raw(
            self.bootstrap, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [self.id]}
        )
        (state,) = response["transaction_states"]
        return state

    def state(self) -> str:
        return str(self.describe()["transaction_state"])


@pytest.fixture
def txn_broker(broker_factory: Any) -> Any:
    running = broker_factory(**SMALL)
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    for future in admin.create_topics([NewTopic("t", 3, 1), NewTopic("u", 1, 1)]).values():
        future.result(TIMEOUT)
    return running


def test_find_coordinator_creates_the_transaction_state_topic(txn_broker: Any) -> None:
    for version in range(7):
        if version >= 4:
            response = raw(
                txn_broker.bootstrap,
                ApiKey.FIND_COORDINATOR,
                version,
                {"key_type": 1, "coordinator_keys": ["a", "b"]},
            )
            found = response["coordinators"]
            assert [c["key"] for c in found] == ["a", "b"]
        elif version >= 1:
            found = [
                raw(
                    txn_broker.bootstrap,
                    ApiKey.FIND_COORDINATOR,
                    version,
                    {"key": "a", "key_type": 1},
                )
            ]
        else:
            continue  # v0 has no key type: groups only
        for entry in found:
            assert (entry["error_code"], entry["node_id"]) == (E.NONE, 0)
    meta = raw(
        txn_broker.bootstrap,
        ApiKey.METADATA,
        9,
        {"topics": [{"name": "__transaction_state"}], "allow_auto_topic_creation": False},
    )
    (topic,) = meta["topics"]
    assert topic["error_code"] == E.NONE and topic["is_internal"]
    assert len(topic["partitions"]) == 3
    empty = raw(txn_broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "", "key_type": 1})
    assert empty["error_code"] == E.INVALID_REQUEST


def test_commit_moves_through_the_states(txn_broker: Any) -> None:
    txn = Txn(txn_broker.bootstrap, "commit-me")
    txn.find()
    first = txn.init_ok()
    assert first["producer_epoch"] == 0
    assert txn.state() == "Empty"
    assert txn.add({"t": [0, 2], "u": [0]}) == {("t", 0): 0, ("t", 2): 0, ("u", 0): 0}
    described = txn.describe()
    assert described["transaction_state"] == "Ongoing"
    assert described["transaction_start_time_ms"] > 0
    assert (described["producer_id"], described["producer_epoch"]) == (txn.pid, 0)
    assert sorted((t["topic"], p) for t in described["topics"] for p in t["partitions"]) == [
        ("t", 0),
        ("t", 2),
        ("u", 0),
    ]
    # a partition already in the transaction is answered at once
    assert txn.add({"t": [0]}) == {("t", 0): 0}
    assert txn.end(True) == E.NONE
    wait_for(lambda: txn.state() == "CompleteCommit")
    assert txn.describe()["topics"] == []
    # the markers reached the partitions: their last stable offset passed them
    offsets = raw(
        txn_broker.bootstrap,
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert offsets["topics"][0]["partitions"][0]["offset"] == 1  # the COMMIT marker
    assert txn.end(True) == E.NONE  # a retried commit
    assert txn.end(False) == E.INVALID_TXN_STATE  # an abort after the commit


def test_abort_and_bad_requests(txn_broker: Any) -> None:
    txn = Txn(txn_broker.bootstrap, "abort-me")
    txn.find()
    txn.init_ok()
    assert txn.end(True) == E.INVALID_TXN_STATE  # nothing to end
    assert txn.add({"t": [1]}) == {("t", 1): 0}
    # the wrong epoch: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before (KIP-588)
    assert txn.add({"t": [0]}, version=2, epoch=txn.epoch + 1) == {("t", 0): E.PRODUCER_FENCED}
    assert txn.add({"t": [0]}, version=1, epoch=txn.epoch + 1) == {
        ("t", 0): E.INVALID_PRODUCER_EPOCH
    }
    assert txn.end(False, version=1, epoch=txn.epoch + 1) == E.INVALID_PRODUCER_EPOCH
    assert txn.end(False, version=3, epoch=txn.epoch + 1) == E.PRODUCER_FENCED
    # unknown topics: UNKNOWN_TOPIC_OR_PARTITION, the rest not attempted
    assert txn.add({"t": [0], "nope": [0], "u": [5]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    stranger = Txn(txn_broker.bootstrap, "abort-me")
    stranger.pid, stranger.epoch = txn.pid + 100, 0
    assert stranger.add({"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert stranger.end(True) == E.INVALID_PRODUCER_ID_MAPPING
    assert txn.end(False) == E.NONE
    wait_for(lambda: txn.state() == "CompleteAbort")
    assert txn.end(True) == E.INVALID_TXN_STATE
    unknown = Txn(txn_broker.bootstrap, "never-seen")
    unknown.find()
    assert unknown.describe()["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    unknown.pid, unknown.epoch = 5, 0
    assert unknown.end(True) == E.INVALID_PRODUCER_ID_MAPPING
    # InitProducerId checks
    assert (
        txn.init(version=4, expected=(txn.pid, txn.epoch - 1 if txn.epoch else 99))["error_code"]
        == E.PRODUCER_FENCED
    )
    assert txn.init(version=3, expected=(txn.pid + 1, txn.epoch))["error_code"] == (
        E.INVALID_PRODUCER_EPOCH
    )
    long = Txn(txn_broker.bootstrap, "abort-me", timeout_ms=900_001)
    assert long.init()["error_code"] == E.INVALID_TRANSACTION_TIMEOUT


def test_a_new_producer_fences_the_open_transaction(txn_broker: Any) -> None:
    old = Txn(txn_broker.bootstrap, "fenced")
    old.find()
    old.init_ok()
    assert old.add({"t": [0]}) == {("t", 0): 0}
    new = Txn(txn_broker.bootstrap, "fenced")
    first = new.init()
    assert first["error_code"] == E.CONCURRENT_TRANSACTIONS  # the open one is aborted first
    new.init_ok()
    assert (new.pid, new.epoch) == (old.pid, old.epoch + 2)  # the fence, then the new epoch
    assert old.state() == "Empty"  # aborted, then the new epoch
    assert old.add({"t": [1]}) == {("t", 1): E.PRODUCER_FENCED}
    assert old.end(True) == E.PRODUCER_FENCED
    # KIP-360: the new producer recovers with its own id and epoch
    bumped = new.init(version=4, expected=(new.pid, new.epoch))
    assert (bumped["error_code"], bumped["producer_epoch"]) == (E.NONE, new.epoch + 1)


def test_timed_out_transaction_is_aborted(broker_factory: Any) -> None:
    running = broker_factory(
        **SMALL, transaction_abort_timed_out_transaction_cleanup_interval_ms="100"
    )
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT)
    txn = Txn(running.bootstrap, "slow", timeout_ms=500)
    txn.find()
    txn.init_ok()
    assert txn.add({"t": [0]}) == {("t", 0): 0}
    wait_for(lambda: txn.state() == "CompleteAbort")
    assert txn.describe()["producer_epoch"] == txn.epoch + 1  # fenced
    assert txn.add({"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}
    assert txn.end(True) == E.PRODUCER_FENCED


@pytest.mark.parametrize("version", range(6))
def test_add_partitions_and_end_every_version(txn_broker: Any, version: int) -> None:
    txn = Txn(txn_broker.bootstrap, f"v{version}")
    txn.find()
    txn.init_ok()
    assert txn.add({"t": [0, 1]}, version=version) == {("t", 0): 0, ("t", 1): 0}
    if version >= 4:  # verify_only: is each partition in the ongoing transaction?
        response = raw(
            txn_broker.bootstrap,
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            {
                "transactions": [
                    {
                        "transactional_id": txn.id,
                        "producer_id": txn.pid,
                        "producer_epoch": txn.epoch,
                        "verify_only": True,
                        "topics": [{"name": "t", "partitions": [0, 2]}],
                    }
                ]
            },
        )
        (result,) = response["results_by_transaction"]
        errors = {
            p["partition_index"]: p["partition_error_code"]
            for p in result["topic_results"][0]["results_by_partition"]
        }
        assert errors == {0: E.NONE, 2: E.INVALID_TXN_STATE}
    response = raw(
        txn_broker.bootstrap,
        ApiKey.END_TXN,
        version,
        {
            "transactional_id": txn.id,
            "producer_id": txn.pid,
            "producer_epoch": txn.epoch,
            "committed": True,
        },
    )
    assert response["error_code"] == E.NONE
    if version >= 5:
        assert (response["producer_id"], response["producer_epoch"]) == (txn.pid, txn.epoch)
    wait_for(lambda: txn.state() == "CompleteCommit")


@pytest.mark.parametrize("version", range(5))
def test_add_offsets_every_version(txn_broker: Any, version: int) -> None:
    txn = Txn(txn_broker.bootstrap, f"offsets-v{version}")
    txn.find()
    group = raw(txn_broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert group["error_code"] == E.NONE
    txn.init_ok()
    response = raw(
        txn_broker.bootstrap,
        ApiKey.ADD_OFFSETS_TO_TXN,
        version,
        {
            "transactional_id": txn.id,
            "producer_id": txn.pid,
            "producer_epoch": txn.epoch,
            "group_id": "g",
        },
    )
    assert response["error_code"] == E.NONE
    topics = txn.describe()["topics"]
    assert [t["topic"] for t in topics] == ["__consumer_offsets"]
    wrong = raw(
        txn_broker.bootstrap,
        ApiKey.ADD_OFFSETS_TO_TXN,
        version,
        {
            "transactional_id": txn.id,
            "producer_id": txn.pid,
            "producer_epoch": txn.epoch + 1,
            "group_id": "g",
        },
    )
    assert wrong["error_code"] == (E.PRODUCER_FENCED if version >= 2 else E.INVALID_PRODUCER_EPOCH)


@pytest.mark.parametrize("version", range(2))
def test_list_transactions_filters(txn_broker: Any, version: int) -> None:
    open_ = Txn(txn_broker.bootstrap, "open")
    done = Txn(txn_broker.bootstrap, "done")
    for txn in (open_, done):
        txn.find()
        txn.init_ok()
        txn.add({"t": [0]})
    assert done.end(True) == E.NONE
    wait_for(lambda: done.state() == "CompleteCommit")

    def listed(**body: Any) -> dict[str, Any]:
        full = {"state_filters": [], "producer_id_filters": [], **body}
        return raw(txn_broker.bootstrap, ApiKey.LIST_TRANSACTIONS, version, full)

    everything = listed()
    assert everything["error_code"] == E.NONE
    assert {
        (t["transactional_id"], t["transaction_state"], t["producer_id"])
        for t in everything["transaction_states"]
    } == {("open", "Ongoing", open_.pid), ("done", "CompleteCommit", done.pid)}
    ongoing = listed(state_filters=["Ongoing", "Bogus"])
    assert [t["transactional_id"] for t in ongoing["transaction_states"]] == ["open"]
    assert ongoing["unknown_state_filters"] == ["Bogus"]
    by_pid = listed(producer_id_filters=[done.pid])
    assert [t["transactional_id"] for t in by_pid["transaction_states"]] == ["done"]
    if version >= 1:  # started longer ago than the filter
        time.sleep(0.05)
        long = listed(duration_filter=10)
        assert sorted(t["transactional_id"] for t in long["transaction_states"]) == ["done", "open"]
        assert listed(duration_filter=3_600_000)["transaction_states"] == []


def test_state_is_reloaded_after_kill_9(broker_process: Any, tmp_path: Any) -> None:
    overrides = [
        "--override",
        "transaction.state.log.num.partitions=3",
        "--override",
        "offsets.topic.num.partitions=3",
    ]
    proc = broker_process(*overrides)
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(TIMEOUT)
    committed = Txn(proc.bootstrap, "reloaded-commit")
    open_ = Txn(proc.bootstrap, "reloaded-open")
    for txn in (committed, open_):
        txn.find()
        txn.init_ok()
    committed.add({"t": [0]})
    assert committed.end(True) == E.NONE
    wait_for(lambda: committed.state() == "CompleteCommit")
    open_.add({"t": [1]})
    proc.kill()
    proc.start()
    wait_for(lambda: committed.describe()["error_code"] == E.NONE)
    assert committed.state() == "CompleteCommit"
    described = open_.describe()
    assert described["transaction_state"] == "Ongoing"
    assert (described["producer_id"], described["producer_epoch"]) == (open_.pid, open_.epoch)
    # the producer that survived may still commit with the coordinator's reloaded state
    assert open_.end(True) == E.NONE
    wait_for(lambda: open_.state() == "CompleteCommit")
    offsets = raw(
        proc.bootstrap,
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 1, "timestamp": -1}]}],
        },
    )
    assert offsets["topics"][0]["partitions"][0]["offset"] == 1
    proc.terminate()


def test_idle_transactional_ids_expire(broker_factory: Any) -> None:
    running = broker_factory(
        **SMALL,
        transactional_id_expiration_ms="300",
        transaction_remove_expired_transaction_cleanup_interval_ms="100",
    )
    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(TIMEOUT)
    idle = Txn(running.bootstrap, "idle")
    idle.find()
    idle.init_ok()
    wait_for(lambda: idle.describe()["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND)
    # forgotten: its producer id is unknown now, and a new InitProducerId starts over
    assert idle.add({"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    again = Txn(running.bootstrap, "idle")
    again.init_ok()
    assert again.pid != idle.pid and again.epoch == 0
    # reloaded after a restart: the tombstone, then the new incarnation's records
    running.overrides["transactional.id.expiration.ms"] = "3600000"
    running.restart()
    again.bootstrap = running.bootstrap
    loaded = wait_for(lambda: d if (d := again.describe())["error_code"] == E.NONE else None)
    assert (loaded["producer_id"], loaded["producer_epoch"]) == (again.pid, 0)


def txn_offset_commit(
    txn: Txn,
    version: int,
    offset: int,
    epoch: int | None = None,
    generation: int = -1,
    member: str = "",
) -> int:
    response = raw(
        txn.bootstrap,
        ApiKey.TXN_OFFSET_COMMIT,
        version,
        {
            "transactional_id": txn.id,
            "group_id": "tg",
            "producer_id": txn.pid,
            "producer_epoch": txn.epoch if epoch is None else epoch,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": None,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                }
            ],
        },
    )
    return int(response["topics"][0]["partitions"][0]["error_code"])


def fetched(bootstrap: str, require_stable: bool) -> tuple[int, int]:
    response = raw(
        bootstrap,
        ApiKey.OFFSET_FETCH,
        7,
        {
            "group_id": "tg",
            "topics": [{"name": "t", "partition_indexes": [0]}],
            "require_stable": require_stable,
        },
    )
    (partition,) = response["topics"][0]["partitions"]
    return partition["error_code"], partition["committed_offset"]


@pytest.mark.parametrize("version", range(5))
def test_txn_offset_commit_every_version(txn_broker: Any, version: int) -> None:
    txn = Txn(txn_broker.bootstrap, f"tocv{version}")
    txn.find()
    group = raw(txn_broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "tg", "key_type": 0})
    assert group["error_code"] == E.NONE
    txn.init_ok()
    raw(
        txn_broker.bootstrap,
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        {
            "transactional_id": txn.id,
            "producer_id": txn.pid,
            "producer_epoch": txn.epoch,
            "group_id": "tg",
        },
    )
    assert txn_offset_commit(txn, version, 42) == E.NONE
    assert fetched(txn_broker.bootstrap, False) == (E.NONE, -1)
    assert fetched(txn_broker.bootstrap, True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    if version >= 3:  # KIP-447: a member of a generation the group does not have
        assert txn_offset_commit(txn, version, 43, generation=5, member="ghost") == (
            E.UNKNOWN_MEMBER_ID
        )
    assert txn.end(True) == E.NONE
    wait_for(lambda: fetched(txn_broker.bootstrap, True) == (E.NONE, 42))


def test_a_fenced_producer_cannot_commit_offsets(txn_broker: Any) -> None:
    old = Txn(txn_broker.bootstrap, "offsets-fenced")
    old.find()
    raw(txn_broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "tg", "key_type": 0})
    old.init_ok()
    raw(
        txn_broker.bootstrap,
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        {
            "transactional_id": old.id,
            "producer_id": old.pid,
            "producer_epoch": old.epoch,
            "group_id": "tg",
        },
    )
    assert txn_offset_commit(old, 3, 10) == E.NONE
    new = Txn(txn_broker.bootstrap, "offsets-fenced")
    new.init_ok()  # aborts the old transaction: its pending offsets are dropped
    wait_for(lambda: fetched(txn_broker.bootstrap, True) == (E.NONE, -1))
    # the abort marker carried the new epoch: the log refuses the zombie's commit
    assert txn_offset_commit(old, 3, 11) in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED)
    assert fetched(txn_broker.bootstrap, True) == (E.NONE, -1)
