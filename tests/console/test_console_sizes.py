"""Partition sizes on the console's topic pages (DescribeLogDirs): how a size reads, and a
principal refused Describe on the cluster still gets its pages, with sizes shown as "-"."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    page_fixture,
    snap_fixture,
)

from logbus import Admin, Producer
from logbus.client.admin import NewTopic
from logbus.console.sizes import human_bytes
from logbus.protocol.acl_types import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (20 * 1024 * 1024, "20.0 MiB"),
        (3 * 1024**5, "3.0 PiB"),
        (2048 * 1024**5, "2048.0 PiB"),
    ],
)
def test_sizes_read_as_people_read_them(size: int | None, shown: str) -> None:
    assert human_bytes(size) == shown


def test_refused_describe_on_the_cluster_shows_no_sizes(
    broker_factory: Any, console_factory: Any
) -> None:
    broker = broker_factory(
        authorizer_class_name=AUTHORIZER, allow_everyone_if_no_acl_found="true"
    )
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("guarded-sizes", 1, 1)])
        admin.create_acls([
            AclBinding(
                ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                AccessControlEntry(
                    "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.DENY
                ),
            )
        ])
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        producer.send("guarded-sizes", b"hidden size").result(30)
    console = console_factory(broker.bootstrap)
    with httpx.Client(base_url=console.url, timeout=30) as http:
        listing = http.get("/topics")
        assert listing.status_code == 200, listing.text
        assert re.search(r'<td class="size" data-bytes="">-</td>', listing.text)
        page = http.get("/topics/guarded-sizes")
        assert page.status_code == 200, page.text
        assert "Traceback" not in page.text and "banner error" not in page.text
        assert re.search(r'<td class="size" data-bytes="" title="">-</td>', page.text)
        assert re.search(r'id="topic-size">Size: <strong[^>]*>-</strong>', page.text)
        assert "<td>1</td>" in page.text  # the record count is still there
