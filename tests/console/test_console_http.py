"""The console's pages over plain HTTP (httpx, no browser) against a real broker:
what each page answers, and that bad requests get a readable error page, never a
traceback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from console_fixtures import (  # noqa: F401  (the console's fixtures)
    console_factory_fixture,
    open_session,
    page_fixture,
    snap_fixture,
)

from logbus import Admin, Producer
from logbus.client.admin import NewTopic


@pytest.fixture
def http(broker: Any, console_factory: Any) -> Iterator[httpx.Client]:
    console = console_factory(broker.bootstrap)
    with httpx.Client(base_url=console.url, timeout=30, follow_redirects=True) as client:
        open_session(client)
        yield client


def _topic(bootstrap: str, name: str, partitions: int = 1, values: list[bytes] = ()) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    if values:
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for value in values:
                producer.send(name, value, partition=0)
            producer.flush(30)


def _readable(response: Any, status: int, *phrases: str) -> None:
    assert response.status_code == status, response.text
    assert 'class="banner error"' in response.text
    assert "Traceback" not in response.text
    for phrase in phrases:
        assert phrase in response.text, response.text


def test_overview_and_static_assets(http: httpx.Client, broker: Any) -> None:
    page = http.get("/")
    assert page.status_code == 200
    assert f"127.0.0.1:{broker.port}" in page.text
    assert "Under-replicated partitions" in page.text
    script = http.get("/static/htmx.min.js")
    assert script.status_code == 200 and "htmx" in script.text[:2000]
    assert http.get("/static/console.css").status_code == 200


def test_unknown_pages_topics_and_groups_are_readable_404s(http: httpx.Client) -> None:
    _readable(http.get("/no/such/page"), 404, "no such page")
    _readable(http.get("/topics/missing-topic"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _readable(http.get("/topics/missing-topic/messages"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    _readable(http.get("/groups/missing-group"), 404, "GROUP_ID_NOT_FOUND")
    _readable(http.post("/"), 405)


def test_bad_numbers_in_forms_and_queries(http: httpx.Client, broker: Any) -> None:
    _topic(broker.bootstrap, "numbers", values=[b"a", b"b"])
    _readable(http.post("/topics", data={"name": "x", "partitions": "many"}), 400,
              "partitions: expected a whole number, got &#39;many&#39;")
    _readable(http.post("/topics", data={"name": "x", "partitions": "0"}), 400,
              "partitions: must be at least 1")
    _readable(http.post("/topics/numbers/partitions", data={"total": "1"}), 400,
              "INVALID_PARTITIONS")
    _readable(http.post("/topics/numbers/partitions", data={"total": "-3"}), 400,
              "must be at least 1")
    url = "/topics/numbers/messages"
    _readable(http.get(url, params={"from": "offset", "offset": "ten"}), 400,
              "offset: expected a whole number")
    _readable(http.get(url, params={"from": "offset", "offset": "7"}), 400,
              "OFFSET_OUT_OF_RANGE", "offsets 0 to 1")
    _readable(http.get(url, params={"partition": "3"}), 404, "partitions 0 to 0, not 3")
    _readable(http.get(url, params={"from": "timestamp", "time": "yesterday"}), 400,
              "expected a date and time")
    _readable(http.get(url, params={"count": "100000"}), 400, "at most 500")
    _readable(http.post("/produce", data={"topic": "numbers", "partition": "x"}), 400,
              "partition: expected a whole number")
    _readable(http.post("/produce", data={"topic": "numbers", "partition": "4"}), 400,
              "partitions 0 to 0, not 4")
    _readable(http.post("/produce", data={"topic": "numbers", "headers": "novalue"}), 400,
              "headers, line 1: expected key=value")
    _readable(http.post("/topics/numbers/configs", data={"config": "retention.ms",
                                                          "value": "soon"}), 400,
              "INVALID_CONFIG")
    # Nothing above changed the topic or broke the console.
    assert http.get("/topics/numbers").status_code == 200


def test_htmx_requests_get_a_banner_fragment(http: httpx.Client) -> None:
    response = http.get("/topics/missing/messages", headers={"HX-Request": "true"})
    assert response.status_code == 404
    assert response.text.startswith('<div class="banner error"')
    assert "<html" not in response.text


def test_delete_needs_the_name_typed(http: httpx.Client, broker: Any) -> None:
    _topic(broker.bootstrap, "keep-me")
    _readable(http.post("/topics/keep-me/delete", data={"confirm": "keep"}), 400, "Not deleted")
    assert http.get("/topics/keep-me").status_code == 200
    done = http.post("/topics/keep-me/delete", data={"confirm": "keep-me"})
    assert done.status_code == 200 and "Deleted topic keep-me" in done.text


def test_payloads_text_json_hex_non_utf8_and_huge(http: httpx.Client, broker: Any) -> None:
    huge = b"x" * 1_000_000  # 1 MB: under the broker's default message.max.bytes
    _topic(broker.bootstrap, "payloads",
           values=[b'{"a": [1, 2]}', b"\xff\xfe not utf-8", huge, "é😀".encode()])
    url = "/topics/payloads/messages"
    as_json = http.get(url, params={"from": "offset", "offset": "0", "count": "1",
                                    "mode": "json"}).text
    assert "{\n  &#34;a&#34;: [\n    1,\n    2\n  ]\n}" in as_json
    odd = http.get(url, params={"from": "offset", "offset": "1", "count": "1"}).text
    assert "ff fe 20 6e 6f 74" in odd and "not UTF-8: shown as hex" in odd
    big = http.get(url, params={"from": "offset", "offset": "2", "count": "1"})
    assert big.status_code == 200
    assert "1,000,000 bytes, the first 10,240 shown" in big.text
    assert len(big.text) < 100_000
    text = http.get(url, params={"from": "offset", "offset": "3", "count": "1"}).text
    assert "é😀" in text
    hexed = http.get(url, params={"from": "offset", "offset": "3", "count": "1",
                                  "mode": "hex"}).text
    assert "c3 a9 f0 9f 98 80" in hexed


def test_reset_offsets_refused_while_the_group_has_members(
    http: httpx.Client, broker: Any
) -> None:
    from confluent_kafka import Consumer

    _topic(broker.bootstrap, "tasks", values=[b"t0", b"t1", b"t2"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["tasks"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            got += message is not None and message.error() is None
        consumer.commit(asynchronous=False)
        refused = http.post("/groups/busy/reset", data={"strategy": "earliest"})
        _readable(refused, 409, "it is Stable with 1 member(s)", "Stop its consumers first")
    finally:
        consumer.close()
    url = "/groups/busy/reset"
    _readable(http.post(url, data={"strategy": "sideways"}), 400, "reset to: one of")
    _readable(http.post(url, data={"strategy": "offset", "offset": "x"}), 400,
              "offset: expected a whole number")
    _readable(http.post(url, data={"strategy": "earliest", "topic": "nope"}), 404,
              "UNKNOWN_TOPIC_OR_PARTITION")
    done = http.post(url, data={"strategy": "earliest"})
    assert done.status_code == 200 and "tasks-0 to 0" in done.text
    assert 'id="total-lag">3<' in done.text
    # To a time before every record: the first offset; after every record: the log end.
    done = http.post(url, data={"strategy": "timestamp", "time": "2100-01-01T00:00"})
    assert "tasks-0 to 3" in done.text and 'id="total-lag">0<' in done.text
    done = http.post(url, data={"strategy": "timestamp", "time": "2000-01-01T00:00:00"})
    assert "tasks-0 to 0" in done.text


def test_forms_from_other_sites_and_other_host_names_are_refused(
    broker: Any, console_factory: Any
) -> None:
    _topic(broker.bootstrap, "guarded")
    console = console_factory(broker.bootstrap, allowed_hosts=["127.0.0.1", "localhost"])
    with httpx.Client(base_url=console.url, timeout=30) as http:
        open_session(http, "/topics")
        # A page of another site posting to the console (cross-site request forgery).
        forged = http.post("/topics/guarded/delete", data={"confirm": "guarded"},
                           headers={"Origin": "http://evil.example"})
        _readable(forged, 403, "sent from another site")
        # A DNS name rebound to 127.0.0.1 by a hostile site.
        assert http.get("/", headers={"Host": "evil.example"}).status_code == 400
        assert http.get("/topics/guarded").status_code == 200
        # The console's own page posting: accepted.
        own = http.post("/topics/guarded/delete", data={"confirm": "guarded"},
                        headers={"Origin": console.url}, follow_redirects=True)
        assert own.status_code == 200 and "Deleted topic guarded" in own.text


def test_console_started_before_the_broker(broker_factory: Any, console_factory: Any) -> None:
    running = broker_factory()
    port = running.port
    running.stop()
    console = console_factory(f"127.0.0.1:{port}")
    with httpx.Client(base_url=console.url, timeout=30) as http:
        _readable(http.get("/"), 503, "could not be reached")
        running.start()
        assert running.port == port
        page = http.get("/")
        assert page.status_code == 200 and "Cluster overview" in page.text
