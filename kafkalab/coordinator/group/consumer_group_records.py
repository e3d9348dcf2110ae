"""The KIP-848 records of `__consumer_offsets`, as Kafka 4.0 writes them.

Kafka's schemas (group-coordinator/src/main/resources/common/message) and
GroupCoordinatorRecordHelpers. A consumer group is not one record, like a
classic group, but many small ones, each replayed into the group's state:

    key type  key fields           value (version 0, flexible)
    3         group                ConsumerGroupMetadataValue: epoch int32 (the group epoch)
    4         group                ConsumerGroupPartitionMetadataValue (subscribed topics'
                                   metadata; read and skipped here)
    5         group, member        ConsumerGroupMemberMetadataValue: instance id, rack id,
                                   client id, client host, subscribed topic names, topic regex,
                                   rebalance timeout, server assignor
    6         group                ConsumerGroupTargetAssignmentMetadataValue: assignment epoch
    7         group, member        ConsumerGroupTargetAssignmentMemberValue: [topic id, partitions]
    8         group, member        ConsumerGroupCurrentMemberAssignmentValue: member epoch,
                                   previous member epoch, state int8 (0 stable,
                                   1 unrevoked_partitions, 2 unreleased_partitions),
                                   assigned and pending-revocation [topic id, partitions]

Keys are an int16 type then a non-flexible struct; values an int16 version (0)
then a flexible struct (compact strings, tagged fields, none written). Partitions
are named by topic *id* (a UUID), so the writer needs the cluster's topic ids.
A member leaving is tombstones for 8, 7 and 5, and a new group epoch (3).

`records_between(before, after)` is how a handler writes (Kafka: the records
GroupMetadataManager.consumerGroupHeartbeat adds for what changed): the handler
works out the group as it should be on a copy, and the records are what turns
the served group into that copy, in Kafka's order. Replaying them is then the
only way the served group changes, live as at load.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kafkalab.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupMember,
    TopicPartition,
)
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    INT8,
    INT32,
    STRING,
    UUID,
    ArrayOf,
    ProtocolError,
    Reader,
    Writer,
)

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_ASSIGNMENT_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT = 6, 7, 8
CONSUMER_GROUP_RECORD_TYPES = (3, 4, 5, 6, 7, 8)
STATE_BYTES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}

_I16 = struct.Struct(">h")
_GROUP_KEY = Message(-1, "ConsumerGroupKey", [F("group_id", STRING)])
_MEMBER_KEY = Message(-1, "ConsumerGroupMemberKey", [F("group_id", STRING), F("member_id", STRING)])
_TOPIC_PARTITIONS = [F("topic_id", UUID), F("partitions", ArrayOf(INT32))]
_VALUES = {
    GROUP_METADATA: Message(-1, "ConsumerGroupMetadataValue", [F("epoch", INT32)], flexible_from=0),
    MEMBER_METADATA: Message(
        -1,
        "ConsumerGroupMemberMetadataValue",
        [
            F("instance_id", STRING, nullable="0+"),
            F("rack_id", STRING, nullable="0+"),
            F("client_id", STRING),
            F("client_host", STRING),
            F("subscribed_topic_names", ArrayOf(STRING)),
            F("subscribed_topic_regex", STRING, nullable="0+"),
            F("rebalance_timeout_ms", INT32, default=-1),
            F("server_assignor", STRING, nullable="0+"),
        ],
        flexible_from=0,
    ),
    TARGET_ASSIGNMENT_METADATA: Message(
        -1,
        "ConsumerGroupTargetAssignmentMetadataValue",
        [F("assignment_epoch", INT32)],
        flexible_from=0,
    ),
    TARGET_ASSIGNMENT_MEMBER: Message(
        -1,
        "ConsumerGroupTargetAssignmentMemberValue",
        [F("topic_partitions", list(_TOPIC_PARTITIONS))],
        flexible_from=0,
    ),
    CURRENT_MEMBER_ASSIGNMENT: Message(
        -1,
        "ConsumerGroupCurrentMemberAssignmentValue",
        [
            F("member_epoch", INT32),
            F("previous_member_epoch", INT32),
            F("state", INT8),
            F("assigned_partitions", list(_TOPIC_PARTITIONS)),
            F("partitions_pending_revocation", list(_TOPIC_PARTITIONS)),
        ],
        flexible_from=0,
    ),
}


@dataclass(frozen=True)
class ConsumerGroupKey:
    type: int
    group_id: str
    member_id: str | None = None


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    w = Writer()
    w.buf += _I16.pack(record_type)
    if record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        _MEMBER_KEY.encode({"group_id": group_id, "member_id": member_id or ""}, 0, w)
    else:
        _GROUP_KEY.encode({"group_id": group_id}, 0, w)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> ConsumerGroupKey:
    r = Reader(data)
    record_type = r._unpack(_I16)
    if record_type not in CONSUMER_GROUP_RECORD_TYPES:
        raise ProtocolError(f"record type {record_type} is not a consumer-group record")
    if record_type in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        d = _MEMBER_KEY.decode(r, 0)
        return ConsumerGroupKey(record_type, d["group_id"], d["member_id"])
    return ConsumerGroupKey(record_type, _GROUP_KEY.decode(r, 0)["group_id"])


def encode_value(record_type: int, fields: dict) -> bytes:
    w = Writer()
    w.buf += _I16.pack(0)
    _VALUES[record_type].encode(fields, 0, w)
    return w.getvalue()


def decode_value(record_type: int, data: bytes | bytearray | memoryview) -> dict:
    r = Reader(data)
    version = r._unpack(_I16)
    if version != 0:
        raise ProtocolError(
            f"consumer-group record type {record_type}: value version {version} is not 0"
        )
    return _VALUES[record_type].decode(r, 0)


def topic_partitions(
    partitions: Iterable[TopicPartition], topic_ids: dict[str, uuid.UUID]
) -> list[dict]:
    """{(topic, p)} -> [{"topic_id", "partitions"}], topics and partitions sorted."""
    by: dict[str, list[int]] = {}
    for t, p in partitions:
        by.setdefault(t, []).append(p)
    return [{"topic_id": topic_ids[t], "partitions": sorted(ps)} for t, ps in sorted(by.items())]


def from_topic_partitions(
    entries: list[dict], topic_names: dict[uuid.UUID, str]
) -> frozenset[TopicPartition]:
    return frozenset(
        (topic_names[e["topic_id"]], p)
        for e in entries
        if e["topic_id"] in topic_names
        for p in e["partitions"]
    )


# -- the records of a group's changes (Kafka: GroupCoordinatorRecordHelpers) ------------------

Record = tuple[bytes, bytes | None]  # (key, value); value None: a tombstone
TopicIds = Callable[[str], uuid.UUID]  # a topic's id (TopicMetadata.topic_id)


def _ids(partitions: Iterable[TopicPartition], topic_id: TopicIds) -> dict[str, uuid.UUID]:
    return {tp[0]: topic_id(tp[0]) for tp in partitions}


def member_metadata(m: ConsumerGroupMember) -> tuple[object, ...]:
    """What ConsumerGroupMemberMetadataValue carries of a member."""
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.rebalance_timeout_ms,
        m.server_assignor,
    )


def current_assignment(m: ConsumerGroupMember) -> tuple[object, ...]:
    """What ConsumerGroupCurrentMemberAssignmentValue carries of a member."""
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
    fields = {
        "instance_id": m.instance_id,
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscribed_topic_names": sorted(m.subscribed_topic_names),
        "subscribed_topic_regex": None,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "server_assignor": m.server_assignor,
    }
    return (
        encode_key(MEMBER_METADATA, group_id, m.member_id),
        encode_value(MEMBER_METADATA, fields),
    )


def current_assignment_record(group_id: str, m: ConsumerGroupMember, topic_id: TopicIds) -> Record:
    ids = _ids(m.assigned | m.pending_revocation, topic_id)
    fields = {
        "member_epoch": m.member_epoch,
        "previous_member_epoch": m.previous_member_epoch,
        "state": STATE_BYTES[m.state.value],
        "assigned_partitions": topic_partitions(m.assigned, ids),
        "partitions_pending_revocation": topic_partitions(m.pending_revocation, ids),
    }
    return (
        encode_key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
        encode_value(CURRENT_MEMBER_ASSIGNMENT, fields),
    )


def target_member_record(
    group_id: str, member_id: str, parts: frozenset[TopicPartition], topic_id: TopicIds
) -> Record:
    fields = {"topic_partitions": topic_partitions(parts, _ids(parts, topic_id))}
    return (
        encode_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
        encode_value(TARGET_ASSIGNMENT_MEMBER, fields),
    )


def group_epoch_record(group_id: str, epoch: int) -> Record:
    return encode_key(GROUP_METADATA, group_id), encode_value(GROUP_METADATA, {"epoch": epoch})


def target_metadata_record(group_id: str, assignment_epoch: int) -> Record:
    return (
        encode_key(TARGET_ASSIGNMENT_METADATA, group_id),
        encode_value(TARGET_ASSIGNMENT_METADATA, {"assignment_epoch": assignment_epoch}),
    )


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: its current assignment, target and metadata, in that order."""
    return [
        (encode_key(t, group_id, member_id), None)
        for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)
    ]


def group_tombstones(group_id: str) -> list[Record]:
    """An Empty group deleted (DeleteGroups): its target metadata, partition
    metadata and group epoch; the last one removes the group when replayed."""
    return [
        (encode_key(t, group_id), None)
        for t in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)
    ]


def records_between(
    before: ConsumerGroup, after: ConsumerGroup, topic_id: TopicIds
) -> list[Record]:
    """The records that turn `before` into `after` (the same group id), in Kafka's
    order: removed members' tombstones, member metadata, group epoch, target,
    target epoch, current assignments. Empty when nothing a record carries changed."""
    g = after.group_id
    out: list[Record] = []
    for member_id in before.members:
        if member_id not in after.members:
            out += member_tombstones(g, member_id)
    old = before.members
    for member_id, m in after.members.items():
        if member_id not in old or member_metadata(old[member_id]) != member_metadata(m):
            out.append(member_metadata_record(g, m))
    if after.group_epoch != before.group_epoch:
        out.append(group_epoch_record(g, after.group_epoch))
    for member_id, parts in after.target.items():
        if before.target.get(member_id) != parts:
            out.append(target_member_record(g, member_id, parts, topic_id))
    if after.assignment_epoch != before.assignment_epoch:
        out.append(target_metadata_record(g, after.assignment_epoch))
    for member_id, m in after.members.items():
        if member_id not in old or current_assignment(old[member_id]) != current_assignment(m):
            out.append(current_assignment_record(g, m, topic_id))
    return out
