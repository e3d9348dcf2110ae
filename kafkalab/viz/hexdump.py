"""Hex dumps, and a field-by-field annotation of a RecordBatch v2 header."""

from __future__ import annotations

import pandas as pd

from kafkalab.records import record_batch as rb

# (field, offset, width, what it means) in header order; widths sum to 61.
_HEADER_FIELDS = (
    ("baseOffset", rb.BASE_OFFSET_OFFSET, 8, "offset of the first record; the leader rewrites it"),
    ("batchLength", rb.LENGTH_OFFSET, 4, "bytes after this field (batch size - 12)"),
    ("partitionLeaderEpoch", rb.PARTITION_LEADER_EPOCH_OFFSET, 4, "leader epoch that wrote it"),
    ("magic", rb.MAGIC_OFFSET, 1, "format version, 2"),
    ("crc", rb.CRC_OFFSET, 4, "CRC-32C of attributes .. end"),
    ("attributes", rb.ATTRIBUTES_OFFSET, 2, "codec, timestamp type, transactional, control"),
    ("lastOffsetDelta", rb.LAST_OFFSET_DELTA_OFFSET, 4, "last offset - base offset"),
    ("baseTimestamp", rb.BASE_TIMESTAMP_OFFSET, 8, "timestamp of the first record (ms)"),
    ("maxTimestamp", rb.MAX_TIMESTAMP_OFFSET, 8, "largest timestamp in the batch (ms)"),
    ("producerId", rb.PRODUCER_ID_OFFSET, 8, "idempotent/transactional producer, -1 if none"),
    ("producerEpoch", rb.PRODUCER_EPOCH_OFFSET, 2, "fences zombie producers"),
    ("baseSequence", rb.BASE_SEQUENCE_OFFSET, 4, "sequence of the first record, -1 if none"),
    ("recordsCount", rb.RECORDS_COUNT_OFFSET, 4, "number of records that follow"),
)


def hexdump(data: bytes | bytearray | memoryview, start: int = 0, width: int = 16) -> str:
    """Classic `offset  hex  |ascii|` dump of `data`, offsets counted from `start`."""
    data = bytes(data)
    lines = []
    for i in range(0, len(data), width):
        chunk = data[i : i + width]
        hex_part = " ".join(f"{b:02x}" for b in chunk).ljust(width * 3 - 1)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start + i:08x}  {hex_part}  |{text}|")
    return "\n".join(lines)


def annotated_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> pd.DataFrame:
    """One row per header field of the batch at `pos`: byte range, raw bytes, value.

    The values come from kafkalab.records.record_batch.read_header, and the
    table also says whether the CRC matches the bytes.
    """
    header = rb.read_header(buf, pos)
    raw = bytes(memoryview(buf)[pos : pos + rb.RECORD_BATCH_OVERHEAD])
    values = {
        "baseOffset": header.base_offset,
        "batchLength": header.batch_length,
        "partitionLeaderEpoch": header.partition_leader_epoch,
        "magic": header.magic,
        "crc": f"{header.crc:#010x} ({'valid' if rb.is_valid(buf, pos) else 'MISMATCH'})",
        "attributes": _describe_attributes(header),
        "lastOffsetDelta": header.last_offset_delta,
        "baseTimestamp": header.base_timestamp,
        "maxTimestamp": header.max_timestamp,
        "producerId": header.producer_id,
        "producerEpoch": header.producer_epoch,
        "baseSequence": header.base_sequence,
        "recordsCount": header.records_count,
    }
    rows = [
        {
            "bytes": f"{offset}..{offset + width - 1}",
            "field": name,
            "hex": raw[offset : offset + width].hex(" "),
            "value": values[name],
            "meaning": meaning,
        }
        for name, offset, width, meaning in _HEADER_FIELDS
    ]
    return pd.DataFrame(rows).set_index("bytes")


def _describe_attributes(header: rb.BatchHeader) -> str:
    parts = [header.compression_type.name.lower(), header.timestamp_type.name]
    if header.is_transactional:
        parts.append("transactional")
    if header.is_control_batch:
        parts.append("control")
    if header.has_delete_horizon:
        parts.append("delete-horizon")
    return f"{header.attributes} = " + ", ".join(parts)
