"""The consumer protocol: what consumers put inside JoinGroup and SyncGroup.

Kafka's class: org.apache.kafka.clients.consumer.internals.ConsumerProtocol,
with the schemas ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json (clients/src/main/resources/common/message).

The group coordinator treats a member's protocol metadata and assignment as
opaque bytes. Consumers (protocol type "consumer") agree on this format among
themselves: each member sends a *subscription* in JoinGroup (one per assignor
it supports, all in the same format), and the leader sends each member its
*assignment* in SyncGroup. Both are an int16 version followed by a
non-flexible struct:

    ConsumerProtocolSubscription (v0-v3)
        topics            []string
        user_data         nullable bytes           (assignor-specific)
        owned_partitions  [](topic, []int32)       v1+  KIP-429: what I own now
        generation_id     int32, default -1        v2+  the generation owned_partitions are from
        rack_id           nullable string          v3+  KIP-881: rack-aware assignment

    ConsumerProtocolAssignment (v0-v3: the same fields in every version)
        assigned_partitions  [](topic, []int32)
        user_data            nullable bytes

The Java client writes version 3 of both. A reader meets newer versions by
decoding them as the newest version it knows (fields are only ever appended),
which is what `decode_*` do; the broker also reads the topics of the
subscription for OffsetDelete and offset expiry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import BYTES, INT32, STRING, ArrayOf, ProtocolError, Reader, Writer

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3  # what the Java client writes
ASSIGNMENT_VERSION = 3
HIGHEST_SUBSCRIPTION_VERSION = 3
HIGHEST_ASSIGNMENT_VERSION = 3

_TOPIC_PARTITIONS = [F("topic", STRING), F("partitions", ArrayOf(INT32))]

SUBSCRIPTION_SCHEMA = Message(
    -1,
    "ConsumerProtocolSubscription",
    [
        F("topics", ArrayOf(STRING)),
        F("user_data", BYTES, nullable="0+"),
        F("owned_partitions", list(_TOPIC_PARTITIONS), "1+"),
        F("generation_id", INT32, "2+", default=-1),
        F("rack_id", STRING, "3+", nullable="3+"),
    ],
)

ASSIGNMENT_SCHEMA = Message(
    -1,
    "ConsumerProtocolAssignment",
    [
        F("assigned_partitions", list(_TOPIC_PARTITIONS)),
        F("user_data", BYTES, nullable="0+"),
    ],
)

_VERSION = struct.Struct(">h")

TopicPartition = tuple[str, int]


def _group_by_topic(partitions: list[TopicPartition] | tuple | frozenset | set) -> list[dict]:
    """[(topic, p)] -> [{"topic", "partitions"}], topics in first-seen order and
    partitions in the order given: the Java client keeps the caller's order
    (a LinkedHashMap per topic)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _flatten(entries: list[dict] | None) -> list[TopicPartition]:
    return [(e["topic"], p) for e in entries or [] for p in e["partitions"]]


@dataclass(frozen=True)
class Subscription:
    """A member's subscription (Kafka: ConsumerPartitionAssignor.Subscription)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    """A member's assignment (Kafka: ConsumerPartitionAssignor.Assignment)."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None
    version: int = field(default=ASSIGNMENT_VERSION, compare=False)


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """The bytes a Java consumer puts in JoinGroup's protocol metadata."""
    if not 0 <= version <= HIGHEST_SUBSCRIPTION_VERSION:
        raise ValueError(f"ConsumerProtocolSubscription has versions 0-3, not {version}")
    w = Writer()
    w.buf += _VERSION.pack(version)
    SUBSCRIPTION_SCHEMA.encode(
        {
            "topics": list(sub.topics),
            "user_data": sub.user_data,
            "owned_partitions": _group_by_topic(sub.owned_partitions),
            "generation_id": sub.generation_id,
            "rack_id": sub.rack_id,
        },
        version,
        w,
    )
    return w.getvalue()


def subscription_version(data: bytes) -> int:
    if len(data) < 2:
        raise ProtocolError("a consumer protocol subscription needs at least its 2-byte version")
    return _VERSION.unpack_from(data)[0]


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Decode any version; versions above 3 are read as version 3 (Kafka does the same)."""
    r = Reader(data)
    version = r._unpack(_VERSION)
    if version < 0:
        raise ProtocolError(f"consumer protocol subscription with negative version {version}")
    version = min(version, HIGHEST_SUBSCRIPTION_VERSION)
    d = SUBSCRIPTION_SCHEMA.decode(r, version)
    user_data = d["user_data"]
    return Subscription(
        topics=tuple(d["topics"]),
        user_data=None if user_data is None else bytes(user_data),
        owned_partitions=tuple(_flatten(d["owned_partitions"])),
        generation_id=d["generation_id"],
        rack_id=d["rack_id"] if version >= 3 else None,
    )


def encode_assignment(assignment: Assignment, version: int | None = None) -> bytes:
    """The bytes a Java leader puts in SyncGroup for one member."""
    version = assignment.version if version is None else version
    if not 0 <= version <= HIGHEST_ASSIGNMENT_VERSION:
        raise ValueError(f"ConsumerProtocolAssignment has versions 0-3, not {version}")
    w = Writer()
    w.buf += _VERSION.pack(version)
    ASSIGNMENT_SCHEMA.encode(
        {
            "assigned_partitions": _group_by_topic(assignment.partitions),
            "user_data": assignment.user_data,
        },
        version,
        w,
    )
    return w.getvalue()


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Decode any version. An empty byte string is an empty assignment: that is
    what the coordinator hands a member the leader gave nothing."""
    if len(data) == 0:
        return Assignment()
    r = Reader(data)
    version = r._unpack(_VERSION)
    if version < 0:
        raise ProtocolError(f"consumer protocol assignment with negative version {version}")
    read_as = min(version, HIGHEST_ASSIGNMENT_VERSION)
    d = ASSIGNMENT_SCHEMA.decode(r, read_as)
    user_data = d["user_data"]
    return Assignment(
        partitions=tuple(_flatten(d["assigned_partitions"])),
        user_data=None if user_data is None else bytes(user_data),
        version=read_as,
    )
