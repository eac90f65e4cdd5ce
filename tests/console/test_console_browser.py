"""The console in a real browser (Debian's Chromium driven by Playwright) against a real
broker and real third-party clients: one test per view, each showing real data, and the
broker stopped under it."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    snap_fixture,
)
from playwright.sync_api import expect

from kafka_wire import create_topic

Snap = Callable[[Any, str], None]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int | None]],
            partition: int = 0) -> None:
    """Records (key, value, timestamp ms or None) sent by confluent-kafka (allowed records
    up to the broker's default message.max.bytes: librdkafka's own limit is lower)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 1048588}
    )
    for key, value, ts in records:
        if ts is None:
            producer.produce(topic, value, key, partition=partition)
        else:
            producer.produce(topic, value, key, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def group_consumer(bootstrap: str, group: str, topic: str, wanted: int) -> Any:
    """A confluent-kafka consumer in `group` that has read and committed `wanted` records
    of `topic`."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": "lag-watcher",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 30000,
    })
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < wanted and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    assert got == wanted
    consumer.commit(asynchronous=False)
    return consumer


def test_overview_shows_brokers_controller_and_counts(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "orders", 3)
    create_topic(broker.bootstrap, "payments", 2)
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/")
    expect(page.locator("h1")).to_have_text("Cluster overview")
    row = page.locator("#brokers tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(0)).to_have_text("0")
    expect(row.locator("td").nth(1)).to_have_text(f"127.0.0.1:{broker.port}")
    expect(row.locator("td").nth(3)).to_have_text("controller")
    expect(page.locator("#controller")).to_have_text("broker 0")
    expect(page.locator("#topic-count")).to_contain_text("2 (and")
    expect(page.locator("#partition-count")).to_have_text(re.compile(r"^(5|[6-9]\d)$"))
    expect(page.locator("#under-replicated-count")).to_have_text("0")
    expect(page.locator("#offline-count")).to_have_text("0")
    snap(page, "overview")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat missing: `make system-deps`")
def test_create_topic_and_produce_from_the_page_reaches_kcat(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill("from-the-browser")
    form.locator("input[name=partitions]").fill("2")
    form.locator("button").click()
    expect(page.locator(".banner.notice")).to_contain_text("Created topic from-the-browser")
    expect(page.locator("#partitions tbody tr")).to_have_count(2)
    page.get_by_role("link", name="Produce a message").click()
    produce_form = page.locator("#produce")
    expect(produce_form.locator("select[name=topic]")).to_have_value("from-the-browser")
    produce_form.locator("input[name=partition]").fill("1")
    produce_form.locator("input[name=key]").fill("k1")
    produce_form.locator("textarea[name=value]").fill('{"hello": "kcat"}')
    produce_form.locator("textarea[name=headers]").fill("source=console")
    produce_form.locator("button").click()
    expect(page.locator("#written")).to_contain_text("Written to from-the-browser-1 at offset 0")
    snap(page, "produce")
    out = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "from-the-browser", "-p", "1",
         "-o", "beginning", "-c", "1", "-e", "-q", "-f", "%k|%s|%h\\n"],
        capture_output=True, timeout=60, check=True,
    )
    assert out.stdout.decode() == 'k1|{"hello": "kcat"}|source=console\n'


def test_topic_page_partitions_configs_and_changes(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    produce(broker.bootstrap, "events", [(None, b"v%d" % i, None) for i in range(4)])
    on_disk = sum(f.stat().st_size for f in (broker.data_dir / "events-0").glob("*.log"))
    assert on_disk > 0
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/topics")
    listed = page.locator("#topics tr", has=page.get_by_role("link", name="events", exact=True))
    expect(listed.locator("td.size")).to_have_attribute("data-bytes", str(on_disk))
    expect(listed.locator("td.size")).to_have_text(f"{on_disk} B")
    page.get_by_role("link", name="events", exact=True).click()
    rows = page.locator("#partitions tbody tr")
    expect(rows).to_have_count(2)
    first = rows.nth(0).locator("td")
    expect(first.nth(1)).to_have_text("0")  # leader
    expect(first.nth(2)).to_have_text("0")  # replicas
    expect(first.nth(3)).to_have_text("0")  # ISR
    expect(first.nth(4)).to_have_text("0")  # start offset
    expect(first.nth(5)).to_have_text("4")  # end offset
    expect(first.nth(7)).to_have_text(f"{on_disk} B")  # size: the segments on disk
    expect(first.nth(7)).to_have_attribute("title", f"broker 0: {on_disk} B")
    expect(rows.nth(1).locator("td").nth(7)).to_have_text("0 B")  # nothing produced there
    expect(page.locator("#topic-size strong")).to_have_text(f"{on_disk} B")
    config = page.locator("#alter-config")
    config.locator("input[name=config]").fill("retention.ms")
    config.locator("input[name=value]").fill("3600000")
    config.get_by_role("button", name="Set", exact=True).click()
    expect(page.locator(".banner.notice")).to_contain_text("Set retention.ms = 3600000")
    retention = page.locator("#configs tr[data-config='retention.ms']")
    expect(retention).to_contain_text("3600000")
    expect(retention).to_contain_text("DYNAMIC_TOPIC_CONFIG")
    page.locator("#add-partitions input[name=total]").fill("3")
    page.locator("#add-partitions button").click()
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    snap(page, "topic")
    page.locator("#delete-topic input[name=confirm]").fill("events")
    page.locator("#delete-topic button").click()
    expect(page.locator(".banner.notice")).to_have_text("Deleted topic events.")
    expect(page.locator("#topics")).not_to_contain_text("events")


def test_message_browser_by_offset_by_timestamp_and_live_tail(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "clicks")
    base = (int(time.time()) - 3600) * 1000
    produce(broker.bootstrap, "clicks", [
        (b"user-%d" % i, b'{"click": %d}' % i, base + i * 1000) for i in range(10)
    ])
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/topics/clicks/messages")
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("offset")
    form.locator("input[name=offset]").fill("6")
    form.locator("input[name=count]").fill("2")
    form.locator("select[name=mode]").select_option("json")
    form.locator("button").click()
    rows = page.locator("#records tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".offset")).to_have_text("6")
    expect(rows.nth(0).locator(".key")).to_contain_text("user-6")
    expect(rows.nth(0).locator(".value pre")).to_have_text('{\n  "click": 6\n}')
    # By time: 3.5 s after the first record is the first record at or after it, offset 4.
    when = datetime.fromtimestamp((base + 3500) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("timestamp")
    form.locator("input[name=time]").fill(when[:-3])
    form.locator("input[name=count]").fill("3")
    form.locator("button").click()
    expect(rows).to_have_count(3)
    expect(rows.nth(0).locator(".offset")).to_have_text("4")
    expect(rows.nth(0).locator(".timestamp")).to_have_attribute("title", f"{base + 4000} ms")
    # The live tail: the latest records, refreshed while the page is open.
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("latest")
    form.locator("input[name=count]").fill("3")
    form.locator("input[name=tail]").check()
    form.locator("button").click()
    expect(rows.nth(2).locator(".offset")).to_have_text("9")
    produce(broker.bootstrap, "clicks", [(b"late", b"arrived while watching", None)])
    expect(rows.nth(2).locator(".offset")).to_have_text("10", timeout=30_000)
    expect(rows.nth(2).locator(".value")).to_contain_text("arrived while watching")
    snap(page, "messages")


def test_groups_members_assignment_reset_and_lag(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "jobs", 2)
    produce(broker.bootstrap, "jobs", [(None, b"j%d" % i, None) for i in range(6)], 0)
    produce(broker.bootstrap, "jobs", [(None, b"j%d" % i, None) for i in range(4)], 1)
    consumer = group_consumer(broker.bootstrap, "workers", "jobs", 10)
    try:
        console = console_factory(broker.bootstrap)
        page.goto(console.url + "/groups")
        row = page.locator("#groups tr", has_text="workers")
        expect(row).to_contain_text("Stable")
        row.get_by_role("link", name="workers").click()
        expect(page.locator("#group-state")).to_have_text("Stable")
        member = page.locator("#members tbody tr")
        expect(member).to_have_count(1)
        expect(member).to_contain_text("lag-watcher")
        expect(member).to_contain_text("jobs: 0,1")
        expect(page.locator("#total-lag")).to_have_text("0")
        expect(page.locator("#reset-refused")).to_contain_text("it is Stable")
        snap(page, "group")
    finally:
        consumer.close()
    page.reload()
    expect(page.locator("#group-state")).to_have_text("Empty")
    reset = page.locator("#reset-offsets")
    reset.locator("input[name=topic]").fill("jobs")
    reset.locator("select[name=strategy]").select_option("offset")
    reset.locator("input[name=offset]").fill("1")
    reset.locator("button").click()
    expect(page.locator(".banner.notice")).to_contain_text("jobs-0 to 1, jobs-1 to 1")
    expect(page.locator("#total-lag")).to_have_text("8")  # (6 - 1) + (4 - 1)
    lag_rows = page.locator("#lag-table tbody tr")
    expect(lag_rows.nth(0).locator("td").nth(4)).to_have_text("5")
    expect(lag_rows.nth(1).locator("td").nth(4)).to_have_text("3")


def test_lag_chart_follows_new_records(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "metrics")
    produce(broker.bootstrap, "metrics", [(None, b"m%d" % i, None) for i in range(5)])
    group_consumer(broker.bootstrap, "dashboards", "metrics", 5).close()
    console = console_factory(broker.bootstrap)
    page.goto(console.url + "/groups/dashboards")
    chart = page.locator("svg.lag-chart")
    expect(chart).to_have_attribute("data-latest", "0")
    produce(broker.bootstrap, "metrics", [(None, b"n%d" % i, None) for i in range(7)])
    # htmx polls the lag every few seconds: the chart follows without a reload.
    expect(chart).to_have_attribute("data-latest", "7", timeout=30_000)
    expect(page.locator("#total-lag")).to_have_text("7")
    samples = int(chart.get_attribute("data-samples") or 0)
    assert samples >= 2
    expect(chart.locator("polyline")).to_have_count(1)
    snap(page, "lag")


def test_broker_stopped_shows_an_error_banner_and_the_console_recovers(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "survivor")
    console = console_factory(broker.bootstrap)
    produce(broker.bootstrap, "survivor", [(None, b"still here", None)])
    page.goto(console.url + "/topics/survivor/messages?from=latest&tail=on")
    expect(page.locator("#records tbody tr")).to_have_count(1)
    broker.stop()
    try:
        # The live tail's next refresh puts the banner in place of the records.
        expect(page.locator("#records-area .banner.error")).to_contain_text(
            "could not be reached", timeout=30_000
        )
        page.goto(console.url + "/topics")
        banner = page.locator(".banner.error")
        expect(banner).to_contain_text("could not be reached", timeout=30_000)
        expect(banner).to_have_attribute("data-status", "503")
        assert "Traceback" not in page.content()
        snap(page, "broker-down")
        page.goto(console.url + "/groups")
        expect(page.locator(".banner.error")).to_contain_text("could not be reached")
        assert httpx.get(console.url + "/static/console.css", timeout=10).status_code == 200
    finally:
        broker.start()
    page.goto(console.url + "/topics")
    expect(page.locator("#topics")).to_contain_text("survivor", timeout=30_000)


def test_bad_input_gets_readable_pages(
    broker: Any, console_factory: Any, page: Any, snap: Snap
) -> None:
    create_topic(broker.bootstrap, "odd")
    produce(broker.bootstrap, "odd", [
        (b"\x00\x9f", b"\xc3\x28 broken \xff", None),
        (None, b"y" * 1_000_000, None),
    ])
    console = console_factory(broker.bootstrap)
    banner = page.locator(".banner.error")
    # A topic that does not exist, by URL.
    response = page.goto(console.url + "/topics/no-such-topic")
    assert response is not None and response.status == 404
    expect(banner).to_contain_text("UNKNOWN_TOPIC_OR_PARTITION")
    # An offset past the end, from the browser's form.
    page.goto(console.url + "/topics/odd/messages")
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("offset")
    form.locator("input[name=offset]").fill("99")
    form.locator("button").click()
    expect(banner).to_contain_text("OFFSET_OUT_OF_RANGE: offset 99 is outside odd-0")
    expect(banner).to_contain_text("offsets 0 to 1")
    # A value and a key that are not UTF-8, and a 1 MB value: hex, and cut with a note.
    page.goto(console.url + "/topics/odd/messages?from=offset&offset=0&count=2")
    rows = page.locator("#records tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator(".key pre")).to_have_text("00 9f")
    expect(rows.nth(0).locator(".value pre")).to_have_text("c3 28 20 62 72 6f 6b 65 6e 20 ff")
    expect(rows.nth(0).locator(".value .payload-note")).to_have_text("not UTF-8: shown as hex")
    expect(rows.nth(1).locator(".value .payload-note")).to_have_text(
        "1,000,000 bytes, the first 10,240 shown"
    )
    assert len(rows.nth(1).locator(".value pre").inner_text()) == 10_240
    # A bad number in a form.
    page.goto(console.url + "/topics")
    create = page.locator("#create-topic")
    create.locator("input[name=name]").fill("never")
    create.locator("input[name=partitions]").fill("many")
    create.locator("button").click()
    expect(banner).to_contain_text("partitions: expected a whole number, got 'many'")
    snap(page, "bad-input")
    # The console keeps serving.
    page.goto(console.url + "/topics")
    expect(page.locator("#topics")).to_contain_text("odd")
    expect(page.locator("#topics")).not_to_contain_text("never")
