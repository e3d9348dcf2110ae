"""RecordSerde: a Raft log's entries as Kafka record batches (Kafka: RecordSerde,
MetadataRecordSerde, ControlRecordUtils).

How the metadata log's entries look on the wire (a Fetch response's Records) and on
disk (`__cluster_metadata-0`): RecordBatch v2, one batch per run of entries of one
epoch, the epoch in the batch's PartitionLeaderEpoch, no producer id. A
LeaderChangeMessage is a control batch of its own (control type 2, LEADER_CHANGE),
its value Kafka's LeaderChangeMessage schema (version 0: Version, LeaderId,
Voters, GrantingVoters, flexible), as Kafka writes it. Any other record is JSON (the
QuorumController's metadata records are JSON dicts in this step; Kafka's
ApiMessageAndVersion binary records are a later step of issue 25).

    encode_entries(entries)  -> bytes of record batches
    decode_entries(buf)      -> tuple[LogEntry, ...]; a trailing partial batch is
                                skipped, as a fetcher does
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence

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
    records = [SimpleRecord(json.dumps(e.record, sort_keys=True).encode()) for e in run]
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
                value = json.loads(record.value) if record.value is not None else None
                out.append(LogEntry(record.offset, epoch, value))
    return tuple(out)
