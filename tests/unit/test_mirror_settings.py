"""The settings `logbus mirror` picks for bulk copying when the user's config is silent,
and the user's own settings winning over them."""

from __future__ import annotations

import pytest

from logbus.mirror.maker import (
    BULK_CONSUMER_DEFAULTS,
    BULK_PRODUCER_DEFAULTS,
    MirrorError,
    consumer_settings,
    producer_settings,
)


def test_the_mirror_picks_bulk_settings_the_user_left_out() -> None:
    consumer = consumer_settings({"bootstrap.servers": "a:9092", "group.id": "m"}, 1)
    assert consumer["max.poll.records"] == BULK_CONSUMER_DEFAULTS["max.poll.records"]
    assert consumer["enable.auto.commit"] == "false"
    assert consumer["client.id"] == "m-1"
    producer = producer_settings({"bootstrap.servers": "b:9092"})
    assert producer["buffer.memory"] == BULK_PRODUCER_DEFAULTS["buffer.memory"]


def test_the_users_settings_win_over_the_mirrors() -> None:
    consumer = consumer_settings(
        {"group.id": "m", "max.poll.records": "7", "key.deserializer": "x"}, 0
    )
    assert consumer["max.poll.records"] == "7"
    assert "key.deserializer" not in consumer
    producer = producer_settings({"buffer.memory": "1024", "value.serializer": "x"})
    assert producer["buffer.memory"] == "1024"
    assert "value.serializer" not in producer


def test_a_consumer_config_without_group_id_is_refused() -> None:
    with pytest.raises(MirrorError, match=r"group\.id"):
        consumer_settings({"bootstrap.servers": "a:9092"}, 0)
