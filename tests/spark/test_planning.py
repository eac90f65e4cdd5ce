"""Planning without a broker: option parsing, range splitting, the read limit, offsets JSON."""

from __future__ import annotations

import itertools

import pytest

from logbus.spark.offset_range import OffsetRange, split_ranges
from logbus.spark.options import LogbusSparkError, parse_read_options, parse_write_options
from logbus.spark.source import _rate_limit, offsets_from_json, offsets_to_json

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_split_ranges_in_proportion_and_capped() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 5, 5)]
    pieces = split_ranges(ranges, min_partitions=10)
    assert len(pieces) >= 10
    assert [p for p in pieces if p.partition == 2] == []  # empty ranges are dropped
    for partition, start, end in ((0, 0, 900), (1, 10, 110)):
        mine = [p for p in pieces if p.partition == partition]
        assert mine[0].start == start and mine[-1].end == end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
    assert len([p for p in pieces if p.partition == 0]) == 9
    capped = split_ranges(ranges, max_records_per_partition=300)
    assert max(p.size for p in capped) <= 300
    assert sum(p.size for p in capped) == 1000


def test_rate_limit_is_exact_and_proportional() -> None:
    begin = {("t", 0): 0, ("t", 1): 100, ("u", 0): 7}
    latest = {("t", 0): 90, ("t", 1): 130, ("u", 0): 7, ("u", 1): 0}
    end = _rate_limit(begin, latest, 40)
    assert sum(end[tp] - begin.get(tp, latest[tp]) for tp in latest) == 40
    assert end[("t", 0)] == 30 and end[("t", 1)] == 110 and end[("u", 0)] == 7
    assert _rate_limit(begin, latest, 1000) == latest


def test_offsets_json_has_sorted_keys() -> None:
    offsets = {("b", 10): 5, ("b", 2): 1, ("a", 0): 3}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"] and list(as_json["b"]) == ["10", "2"]
    assert offsets_from_json(as_json) == offsets
    with pytest.raises(LogbusSparkError, match="malformed"):
        offsets_from_json({"a": 3})


def test_options_are_checked() -> None:
    options = parse_read_options(
        {**BOOT, "SUBSCRIBE": "a, b", "kafkaConsumer.pollTimeoutMs": "512",
         "kafka.max.poll.records": "10", "startingOffsets": '{"a": {"0": -2}}'},
        streaming=True,
    )
    assert options.subscribe == ("a", "b") and options.starting == {"a": {0: -2}}
    assert options.client.bootstrap_servers == "127.0.0.1:9092"
    bad = [
        ({"subscribe": "a", "kafka.max.pol.records": "1"},
         "did you mean 'kafka.max.poll.records'"),
        ({"subscribe": "a", "maxBytesPerTrigger": "5"},
         "'maxBytesPerTrigger' is not supported"),
        ({"subscribePattern": "("}, "not a valid regular expression"),
        ({"assign": '{"a": ["x"]}'}, "must map to a list of partition numbers"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "is not a partition number"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "is not an offset"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "must be true or false"),
        ({"subscribe": "a", "kafka.isolation.level": "serializable"},
         "must be read_uncommitted or read_committed"),
    ]
    for given, message in bad:
        with pytest.raises(LogbusSparkError, match=message):
            parse_read_options({**BOOT, **given}, streaming=False)
    assert parse_write_options({**BOOT, "topic": "t", "kafka.linger.ms": "5"}).producer_config == {
        "bootstrap.servers": "127.0.0.1:9092", "linger.ms": "5"
    }
