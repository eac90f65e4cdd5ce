"""`logbus delete-records`: delete a partition's records below an offset (Kafka's
`kafka-delete-records`), by moving its log start offset.

    logbus delete-records --topic T --partition P --before OFFSET

`--before -1` deletes everything below the high watermark.
"""

from __future__ import annotations

import argparse

from logbus.cli.common import (
    CommandError,
    add_bootstrap,
    client_security,
    non_negative_int,
    run,
    whole_number,
)
from logbus.client.cluster import Cluster
from logbus.client.errors import KafkaError
from logbus.client.requests.delete_records import delete_records
from logbus.client.requests.list_offsets import LATEST, list_offsets
from logbus.protocol import ErrorCode
from logbus.types import TopicPartition


def _offset(text: str) -> int:
    return whole_number(text, -1, "must be an offset, or -1 for the high watermark", "an offset")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "delete-records",
        help="delete a partition's records below an offset",
        description="Move a partition's log start offset to OFFSET: records below it can no "
        "longer be read, and their segments are deleted at the next retention check.",
    )
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--partition", type=non_negative_int, required=True, help="the partition")
    parser.add_argument(
        "--before",
        type=_offset,
        required=True,
        metavar="OFFSET",
        help="delete every record below this offset (-1: below the high watermark)",
    )
    add_bootstrap(parser)
    parser.set_defaults(func=lambda args: run(_delete_records(args)))


async def _delete_records(args: argparse.Namespace) -> int:
    async with await Cluster.connect(
        args.bootstrap_server, client_id="logbus-delete-records", security=client_security(args)
    ) as cluster:
        md = await cluster.refresh([args.topic])
        md.topic(args.topic)  # raises UNKNOWN_TOPIC_OR_PARTITION for a missing topic
        conn = await cluster.leader(args.topic, args.partition)
        key = TopicPartition(args.topic, args.partition)
        result = (await delete_records(conn, {key: args.before}))[key]
        if isinstance(result, KafkaError):
            if result.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                end = await list_offsets(conn, args.topic, args.partition, LATEST)
                raise CommandError(
                    f"offset {args.before} is above the high watermark {end} of "
                    f"{args.topic}-{args.partition}"
                )
            raise result
    print("Records delete operation completed:")
    print(f"partition: {args.topic}-{args.partition}\tlow_watermark: {result}")
    return 0
