"""ConsumerProtocol subscription and assignment bytes: identical to kafka-python's
(whose schemas are Kafka's JSON) for every version, and tolerant of newer versions."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from kafkalab.client.assignors.sticky import decode_sticky_user_data, encode_sticky_user_data
from kafkalab.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

FAST = settings(max_examples=150, deadline=None)
topics = st.text(min_size=1, max_size=8)
partitions = st.lists(st.tuples(topics, st.integers(0, 1000)), max_size=8, unique=True).map(
    lambda ps: tuple(sorted(ps))
)


def grouped(parts, cls):
    by: dict[str, list[int]] = {}
    for t, p in parts:
        by.setdefault(t, []).append(p)
    return [cls.TopicPartition(topic=t, partitions=ps) for t, ps in by.items()]


@FAST
@given(
    st.lists(topics, max_size=5),
    st.none() | st.binary(max_size=20),
    partitions,
    st.integers(-1, 2**31 - 1),
    st.none() | topics,
    st.integers(0, 3),
)
def test_subscription_bytes_equal_kafka_pythons(ts, user_data, owned, generation, rack, version):
    ours = encode_subscription(Subscription(tuple(ts), user_data, owned, generation, rack), version)
    theirs = KpSubscription(
        version=version,
        topics=ts,
        user_data=user_data,
        owned_partitions=grouped(owned, KpSubscription),
        generation_id=generation,
        rack_id=rack,
    ).encode(version=version)
    assert ours == theirs
    back = decode_subscription(theirs)
    assert back.topics == tuple(ts) and back.user_data == user_data
    assert back.owned_partitions == (owned if version >= 1 else ())
    assert back.generation_id == (generation if version >= 2 else -1)
    assert back.rack_id == (rack if version >= 3 else None)


@FAST
@given(partitions, st.none() | st.binary(max_size=20), st.integers(0, 3))
def test_assignment_bytes_equal_kafka_pythons(parts, user_data, version):
    ours = encode_assignment(Assignment(parts, user_data), version)
    theirs = KpAssignment(
        version=version, assigned_partitions=grouped(parts, KpAssignment), user_data=user_data
    ).encode(version=version)
    assert ours == theirs
    assert decode_assignment(theirs) == Assignment(parts, user_data)


def test_kafka_python_decodes_ours():
    data = encode_subscription(Subscription(("a", "b"), None, (("a", 1),), 4, "rack-1"))
    kp = KpSubscription.decode(data)
    assert (kp.topics, kp.generation_id, kp.rack_id) == (["a", "b"], 4, "rack-1")


def test_a_newer_version_is_read_as_the_newest_known():
    v3 = encode_subscription(Subscription(("t",), None, (), 2, "r"))
    v9 = struct.pack(">h", 9) + v3[2:] + b"future fields"
    assert decode_subscription(v9) == Subscription(("t",), None, (), 2, "r")


def test_an_empty_assignment_is_empty_bytes():
    assert decode_assignment(b"") == Assignment()


def test_sticky_user_data_in_javas_layout_and_kafka_pythons():
    ours = encode_sticky_user_data([("t", 0), ("t", 1), ("u", 2)], 7)
    assert ours == (
        struct.pack(">i", 2)
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + b"\x00\x01u"
        + struct.pack(">ii", 1, 2)
        + struct.pack(">i", 7)
    )
    assert decode_sticky_user_data(ours) == ([("t", 0), ("t", 1), ("u", 2)], 7)
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

    kp = StickyAssignorUserData([("t", [0, 1]), ("u", [2])], 7).encode(version=1)
    assert decode_sticky_user_data(kp) == ([("t", 0), ("t", 1), ("u", 2)], 7)
    v0 = ours[:-4]  # no generation
    assert decode_sticky_user_data(v0) == ([("t", 0), ("t", 1), ("u", 2)], None)
