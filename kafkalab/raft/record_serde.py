"""RecordSerde: a Raft log's entries as Kafka record batches (Kafka: RecordSerde,
MetadataRecordSerde, ControlRecordUtils).

How the metadata log's entries look on the wire (a Fetch response's Records) and on
disk (`__cluster_metadata-0`): RecordBatch v2, one batch per run of entries of one
epoch, the epoch in the batch's PartitionLeaderEpoch, no producer id. A
LeaderChangeMessage is a control batch of its own (control type 2, LEADER_CHANGE),
its value Kafka's LeaderChangeMessage schema (version 0: Version, LeaderId,
Voters, GrantingVoters, flexible), as Kafka writes it. A metadata record (a dict
whose "type" is a metadata record's name: everything the QuorumController writes) is
Kafka's ApiMessageAndVersion frame (frame version 1, apiKey, version, the record:
kafkalab/controller/metadata_record_serde.py), as Kafka's KafkaRaftClient is given
MetadataRecordSerde. Kafka's Raft is generic over its RecordSerde; so is this one's
log, which the Raft tests and the by-hand labs fill with plain values (strings,
numbers, dicts of no metadata type): those are JSON, their test serde (a frame
starts with byte 1, JSON never does). A JSON value that is a metadata record (a log
written before metadata records were Kafka's binary format) raises
JsonMetadataRecordError, which says to re-create the cluster directory.

    encode_entries(entries)  -> bytes of record batches
    decode_entries(buf)      -> tuple[LogEntry, ...]; a trailing partial batch is
                                skipped, as a fetcher does
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence

from kafkalab.controller.metadata_record_serde import (
    FRAME_VERSION,
    METADATA_RECORD_TYPES,
    JsonMetadataRecordError,
    deserialize,
    serialize,
)
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import INT16, INT32
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.raft_log import LogEntry
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.control_record import ControlRecordType
from kafkalab.records.record_batch import CorruptRecordError

_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
LEADER_CHANGE_CURRENT_VERSION = 0

LEADER_CHANGE_MESSAGE = Message(
    -1,
    "LeaderChangeMessage",
    [
        F("version", INT16),
        F("leader_id", INT32),
        F("voters", [F("voter_id", INT32)]),
        F("granting_voters", [F("voter_id", INT32)]),
    ],
    flexible_from=0,
)


def encode_leader_change(message: LeaderChangeMessage) -> bytes:
    body = {
        "version": LEADER_CHANGE_CURRENT_VERSION,
        "leader_id": message.leader_id,
        "voters": [{"voter_id": v} for v in message.voters],
        "granting_voters": [{"voter_id": v} for v in message.granting_voters],
    }
    return bytes(LEADER_CHANGE_MESSAGE.encode(body, LEADER_CHANGE_CURRENT_VERSION).buf)


def decode_leader_change(value: bytes) -> LeaderChangeMessage:
    body = LEADER_CHANGE_MESSAGE.decode(value, LEADER_CHANGE_CURRENT_VERSION)
    return LeaderChangeMessage(
        body["leader_id"],
        tuple(v["voter_id"] for v in body["voters"]),
        tuple(v["voter_id"] for v in body["granting_voters"]),
    )


def encode_record(record: object) -> bytes:
    """A metadata record as Kafka's frame; a plain value as JSON (see above)."""
    if isinstance(record, dict) and record.get("type") in METADATA_RECORD_TYPES:
        return serialize(record)
    return json.dumps(record, sort_keys=True).encode()


def decode_record(value: bytes | None, offset: int) -> object:
    """The record of a value encode_record wrote."""
    if value is None:
        return None
    if value[:1] == bytes([FRAME_VERSION]):
        return deserialize(value, offset)
    record = json.loads(value)
    if isinstance(record, dict) and record.get("type") in METADATA_RECORD_TYPES:
        deserialize(value, offset)  # raises JsonMetadataRecordError, which says what to do
        raise JsonMetadataRecordError(f"a JSON metadata record at offset {offset}")
    return record


def _runs(entries: Sequence[LogEntry]) -> Iterable[list[LogEntry]]:
    """Consecutive entries of one epoch and one kind (control or data)."""
    run: list[LogEntry] = []
    for entry in entries:
        control = isinstance(entry.record, LeaderChangeMessage)
        if run and (
            control
            or isinstance(run[-1].record, LeaderChangeMessage)
            or run[-1].epoch != entry.epoch
        ):
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


def encode_batch(run: Sequence[LogEntry]) -> bytes:
    """One record batch of entries of one epoch (a LeaderChangeMessage alone)."""
    first = run[0]
    if isinstance(first.record, LeaderChangeMessage):
        key = _CONTROL_KEY.pack(0, int(ControlRecordType.LEADER_CHANGE))
        record = SimpleRecord(encode_leader_change(first.record), key=key)
        return build_batch(
            [record], base_offset=first.offset, partition_leader_epoch=first.epoch, is_control=True
        )
    records = [SimpleRecord(encode_record(e.record)) for e in run]
    return build_batch(records, base_offset=first.offset, partition_leader_epoch=first.epoch)


def encode_entries(entries: Sequence[LogEntry]) -> bytes:
    """The entries as back-to-back record batches."""
    return b"".join(encode_batch(run) for run in _runs(entries))


def decode_entries(buf: bytes | bytearray | memoryview) -> tuple[LogEntry, ...]:
    """The entries of back-to-back record batches (CRC-checked)."""
    out: list[LogEntry] = []
    for batch in iter_batches(buf):
        epoch = batch.header.partition_leader_epoch
        for record in batch.records:
            if batch.header.is_control_batch:
                if record.key is None or len(record.key) < _CONTROL_KEY.size:
                    raise CorruptRecordError("a control record's key must be 4 bytes")
                _version, kind = _CONTROL_KEY.unpack_from(record.key)
                if kind != ControlRecordType.LEADER_CHANGE or record.value is None:
                    raise CorruptRecordError(f"control record type {kind} in the metadata log")
                out.append(LogEntry(record.offset, epoch, decode_leader_change(record.value)))
            else:
                out.append(
                    LogEntry(record.offset, epoch, decode_record(record.value, record.offset))
                )
    return tuple(out)
