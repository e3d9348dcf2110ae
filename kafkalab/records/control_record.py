"""Control records: the COMMIT and ABORT markers that end a transaction in a partition.

Kafka's classes: org.apache.kafka.common.record.ControlRecordType and
EndTransactionMarker. A marker is a batch of its own with the transactional
and control attribute bits set, the producer's id and epoch, no sequence, and
exactly one record:

    key   = version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0), coordinatorEpoch int32

A read_committed consumer never returns control records; it uses them to know
where a transaction ended and whether to drop its records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from kafkalab.records.compression import decompress
from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.records.record import Record, decode_record
from kafkalab.records.record_batch import RECORD_BATCH_OVERHEAD, BatchHeader, CorruptRecordError

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0


class ControlRecordType(IntEnum):
    """Kafka's ControlRecordType (the KRaft types 2-6 are not used by kafkalab)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    type: ControlRecordType
    coordinator_epoch: int


def build_end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: ControlRecordType,
    coordinator_epoch: int,
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The batch a transaction coordinator writes to end a transaction in a partition."""
    if marker not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"an end-transaction marker is COMMIT or ABORT, not {marker!r}")
    key = _KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, int(marker))
    value = _VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch(
        [SimpleRecord(value, key=key, timestamp=timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def control_record_type(record: Record) -> ControlRecordType:
    if record.key is None or len(record.key) < _KEY.size:
        raise CorruptRecordError("a control record's key must be at least 4 bytes")
    version, type_id = _KEY.unpack_from(record.key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} is invalid")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {type_id}") from None


def parse_control_record(record: Record) -> EndTransactionMarker:
    """The COMMIT/ABORT marker carried by a control record."""
    kind = control_record_type(record)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control record of type {kind.name} is not a transaction marker")
    if record.value is None or len(record.value) < _VALUE.size:
        raise CorruptRecordError("an end-transaction marker's value must be at least 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(record.value)
    if version < 0:
        raise CorruptRecordError(f"end-transaction marker version {version} is invalid")
    return EndTransactionMarker(kind, coordinator_epoch)


def read_end_txn_marker(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker of the control batch at `pos` (its first record),
    or None for an empty control batch (one the LogCleaner emptied) or a control
    record that is not a transaction marker. Decodes one record only: the hot
    path reads markers without decoding anything else."""
    if not header.is_control_batch or header.records_count == 0:
        return None
    end = pos + header.size_in_bytes
    body = decompress(header.compression_type, memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : end])
    record, _ = decode_record(body, 0, header.base_offset, header.base_timestamp)
    if control_record_type(record) not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    return parse_control_record(record)
