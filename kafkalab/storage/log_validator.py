"""LogValidator: what a leader checks in every record before it appends a batch.

Kafka's class: org.apache.kafka.storage.internals.log.LogValidator. The batch
header was checked already (whole, CRC, sizes: `UnifiedLog._validate`); this
module walks the records inside each batch, as Kafka's `for (Record r : batch)`
does, and then assigns offsets, stamps the leader epoch and the timestamps:

- every record is well formed (Kafka: DefaultRecord.readFrom): its length
  fits in the batch, its varints are at most 5 (10) bytes, key, value and
  headers fit inside the record, header keys are not null, and the fields add
  up to the record's declared length; after `recordsCount` records nothing is
  left (Kafka: "Incorrect declared batch size, records still remaining").
  These answer INVALID_RECORD, with the index of the record that broke;
- compressed records are decompressed and walked the same way;
- a compacted topic refuses records without a key, and a CreateTime topic
  refuses timestamps outside [now - message.timestamp.before.max.ms,
  now + message.timestamp.after.max.ms] (INVALID_TIMESTAMP); a batch that
  claims LogAppendTime on a CreateTime topic without timestamps is refused too.
  Both are collected for every record, and reported per record (Produce v8+
  `record_errors`: the record's index in its batch and why);
- the batch's maxTimestamp is set from its records (Kafka does it in place);
- the batch is rebuilt when its codec is not the topic's `compression.type`
  (`producer` keeps the producer's), or its records' offset deltas do not run
  0, 1, 2, ... (Kafka rebuilds those too rather than refuse them); a rebuilt
  batch keeps its producer id, epoch, base sequence and transactional flag.

The walk is the produce path's only per-record work, so it is written for speed:
one pass, no objects per record, the one-byte varint read inline.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from kafkalab.records.compression import CompressionError, decompress
from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.records.record import decode_record
from kafkalab.records.record_batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    TimestampType,
    read_header,
    set_max_timestamp_and_type,
)
from kafkalab.storage.errors import (
    CompactedRecordWithoutKeyError,
    InvalidTimestampError,
    RecordError,
    RecordValidationError,
)
from kafkalab.storage.log_config import LogConfig

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

#: compression.type names (Kafka: BrokerCompressionType) -> the codec a batch gets;
#: `producer` keeps the batch's own.
TARGET_CODECS: dict[str, CompressionType | None] = {
    "producer": None,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


@dataclass(slots=True)
class ValidatedBatch:
    """One batch as it will be stored: its position and header in the (maybe
    rebuilt) buffer, its max timestamp and the offset delta of the record holding it."""

    position: int
    header: BatchHeader
    max_timestamp: int
    offset_delta_of_max_timestamp: int


@dataclass(slots=True)
class ValidationResult:
    """What validation made of an append (Kafka: LogValidator.ValidationResult):
    the buffer to write (the request's own unless a batch was rebuilt), its
    batches with their first offsets assigned, and the append time (-1 unless
    message.timestamp.type=LogAppendTime)."""

    records: bytearray
    batches: list[ValidatedBatch]
    log_append_time: int
    rebuilt: bool


def _varint(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint at `pos` of at most `max_bytes` bytes (5: int32, 10: int64)."""
    raw = shift = 0
    for i in range(max_bytes):
        byte = buf[pos + i]  # IndexError past the end: the caller names the record
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise ValueError(f"a varint longer than {max_bytes} bytes")


#: From this many records on, walk_records hands the fields to numpy.
VECTORIZED_FROM = 300  # below, numpy's fixed cost per call outweighs what it saves


def walk_records(
    body: bytes | bytearray | memoryview,
    start: int,
    end: int,
    count: int,
    *,
    need_keys: bool = False,
) -> tuple[int, int, bool, list[int]]:
    """Walk `count` records in body[start:end] without decoding them.

    Returns (largest timestamp delta, index of the first record holding it,
    whether the offset deltas run 0..count-1, indexes of records without a key
    when `need_keys`). Raises RecordValidationError naming the record that is
    not well formed (Kafka: DefaultRecord.readFrom). Large batches go through
    `_walk_vectorized`, which reads the same fields for all records at once and
    falls back to this walk, record by record, to name the first bad one."""
    if count >= VECTORIZED_FROM:
        found = _walk_vectorized(body, start, end, count, need_keys)
        if found is not None:
            return found
    return walk_records_one_by_one(body, start, end, count, need_keys=need_keys)


def walk_records_one_by_one(
    body: bytes | bytearray | memoryview,
    start: int,
    end: int,
    count: int,
    *,
    need_keys: bool = False,
) -> tuple[int, int, bool, list[int]]:
    """walk_records in pure Python, one record after the other."""
    pos = start
    max_delta = -(2**63)
    max_index = 0
    in_order = True
    keyless: list[int] = []
    index = 0
    # Each varint is read inline when it is one or two bytes (nearly all of them:
    # lengths below 8 KiB, offset deltas below 8,192), by _varint otherwise.
    try:
        for index in range(count):
            b = body[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = _varint(body, pos, 5)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise ValueError(
                    f"record length {length} does not fit: {end - pos} bytes remain in the batch"
                )
            pos += 1  # attributes
            b = body[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                ts_delta = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                ts_delta, pos = _varint(body, pos, 10)
            if ts_delta > max_delta:
                max_delta, max_index = ts_delta, index
            b = body[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                offset_delta = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                offset_delta, pos = _varint(body, pos, 5)
            if offset_delta != index:
                in_order = False
            b = body[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                size = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                size, pos = _varint(body, pos, 5)
            if size >= 0:  # the key
                pos += size
            elif size != -1:
                raise ValueError(f"key length {size}")
            elif need_keys:
                keyless.append(index)
            b = body[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            elif body[pos + 1] < 0x80:
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                size = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                size, pos = _varint(body, pos, 5)
            if size >= 0:  # the value
                pos += size
            elif size != -1:
                raise ValueError(f"value length {size}")
            if body[pos] == 0:  # no headers
                pos += 1
            else:
                pos = _walk_headers(body, pos, record_end)
            if pos != record_end:
                raise ValueError(
                    f"the record says it is {length} bytes but its fields take "
                    f"{length + pos - record_end}"
                )
        if pos != end:
            index = count
            raise ValueError(
                f"{end - pos} bytes remain after the {count} records the batch declares "
                "(Kafka: incorrect declared batch size)"
            )
    except (ValueError, IndexError) as e:
        why = str(e) if isinstance(e, ValueError) else "it runs past the end of the batch"
        raise RecordValidationError(
            f"record {index} of the batch is not well formed: {why}",
            [RecordError(index, why)],
        ) from None
    return max_delta, max_index, in_order, keyless


def _walk_vectorized(
    body: bytes | bytearray | memoryview, start: int, end: int, count: int, need_keys: bool
) -> tuple[int, int, bool, list[int]] | None:
    """walk_records for many records: only the chain of record lengths is read
    one record at a time (where a record starts depends on the one before), and
    only as a guess; numpy then checks that chain and reads every other field of
    every record at once. None when a record is not well formed: the
    one-by-one walk then names it."""
    ends = []
    append = ends.append
    pos = start
    try:
        for _ in range(count):
            b = body[pos]
            if b < 0x80:
                pos += ((b >> 1) ^ -(b & 1)) + 1
            else:  # a two-byte length; anything else fails the check below
                raw = (b & 0x7F) | (body[pos + 1] << 7)
                pos += ((raw >> 1) ^ -(raw & 1)) + 2
            append(pos)
    except IndexError:
        return None
    if pos != end:
        return None
    size = end - start
    data = np.zeros(size + 32, dtype=np.uint8)
    data[:size] = np.frombuffer(body, dtype=np.uint8, count=size, offset=start)
    record_ends = np.asarray(ends, dtype=np.int64) - start
    if (record_ends <= 0).any() or (record_ends > size).any():
        return None
    record_starts = np.empty_like(record_ends)
    record_starts[0] = 0
    record_starts[1:] = record_ends[:-1]
    # the chain, checked: each length varint says where its record ends
    length, at, bad = _varints(data, record_starts, 5)
    if bad.any() or (length <= 0).any() or not np.array_equal(at + length, record_ends):
        return None
    beyond = size + 1  # past every record's end: a field that gets here fails
    at = at + 1  # the attributes byte
    ts_delta, at, bad = _varints(data, at, 10)
    offset_delta, at, bad_offset = _varints(data, at, 5)
    key_size, at, bad_key = _varints(data, at, 5)
    at = np.minimum(at + np.maximum(key_size, 0), beyond)
    value_size, at, bad_value = _varints(data, at, 5)
    at = np.minimum(at + np.maximum(value_size, 0), beyond)
    bad |= bad_offset | bad_key | bad_value | (key_size < -1) | (value_size < -1)
    with_headers = data[at] != 0
    at = at + 1  # a header count of 0
    if bad.any():
        return None
    if with_headers.any():
        for index in np.flatnonzero(with_headers).tolist():
            try:
                last = _walk_headers(body, start + int(at[index]) - 1, ends[index])
            except (ValueError, IndexError):
                return None
            at[index] = last - start
    if not np.array_equal(at, record_ends):
        return None
    max_index = int(np.argmax(ts_delta))
    in_order = bool(np.array_equal(offset_delta, np.arange(count, dtype=np.int64)))
    keyless = np.flatnonzero(key_size == -1).tolist() if need_keys else []
    return int(ts_delta[max_index]), max_index, in_order, keyless


def _varints(data, at, max_bytes: int):
    """The zigzag varints at positions `at` of `data` (numpy): (values, positions
    after them, which are invalid: longer than `max_bytes`, or past 32 bits for
    an int32)."""
    byte = data[at]
    raw = (byte & 0x7F).astype(np.uint64)
    more = byte >= 0x80
    size = np.ones_like(at)
    k = 1
    while more.any():
        if k == max_bytes:
            return np.zeros_like(at), at + size, more
        byte = data[at + k]
        raw |= np.where(more, (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k), 0).astype(
            np.uint64
        )
        size += more
        more &= byte >= 0x80
        k += 1
    bad = raw > 0xFFFFFFFF if max_bytes == 5 else np.zeros(len(at), dtype=bool)
    values = ((raw >> np.uint64(1)) ^ (np.uint64(0) - (raw & np.uint64(1)))).view(np.int64)
    return values, at + size, bad


def _walk_headers(body, pos: int, record_end: int) -> int:
    count, pos = _varint(body, pos, 5)
    if count < 0:
        raise ValueError(f"header count {count}")
    for _ in range(count):
        size, pos = _varint(body, pos, 5)
        if size < 0:
            raise ValueError(f"header key length {size}: header keys cannot be null")
        if pos + size > record_end:
            raise ValueError("a header key runs past the end of its record")
        try:
            bytes(body[pos : pos + size]).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("a header key is not valid UTF-8") from None
        pos += size
        size, pos = _varint(body, pos, 5)
        if size >= 0:
            pos += size
        elif size != -1:
            raise ValueError(f"header value length {size}")
        if pos > record_end:
            raise ValueError("a header runs past the end of its record")
    return pos


def validate_and_assign_offsets(
    buf: bytearray,
    headers: list[tuple[int, BatchHeader]],
    *,
    first_offset: int,
    leader_epoch: int,
    now: int,
    config: LogConfig,
    where: str = "",
) -> ValidationResult:
    """Check every record of `headers`' batches in `buf`, then give the batches
    offsets from `first_offset`, the leader's epoch and their timestamps (Kafka:
    validateMessagesAndAssignOffsets). Raises a RecordValidationError with the
    offending records, and writes nothing to `buf` before every batch passed."""
    append_time = config.message_timestamp_type == "LogAppendTime"
    target = TARGET_CODECS[config.compression_type]
    need_keys = config.compact
    before_max = config.message_timestamp_before_max_ms
    after_max = config.message_timestamp_after_max_ms
    plans = []  # (pos, header, body or None, max delta, index of max, rebuild)
    for pos, header in headers:
        size = header.batch_length + LOG_OVERHEAD
        codec = header.attributes & COMPRESSION_CODEC_MASK
        control = bool(header.attributes & CONTROL_FLAG_MASK)
        body = None
        try:
            if codec:
                body = decompress(
                    CompressionType(codec),
                    memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : pos + size],
                )
                max_delta, max_index, in_order, keyless = walk_records(
                    body, 0, len(body), header.records_count, need_keys=need_keys and not control
                )
            else:
                max_delta, max_index, in_order, keyless = walk_records(
                    buf,
                    pos + RECORD_BATCH_OVERHEAD,
                    pos + size,
                    header.records_count,
                    need_keys=need_keys and not control,
                )
        except CompressionError as e:
            raise RecordValidationError(
                f"{where}: {e}", [RecordError(0, "the records could not be decompressed")]
            ) from None
        except RecordValidationError as e:
            raise RecordValidationError(f"{where}: {e.message}", e.record_errors) from None
        if keyless:
            errors = [
                RecordError(i, f"Compacted topic cannot accept message without key in {where}")
                for i in keyless
            ]
            raise CompactedRecordWithoutKeyError(
                f"{where}: compacted topic cannot accept a record without a key (record "
                f"{keyless[0]} of the batch at position {pos}); give every record a key, or "
                "use cleanup.policy=delete",
                errors,
            )
        batch_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
        if header.records_count and not append_time:
            if batch_append_time and header.max_timestamp == -1:
                raise InvalidTimestampError(
                    f"{where}: the batch at position {pos} says LogAppendTime; a producer "
                    "must not set the timestamp type (the topic's message.timestamp.type decides)",
                    [RecordError(0, "Producer should not set timestamp type to LogAppendTime.")],
                )
            _check_timestamps(
                header,
                body if codec else buf,
                pos,
                codec,
                max_delta,
                now,
                before_max,
                after_max,
                where,
            )
        rebuild = (target is not None and target != codec and not (control and codec == 0)) or (
            not in_order and header.records_count > 0
        )
        plans.append((pos, header, body, max_delta, max_index, rebuild))
    if any(plan[5] for plan in plans):
        return _rebuilt(buf, plans, first_offset, leader_epoch, now, config, target)
    # In place (Kafka: assignOffsetsNonCompressed, or the compressed path's in-place
    # branch): only fields outside the CRC change, unless a timestamp does.
    batches = []
    offset = first_offset
    for pos, header, _, max_delta, max_index, _ in plans:
        _INT64.pack_into(buf, pos, offset)
        _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        if append_time:
            set_max_timestamp_and_type(buf, pos, now, TimestampType.LOG_APPEND_TIME)
            max_ts, max_at = now, 0
        else:
            max_ts = header.base_timestamp + max_delta if header.records_count else -1
            max_at = max_index
            if header.records_count and (
                max_ts != header.max_timestamp or header.attributes & TIMESTAMP_TYPE_MASK
            ):
                set_max_timestamp_and_type(buf, pos, max_ts, TimestampType.CREATE_TIME)
        batches.append(ValidatedBatch(pos, read_header(buf, pos), max_ts, max_at))
        offset += header.last_offset_delta + 1
    return ValidationResult(buf, batches, now if append_time else -1, False)


def _check_timestamps(
    header: BatchHeader,
    data,
    pos: int,
    codec: int,
    max_delta: int,
    now: int,
    before_max: int,
    after_max: int,
    where: str,
) -> None:
    """Kafka's validateTimestamp for a CreateTime topic: every record's timestamp
    within [now - before_max, now + after_max]. The walk found the largest; the
    smallest needs a second look only when before.max.ms is not the default."""
    latest = header.base_timestamp + max_delta
    late_ok = latest - now <= after_max
    early_ok = before_max >= 2**62  # Kafka's default, Long.MAX_VALUE: any past time
    if late_ok and early_ok:
        return
    start = 0 if codec else pos + RECORD_BATCH_OVERHEAD
    errors = []
    at = start
    for index in range(header.records_count):
        record, at = decode_record(data, at, 0, header.base_timestamp)
        ts = record.timestamp
        if ts != -1 and (now - ts > before_max or ts - now > after_max):
            errors.append(
                RecordError(
                    index,
                    f"Timestamp {ts} of message with offset {index} is out of range. The "
                    f"timestamp should be within [{now - before_max}, {now + after_max}]",
                )
            )
    if errors:
        raise InvalidTimestampError(
            f"{where}: {len(errors)} record(s) have timestamps outside "
            f"[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] = "
            f"[{now - before_max}, {now + after_max}]; fix the producer's clock or "
            "timestamps, or raise those topic configs",
            errors,
        )


def _rebuilt(
    buf: bytearray,
    plans: list,
    first_offset: int,
    leader_epoch: int,
    now: int,
    config: LogConfig,
    target: CompressionType | None,
) -> ValidationResult:
    """Rebuild every batch (Kafka: buildRecordsAndAssignOffsets): in the topic's
    codec (or the producer's), offsets 0..n-1 inside, the producer fields kept."""
    append_time = config.message_timestamp_type == "LogAppendTime"
    out = bytearray()
    batches = []
    offset = first_offset
    for pos, header, body, _, _, _ in plans:
        size = header.batch_length + LOG_OVERHEAD
        codec = header.attributes & COMPRESSION_CODEC_MASK
        data = body if codec else memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : pos + size]
        records = []
        at = 0
        for _ in range(header.records_count):
            record, at = decode_record(data, at, 0, header.base_timestamp)
            records.append(record)
        new_codec = CompressionType(codec if target is None else target)
        level = {
            CompressionType.GZIP: config.compression_gzip_level,
            CompressionType.LZ4: config.compression_lz4_level,
            CompressionType.ZSTD: config.compression_zstd_level,
        }.get(new_codec)
        control = bool(header.attributes & CONTROL_FLAG_MASK)
        batch = bytearray(
            build_batch(
                [SimpleRecord(r.value, r.key, r.headers, r.timestamp) for r in records],
                base_offset=offset,
                compression=CompressionType.NONE if control and codec == 0 else new_codec,
                compression_level=level,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                partition_leader_epoch=leader_epoch,
                is_transactional=header.is_transactional,
                is_control=control,
            )
        )
        if append_time:
            set_max_timestamp_and_type(batch, 0, now, TimestampType.LOG_APPEND_TIME)
        new_header = read_header(batch)
        max_ts = now if append_time else new_header.max_timestamp
        max_at = 0
        if not append_time:
            for i, r in enumerate(records):
                if r.timestamp == max_ts:
                    max_at = i
                    break
        batches.append(ValidatedBatch(len(out), new_header, max_ts, max_at))
        out += batch
        offset += new_header.last_offset_delta + 1
    return ValidationResult(out, batches, now if append_time else -1, True)


__all__ = [
    "TARGET_CODECS",
    "CorruptRecordError",
    "ValidatedBatch",
    "ValidationResult",
    "validate_and_assign_offsets",
    "walk_records",
]
