"""Snapshots of the metadata log (KIP-630; Kafka: org.apache.kafka.snapshot).

A snapshot is the state machine's state after every record below its end offset,
written as the state machine's own records, so that a voter (or a broker) rebuilds
the state from it and then replays only the entries after it. Its id is a
SnapshotId (Kafka: OffsetAndEpoch): the end offset, the first offset *not* in it,
and the epoch of the record before that offset.

Its bytes are record batches, as Kafka's RecordsSnapshotWriter writes them: a
control batch holding a SnapshotHeaderRecord (control type 3: Version,
LastContainedLogTimestamp) at offset 0, the records in batches of the snapshot's
epoch (encoded by record_serde, as the log's entries are), and a control batch
holding a SnapshotFooterRecord (control type 4: Version) last. On disk it is the file
`<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` in the partition directory,
written as `.checkpoint.part` and renamed once fsynced (Kafka:
Snapshots.filenameFromSnapshotId, FileRawSnapshotWriter.freeze).

    encode_snapshot(id, records, ts)   -> bytes
    decode_snapshot(buf)               -> Snapshot(records, last_contained_log_timestamp);
                                          CorruptSnapshotError if the header or
                                          footer is missing
    snapshot_filename(id)              `%020d-%010d.checkpoint`
    parse_snapshot_filename(name)      the id of a `.checkpoint` (or `.part`) name
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import INT16, INT64
from kafkalab.raft.errors import CorruptSnapshotError
from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch
from kafkalab.raft.record_serde import decode_entries, encode_entries
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.control_record import ControlRecordType
from kafkalab.records.memory_records import decode_batch
from kafkalab.records.record_batch import CorruptRecordError, iter_headers

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".part"  # `.checkpoint.part` while written
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint(\.part)?$")
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
SNAPSHOT_HEADER_CURRENT_VERSION = 0
SNAPSHOT_FOOTER_CURRENT_VERSION = 0

SNAPSHOT_HEADER_RECORD = Message(
    -1,
    "SnapshotHeaderRecord",
    [F("version", INT16), F("last_contained_log_timestamp", INT64)],
    flexible_from=0,
)
SNAPSHOT_FOOTER_RECORD = Message(-1, "SnapshotFooterRecord", [F("version", INT16)], flexible_from=0)


@dataclass(frozen=True)
class Snapshot:
    """A snapshot's content: the records between its header and its footer."""

    records: tuple[object, ...]
    last_contained_log_timestamp: int = -1


def snapshot_filename(snapshot_id: OffsetAndEpoch) -> str:
    """Kafka: Snapshots.filenameFromSnapshotId + SUFFIX."""
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_filename(name: str) -> tuple[OffsetAndEpoch, bool] | None:
    """(id, partial) of a snapshot file name, None if it is not one."""
    m = _NAME.match(name)
    if m is None:
        return None
    return OffsetAndEpoch(int(m.group(1)), int(m.group(2))), m.group(3) is not None


def _control_batch(
    kind: ControlRecordType, value: bytes, offset: int, epoch: int, ts: int
) -> bytes:
    record = SimpleRecord(value, key=_CONTROL_KEY.pack(0, int(kind)), timestamp=ts)
    return build_batch([record], base_offset=offset, partition_leader_epoch=epoch, is_control=True)


def encode_snapshot(
    snapshot_id: OffsetAndEpoch,
    records: Sequence[object],
    last_contained_log_timestamp: int = -1,
    timestamp_ms: int = 0,
) -> bytes:
    """The snapshot's bytes: header, records, footer (offsets from 0, the snapshot's
    epoch in every batch)."""
    epoch = snapshot_id.epoch
    header = SNAPSHOT_HEADER_RECORD.encode(
        {
            "version": SNAPSHOT_HEADER_CURRENT_VERSION,
            "last_contained_log_timestamp": last_contained_log_timestamp,
        },
        0,
    )
    out = [
        _control_batch(ControlRecordType.SNAPSHOT_HEADER, bytes(header.buf), 0, epoch, timestamp_ms)
    ]
    entries = [LogEntry(1 + i, epoch, r) for i, r in enumerate(records)]
    if entries:
        out.append(encode_entries(entries))
    footer = SNAPSHOT_FOOTER_RECORD.encode({"version": SNAPSHOT_FOOTER_CURRENT_VERSION}, 0)
    out.append(
        _control_batch(
            ControlRecordType.SNAPSHOT_FOOTER,
            bytes(footer.buf),
            1 + len(entries),
            epoch,
            timestamp_ms,
        )
    )
    return b"".join(out)


def _control_type(batch_bytes: bytes) -> tuple[ControlRecordType, bytes]:
    batch = decode_batch(batch_bytes)
    if len(batch.records) != 1:
        raise CorruptSnapshotError("a snapshot's control batch holds one record")
    record = batch.records[0]
    if record.key is None or len(record.key) < _CONTROL_KEY.size or record.value is None:
        raise CorruptSnapshotError("a control record needs a 4-byte key and a value")
    _version, kind = _CONTROL_KEY.unpack_from(record.key)
    try:
        return ControlRecordType(kind), record.value
    except ValueError as e:
        raise CorruptSnapshotError(f"control record type {kind} in a snapshot") from e


def decode_snapshot(buf: bytes | bytearray | memoryview) -> Snapshot:
    """The records of a whole snapshot, checked: a SnapshotHeader first, a
    SnapshotFooter last, every batch whole and CRC-valid."""
    buf = bytes(buf)
    try:
        batches = list(iter_headers(buf))
    except CorruptRecordError as e:
        raise CorruptSnapshotError(f"not record batches: {e}") from e
    end = batches[-1][0] + batches[-1][1].size_in_bytes if batches else 0
    if len(batches) < 2 or end != len(buf):
        raise CorruptSnapshotError(
            f"a snapshot is whole record batches from a header to a footer ({len(buf)} bytes, "
            f"{len(batches)} whole batches ending at {end})"
        )
    records: list[object] = []
    timestamp = -1
    try:
        for i, (pos, header) in enumerate(batches):
            data = buf[pos : pos + header.size_in_bytes]
            if header.is_control_batch:
                kind, value = _control_type(data)
                if i == 0 and kind is ControlRecordType.SNAPSHOT_HEADER:
                    body = SNAPSHOT_HEADER_RECORD.decode(value, 0)
                    timestamp = body["last_contained_log_timestamp"]
                elif i == len(batches) - 1 and kind is ControlRecordType.SNAPSHOT_FOOTER:
                    SNAPSHOT_FOOTER_RECORD.decode(value, 0)
                else:
                    raise CorruptSnapshotError(f"control record {kind.name} at batch {i}")
            elif i == 0 or i == len(batches) - 1:
                raise CorruptSnapshotError("a snapshot opens with a header and ends with a footer")
            else:
                records.extend(e.record for e in decode_entries(data))
    except CorruptRecordError as e:
        raise CorruptSnapshotError(str(e)) from e
    return Snapshot(tuple(records), timestamp)


__all__ = [
    "PARTIAL_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "Snapshot",
    "decode_snapshot",
    "encode_snapshot",
    "parse_snapshot_filename",
    "snapshot_filename",
]
