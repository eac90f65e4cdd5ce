"""An independent reader of what the broker stored: confluent-kafka (librdkafka) fetches
every partition from its first offset to its high watermark; any error it reports (such
as _BAD_COMPRESSION or _BAD_MSG) or a read that stops making progress is a problem."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

STALL_S = 10.0


def confluent_read_problems(bootstrap: str, topics: dict[str, int]) -> list[str]:
    problems = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "check.crcs": True,
            "log_level": 3,  # what it reports to the application is what counts
        }
    )
    try:
        for topic, partitions in sorted(topics.items()):
            for partition in range(partitions):
                problem = _read_partition(consumer, topic, partition)
                if problem:
                    problems.append(f"confluent-kafka reading {topic}-{partition}: {problem}")
                    if "stalled" in problem:  # one stall is enough to know, and costs much
                        return problems
    finally:
        consumer.close()
    return problems


def _read_partition(consumer: Consumer, topic: str, partition: int) -> str | None:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    if high <= low:
        return None
    consumer.assign([TopicPartition(topic, partition, low)])
    position = low
    last_progress = time.monotonic()
    while position < high:
        if time.monotonic() - last_progress > STALL_S:
            return f"stalled at offset {position} of {high} (no record, no error)"
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                if msg.offset() < high:
                    return f"end of partition at {msg.offset()}, high watermark {high}"
                break
            return f"error at offset {position}: {error.name()}: {error.str()}"
        position = msg.offset() + 1
        last_progress = time.monotonic()
    return None
