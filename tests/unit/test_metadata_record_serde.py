"""MetadataRecordSerde: the controller's metadata records as Kafka's binary records
(issue 25). Every record type at every version Kafka declares survives its schema;
every record dict the controller writes survives serialize/deserialize; two
records' bytes are spelt out field by field from Kafka's JSON schemas; a JSON
record (a metadata log from before) is refused with an error that says what to do."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.controller.metadata_record_serde import (
    METADATA_RECORD_SERDE,
    JsonMetadataRecordError,
    MetadataParseError,
    deserialize,
    kafka_uuid_string,
    serialize,
)
from kafkalab.controller.quorum_controller import METADATA_TOPIC, QuorumController
from kafkalab.protocol.messages.metadata_records import METADATA_RECORDS
from kafkalab.protocol.schema import Field
from kafkalab.protocol.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
)
from kafkalab.raft.record_serde import decode_entries
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog

INT32S = st.integers(-(2**31), 2**31 - 1)
INT64S = st.integers(-(2**63), 2**63 - 1)
_PRIMITIVES = {
    id(BOOL): st.booleans(),
    id(INT8): st.integers(-128, 127),
    id(INT16): st.integers(-(2**15), 2**15 - 1),
    id(INT32): INT32S,
    id(INT64): INT64S,
    id(UINT16): st.integers(0, 2**16 - 1),
    id(STRING): st.text(max_size=12),
    id(UUID): st.uuids(),
}


def _values(f: Field, version: int) -> st.SearchStrategy:
    if isinstance(f.type, list):
        values = st.lists(_bodies(f.type, version), max_size=3)
    elif isinstance(f.type, ArrayOf):
        values = st.lists(_PRIMITIVES[id(f.type.item)], max_size=4)
    else:
        values = _PRIMITIVES[id(f.type)]
    if version in f._nullable:
        values = st.none() | values
    if f.tag is not None:
        values = st.just(f.default_value()) | values
    return values


def _bodies(fields: list[Field], version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {f.name: _values(f, version) for f in fields if version in f._versions}
    )


EVERY_VERSION = [
    (kind, v)
    for kind in METADATA_RECORDS.values()
    for v in range(kind.lowest_version, kind.highest_version + 1)
]


@pytest.mark.parametrize(
    "kind,version", EVERY_VERSION, ids=[f"{k.name}-v{v}" for k, v in EVERY_VERSION]
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_record_type_and_version_survives_its_frame(kind, version, data):
    body = data.draw(_bodies(kind.message.fields, version))
    frame = METADATA_RECORD_SERDE.write(kind.api_key, version, body)
    if kind.api_key < 128:  # one byte each as unsigned varints
        assert frame[:3] == bytes([1, kind.api_key, version])
    got_kind, got_version, got = METADATA_RECORD_SERDE.read(frame)
    assert (got_kind, got_version) == (kind, version)
    expected = {f.name: body.get(f.name, f.default_value()) for f in kind.message.fields}
    assert got == expected
    printed = json.loads(METADATA_RECORD_SERDE.to_json(frame))  # Kafka's dump, any record
    assert (printed["type"], printed["version"]) == (kind.type_name, version)


# -- the record dicts the controller writes ---------------------------------------------------

ids = st.uuids().map(str)
brokers = st.integers(-1, 2**31 - 1)
replica_lists = st.lists(brokers, max_size=5)
endpoints = st.lists(
    st.tuples(st.text(max_size=8), st.text(max_size=12), st.integers(0, 65535)).map(list),
    min_size=1,
    max_size=3,
)


@st.composite
def register_broker(draw):
    points = draw(endpoints)
    r = {
        "type": "RegisterBrokerRecord",
        "broker_id": draw(brokers),
        "host": points[0][1],
        "port": points[0][2],
        "incarnation_id": draw(ids),
        "broker_epoch": draw(INT64S),
        "endpoints": points,
    }
    if draw(st.booleans()):
        r["fenced"] = False
    return r


@st.composite
def partition_record(draw):
    r = {
        "type": "PartitionRecord",
        "topic_id": draw(ids),
        "partition": draw(INT32S),
        "replicas": draw(replica_lists),
        "isr": draw(replica_lists),
        "leader": draw(INT32S),
        "leader_epoch": draw(INT32S),
        "partition_epoch": draw(INT32S),
    }
    for key in ("adding_replicas", "removing_replicas"):
        more = draw(replica_lists)
        if more:
            r[key] = more
    return r


@st.composite
def partition_change_record(draw):
    r = {"type": "PartitionChangeRecord", "topic_id": draw(ids), "partition": draw(INT32S)}
    for key in ("isr", "replicas", "adding_replicas", "removing_replicas"):
        if draw(st.booleans()):
            r[key] = draw(replica_lists)
    if draw(st.booleans()):
        r["leader"] = draw(INT32S.filter(lambda b: b != -2))  # -2: no change (absent)
    return r


def _optional(kind: str, key: str):
    return st.one_of(
        st.just({"type": kind}), st.text(max_size=10).map(lambda s: {"type": kind, key: s})
    )


records = st.one_of(
    register_broker(),
    st.builds(
        lambda kind, b, e: {"type": kind, "broker_id": b, "broker_epoch": e},
        st.sampled_from(["FenceBrokerRecord", "UnfenceBrokerRecord"]),
        brokers,
        INT64S,
    ),
    st.builds(lambda n, i: {"type": "TopicRecord", "name": n, "topic_id": i}, st.text(), ids),
    st.builds(
        lambda t, rn, n, v: {
            "type": "ConfigRecord",
            "resource_type": t,
            "resource_name": rn,
            "name": n,
            "value": v,
        },
        st.sampled_from([2, 4]),
        st.text(max_size=10),
        st.text(max_size=20),
        st.none() | st.text(max_size=20),
    ),
    partition_record(),
    partition_change_record(),
    ids.map(lambda i: {"type": "RemoveTopicRecord", "topic_id": i}),
    st.builds(
        lambda b, e, n: {
            "type": "ProducerIdsRecord",
            "broker_id": b,
            "broker_epoch": e,
            "next_producer_id": n,
        },
        brokers,
        INT64S,
        INT64S,
    ),
    INT64S.map(lambda o: {"type": "MetadataSnapshotRecord", "end_offset": o}),
    _optional("BeginTransactionRecord", "name"),
    st.just({"type": "EndTransactionRecord"}),
    _optional("AbortTransactionRecord", "reason"),
)


@settings(max_examples=400, deadline=None)
@given(records)
def test_every_record_dict_survives_serialize_and_deserialize(record):
    assert deserialize(serialize(record)) == record


def test_the_controllers_records_survive_too(tmp_path):
    """What a controller writes (a broker, a topic with configs, elections, a
    reassignment, a deletion, producer ids): read back from its log, the same dicts,
    and a controller restarted on the log has the same image."""
    c = QuorumController(tmp_path)
    epochs = {b: c.register_broker(b, "h", 9000 + b, f"i{b}", 0) for b in (1, 2, 3)}
    for b, e in epochs.items():
        c.heartbeat(b, e, 0)
    c.create_topic("t", 2, 3, configs={"retention.ms": "5"})
    c.allocate_producer_ids(1, epochs[1])
    c.fence_broker(c.topics["t"].partitions[0].leader, 10)
    c.alter_partition_reassignments([("t", 1, [3, 2, 1])])
    c.create_topic("gone", 1, 1)
    c.delete_topic("gone")
    written = [r for _, r in c.records_since(0)]
    assert [deserialize(serialize(r)) for r in written] == written
    kinds = {r["type"] for r in written}
    assert {"RegisterBrokerRecord", "PartitionChangeRecord", "RemoveTopicRecord"} <= kinds
    image = {n: (t.topic_id, t.configs, t.partitions) for n, t in c.topics.items()}
    brokers_before = dict(c.brokers)
    c.close()
    again = QuorumController(tmp_path)
    assert {n: (t.topic_id, t.configs, t.partitions) for n, t in again.topics.items()} == image
    assert {b: (r.broker_epoch, r.fenced) for b, r in again.brokers.items()} == {
        b: (r.broker_epoch, r.fenced) for b, r in brokers_before.items()
    }
    again.close()


# -- bytes by hand, from Kafka's JSON schemas --------------------------------------------------

TOPIC_ID = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")


def test_a_topic_records_bytes_field_by_field():
    """TopicRecord.json: apiKey 2, version 0, flexible: Name (compact string),
    TopicId (uuid), then the tagged fields section."""
    frame = serialize({"type": "TopicRecord", "name": "orders", "topic_id": str(TOPIC_ID)})
    expected = (
        bytes([1])  # frame version 1 (unsigned varint)
        + bytes([2])  # apiKey 2: TopicRecord
        + bytes([0])  # version 0
        + bytes([6 + 1])  # Name: compact string, length + 1
        + b"orders"
        + bytes(range(16))  # TopicId: 16 bytes, most significant first
        + bytes([0])  # no tagged fields
    )
    assert frame == expected


def test_a_partition_change_records_bytes_field_by_field():
    """PartitionChangeRecord.json: apiKey 5, version 0: PartitionId (int32), TopicId
    (uuid), and everything else tagged: Isr is tag 0, Leader tag 1, written only
    when not their defaults (null, -2), in tag order."""
    frame = serialize(
        {
            "type": "PartitionChangeRecord",
            "topic_id": str(TOPIC_ID),
            "partition": 7,
            "isr": [1, 2],
            "leader": 2,
        }
    )
    expected = (
        bytes([1, 5, 0])  # frame version 1, apiKey 5, version 0
        + (7).to_bytes(4, "big")  # PartitionId
        + bytes(range(16))  # TopicId
        + bytes([2])  # two tagged fields
        + bytes([0])  # tag 0: Isr
        + bytes([1 + 8])  # its size: the compact array's length byte and two int32s
        + bytes([2 + 1])  # compact array of 2
        + (1).to_bytes(4, "big")
        + (2).to_bytes(4, "big")
        + bytes([1])  # tag 1: Leader
        + bytes([4])  # its size
        + (2).to_bytes(4, "big")
    )
    assert frame == expected
    assert json.loads(METADATA_RECORD_SERDE.to_json(frame)) == {
        "type": "PARTITION_CHANGE_RECORD",
        "version": 0,
        "data": {"partitionId": 7, "topicId": "AAECAwQFBgcICQoLDA0ODw", "isr": [1, 2], "leader": 2},
    }


def test_kafkas_uuid_string_is_url_safe_base64_unpadded():
    assert kafka_uuid_string(TOPIC_ID) == "AAECAwQFBgcICQoLDA0ODw"
    assert kafka_uuid_string(uuid.UUID(int=2**128 - 1)) == "_____________________w"


# -- what is not a record -----------------------------------------------------------------------


def test_bytes_that_are_not_a_record_are_refused():
    frame = serialize({"type": "RemoveTopicRecord", "topic_id": str(TOPIC_ID)})
    with pytest.raises(MetadataParseError, match="frame version 0"):
        deserialize(b"\x00" + frame[1:])
    with pytest.raises(MetadataParseError, match="unknown type 99"):
        deserialize(bytes([1, 99, 0]))
    with pytest.raises(MetadataParseError, match="version 1 is not one of 0-0"):
        deserialize(frame[:2] + b"\x01" + frame[3:])
    with pytest.raises(MetadataParseError, match="garbage"):
        deserialize(frame + b"\x00")
    with pytest.raises(MetadataParseError, match="RemoveTopicRecord"):
        deserialize(frame[:-5])
    with pytest.raises(ValueError, match="no field"):
        serialize({"type": "RemoveTopicRecord", "topic_id": str(TOPIC_ID), "name": "t"})


OLD = {"type": "TopicRecord", "name": "t", "topic_id": str(TOPIC_ID)}


def test_a_controller_on_a_json_metadata_log_says_to_recreate_the_directory(tmp_path):
    """A metadata log from before Kafka's binary records: not read, and the error
    says what to do (on-disk compatibility with the JSON logs is not kept)."""
    log = UnifiedLog(tmp_path / f"{METADATA_TOPIC}-0", LogConfig())
    log.append_as_follower(build_batch([SimpleRecord(json.dumps(OLD).encode())]))
    log.close()
    with pytest.raises(JsonMetadataRecordError, match="Re-create the cluster directory"):
        QuorumController(tmp_path)


def test_a_raft_log_entry_that_is_a_json_metadata_record_is_refused_too():
    batch = build_batch([SimpleRecord(json.dumps(OLD, sort_keys=True).encode())])
    with pytest.raises(JsonMetadataRecordError, match="at offset 0 is JSON"):
        decode_entries(batch)
