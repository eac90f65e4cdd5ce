"""The console's pages of the three kinds of group, in a real browser against real
confluent-kafka members: a classic consumer, a KIP-848 consumer (`group.protocol=consumer`:
its epochs, each member's epoch and its assignment beside its target assignment) and a
KIP-932 `ShareConsumer` (members, subscriptions, share-partition start offsets and lag)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    snap_fixture,
)
from playwright.sync_api import expect

from kafka_wire import create_topic

pytestmark = pytest.mark.timeout(180)

Snap = Callable[[Any, str], None]
FAST_HEARTBEATS = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.share.heartbeat.interval.ms": "300",
}


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, b"r%d" % i, partition=partition)
    assert producer.flush(30) == 0


def consume(consumer: Any, wanted: int) -> None:
    """Poll a consumer until it has read `wanted` records, then commit them."""
    got = 0
    deadline = time.monotonic() + 60
    while got < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == wanted
    consumer.commit(asynchronous=False)


def share_consume(consumer: Any, wanted: int) -> None:
    """Poll a share consumer until it was delivered `wanted` records, then acknowledge
    them (implicitly, as accepted) and wait for the broker to confirm."""
    got = 0
    deadline = time.monotonic() + 60
    while got < wanted and time.monotonic() < deadline:
        got += sum(1 for m in consumer.poll(0.5) or [] if m.error() is None)
    assert got == wanted
    consumer.commit_sync()


def earliest_share_group(bootstrap: str, group: str) -> None:
    resource = ConfigResource(
        ResourceType.GROUP, group,
        incremental_configs=[ConfigEntry("share.auto.offset.reset", "earliest",
                                         incremental_operation=AlterConfigOpType.SET)],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)


def test_groups_list_shows_each_type_and_state(
    broker_factory: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    broker = broker_factory(**FAST_HEARTBEATS)
    create_topic(broker.bootstrap, "orders", 2)
    produce(broker.bootstrap, "orders", {0: 4, 1: 2})
    earliest_share_group(broker.bootstrap, "pickers")
    base = {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    classic = Consumer({**base, "group.id": "billing", "client.id": "classic-member"})
    kip848 = Consumer({**base, "group.id": "shipping", "group.protocol": "consumer",
                       "client.id": "new-protocol"})
    share = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "pickers",
                           "client.id": "share-member"})
    try:
        for consumer in (classic, kip848, share):
            consumer.subscribe(["orders"])
        consume(classic, 6)
        consume(kip848, 6)
        share_consume(share, 6)
        console = console_factory(broker.bootstrap)
        page.goto(console.url + "/groups")
        for group, kind in (("billing", "classic"), ("shipping", "consumer"),
                            ("pickers", "share")):
            row = page.locator("#groups tbody tr", has_text=group)
            expect(row.locator(".group-type")).to_have_text(kind)
            expect(row.locator(".group-state")).to_have_text("Stable")
        snap(page, "groups")

        page.locator("#groups").get_by_role("link", name="shipping").click()
        _check_consumer_group_page(page)
        snap(page, "consumer-group")

        page.goto(console.url + "/groups")
        page.locator("#groups").get_by_role("link", name="pickers").click()
        _check_share_group_page(page, broker.bootstrap)
        snap(page, "share-group")
    finally:
        for consumer in (classic, kip848, share):
            consumer.close()


def _check_consumer_group_page(page: Any) -> None:
    expect(page.locator("#group-type")).to_have_text("consumer")
    expect(page.locator("#group-state")).to_have_text("Stable")
    expect(page.locator("#group-assignor")).to_have_text("uniform")
    epoch = page.locator("#group-epoch").inner_text()
    assert int(epoch) >= 1
    expect(page.locator("#assignment-epoch")).to_have_text(epoch)
    member = page.locator("#members tbody tr")
    expect(member).to_have_count(1)
    expect(member).to_contain_text("new-protocol")
    expect(member.locator(".member-epoch")).to_have_text(epoch)
    expect(member.locator(".assignment")).to_have_text("orders: 0,1")
    expect(member.locator(".target-assignment")).to_have_text("orders: 0,1")
    expect(page.locator("#total-lag")).to_have_text("0")


def _check_share_group_page(page: Any, bootstrap: str) -> None:
    expect(page.locator("h1")).to_contain_text("Share group pickers")
    expect(page.locator("#group-type")).to_have_text("share")
    expect(page.locator("#group-state")).to_have_text("Stable")
    assert int(page.locator("#group-epoch").inner_text()) >= 1
    member = page.locator("#members tbody tr")
    expect(member).to_have_count(1)
    expect(member).to_contain_text("share-member")
    expect(member.locator(".subscribed")).to_have_text("orders")
    expect(member.locator(".assignment")).to_have_text("orders: 0,1")
    rows = page.locator("#start-offsets tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".start-offset")).to_have_text("4")
    expect(rows.nth(1).locator(".start-offset")).to_have_text("2")
    expect(page.locator("#total-lag")).to_have_text("0")
    # records nobody acknowledges yet are the share group's lag; htmx polls it, and the
    # chart follows without a reload
    produce(bootstrap, "orders", {0: 3})
    expect(page.locator("#total-lag")).to_have_text("3", timeout=30_000)
    expect(rows.nth(0).locator(".lag")).to_have_text("3")
    expect(page.locator("svg.lag-chart")).to_have_attribute("data-latest", "3")


def test_a_share_group_page_is_found_without_its_type(
    broker_factory: Any, console_factory: Any
) -> None:
    broker = broker_factory(**FAST_HEARTBEATS)
    create_topic(broker.bootstrap, "parcels", 1)
    produce(broker.bootstrap, "parcels", {0: 2})
    earliest_share_group(broker.bootstrap, "sorters")
    share = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "sorters"})
    try:
        share.subscribe(["parcels"])
        share_consume(share, 2)
        console = console_factory(broker.bootstrap)
        page = httpx.get(console.url + "/groups/sorters", timeout=30)
        assert page.status_code == 200
        assert "Share group" in page.text and 'id="start-offsets"' in page.text
        fragment = httpx.get(console.url + "/groups/sorters/share-lag", timeout=30)
        assert fragment.status_code == 200 and 'id="total-lag">0<' in fragment.text
        for path in ("/groups/nobody?type=share", "/groups/nobody/share-lag"):
            missing = httpx.get(console.url + path, timeout=30)
            assert missing.status_code == 404, path
            assert "GROUP_ID_NOT_FOUND" in missing.text
    finally:
        share.close()
