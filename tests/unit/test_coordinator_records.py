"""__consumer_offsets records: byte-exact against layouts built from Kafka's JSON
schemas by hand, round trips of every version, tombstones, and the partition a
group lives on (Java's String.hashCode and Kafka's Utils.abs)."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.coordinator.group.coordinator_records import (
    GroupKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    OtherKey,
    describe_record,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    read_group_value,
    read_key,
    read_offset_value,
)

FAST = settings(max_examples=200, deadline=None)


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_commit_key_is_version_1_group_topic_partition():
    assert offset_commit_key("group-id", "foo", 1) == (
        struct.pack(">h", 1) + s16("group-id") + s16("foo") + struct.pack(">i", 1)
    )
    assert group_metadata_key("group-id") == struct.pack(">h", 2) + s16("group-id")


def test_offset_commit_value_v3_and_v1():
    om = OffsetAndMetadata(100, 10, "metadata", 1234)
    assert offset_commit_value(om) == (
        struct.pack(">hqi", 3, 100, 10) + s16("metadata") + struct.pack(">q", 1234)
    )
    with_expiry = OffsetAndMetadata(100, -1, "m", 1234, expire_timestamp=5678)
    assert offset_commit_value(with_expiry) == (
        struct.pack(">hq", 1, 100) + s16("m") + struct.pack(">qq", 1234, 5678)
    )


def test_group_metadata_value_v3():
    member = MemberRecord("m1", "i1", "client", "/127.0.0.1", 300_000, 45_000, b"S", b"AB")
    value = group_metadata_value(GroupMetadataRecord("consumer", 7, "range", "m1", 99, (member,)))
    expected = (
        struct.pack(">h", 3)
        + s16("consumer")
        + struct.pack(">i", 7)
        + s16("range")
        + s16("m1")
        + struct.pack(">q", 99)
        + struct.pack(">i", 1)
        + s16("m1")
        + s16("i1")
        + s16("client")
        + s16("/127.0.0.1")
        + struct.pack(">ii", 300_000, 45_000)
        + struct.pack(">i", 1)
        + b"S"
        + struct.pack(">i", 2)
        + b"AB"
    )
    assert value == expected
    empty = group_metadata_value(GroupMetadataRecord("consumer", 8, None, None, 5))
    assert empty == struct.pack(">h", 3) + s16("consumer") + struct.pack(">ihhqi", 8, -1, -1, 5, 0)


def test_older_and_flexible_values_decode():
    # v0: no current_state_timestamp, no rebalance timeout, no instance id
    v0 = (
        struct.pack(">h", 0)
        + s16("consumer")
        + struct.pack(">i", 1)
        + s16("range")
        + s16("m")
        + struct.pack(">i", 1)
        + s16("m")
        + s16("c")
        + s16("h")
        + struct.pack(">i", 10_000)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    g = read_group_value(v0)
    assert g.current_state_timestamp == -1
    assert g.members[0].rebalance_timeout_ms == 10_000 and g.members[0].group_instance_id is None
    # v4 (flexible): compact strings and tagged fields
    v4 = (
        struct.pack(">hq", 4, 42) + struct.pack(">i", 3) + b"\x02m" + struct.pack(">q", 7) + b"\x00"
    )
    assert read_offset_value(v4) == OffsetAndMetadata(42, 3, "m", 7)
    assert read_offset_value(struct.pack(">hq", 0, 1) + s16("") + struct.pack(">q", 2)) == (
        OffsetAndMetadata(1, -1, "", 2)
    )


names = st.text(min_size=0, max_size=20)
members = st.builds(
    MemberRecord,
    names,
    st.none() | names,
    names,
    names,
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=30),
    st.binary(max_size=30),
)


@FAST
@given(
    st.builds(
        GroupMetadataRecord,
        names,
        st.integers(0, 2**31 - 1),
        st.none() | names,
        st.none() | names,
        st.integers(-1, 2**62),
        st.lists(members, max_size=4).map(tuple),
    ),
    st.sampled_from([3, 4]),
)
def test_group_values_round_trip(g, version):
    assert read_group_value(group_metadata_value(g, version)) == g


@FAST
@given(
    st.integers(-1, 2**62),
    st.integers(-1, 2**31 - 1),
    names,
    st.integers(0, 2**62),
    st.none() | st.integers(0, 2**62),
)
def test_offset_values_round_trip(offset, epoch, metadata, commit, expire):
    om = OffsetAndMetadata(offset, epoch, metadata, commit, expire)
    back = read_offset_value(offset_commit_value(om))
    # v1 has no leader epoch: Kafka loses it there too
    assert back == (
        om if expire is None else OffsetAndMetadata(offset, -1, metadata, commit, expire)
    )


@FAST
@given(names, names, st.integers(0, 2**31 - 1))
def test_keys_round_trip(group, topic, partition):
    assert read_key(offset_commit_key(group, topic, partition)) == OffsetKey(
        group, topic, partition
    )
    assert read_key(group_metadata_key(group)) == GroupKey(group)


def test_kip_848_keys_are_recognised_and_described():
    from kafkalab.coordinator.group import consumer_group_records as cg

    assert read_key(struct.pack(">h", 3) + s16("g")) == OtherKey(3)
    line = describe_record(cg.encode_key(3, "g"), cg.encode_value(3, {"epoch": 4}))
    assert line == "consumer_group_metadata::group=g :: epoch=4"
    assert describe_record(cg.encode_key(5, "g", "m"), None) == (
        "consumer_group_member_metadata::group=g,member=m :: <DELETE>"
    )
    assert "not decoded" in describe_record(struct.pack(">h", 9) + s16("g"), b"")
    assert describe_record(offset_commit_key("g", "t", 0), None).endswith("<DELETE>")


def test_java_string_hash_code():
    # values of String.hashCode() in Java
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    # a character outside the BMP is two UTF-16 code units (0xD83D 0xDE00)
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_partition_for_uses_kafkas_utils_abs():
    # Utils.abs: Math.abs, with Integer.MIN_VALUE -> 0
    assert partition_for("polygenelubricants", 50) == 0
    h = java_string_hash("console-consumer-1")
    assert partition_for("console-consumer-1", 50) == abs(h) % 50
    # for a negative hash, Math.abs and the partitioner's `& 0x7fffffff` disagree;
    # the group coordinator uses the former
    negative = next(
        g
        for g in (f"group-{i}" for i in range(1000))
        if java_string_hash(g) < 0
        and (-java_string_hash(g)) % 50 != (java_string_hash(g) & 0x7FFFFFFF) % 50
    )
    assert partition_for(negative, 50) == (-java_string_hash(negative)) % 50
