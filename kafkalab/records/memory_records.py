"""Building and decoding whole RecordBatch v2 batches in memory.

Kafka's classes: org.apache.kafka.common.record.MemoryRecordsBuilder (what a
producer uses to fill a batch) and MemoryRecords / DefaultRecordBatch (what a
consumer iterates). The broker's hot path does not come here: it works on the
61-byte header (kafkalab.records.record_batch) and walks the records without
decoding them (kafkalab.storage.log_validator); only a batch the broker
recompresses (compression.type) is decoded and built here. Producers,
consumers, tools and labs do.

    >>> data = build_batch([SimpleRecord(b"hello", key=b"k", timestamp=1000)])
    >>> [r.value for r in decode_batch(data).records]
    [b'hello']
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from kafkalab.records.compression import compress, decompress
from kafkalab.records.record import Header, Record, decode_record, encode_record
from kafkalab.records.record_batch import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    TimestampType,
    ensure_valid,
    iter_headers,
    read_header,
    write_header,
)


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """What a producer hands over: a value, maybe a key, headers and a timestamp
    (None: now, in ms). Kafka: SimpleRecord / ProducerRecord."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded batch: its header and its records with absolute offsets."""

    header: BatchHeader
    records: list[Record]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes


def _as_simple(record: SimpleRecord | bytes | bytearray | None) -> SimpleRecord:
    if isinstance(record, SimpleRecord):
        return record
    if record is None or isinstance(record, (bytes, bytearray, memoryview)):
        return SimpleRecord(None if record is None else bytes(record))
    raise TypeError(f"expected SimpleRecord or bytes, got {type(record).__name__}")


def _as_headers(headers) -> tuple[Header, ...]:
    return tuple(h if isinstance(h, Header) else Header(h[0], h[1]) for h in headers)


def build_batch(
    records: Iterable[SimpleRecord | bytes],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
) -> bytes:
    """Encode records as one RecordBatch v2, offsets base_offset, base_offset+1, ...

    As Java's MemoryRecordsBuilder: baseTimestamp is the first record's
    timestamp (unless given), maxTimestamp the largest, lastOffsetDelta n-1,
    and the CRC-32C covers attributes to the end.
    """
    simple = [_as_simple(r) for r in records]
    if not simple:
        raise ValueError("a batch needs at least one record")
    if is_transactional and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id (InitProducerId)")
    now = None
    timestamps = []
    for r in simple:
        if r.timestamp is None:
            now = now if now is not None else int(time.time() * 1000)
            timestamps.append(now)
        else:
            timestamps.append(r.timestamp)
    first_ts = timestamps[0] if base_timestamp is None else base_timestamp
    body = bytearray()
    for delta, (r, ts) in enumerate(zip(simple, timestamps, strict=True)):
        body += encode_record(delta, ts - first_ts, r.key, r.value, _as_headers(r.headers))
    payload = compress(compression, body, compression_level)
    attributes = int(compression) & 0x07
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    buf[RECORD_BATCH_OVERHEAD:] = payload
    write_header(
        buf,
        0,
        len(buf),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(simple) - 1,
        base_timestamp=first_ts,
        max_timestamp=max(timestamps),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(simple),
    )
    return bytes(buf)


def build_retained_batch(
    header: BatchHeader,
    records: Sequence[Record],
    *,
    delete_horizon_ms: int = NO_TIMESTAMP,
    raw_records: Sequence[bytes | memoryview] | None = None,
) -> bytes:
    """The batch `header` describes, holding only `records` (a subset of its own,
    in order): what Kafka's cleaner writes (MemoryRecords.filterTo).

    Kept from the original: base offset and lastOffsetDelta (so the last offset
    and the producer's last sequence survive), producer id, epoch and base
    sequence, partition leader epoch, the transactional and control flags, the
    timestamp type and the compression codec. Records keep their offsets,
    timestamps, keys, values and headers. baseTimestamp is the first record's
    timestamp, or `delete_horizon_ms` when given (KIP-534: the batch then has the
    delete-horizon attribute bit and its tombstones may go after that time).
    With no records, an empty batch (header only, uncompressed), as Kafka keeps
    to preserve a producer's last sequence or the log's last offset
    (DefaultRecordBatch.writeEmptyHeader). `raw_records`, the records' original
    bytes, are reused when the base timestamp is unchanged.
    """
    attributes = header.attributes & ~DELETE_HORIZON_FLAG_MASK
    if not records:
        attributes &= ~0x07  # no records: no compression
        base_ts, max_ts, payload = NO_TIMESTAMP, header.max_timestamp, b""
    else:
        append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        if delete_horizon_ms >= 0:
            base_ts = delete_horizon_ms
            attributes |= DELETE_HORIZON_FLAG_MASK
        else:
            base_ts = records[0].timestamp
        if append_time:
            max_ts = header.max_timestamp
        else:
            max_ts = max(r.timestamp for r in records)
        body = bytearray()
        if raw_records is not None and base_ts == header.base_timestamp:
            for raw in raw_records:
                body += raw
        else:
            base = header.base_offset
            for r in records:
                body += encode_record(
                    r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers
                )
        payload = compress(header.compression_type, body)
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    buf[RECORD_BATCH_OVERHEAD:] = payload
    write_header(
        buf,
        0,
        len(buf),
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(records),
    )
    return bytes(buf)


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> RecordBatch:
    """Decode the whole batch at `pos`, decompressing its records.

    Raises CorruptRecordError on a bad CRC (unless verify_crc=False), a record
    count that does not match, offset deltas out of order, or trailing bytes.
    """
    header = ensure_valid(buf, pos) if verify_crc else read_header(buf, pos)
    end = pos + header.size_in_bytes
    if len(buf) < end:
        raise CorruptRecordError(f"batch at position {pos} is cut short")
    body = decompress(header.compression_type, memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : end])
    records = []
    at = 0
    # When timestamps are LogAppendTime, every record's timestamp is the batch's max.
    append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    for _ in range(header.records_count):
        record, at = decode_record(body, at, header.base_offset, header.base_timestamp)
        if append_time:
            record = Record(
                record.offset, header.max_timestamp, record.key, record.value, record.headers
            )
        if record.offset > header.last_offset or (records and record.offset <= records[-1].offset):
            raise CorruptRecordError(
                f"record offset {record.offset} is out of order or past the batch's last "
                f"offset {header.last_offset}"
            )
        records.append(record)
    if at != len(body):
        raise CorruptRecordError(
            f"batch at position {pos} has {len(body) - at} bytes after its "
            f"{header.records_count} records"
        )
    return RecordBatch(header, records)


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[RecordBatch]:
    """Decode back-to-back batches (a .log file, a fetch response's records).
    A trailing partial batch is skipped, as clients do."""
    for at, _ in iter_headers(buf, pos):
        yield decode_batch(buf, at)
