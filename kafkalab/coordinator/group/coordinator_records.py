"""The records of `__consumer_offsets`, byte for byte as Kafka writes them.

Kafka's classes: kafka.coordinator.group.GroupMetadataManager (offsetCommitKey,
offsetCommitValue, groupMetadataKey, groupMetadataValue, readMessageKey,
partitionFor) and, since 3.6, GroupCoordinatorRecordHelpers and
GroupCoordinatorRecordSerde; schemas in
group-coordinator/src/main/resources/common/message/{OffsetCommitKey,
OffsetCommitValue,GroupMetadataKey,GroupMetadataValue}.json.

Every record key starts with an int16 that says what the record is (Kafka
calls it the key version, and since 4.0 the coordinator record type):

    key   0 or 1   OffsetCommitKey     group string, topic string, partition int32
    key   2        GroupMetadataKey    group string
    key   3+       KIP-848 consumer-group records (ConsumerGroupMetadataKey, ...)

and every value starts with its own int16 version:

    OffsetCommitValue   v1 if the commit carries an expire timestamp (OffsetCommit
                        v2-v4 with retention_time_ms), otherwise v3:
                        offset int64, leader_epoch int32 (v3+), metadata string,
                        commit_timestamp int64, expire_timestamp int64 (v1 only)
    GroupMetadataValue  v3: protocol_type string, generation int32, protocol
                        nullable string, leader nullable string,
                        current_state_timestamp int64 (v2+), members
                        [member_id, group_instance_id (v3+, nullable), client_id,
                        client_host, rebalance_timeout (v1+), session_timeout,
                        subscription bytes, assignment bytes]

Kafka 3.x writes key version 1 for offsets and 2 for groups, and value versions
3 (both), "the highest non-flexible version until a tagged field is
introduced"; v4 (flexible) is read but not written. A record with a null value
is a *tombstone*: log compaction keeps only the latest record per key and, after
`delete.retention.ms`, drops tombstones, so the compacted log holds exactly the
live offsets and groups.

A group lives on partition `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`,
where hashCode is Java's String.hashCode (over UTF-16 code units, 32-bit
wrap-around) and Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (it is not the
`& 0x7fffffff` of Utils.toPositive, which the producer's partitioner uses).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import BYTES, INT32, INT64, STRING, ProtocolError, Reader, Writer

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1  # what Kafka 3.x writes (0 is the same layout, older)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")

OFFSET_COMMIT_KEY = Message(
    -1, "OffsetCommitKey", [F("group", STRING), F("topic", STRING), F("partition", INT32)]
)
GROUP_METADATA_KEY = Message(-1, "GroupMetadataKey", [F("group", STRING)])
OFFSET_COMMIT_VALUE = Message(
    -1,
    "OffsetCommitValue",
    [
        F("offset", INT64),
        F("leader_epoch", INT32, "3+", default=-1),
        F("metadata", STRING),
        F("commit_timestamp", INT64),
        F("expire_timestamp", INT64, "1", default=-1),
    ],
    flexible_from=4,
)
GROUP_METADATA_VALUE = Message(
    -1,
    "GroupMetadataValue",
    [
        F("protocol_type", STRING),
        F("generation", INT32),
        F("protocol", STRING, nullable="0+"),
        F("leader", STRING, nullable="0+"),
        F("current_state_timestamp", INT64, "2+", default=-1),
        F(
            "members",
            [
                F("member_id", STRING),
                F("group_instance_id", STRING, "3+", nullable="3+"),
                F("client_id", STRING),
                F("client_host", STRING),
                F("rebalance_timeout", INT32, "1+"),
                F("session_timeout", INT32),
                F("subscription", BYTES),
                F("assignment", BYTES),
            ],
        ),
    ],
    flexible_from=4,
)
_HIGHEST_VALUE_VERSION = 4


# -- values as Python objects -------------------------------------------------------------


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed offset (Kafka: OffsetAndMetadata). leader_epoch -1 means none;
    expire_timestamp None means "expire by offsets.retention.minutes"."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    """One member as GroupMetadataValue stores it: `subscription` is the member's
    metadata for the group's selected protocol."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataRecord:
    """A classic group as GroupMetadataValue stores it (written after each
    completed SyncGroup, when a generation ends Empty, and for static members)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int
    version: int = field(default=OFFSET_COMMIT_KEY_VERSION, compare=False)


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OtherKey:
    """A record type this coordinator does not replay (KIP-848 and share groups)."""

    version: int


# -- encoding -------------------------------------------------------------------------------


def _prefixed(prefix: int, schema: Message, obj: dict, schema_version: int = 0) -> bytes:
    """int16 prefix (key version / record type, or value version), then the struct.
    Keys have one schema version (0) whatever their prefix."""
    w = Writer()
    w.buf += _I16.pack(prefix)
    schema.encode(obj, schema_version, w)
    return w.getvalue()


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _prefixed(
        OFFSET_COMMIT_KEY_VERSION,
        OFFSET_COMMIT_KEY,
        {"group": group, "topic": topic, "partition": partition},
    )


def group_metadata_key(group: str) -> bytes:
    return _prefixed(GROUP_METADATA_KEY_VERSION, GROUP_METADATA_KEY, {"group": group})


def offset_commit_value(om: OffsetAndMetadata, version: int | None = None) -> bytes:
    """v3, or v1 when the commit has an explicit expire timestamp (as Kafka 3.x)."""
    if version is None:
        version = (
            OFFSET_COMMIT_VALUE_VERSION
            if om.expire_timestamp is None
            else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE
        )
    return _prefixed(
        version,
        OFFSET_COMMIT_VALUE,
        {
            "offset": om.offset,
            "leader_epoch": om.leader_epoch,
            "metadata": om.metadata,
            "commit_timestamp": om.commit_timestamp,
            "expire_timestamp": -1 if om.expire_timestamp is None else om.expire_timestamp,
        },
        version,
    )


def group_metadata_value(
    g: GroupMetadataRecord, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    return _prefixed(
        version,
        GROUP_METADATA_VALUE,
        {
            "protocol_type": g.protocol_type,
            "generation": g.generation,
            "protocol": g.protocol,
            "leader": g.leader,
            "current_state_timestamp": g.current_state_timestamp,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.subscription,
                    "assignment": m.assignment,
                }
                for m in g.members
            ],
        },
        version,
    )


# -- decoding -------------------------------------------------------------------------------


def read_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupKey | OtherKey:
    """Kafka: GroupMetadataManager.readMessageKey."""
    r = Reader(data)
    version = r._unpack(_I16)
    if version in (0, 1):
        d = OFFSET_COMMIT_KEY.decode(r, 0)
        return OffsetKey(d["group"], d["topic"], d["partition"], version)
    if version == 2:
        return GroupKey(GROUP_METADATA_KEY.decode(r, 0)["group"])
    if version < 0:
        raise ProtocolError(f"__consumer_offsets key with negative version {version}")
    return OtherKey(version)


def _value_version(r: Reader, what: str) -> int:
    version = r._unpack(_I16)
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise ProtocolError(f"{what} version {version} is not one of 0-{_HIGHEST_VALUE_VERSION}")
    return version


def read_offset_value(data: bytes | bytearray | memoryview) -> OffsetAndMetadata:
    r = Reader(data)
    version = _value_version(r, "OffsetCommitValue")
    d = OFFSET_COMMIT_VALUE.decode(r, version)
    expire = d["expire_timestamp"] if version == 1 else -1
    return OffsetAndMetadata(
        offset=d["offset"],
        leader_epoch=d["leader_epoch"],
        metadata=d["metadata"],
        commit_timestamp=d["commit_timestamp"],
        expire_timestamp=None if expire == -1 else expire,
    )


def read_group_value(data: bytes | bytearray | memoryview) -> GroupMetadataRecord:
    r = Reader(data)
    version = _value_version(r, "GroupMetadataValue")
    d = GROUP_METADATA_VALUE.decode(r, version)
    members = tuple(
        MemberRecord(
            member_id=m["member_id"],
            group_instance_id=m["group_instance_id"] if version >= 3 else None,
            client_id=m["client_id"],
            client_host=m["client_host"],
            # before v1 the rebalance timeout was the session timeout (Kafka does the same)
            rebalance_timeout_ms=m["rebalance_timeout"] if version >= 1 else m["session_timeout"],
            session_timeout_ms=m["session_timeout"],
            subscription=bytes(m["subscription"]),
            assignment=bytes(m["assignment"]),
        )
        for m in d["members"]
    )
    return GroupMetadataRecord(
        protocol_type=d["protocol_type"],
        generation=d["generation"],
        protocol=d["protocol"],
        leader=d["leader"],
        current_state_timestamp=d["current_state_timestamp"],
        members=members,
    )


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One line per record, for `kafkalab dump-log --offsets-decoder` (the shape of
    Kafka's OffsetsMessageFormatter / GroupMetadataMessageFormatter)."""
    if key is None:
        return "key: null (not a coordinator record)"
    k = read_key(key)
    if isinstance(k, OffsetKey):
        head = f"offset_commit::group={k.group},partition={k.topic}-{k.partition}"
        if value is None:
            return head + " :: <DELETE>"
        v = read_offset_value(value)
        return (
            f"{head} :: offset={v.offset},leader_epoch={v.leader_epoch},"
            f"metadata={v.metadata!r},commit_timestamp={v.commit_timestamp},"
            f"expire_timestamp={v.expire_timestamp}"
        )
    if isinstance(k, GroupKey):
        head = f"group_metadata::group={k.group}"
        if value is None:
            return head + " :: <DELETE>"
        g = read_group_value(value)
        members = ",".join(
            f"{m.member_id}(instance={m.group_instance_id},client={m.client_id}@{m.client_host},"
            f"session={m.session_timeout_ms},rebalance={m.rebalance_timeout_ms})"
            for m in g.members
        )
        return (
            f"{head} :: protocol_type={g.protocol_type},generation={g.generation},"
            f"protocol={g.protocol},leader={g.leader},"
            f"current_state_timestamp={g.current_state_timestamp},members=[{members}]"
        )
    from kafkalab.coordinator.group import consumer_group_records as cg

    if k.version not in cg.CONSUMER_GROUP_RECORD_TYPES:
        return f"record type {k.version} (a share or streams group record, not decoded)"
    ck = cg.decode_key(key)
    names = {
        cg.GROUP_METADATA: "consumer_group_metadata",
        cg.PARTITION_METADATA: "consumer_group_partition_metadata",
        cg.MEMBER_METADATA: "consumer_group_member_metadata",
        cg.TARGET_ASSIGNMENT_METADATA: "consumer_group_target_assignment_metadata",
        cg.TARGET_ASSIGNMENT_MEMBER: "consumer_group_target_assignment_member",
        cg.CURRENT_MEMBER_ASSIGNMENT: "consumer_group_current_member_assignment",
    }
    head = f"{names[ck.type]}::group={ck.group_id}" + (
        f",member={ck.member_id}" if ck.member_id is not None else ""
    )
    if value is None:
        return head + " :: <DELETE>"
    if ck.type == cg.PARTITION_METADATA:
        return head + " :: (not decoded)"
    fields = cg.decode_value(ck.type, value)
    fields.pop("_tagged", None)
    shown = ",".join(f"{name}={v}" for name, v in fields.items())
    return f"{head} :: {shown}"


# -- which partition --------------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE -> 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition that holds `group_id` (its leader is the
    group's coordinator)."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
