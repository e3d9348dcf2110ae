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
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

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


def topic_partitions(partitions, topic_ids: dict[str, uuid.UUID]) -> list[dict]:
    """{(topic, p)} -> [{"topic_id", "partitions"}], topics and partitions sorted."""
    by: dict[str, list[int]] = {}
    for t, p in partitions:
        by.setdefault(t, []).append(p)
    return [{"topic_id": topic_ids[t], "partitions": sorted(ps)} for t, ps in sorted(by.items())]


def from_topic_partitions(entries: list[dict], topic_names: dict[uuid.UUID, str]) -> frozenset:
    return frozenset(
        (topic_names[e["topic_id"]], p)
        for e in entries
        if e["topic_id"] in topic_names
        for p in e["partitions"]
    )
