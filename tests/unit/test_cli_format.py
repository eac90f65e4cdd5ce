"""How the console producer reads lines and the console consumer and `topics describe`
print, as pure functions."""

from __future__ import annotations

from uuid import UUID

import pytest

from logbus.cli.common import CommandError
from logbus.cli.consume import RecordFormat
from logbus.cli.main import build_parser
from logbus.cli.produce import LineFormat, LineSplitter, line_format
from logbus.cli.topics import describe_lines
from logbus.client.consumer import ConsumerRecord
from logbus.client.metadata import PartitionInfo, TopicInfo, topic_id_string


def test_line_splitter_keeps_partial_lines_for_the_next_chunk() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"a\nb") == [b"a"]
    assert splitter.feed(b"c\r\n\nd") == [b"bc", b""]
    assert splitter.end() == [b"d"]
    assert splitter.count == 4
    assert splitter.end() == []


def test_line_format_without_keys() -> None:
    assert LineFormat().parse(b"k\tv", 1) == (None, b"k\tv")


def test_line_format_with_keys() -> None:
    fmt = LineFormat(parse_key=True, key_separator=b"::")
    assert fmt.parse(b"user-1::hello::world", 1) == (b"user-1", b"hello::world")
    assert fmt.parse(b"::", 1) == (b"", b"")
    with pytest.raises(CommandError, match="No key separator found on line number 7: 'oops'"):
        fmt.parse(b"oops", 7)
    lenient = LineFormat(parse_key=True, key_separator=b":", ignore_error=True)
    assert lenient.parse(b"oops", 1) == (None, b"oops")


def test_null_marker() -> None:
    fmt = LineFormat(parse_key=True, key_separator=b",", null_marker=b"<null>")
    assert fmt.parse(b"<null>,<null>", 1) == (None, None)
    assert fmt.parse(b"k,<null>", 1) == (b"k", None)


def _format(*argv: str) -> LineFormat:
    return line_format(build_parser().parse_args(["produce", "t", *argv]))


def test_line_format_from_arguments() -> None:
    assert _format() == LineFormat()
    assert _format("--property", "parse.key=true", "--property", "key.separator=:") == (
        LineFormat(parse_key=True, key_separator=b":")
    )
    assert _format("--parse-key", "--key-separator", "|") == (
        LineFormat(parse_key=True, key_separator=b"|")
    )
    # --key-separator wins over the property, and alone does not turn key parsing on
    assert _format("--key-separator", "|", "--property", "key.separator=:") == (
        LineFormat(key_separator=b"|")
    )


def _record(key: bytes | None, value: bytes | None, timestamp_type: int = 0) -> ConsumerRecord:
    return ConsumerRecord("t", 2, 5, 1000, timestamp_type, key, value, ())


def test_record_format_value_only_by_default() -> None:
    record = _record(b"k", b"caf\xc3\xa9 \xff")
    assert RecordFormat().line(record) == "café \ufffd\n".encode()


def test_record_format_all_fields() -> None:
    fmt = RecordFormat(
        print_key=True,
        print_offset=True,
        print_partition=True,
        print_timestamp=True,
        separator=b"|",
    )
    record = _record(None, None)
    assert fmt.line(record) == b"CreateTime:1000|Partition:2|Offset:5|null|null\n"
    assert fmt.line(_record(None, None, 1)).startswith(b"LogAppendTime:1000|")


def test_record_format_from_arguments() -> None:
    parse = build_parser().parse_args
    args = parse(
        [
            "consume",
            "t",
            "--print-key",
            "--property",
            "print.offset=true",
            "--property",
            "null.literal=NULL",
            "--key-separator",
            ",",
        ]
    )
    fmt = RecordFormat.from_args(args)
    assert fmt == RecordFormat(
        print_key=True, print_offset=True, separator=b",", null_literal=b"NULL"
    )


def test_topic_id_string_is_kafkas_base64() -> None:
    assert topic_id_string(UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert topic_id_string(UUID("fb3f5eb9-ffff-4f63-a1e8-3e8d4d0e6b1a")) == (
        "-z9euf__T2Oh6D6NTQ5rGg"
    )


def test_describe_lines_look_like_kafka_topics() -> None:
    topic_id = UUID(int=1)
    info = TopicInfo(
        name="orders",
        topic_id=topic_id,
        is_internal=False,
        partitions={
            0: PartitionInfo(0, leader=1, leader_epoch=0, replicas=(1, 2), isr=(1, 2)),
            1: PartitionInfo(
                1, leader=-1, leader_epoch=3, replicas=(2, 1), isr=(), offline_replicas=(2,)
            ),
        },
    )
    lines = describe_lines(info, {"retention.ms": "1000", "secret": None})
    assert lines == [
        f"Topic: orders\tTopicId: {topic_id_string(topic_id)}\tPartitionCount: 2\t"
        "ReplicationFactor: 2\tConfigs: retention.ms=1000,secret=<sensitive>",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: \tOffline: 2",
    ]
