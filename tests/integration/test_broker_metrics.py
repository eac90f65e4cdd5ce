"""The broker's metrics endpoint (metrics.listener) read with Prometheus' own parser after
real traffic: counts checked against what the clients sent."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kafka_wire import FETCH_V, WireClient, fetch_body, wait_for
from logbus.common.config_def import ConfigError
from logbus.protocol import ApiKey, ErrorCode
from logbus.server.broker import Broker
from logbus.server.config.broker_config import BrokerConfig
from logbus.server.metrics import endpoint as metrics_endpoint
from logbus.server.metrics.request_log import REQUEST_LOGGER

ROOT = Path(__file__).resolve().parents[2]
METRICS = "http://127.0.0.1:0"


def endpoint(running: Any) -> tuple[str, int]:
    ep = running.broker.metrics_endpoint
    assert ep is not None
    return "127.0.0.1", ep.port


def scrape(running: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint as {(name, sorted labels): value}."""
    host, port = endpoint(running)
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def produce(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=bytes([i % 251]) * size, key=str(i).encode(),
                         partition=i % partitions)
    assert producer.flush(30) == 0


def test_messages_and_bytes_in_match_what_confluent_kafka_produced(broker_factory: Any) -> None:
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-a", partitions=2)[0] == ErrorCode.NONE
        assert wire.create_topic("m-b", partitions=1)[0] == ErrorCode.NONE
    produce(running.bootstrap, "m-a", 300, 100, 2)
    produce(running.bootstrap, "m-b", 50, 1000, 1)
    samples = scrape(running)
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages, topic="m-a") == 300
    assert value(samples, messages, topic="m-b") == 50
    assert value(samples, messages) == 350  # all topics
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    payload_a = 300 * 100 + sum(len(str(i)) for i in range(300))
    # batch headers (61 bytes) and per-record framing (a few bytes) on top of the payload
    assert payload_a < value(samples, bytes_in, topic="m-a") < payload_a + 300 * 12 + 61 * 300
    payload_b = 50 * 1000 + sum(len(str(i)) for i in range(50))
    assert payload_b < value(samples, bytes_in, topic="m-b") < payload_b + 50 * 12 + 61 * 50
    assert value(samples, bytes_in) == value(samples, bytes_in, topic="m-a") + value(
        samples, bytes_in, topic="m-b"
    )
    assert value(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="m-b") >= 1
    end = "kafka_log_log_logendoffset"
    assert value(samples, end, topic="m-a", partition="0") == 150
    assert value(samples, end, topic="m-a", partition="1") == 150
    assert value(samples, end, topic="m-b", partition="0") == 50
    assert value(samples, "kafka_log_log_logstartoffset", topic="m-b", partition="0") == 0
    assert value(samples, "kafka_log_log_numlogsegments", topic="m-b", partition="0") == 1
    log_size = value(samples, "kafka_log_log_size", topic="m-b", partition="0")
    assert log_size >= value(samples, bytes_in, topic="m-b")
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 3
    assert value(samples, "kafka_server_replicamanager_leadercount") == 3
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    # acks=all produces are timed, with every quantile
    for quantile in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999"):
        assert value(samples, "kafka_network_requestmetrics_totaltimems",
                     request="Produce", quantile=quantile) >= 0
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") >= 2


def test_requests_per_type_failed_produce_and_bytes_out(broker_factory: Any) -> None:
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-f", partitions=1)[0] == ErrorCode.NONE
        for _ in range(7):
            wire.metadata(["m-f"])
        refused = wire.produce("m-f", 0, b"\x00" * 80)  # not a record batch
        assert refused["error_code"] != ErrorCode.NONE
        samples = scrape(running)
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(samples, requests, request="Metadata", version="12") == 7
    assert value(samples, requests, request="CreateTopics", version="5") == 1
    assert value(samples, requests, request="Produce", version="9") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_failedproducerequests_total",
                 topic="m-f") == 1
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-f") == 0
    assert value(samples, "kafka_network_requestmetrics_localtimems_count",
                 request="Metadata") == 7
    produce(running.bootstrap, "m-f", 20, 200, 1)
    consumer = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "m-f-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([CkTopicPartition("m-f", 0, 0)])
        got = 0
        while got < 20:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            got += 1
    finally:
        consumer.close()
    samples = scrape(running)
    bytes_out = value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic="m-f")
    assert bytes_out >= value(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                              topic="m-f")
    assert value(samples, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                 topic="m-f") >= 1


def test_lag_is_log_end_minus_committed_per_partition(broker_factory: Any) -> None:
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-lag", partitions=2)[0] == ErrorCode.NONE
    produce(running.bootstrap, "m-lag", 40, 10, 2)  # 20 per partition
    consumer = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "lagging",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        # reads 7 records of partition 0 and 15 of partition 1, committing its positions
        for partition, wanted in ((0, 7), (1, 15)):
            consumer.assign([CkTopicPartition("m-lag", partition, 0)])
            for _ in range(wanted):
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None
                assert msg.partition() == partition
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    samples = scrape(running)
    for partition, committed in (("0", 7), ("1", 15)):
        labels = {"group": "lagging", "topic": "m-lag", "partition": partition}
        assert value(samples, "kafka_consumergroup_group_offset", **labels) == committed
        end = value(samples, "kafka_partition_latest_offset", topic="m-lag", partition=partition)
        assert end == 20
        assert value(samples, "kafka_consumergroup_group_lag", **labels) == end - committed
    assert value(samples, "kafka_consumergroup_group_max_lag", group="lagging") == 13
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1


def http(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def test_bad_paths_methods_and_headers_are_answered_and_kafka_keeps_serving(
    broker_factory: Any,
) -> None:
    running = broker_factory(metrics_listener=METRICS)
    _host, port = endpoint(running)
    status, headers, body = http(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    status, _, _ = http(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    assert http(port, b"GET /other HTTP/1.1\r\n\r\n")[0] == 404
    status, headers, _ = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert http(port, b"DELETE /metrics HTTP/1.1\r\n\r\n")[0] == 405
    huge = b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"
    assert http(port, huge)[0] == 431
    assert http(port, b"\x16\x03\x01garbage\r\n\r\n")[0] == 400
    assert http(port, b"GET /metrics SPDY/3\r\n\r\n")[0] == 400
    # a client that connects and says nothing holds nothing but its own socket
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        with WireClient(running.bootstrap) as wire:
            assert wire.create_topic("m-ok", partitions=1)[0] == ErrorCode.NONE
            assert wire.metadata(["m-ok"])["topics"][0]["error_code"] == ErrorCode.NONE
        assert scrape(running)


def test_no_endpoint_and_nothing_recorded_without_the_setting(broker_factory: Any) -> None:
    running = broker_factory()
    assert running.broker.metrics_endpoint is None
    assert running.broker.metrics is None
    assert running.broker.replica_manager.metrics is None
    assert running.broker.apis.metrics is None


@pytest.mark.parametrize("bad", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://h:x",
                                 "http://127.0.0.1:9404/metrics", "http://127.0.0.1"])
def test_a_bad_metrics_listener_is_refused_naming_the_setting(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listener: expected http://host:port"):
        BrokerConfig.from_properties({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path),
            "metrics.listener": bad,
        })


def test_a_metrics_port_in_use_stops_start_up(broker_factory: Any, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = Broker(BrokerConfig.from_properties({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d"),
            "metrics.listener": f"http://127.0.0.1:{port}",
        }))

        async def start_and_stop() -> None:
            try:
                await broker.start()
            finally:
                await broker.stop()

        with pytest.raises(OSError):
            asyncio.run(start_and_stop())


def test_request_log_writes_one_line_per_request_with_kafkas_fields(
    broker_factory: Any, tmp_path: Path
) -> None:
    log_dir = tmp_path / "request-logs"
    log_dir.mkdir()
    before = REQUEST_LOGGER.level
    try:
        running = broker_factory(request_log_file=str(log_dir))
        with WireClient(running.bootstrap) as wire:
            for _ in range(3):
                wire.metadata(None)
        path = log_dir / "kafka-request.log"

        def lines() -> list[str]:
            for handler in REQUEST_LOGGER.handlers:
                handler.flush()
            return [ln for ln in path.read_text().splitlines() if "apiKey=METADATA" in ln]

        found = wait_for(lambda: len(lines()) >= 3 and lines())
        line = found[0]
        assert re.search(r"DEBUG Completed request:RequestHeader\(apiKey=METADATA, "
                         r"apiVersion=12, clientId=[^,]*, correlationId=\d+\) -- "
                         r"\{requestSize=\d+,responseSize=\d+\} from connection "
                         r"127\.0\.0\.1:\d+-127\.0\.0\.1:\d+;", line), line
        for field in ("totalTime", "requestQueueTime", "localTime", "remoteTime",
                      "throttleTime", "responseQueueTime", "sendTime"):
            assert re.search(rf"[;,]{field}:\d+(\.\d+)?", line), (field, line)
        assert "securityProtocol:PLAINTEXT,principal:User:ANONYMOUS,listener:PLAINTEXT" in line
        assert not REQUEST_LOGGER.propagate  # in its own file only
        running.stop()
        assert not any(
            isinstance(h, logging.FileHandler) for h in REQUEST_LOGGER.handlers
        )  # closed with the broker
        assert REQUEST_LOGGER.propagate
    finally:
        REQUEST_LOGGER.setLevel(before)


def test_request_log_level_set_at_run_time_logs_without_metrics(broker_factory: Any,
                                                                 caplog: Any) -> None:
    running = broker_factory()
    with WireClient(running.bootstrap) as wire:
        wire.metadata(None)
        assert not [r for r in caplog.records if r.name == "kafka.request.logger"]
        with caplog.at_level(logging.DEBUG, logger="kafka.request.logger"):
            wire.metadata(None)
            # logged once the response is written: maybe just after the client read it
            assert wait_for(lambda: [
                r for r in caplog.records
                if r.name == "kafka.request.logger" and "apiKey=METADATA" in r.getMessage()
            ])


def test_grafana_dashboard_uses_only_served_names(broker_factory: Any) -> None:
    dashboard = json.loads((ROOT / "docs" / "grafana" / "logbus.json").read_text())
    exprs = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    assert exprs
    used = {name for expr in exprs for name in re.findall(r"\b(kafka_[a-z_]+)", expr)}
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-g", partitions=1)[0] == ErrorCode.NONE
    produce(running.bootstrap, "m-g", 5, 10, 1)
    consumer = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[CkTopicPartition("m-g", 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    served = {name for name, _labels in scrape(running)}
    assert used - served == set()


def test_connections_beyond_the_limit_get_503_and_silent_clients_are_timed_out(
    broker_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_endpoint, "READ_TIMEOUT_S", 1.0)
    running = broker_factory(metrics_listener=METRICS)
    _host, port = endpoint(running)
    silent = [socket.create_connection(("127.0.0.1", port), timeout=10)
              for _ in range(metrics_endpoint.MAX_CONNECTIONS)]
    try:
        wait_for(lambda: len(running.broker.metrics_endpoint._clients)
                 == metrics_endpoint.MAX_CONNECTIONS)
        assert http(port, b"GET /metrics HTTP/1.1\r\n\r\n")[0] == 503
        # each silent client is answered 408 and closed after the read timeout
        for sock in silent:
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
            assert data.startswith(b"HTTP/1.1 408 ")
    finally:
        for sock in silent:
            sock.close()
    assert http(port, b"GET /metrics HTTP/1.1\r\n\r\n")[0] == 200


def test_a_deleted_topics_series_go_away(broker_factory: Any) -> None:
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-del", partitions=2)[0] == ErrorCode.NONE
        produce(running.bootstrap, "m-del", 10, 10, 2)
        assert value(scrape(running), "kafka_server_brokertopicmetrics_messagesin_total",
                     topic="m-del") == 10
        wire.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["m-del"], "timeout_ms": 10000})

    def gone() -> bool:
        labels = {dict(labels).get("topic") for _name, labels in scrape(running)}
        return "m-del" not in labels

    assert wait_for(gone)
    # the all-topics figures keep what the topic brought in: counters never go back
    assert value(scrape(running), "kafka_server_brokertopicmetrics_messagesin_total") == 10


def test_a_long_poll_fetch_is_in_the_purgatory_and_its_wait_is_remote_time(
    broker_factory: Any,
) -> None:
    running = broker_factory(metrics_listener=METRICS)
    with WireClient(running.bootstrap) as wire:
        assert wire.create_topic("m-wait", partitions=1)[0] == ErrorCode.NONE
    answers: list[Any] = []

    def long_poll() -> None:
        with WireClient(running.bootstrap, timeout=60) as waiting:
            body = fetch_body("m-wait", 0, 0, max_wait_ms=30_000, min_bytes=1)
            answers.append(waiting.request(ApiKey.FETCH, FETCH_V, body))

    poller = threading.Thread(target=long_poll)
    poller.start()
    try:
        purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
        assert wait_for(lambda: value(scrape(running), purgatory, delayedOperation="Fetch") == 1)
        assert value(scrape(running), purgatory, delayedOperation="Produce") == 0
        produce(running.bootstrap, "m-wait", 1, 10, 1)  # wakes it
    finally:
        poller.join(60)
    assert answers
    samples = scrape(running)
    assert value(samples, purgatory, delayedOperation="Fetch") == 0
    assert value(samples, "kafka_network_requestmetrics_remotetimems_count",
                 request="Fetch") >= 1
    # it waited at least for two scrapes: far more than any local work
    assert value(samples, "kafka_network_requestmetrics_remotetimems", request="Fetch",
                 quantile="0.999") > value(samples, "kafka_network_requestmetrics_localtimems",
                                           request="Fetch", quantile="0.999")


def test_idle_ratios_count_the_event_loops_busy_time(broker_factory: Any) -> None:
    running = broker_factory(metrics_listener=METRICS)
    handler = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
    network = "kafka_network_socketserver_networkprocessoravgidlepercent"
    before = time.monotonic()
    first = scrape(running)
    assert 0.0 <= value(first, handler) <= 1.0

    async def burn() -> None:  # 0.3 s of CPU on the broker's loop
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass

    running.loop.run(burn())
    second = scrape(running)
    interval = time.monotonic() - before  # at least the time between the two reads
    assert value(second, handler) <= 1.0 - 0.3 / interval
    assert value(second, network) == value(second, handler)


def test_request_log_switched_on_at_run_time_through_broker_logger_configs(
    broker_factory: Any, caplog: Any
) -> None:
    """KIP-412: IncrementalAlterConfigs on BROKER_LOGGER sets kafka.request.logger."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    caplog.set_level(logging.DEBUG)  # the capture takes what the logger lets through
    REQUEST_LOGGER.setLevel(logging.WARNING)  # its default, whatever ran before
    running = broker_factory()

    def request_lines() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name == "kafka.request.logger" and "apiKey=METADATA" in r.getMessage()]

    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=10000)
    try:
        with WireClient(running.bootstrap) as wire:
            wire.metadata(None)
            assert request_lines() == []  # WARN by default: nothing
            resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "0",
                                      {"kafka.request.logger": "DEBUG"})
            answer = admin.alter_configs([resource], raise_on_unknown=False)
            assert str(answer["broker_logger"]["0"]) == "OK"
            wire.metadata(None)
            assert wait_for(request_lines)
            assert "securityProtocol:PLAINTEXT" in request_lines()[0]
    finally:
        admin.close()
        REQUEST_LOGGER.setLevel(logging.WARNING)
