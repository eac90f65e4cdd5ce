"""`__consumer_offsets` record formats: hand-computed bytes from the JSON specs
(kafka-python has no codec for these internal records), and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logbus.coordinator.group import records as rec


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_offset_commit_key_is_version_1() -> None:
    assert rec.offset_commit_key("g", "t", 3) == h("0001 0001 67 0001 74 00000003")


def test_offset_commit_value_v3_is_written_by_default() -> None:
    commit = rec.OffsetCommit(
        "g", "t", 0, offset=5, leader_epoch=7, metadata="m", commit_timestamp=1000
    )
    # version, offset int64, leader epoch int32, metadata string, commit timestamp int64
    assert rec.offset_commit_value(commit) == h(
        "0003 0000000000000005 00000007 0001 6d 00000000000003e8"
    )


def test_offset_commit_value_v1_when_expire_timestamp() -> None:
    commit = rec.OffsetCommit(
        "g", "t", 0, offset=5, metadata="m", commit_timestamp=1000, expire_timestamp=2000
    )
    assert rec.offset_commit_value(commit) == h(
        "0001 0000000000000005 0001 6d 00000000000003e8 00000000000007d0"
    )
    key, value = rec.offset_commit_record(commit)
    assert value is not None
    assert rec.decode_record(key, value) == commit


def test_group_metadata_key_and_value_v3() -> None:
    group = rec.GroupMetadata(
        group="g",
        protocol_type="consumer",
        generation=1,
        protocol="range",
        leader="m1",
        current_state_timestamp=1000,
        members=(rec.MemberMetadata("m1", None, "c", "/h", 300000, 10000, b"\x01", b"\x02"),),
    )
    key, value = rec.group_metadata_record(group)
    assert key == h("0002 0001 67")
    assert (
        value
        == h(
            "0003"
            "0008" + b"consumer".hex() + "00000001"
            "0005" + b"range".hex() + "0002" + b"m1".hex() + "00000000000003e8"
            "00000001"  # one member
            "0002" + b"m1".hex() + "ffff"  # member id, null group instance id
            "0001" + b"c".hex() + "0002" + b"/h".hex() + "000493e0 00002710"
            "00000001 01 00000001 02"
        )
    )
    assert rec.decode_record(key, value) == group


def test_decode_flexible_offset_commit_value_v4() -> None:
    key = rec.offset_commit_key("g", "t", 1)
    # v4: compact string (length + 1 as varint) and an empty tagged-field section
    value = h("0004 0000000000000005 00000007 02 6d 00000000000003e8 00")
    assert rec.decode_record(key, value) == rec.OffsetCommit("g", "t", 1, 5, 7, "m", 1000, None)


def test_decode_offset_commit_key_v0_and_value_v0() -> None:
    key = h("0000 0001 67 0001 74 00000002")
    value = h("0000 000000000000000a 0000 0000000000000064")
    assert rec.decode_record(key, value) == rec.OffsetCommit("g", "t", 2, 10, -1, "", 100, None)


def test_decode_group_metadata_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    value = h(
        "0000 0008" + b"consumer".hex() + "00000002 ffff ffff 00000001"
        "0002" + b"m1".hex() + "0001" + b"c".hex() + "0001" + b"h".hex() + "00002710"
        "00000000 00000000"
    )
    decoded = rec.decode_record(rec.group_metadata_key("g"), value)
    assert isinstance(decoded, rec.GroupMetadata)
    assert decoded.protocol is None and decoded.leader is None
    assert decoded.current_state_timestamp == -1
    assert decoded.members[0].rebalance_timeout_ms == 10000
    assert decoded.members[0].group_instance_id is None


def test_tombstones() -> None:
    key, value = rec.offset_tombstone("g", "t", 0)
    assert value is None
    assert rec.decode_record(key, value) == rec.OffsetDeleted("g", "t", 0)
    key, value = rec.group_tombstone("g")
    assert value is None
    assert rec.decode_record(key, value) == rec.GroupDeleted("g")


def test_unknown_key_version_is_skippable_and_garbage_raises() -> None:
    assert rec.decode_record(h("0003 0001 67"), b"x") == rec.UnknownRecord(3)
    with pytest.raises(rec.InvalidRecord):
        rec.decode_record(b"\x00", None)
    with pytest.raises(rec.InvalidRecord):
        rec.decode_record(rec.offset_commit_key("g", "t", 0), h("0009 00"))
    with pytest.raises(rec.InvalidRecord):
        rec.decode_record(rec.offset_commit_key("g", "t", 0), h("0003 0000"))


names = st.text(max_size=20)
optional_names = st.none() | names
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int32, int64, int32, names, int64, st.none() | st.integers(0, 2**62))
def test_offset_commit_round_trip(
    group: str,
    topic: str,
    partition: int,
    offset: int,
    epoch: int,
    metadata: str,
    ts: int,
    expire: int | None,
) -> None:
    commit = rec.OffsetCommit(group, topic, partition, offset, epoch, metadata, ts, expire)
    if expire is not None:
        commit = rec.OffsetCommit(group, topic, partition, offset, -1, metadata, ts, expire)
    key, value = rec.offset_commit_record(commit)
    assert rec.decode_record(key, value) == commit


members = st.builds(
    rec.MemberMetadata,
    names,
    optional_names,
    names,
    names,
    int32,
    int32,
    st.binary(max_size=30),
    st.binary(max_size=30),
)


@given(
    names,
    names,
    int32,
    optional_names,
    optional_names,
    int64,
    st.lists(members, max_size=4).map(tuple),
    st.sampled_from([3, 4]),
)
def test_group_metadata_round_trip(
    group: str,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    ts: int,
    members_: tuple[rec.MemberMetadata, ...],
    version: int,
) -> None:
    meta = rec.GroupMetadata(group, protocol_type, generation, protocol, leader, ts, members_)
    key = rec.group_metadata_key(group)
    assert rec.decode_record(key, rec.group_metadata_value(meta, version)) == meta
