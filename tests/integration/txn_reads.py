"""Reading back what transactional producers wrote, once no transaction is open: with a
confluent-kafka read_committed consumer and with logbus's Consumer."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka import TopicPartition as ConfluentPartition

import logbus


def wait_stable(bootstrap: str, topic: str, partitions: int) -> None:
    """Until no transaction is open on the topic: its markers are written by the
    coordinator after EndTxn is answered, so the last stable offset may trail a moment."""
    tps = [logbus.TopicPartition(topic, p) for p in range(partitions)]
    with logbus.Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}
    ) as committed, logbus.Consumer({"bootstrap.servers": bootstrap}) as uncommitted:
        for _ in range(300):
            if committed.end_offsets(tps) == uncommitted.end_offsets(tps):
                return
            time.sleep(0.1)
    raise AssertionError(f"a transaction stays open on {topic}")


def confluent_values(bootstrap: str, topic: str, partitions: int = 1) -> list[bytes]:
    """Every value a confluent-kafka read_committed consumer reads up to the end it may
    read (partition EOF on every partition), once no transaction is open."""
    wait_stable(bootstrap, topic, partitions)
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        consumer.assign([ConfluentPartition(topic, p, 0) for p in range(partitions)])
        for _ in range(300):
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == ConfluentError._PARTITION_EOF:
                    at_end.add(message.partition())
                    if len(at_end) == partitions:
                        return sorted(values)
                    continue
                raise AssertionError(f"consumer error: {error}")
            values.append(message.value())
        raise AssertionError(f"no partition EOF; read {values}")
    finally:
        consumer.close()


def logbus_values(bootstrap: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """Every value a logbus consumer with `isolation` reads up to its end offsets (the
    last stable offset for read_committed), once no transaction is open."""
    wait_stable(bootstrap, topic, partitions)
    with logbus.Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": isolation}
    ) as consumer:
        tps = [logbus.TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        values: list[bytes] = []
        for _ in range(100):
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                return sorted(values)
            values += [r.value for r in consumer.poll(timeout=0.2)]
        raise AssertionError(f"did not reach {ends}; read {values}")
