"""The overview of a real two-broker cluster on ZooKeeper, in the browser: both brokers
with their racks and the controller, and a partition's size on each replica; once a broker
is killed, the partitions it leaves under-replicated and offline are counted and listed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import cluster_processes
from cluster_processes import ProcessCluster
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    snap_fixture,
)
from playwright.sync_api import expect

import logbus

cluster_zookeeper = cluster_processes.cluster_zookeeper
zk_connect = cluster_processes.zk_connect


def test_overview_counts_under_replicated_and_offline_partitions(
    zk_connect: str, tmp_path: Path, console_factory: Any, page: Any, snap: Any
) -> None:
    racks = {0: {"broker.rack": "rack-a"}, 1: {"broker.rack": "rack-b"}}
    with ProcessCluster(zk_connect, 2, tmp_path, per_broker=racks) as cluster:
        cluster.create_topic("replicated", partitions=2, replication_factor=2)
        with logbus.Admin(bootstrap_servers=cluster.bootstrap_of(0)) as admin:
            admin.create_topics([logbus.NewTopic("single", replica_assignment={0: [1]})])
        cluster.wait_for(lambda: cluster.leader_of("single", 0) == 1, 60, "single's leader")
        console = console_factory(cluster.bootstrap_of(0))
        page.goto(console.url + "/")
        brokers = page.locator("#brokers tbody tr")
        expect(brokers).to_have_count(2)
        expect(brokers.nth(0)).to_contain_text("rack-a")
        expect(brokers.nth(1)).to_contain_text("rack-b")
        controller = cluster.controller()
        expect(page.locator("#controller")).to_have_text(f"broker {controller}")
        expect(page.locator("#under-replicated-count")).to_have_text("0")
        expect(page.locator("#offline-count")).to_have_text("0")
        with logbus.Producer(bootstrap_servers=cluster.bootstrap_of(0), acks="all") as producer:
            producer.send("replicated", b"sized", partition=0).result(30)
        page.goto(console.url + "/topics/replicated")
        size = page.locator("#partitions tbody tr").nth(0).locator("td.size")
        # each broker's copy of partition 0, the same batches on both
        expect(size).to_have_attribute("title", re.compile(r"^broker 0: (\d+) B; broker 1: \1 B$"))
        expect(size).not_to_have_text("0 B")

        cluster.kill(1)
        cluster.wait_for(
            lambda: all(1 not in p.isr
                        for p in cluster.metadata("replicated", via=0).partitions.values()),
            60, "broker 1 out of every ISR",
        )
        page.goto(console.url + "/")
        expect(page.locator("#under-replicated-count")).to_have_text("2")
        expect(page.locator("#offline-count")).to_have_text("1")
        under = page.locator("#under-replicated tbody tr")
        expect(under).to_have_count(2)
        expect(under.nth(0)).to_contain_text("replicated")
        offline = page.locator("#offline tbody tr")
        expect(offline).to_have_count(1)
        expect(offline.locator("td").nth(0)).to_have_text("single")
        expect(offline.locator("td").nth(2)).to_have_text("none")
        expect(brokers).to_have_count(1)
        snap(page, "overview-broker-lost")
        # the broker that held "single" is gone: its size is unknown, the page still reads
        page.goto(console.url + "/topics/single")
        expect(page.locator("#partitions tbody tr td.size")).to_have_text("-")
