"""MetadataRecordSerde: the controller's metadata records as Kafka's bytes, and back.

Kafka's classes: org.apache.kafka.metadata.MetadataRecordSerde and
AbstractApiMessageSerde (server-common). A record value in `__cluster_metadata`
(Raft's log, its snapshots, and the metadata log brokers fetch) is one frame:

    unsigned varint   frame version (1)
    unsigned varint   apiKey          (the record type: 3 is PartitionRecord)
    unsigned varint   version         (of that record's schema)
    the record, encoded by its schema (kafkalab/protocol/messages/metadata_records.py;
    every metadata record is flexible, so it ends with its tagged fields)

In memory a record is a dict with a "type" (kafkalab's names are Kafka's record names)
and snake_case fields; `serialize` turns it into the frame, `deserialize` gives the
same dict back (decode(encode(r)) == r for every record the controller writes:
tests/unit/test_metadata_record_serde.py). The versions written, the latest Kafka 4
writes that kafkalab's data fills honestly:

    RegisterBrokerRecord   v3   EndPoints (SecurityProtocol 0, PLAINTEXT: kafkalab
                                speaks no other), Features empty (kafkalab's brokers
                                register no feature levels), Rack null, LogDirs
                                absent (tagged: no directory ids)
    PartitionRecord        v0   v1+ require Directories (a directory id a replica),
    PartitionChangeRecord  v0   which kafkalab does not assign (no JBOD)
    TopicRecord, ConfigRecord, FenceBrokerRecord, UnfenceBrokerRecord,
    RemoveTopicRecord, ProducerIdsRecord, Begin/End/AbortTransactionRecord
                                v0 (their only version)
    MetadataSnapshotRecord v0   kafkalab's own (apiKey 10000), see metadata_records.py

Dicts and Kafka's fields differ where kafkalab's names came first:

    RegisterBrokerRecord   broker_id, incarnation_id (a UUID string), broker_epoch,
                           endpoints [[name, host, port], ...] (EndPoints), host and
                           port (the first endpoint's, not written: Kafka has none),
                           fenced (present only when False; Kafka's default is true)
    Fence/UnfenceBrokerRecord  broker_id, broker_epoch (Kafka: Id, Epoch)
    PartitionRecord        partition (PartitionId), topic_id (a UUID string), replicas,
                           isr, leader, leader_epoch, partition_epoch; adding_replicas
                           and removing_replicas only when not empty
    PartitionChangeRecord  partition, topic_id, and only what changes, as Kafka's
                           tagged fields: isr, leader (present: the leader epoch goes
                           up, even for the same leader), replicas, adding_replicas,
                           removing_replicas. Kafka's record names no epochs: replaying
                           it adds 1 to the partition epoch, and 1 to the leader epoch
                           when Leader is there (Kafka: PartitionRegistration.merge)
    TopicRecord, ConfigRecord, RemoveTopicRecord, ProducerIdsRecord,
    Begin/End/AbortTransactionRecord      Kafka's fields (name, reason: absent if null)
    MetadataSnapshotRecord end_offset

Fencing: Kafka's controller writes BrokerRegistrationChangeRecord (its Fenced field)
since metadata version 3.3; kafkalab writes the older FenceBrokerRecord and
UnfenceBrokerRecord, Kafka's records too, which carry the same facts.

Metadata logs written before this format held JSON values; they are not read:
`deserialize` raises JsonMetadataRecordError, which says to re-create the cluster
directory.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

from kafkalab.errors import Errors, KafkaErrorWithCode
from kafkalab.protocol.messages.metadata_records import (
    METADATA_RECORDS,
    MetadataRecordType,
)
from kafkalab.protocol.schema import Field, Struct
from kafkalab.protocol.types import ProtocolError, Reader, Writer
from kafkalab.records.record_batch import CorruptRecordError
from kafkalab.records.varint import read_unsigned_varint, write_unsigned_varint

#: Kafka's AbstractApiMessageSerde.DEFAULT_FRAME_VERSION.
FRAME_VERSION = 1
#: Kafka's PartitionChangeRecord Leader default: the leader did not change.
NO_LEADER_CHANGE = -2
#: SecurityProtocol.PLAINTEXT's id: every kafkalab listener's.
PLAINTEXT = 0
DEFAULT_LISTENER = "PLAINTEXT"


class MetadataParseError(KafkaErrorWithCode):
    """A metadata record's bytes are not a record this serde knows (Kafka:
    MetadataParseException): an unknown frame version, record type or version, or
    bytes that do not follow the record's schema."""

    code = Errors.CORRUPT_MESSAGE


class JsonMetadataRecordError(MetadataParseError):
    """A metadata record is JSON: the metadata log was written by a kafkalab from
    before metadata records were Kafka's binary format. Not read; the message says
    to re-create the cluster directory."""


_TYPES: dict[str, MetadataRecordType] = {t.name: t for t in METADATA_RECORDS.values()}

#: Every record type's name ("PartitionRecord", ...), kafkalab's marker too.
METADATA_RECORD_TYPES = frozenset(_TYPES)

#: The version kafkalab writes of each record type (see the module docstring).
WRITE_VERSIONS = {name: 0 for name in _TYPES} | {"RegisterBrokerRecord": 3}


def _uuid(value: str | uuid.UUID | None) -> uuid.UUID:
    if value is None:
        return uuid.UUID(int=0)
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


# -- our dicts <-> Kafka's fields, one pair a record type ------------------------------------


def _register_broker_body(r: dict) -> dict:
    endpoints = r.get("endpoints") or [[DEFAULT_LISTENER, r["host"], r["port"]]]
    return {
        "broker_id": r["broker_id"],
        "incarnation_id": _uuid(r["incarnation_id"]),
        "broker_epoch": r["broker_epoch"],
        "end_points": [
            {"name": n, "host": h, "port": p, "security_protocol": PLAINTEXT}
            for n, h, p in endpoints
        ],
        "features": [],
        "rack": None,
        "fenced": r.get("fenced", True),
    }


def _register_broker_record(body: dict) -> dict:
    endpoints = [[e["name"], e["host"], e["port"]] for e in body["end_points"]]
    host, port = (endpoints[0][1], endpoints[0][2]) if endpoints else ("", 0)
    r = {
        "type": "RegisterBrokerRecord",
        "broker_id": body["broker_id"],
        "host": host,
        "port": port,
        "incarnation_id": str(body["incarnation_id"]),
        "broker_epoch": body["broker_epoch"],
        "endpoints": endpoints,
    }
    if not body["fenced"]:
        r["fenced"] = False
    return r


def _broker_body(r: dict) -> dict:
    return {"id": r["broker_id"], "epoch": r["broker_epoch"]}


def _broker_record(kind: str) -> Callable[[dict], dict]:
    def record(body: dict) -> dict:
        return {"type": kind, "broker_id": body["id"], "broker_epoch": body["epoch"]}

    return record


def _topic_body(r: dict) -> dict:
    return {"name": r["name"], "topic_id": _uuid(r["topic_id"])}


def _topic_record(body: dict) -> dict:
    return {"type": "TopicRecord", "name": body["name"], "topic_id": str(body["topic_id"])}


def _config_body(r: dict) -> dict:
    return {k: r[k] for k in ("resource_type", "resource_name", "name", "value")}


def _config_record(body: dict) -> dict:
    return {"type": "ConfigRecord", **_config_body(body)}


def _partition_body(r: dict) -> dict:
    return {
        "partition_id": r["partition"],
        "topic_id": _uuid(r["topic_id"]),
        "replicas": r["replicas"],
        "isr": r["isr"],
        "removing_replicas": r.get("removing_replicas", []),
        "adding_replicas": r.get("adding_replicas", []),
        "leader": r["leader"],
        "leader_epoch": r["leader_epoch"],
        "partition_epoch": r["partition_epoch"],
    }


def _partition_record(body: dict) -> dict:
    r = {
        "type": "PartitionRecord",
        "topic_id": str(body["topic_id"]),
        "partition": body["partition_id"],
        "replicas": body["replicas"],
        "isr": body["isr"],
        "leader": body["leader"],
        "leader_epoch": body["leader_epoch"],
        "partition_epoch": body["partition_epoch"],
    }
    for key in ("adding_replicas", "removing_replicas"):
        if body[key]:
            r[key] = body[key]
    return r


#: PartitionChangeRecord's optional fields and their "did not change" defaults.
_CHANGES = {
    "isr": None,
    "leader": NO_LEADER_CHANGE,
    "replicas": None,
    "adding_replicas": None,
    "removing_replicas": None,
}


def _partition_change_body(r: dict) -> dict:
    body = {"partition_id": r["partition"], "topic_id": _uuid(r["topic_id"])}
    for key, default in _CHANGES.items():
        body[key] = r.get(key, default)
    return body


def _partition_change_record(body: dict) -> dict:
    r = {
        "type": "PartitionChangeRecord",
        "topic_id": str(body["topic_id"]),
        "partition": body["partition_id"],
    }
    for key, default in _CHANGES.items():
        if body[key] != default:
            r[key] = body[key]
    return r


def _remove_topic_body(r: dict) -> dict:
    return {"topic_id": _uuid(r["topic_id"])}


def _remove_topic_record(body: dict) -> dict:
    return {"type": "RemoveTopicRecord", "topic_id": str(body["topic_id"])}


def _producer_ids_body(r: dict) -> dict:
    return {k: r[k] for k in ("broker_id", "broker_epoch", "next_producer_id")}


def _producer_ids_record(body: dict) -> dict:
    return {"type": "ProducerIdsRecord", **_producer_ids_body(body)}


def _without_none(r: dict) -> dict:
    return {k: v for k, v in r.items() if v is not None}


def _snapshot_body(r: dict) -> dict:
    return {"end_offset": r["end_offset"]}


def _snapshot_record(body: dict) -> dict:
    return {"type": "MetadataSnapshotRecord", "end_offset": body["end_offset"]}


_CONVERTERS: dict[str, tuple[Callable[[dict], dict], Callable[[dict], dict], frozenset]] = {
    "RegisterBrokerRecord": (
        _register_broker_body,
        _register_broker_record,
        frozenset(
            {"broker_id", "host", "port", "incarnation_id", "broker_epoch", "endpoints", "fenced"}
        ),
    ),
    "FenceBrokerRecord": (
        _broker_body,
        _broker_record("FenceBrokerRecord"),
        frozenset({"broker_id", "broker_epoch"}),
    ),
    "UnfenceBrokerRecord": (
        _broker_body,
        _broker_record("UnfenceBrokerRecord"),
        frozenset({"broker_id", "broker_epoch"}),
    ),
    "TopicRecord": (_topic_body, _topic_record, frozenset({"name", "topic_id"})),
    "ConfigRecord": (
        _config_body,
        _config_record,
        frozenset({"resource_type", "resource_name", "name", "value"}),
    ),
    "PartitionRecord": (
        _partition_body,
        _partition_record,
        frozenset(
            {
                "topic_id",
                "partition",
                "replicas",
                "isr",
                "leader",
                "leader_epoch",
                "partition_epoch",
                "adding_replicas",
                "removing_replicas",
            }
        ),
    ),
    "PartitionChangeRecord": (
        _partition_change_body,
        _partition_change_record,
        frozenset({"topic_id", "partition", *_CHANGES}),
    ),
    "RemoveTopicRecord": (_remove_topic_body, _remove_topic_record, frozenset({"topic_id"})),
    "ProducerIdsRecord": (
        _producer_ids_body,
        _producer_ids_record,
        frozenset({"broker_id", "broker_epoch", "next_producer_id"}),
    ),
    "MetadataSnapshotRecord": (_snapshot_body, _snapshot_record, frozenset({"end_offset"})),
    "BeginTransactionRecord": (
        lambda r: {"name": r.get("name")},
        lambda body: _without_none({"type": "BeginTransactionRecord", "name": body["name"]}),
        frozenset({"name"}),
    ),
    "EndTransactionRecord": (
        lambda r: {},
        lambda body: {"type": "EndTransactionRecord"},
        frozenset(),
    ),
    "AbortTransactionRecord": (
        lambda r: {"reason": r.get("reason")},
        lambda body: _without_none({"type": "AbortTransactionRecord", "reason": body["reason"]}),
        frozenset({"reason"}),
    ),
}


# -- the frame --------------------------------------------------------------------------------


def _where(offset: int | None) -> str:
    return "" if offset is None else f" at offset {offset}"


class MetadataRecordSerde:
    """Kafka's MetadataRecordSerde: `serialize` a record dict to a frame,
    `deserialize` a frame to the dict, `read` it as (record type, version, Kafka's
    fields) (Kafka: ApiMessageAndVersion), `to_json` it as kafka-dump-log's
    `--cluster-metadata-decoder` prints it."""

    def write(self, api_key: int, version: int, body: dict) -> bytes:
        """A frame of Kafka's fields `body` (snake_case) of record type `api_key`."""
        kind = METADATA_RECORDS[api_key]
        out = bytearray()
        write_unsigned_varint(out, FRAME_VERSION)
        write_unsigned_varint(out, api_key)
        write_unsigned_varint(out, version)
        w = Writer()
        kind.message.encode(body, version, w)
        return bytes(out) + bytes(w.buf)

    def serialize(self, record: dict) -> bytes:
        """The frame of a record dict (at WRITE_VERSIONS' version of its type)."""
        name = record.get("type")
        if name not in _CONVERTERS:
            raise ValueError(f"not a metadata record type: {name!r}")
        to_body, _, keys = _CONVERTERS[name]
        extra = set(record) - keys - {"type"}
        if extra:
            raise ValueError(f"{name} has no field(s) {sorted(extra)} in Kafka's record")
        return self.write(_TYPES[name].api_key, WRITE_VERSIONS[name], to_body(record))

    def read(
        self, value: bytes | bytearray | memoryview, offset: int | None = None
    ) -> tuple[MetadataRecordType, int, dict]:
        """(record type, version, Kafka's fields in snake_case) of a frame."""
        data = bytes(value)
        if data[:1] == b"{":
            raise JsonMetadataRecordError(
                f"the metadata record{_where(offset)} is JSON: this metadata log was "
                "written by a kafkalab from before metadata records were Kafka's binary "
                "format, which this one does not read. Re-create the cluster directory "
                "(kafkalab cluster down, delete the directory, kafkalab cluster up)"
            )
        try:
            frame, pos = read_unsigned_varint(data, 0)
            if frame != FRAME_VERSION:
                raise MetadataParseError(
                    f"metadata record{_where(offset)}: unknown frame version {frame} "
                    f"(only frame version {FRAME_VERSION} is supported)"
                )
            api_key, pos = read_unsigned_varint(data, pos)
            version, pos = read_unsigned_varint(data, pos)
        except CorruptRecordError as e:
            raise MetadataParseError(f"metadata record{_where(offset)}: {e.message}") from None
        kind = METADATA_RECORDS.get(api_key)
        if kind is None:
            raise MetadataParseError(f"metadata record{_where(offset)}: unknown type {api_key}")
        if not kind.lowest_version <= version <= kind.highest_version:
            raise MetadataParseError(
                f"{kind.name}{_where(offset)}: version {version} is not one of "
                f"{kind.lowest_version}-{kind.highest_version}"
            )
        r = Reader(data, pos)
        try:
            body = kind.message.decode(r, version)
        except ProtocolError as e:
            raise MetadataParseError(
                f"failed to deserialize {kind.name}{_where(offset)}: {e}"
            ) from None
        if r.remaining():
            raise MetadataParseError(
                f"found {r.remaining()} byte(s) of garbage after {kind.name}{_where(offset)}"
            )
        return kind, version, body

    def deserialize(
        self, value: bytes | bytearray | memoryview | None, offset: int | None = None
    ) -> dict:
        """The record dict of a frame (MetadataParseError if it is not one)."""
        if value is None:
            raise MetadataParseError(f"metadata record{_where(offset)} has no value")
        kind, _version, body = self.read(value, offset)
        return _CONVERTERS[kind.name][1](body)

    def to_json(self, value: bytes | bytearray | memoryview) -> str:
        """`{"type":"PARTITION_RECORD","version":0,"data":{...}}`: the frame as Kafka's
        DumpLogSegments prints it (MetadataJsonConverters: camelCase names, UUIDs as
        Kafka's base64 Uuid strings, tagged fields only when not their default)."""
        kind, version, body = self.read(value)
        data = _json_struct(kind.message.fields, body, version)
        out = {"type": kind.type_name, "version": version, "data": data}
        return json.dumps(out, separators=(",", ":"))


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _json_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return kafka_uuid_string(value)
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _json_struct(fields: list[Field], body: dict, version: int) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f._versions:
            continue
        value = body.get(f.name)
        if f.tag is not None and value == f.default_value():
            continue  # Kafka's JSON converters leave a tagged field at its default out
        if isinstance(f.type, list) and value is not None:
            out[_camel(f.name)] = [_json_struct(f.type, item, version) for item in value]
        elif isinstance(f.type, Struct) and value is not None:
            out[_camel(f.name)] = _json_struct(f.type.fields, value, version)
        else:
            out[_camel(f.name)] = _json_value(value)
    return out


#: The one serde everyone uses (it holds no state).
METADATA_RECORD_SERDE = MetadataRecordSerde()
serialize = METADATA_RECORD_SERDE.serialize
deserialize = METADATA_RECORD_SERDE.deserialize


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One record as `kafkalab dump-log --cluster-metadata-decoder` prints it: Kafka's
    `payload: {...}` (metadata records have no key), or Kafka's "Error at ..." line."""
    try:
        return f"payload: {METADATA_RECORD_SERDE.to_json(value or b'')}"
    except MetadataParseError as e:
        return f"payload: {e.message}"
