"""Share groups (KIP-932) against one classic consumer, on one logbus broker, one partition:
records/s of a share group of 4 confluent-kafka ShareConsumers (implicit acknowledgement,
each record acknowledged on the member's next poll, every acknowledgement kept in
`__share_group_state`) against one classic confluent-kafka Consumer reading the same
partition from offset 0. The issue's target: the share group >= 0.5x the classic consumer.

Two logs, by the batches the producer wrote them in (`LOGS`): a share fetch acquires whole
batches (Kafka's batch-optimized acquisition), so 16 KiB batches (the Java producer's
default) are shared by all four members, while librdkafka's 1 MB batches go one to a
member, and past the in-flight limit (`group.share.partition.max.record.locks`, 2,000) the
others wait. The headline ratio is the 16 KiB log's; both are recorded, each with the
records every member received.

    python -m bench.share_bench [--records 200000] [--value-size 100] [--runs 3]

Each figure is the median of `--runs` runs, with min and max; the result is written to
`bench/results/<date>-<commit>-share.json`. The time counts from creating the consumers to
the last record received: the share group's members join and get their assignment from the
coordinator within it, the classic consumer is assigned its partition directly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.systems import LogbusBroker

RESULTS = Path(__file__).resolve().parent / "results"
MEMBERS = 4
# The logs measured, by the producer batches they are written in (a share fetch acquires
# whole batches, so these decide how finely the members can share the partition):
LOGS = {
    # the Java producer's default batch.size: ~150 records of 100 B a batch, the case
    # where all four members share the partition (the headline)
    "16 KiB batches": 16_384,
    # librdkafka's defaults (1 MB batches of ~9,000 records when writing this fast): one
    # member takes a batch and, past the in-flight limit, the others wait for it
    "librdkafka's 1 MB batches": 1_000_000,
}


def setup(bootstrap: str, records: int, value_size: int, batch_size: int = 1_000_000) -> str:
    topic = f"share-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": batch_size})
    value = b"x" * value_size
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    return topic


def classic(bootstrap: str, topic: str, records: int) -> float:
    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < records:
        got += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return records / elapsed


def share_group(bootstrap: str, topic: str, records: int) -> tuple[float, list[int]]:
    group = uuid.uuid4().hex
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    lock = threading.Lock()
    counts = [0]
    per_member = [0] * MEMBERS
    done = threading.Event()
    started = [0.0]

    def member(index: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        while not done.is_set():
            batch = consumer.poll(0.5) or []
            n = sum(1 for m in batch if m.error() is None)
            with lock:
                counts[0] += n
                per_member[index] += n
                if counts[0] >= records:
                    done.set()
        consumer.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(MEMBERS)]
    started[0] = time.perf_counter()
    for thread in threads:
        thread.start()
    done.wait(600)
    elapsed = time.perf_counter() - started[0]
    for thread in threads:
        thread.join(60)
    return records / elapsed, per_member


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(bootstrap: str, args: argparse.Namespace, batch_size: int) -> dict[str, Any]:
    """`args.runs` runs on logs written in `batch_size` batches: each a new topic read by
    the classic consumer, then by a new share group."""
    share_rates: list[float] = []
    classic_rates: list[float] = []
    shares: list[list[int]] = []
    for _ in range(args.runs):
        topic = setup(bootstrap, args.records, args.value_size, batch_size)
        classic_rates.append(classic(bootstrap, topic, args.records))
        rate, per_member = share_group(bootstrap, topic, args.records)
        share_rates.append(rate)
        shares.append(per_member)
    return {
        "producer_batch_size": batch_size,
        "classic_records_per_s": summary(classic_rates),
        "share_group_records_per_s": summary(share_rates),
        "records_per_member": shares,
        "ratio": statistics.median(share_rates) / statistics.median(classic_rates),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        broker = LogbusBroker(Path(workdir))
        broker.start()
        try:
            # once, untimed: the first share group creates __consumer_offsets and
            # __share_group_state (50 partitions each), which a classic consumer that is
            # assigned its partition never needs
            share_group(broker.bootstrap, setup(broker.bootstrap, 100, 10), 100)
            logs = {name: measure(broker.bootstrap, args, batch_size)
                    for name, batch_size in LOGS.items()}
        finally:
            broker.stop()
    headline = logs["16 KiB batches"]
    result: dict[str, Any] = {
        "scenario": "share group of 4 vs one classic consumer, one partition",
        "records": args.records,
        "value_size": args.value_size,
        "runs": args.runs,
        "logs": logs,
        "ratio": headline["ratio"],
        "target_ratio": 0.5,
    }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip() or "unknown"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{datetime.now(UTC):%Y-%m-%d}-{commit}-share.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
