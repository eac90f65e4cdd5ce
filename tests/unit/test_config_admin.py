"""Incremental config operations, broker update checks and the config change
notifications in the metadata store, without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from logbus.controller.change_notifications import KEPT_NOTIFICATIONS
from logbus.controller.config_store import (
    CHANGES_PATH,
    ConfigChangeListener,
    change_entity_config,
    fetch_entity_config,
)
from logbus.controller.metadata_store import EmbeddedStore
from logbus.protocol import ErrorCode
from logbus.server.config.broker_config_def import BROKER_CONFIG_DEF
from logbus.server.config.config_admin import (
    AlterOp,
    ConfigUpdateError,
    OpType,
    apply_ops,
    check_broker_update,
)
from logbus.server.config.topic_config import TOPIC_CONFIG_DEF


def test_set_delete_append_subtract() -> None:
    current = {"retention.ms": "1000", "cleanup.policy": "delete"}
    result = apply_ops(
        current,
        [
            AlterOp("retention.ms", OpType.DELETE, None),
            AlterOp("segment.bytes", OpType.SET, "2000"),
            AlterOp("cleanup.policy", OpType.APPEND, "compact, delete"),
        ],
        TOPIC_CONFIG_DEF,
    )
    assert result == {"cleanup.policy": "delete,compact", "segment.bytes": "2000"}
    assert current == {"retention.ms": "1000", "cleanup.policy": "delete"}  # not changed
    # Both start from the default when the setting is not set.
    assert apply_ops(
        {}, [AlterOp("cleanup.policy", OpType.SUBTRACT, "delete")], TOPIC_CONFIG_DEF
    ) == {"cleanup.policy": ""}
    assert apply_ops(
        {},
        [AlterOp("leader.replication.throttled.replicas", OpType.APPEND, "1:0")],
        TOPIC_CONFIG_DEF,
    ) == {"leader.replication.throttled.replicas": "1:0"}


@pytest.mark.parametrize(
    ("ops", "error", "message"),
    [
        ([AlterOp("retention.ms", OpType.APPEND, "1")], ErrorCode.INVALID_CONFIG, "append"),
        ([AlterOp("nope", OpType.SUBTRACT, "1")], ErrorCode.INVALID_CONFIG, "Unknown config name"),
        ([AlterOp("x", 9, "1")], ErrorCode.INVALID_REQUEST, "Unknown operations type 9"),
        ([AlterOp("x", OpType.SET, None)], ErrorCode.INVALID_REQUEST, "SET:x"),
        ([AlterOp("x", 9, None)], ErrorCode.INVALID_REQUEST, "9:x"),
        (
            [AlterOp("x", OpType.SET, "1"), AlterOp("x", OpType.SET, "2")],
            ErrorCode.INVALID_REQUEST,
            "duplicate config keys : x",
        ),
    ],
)
def test_bad_operations(ops: list[AlterOp], error: ErrorCode, message: str) -> None:
    with pytest.raises(ConfigUpdateError) as info:
        apply_ops({}, ops, TOPIC_CONFIG_DEF)
    assert info.value.error == error
    assert message in info.value.message


def test_broker_update_checks() -> None:
    config = check_broker_update(
        {"log.retention.ms": "5"},
        per_broker=False,
        static={"log.retention.hours": "2"},
        dynamic_default={},
        dynamic_per_broker={"message.max.bytes": "100"},
    )
    assert (config.log_retention_ms, config.message_max_bytes) == (5, 100)
    with pytest.raises(ConfigUpdateError) as info:
        check_broker_update(
            {"log.dirs": "/x", "broker.id": "1"},
            per_broker=True,
            static={},
            dynamic_default={},
            dynamic_per_broker={},
        )
    assert info.value.error == ErrorCode.INVALID_REQUEST
    assert info.value.message == "Cannot update these configs dynamically: Set(broker.id, log.dirs)"
    with pytest.raises(ConfigUpdateError) as info:
        check_broker_update(
            {"num.partitions.x": "1"},
            per_broker=True,
            static={},
            dynamic_default={},
            dynamic_per_broker={},
        )
    assert info.value.error == ErrorCode.INVALID_CONFIG
    # Every setting logbus lets change at run time is parsed by the broker config.
    dynamic = [key.name for key in BROKER_CONFIG_DEF if key.update_mode.value != "read-only"]
    assert "log.retention.ms" in dynamic
    assert "broker.id" not in dynamic


def test_change_notifications(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    seen: list[tuple[str, str]] = []
    listener = ConfigChangeListener(
        store,
        {
            "topics": lambda name: seen.append(("topics", name)),
            "brokers": lambda name: seen.append(("brokers", name)),
        },
    )
    change_entity_config(store, "topics", "before-start", {"a": "1"})
    listener.start()
    change_entity_config(store, "topics", "t", {"retention.ms": "1"})
    change_entity_config(store, "brokers", "<default>", {"log.retention.ms": "5"})
    assert seen == [("topics", "t"), ("brokers", "<default>")]
    assert fetch_entity_config(store, "topics", "t") == {"retention.ms": "1"}
    assert fetch_entity_config(store, "topics", "none") == {}
    # Old notifications are purged; the sequence keeps going up.
    for i in range(KEPT_NOTIFICATIONS + 20):
        change_entity_config(store, "topics", "t", {"retention.ms": str(i)})
    children = store.children(CHANGES_PATH)
    assert len(children) <= KEPT_NOTIFICATIONS + 1
    assert children[-1] == f"config_change_{KEPT_NOTIFICATIONS + 22:010d}"
    assert len(seen) == KEPT_NOTIFICATIONS + 22
    listener.stop()
    change_entity_config(store, "topics", "t", {})
    assert len(seen) == KEPT_NOTIFICATIONS + 22
    store.close()
    # Persisted: a new store sees the configs.
    reopened = EmbeddedStore(tmp_path)
    assert fetch_entity_config(reopened, "topics", "t") == {}
    assert fetch_entity_config(reopened, "brokers", "<default>") == {"log.retention.ms": "5"}
    reopened.close()


def test_an_entity_node_without_data_has_no_config(tmp_path: Path) -> None:
    """Kafka's ZooKeeper mode leaves `/config/users/<user>` empty when it creates it as the
    parent of a (user, client id) quota: no configs, as Kafka reads it."""
    store = EmbeddedStore(tmp_path)
    store.create("/config/users/erin/clients/app", b'{"version":1,"config":{"a":"1"}}')
    assert store.get("/config/users/erin")[0] == b""
    assert fetch_entity_config(store, "users", "erin") == {}
    assert fetch_entity_config(store, "users", "erin/clients/app") == {"a": "1"}
    store.close()
