"""RecordBatch v2 (magic 2): the header, read and patched without decoding records.

Kafka's class: org.apache.kafka.common.record.DefaultRecordBatch.

This module is the hot path. The broker never decodes records into objects to
append or to serve a fetch: it reads the 61-byte header, checks the CRC, walks
the records' lengths without decoding them (kafkalab.storage.log_validator),
rewrites the base offset (and partition leader epoch) in place, and moves the
bytes as they are. Everything here works on a buffer and a position.

Layout (big-endian), offsets in bytes from the start of the batch:

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field (= size - 12)
   12  partitionLeaderEpoch  int32
   16  magic                 int8    always 2
   17  crc                   uint32  CRC-32C of bytes [21, end)
   21  attributes            int16
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records ...

Invariant kept by every writer here: the CRC covers attributes to the end, so
rewriting baseOffset or partitionLeaderEpoch never needs a new CRC; changing
attributes, timestamps or producer fields does.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from kafkalab.errors import Errors, KafkaErrorWithCode
from kafkalab.records.crc import crc32c

# Field offsets (Kafka: DefaultRecordBatch.*_OFFSET).
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

#: Bytes before the batchLength count starts (baseOffset + batchLength).
LOG_OVERHEAD = 12
#: Size of the batch header; the smallest valid batch (no records) is this long.
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class CompressionType(IntEnum):
    """Attribute bits 0-2 (Kafka: CompressionType)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3 (Kafka: TimestampType)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# Attribute bits (Kafka: DefaultRecordBatch.*_FLAG_MASK).
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40


class CorruptRecordError(KafkaErrorWithCode):
    """A batch failed a structural or CRC check.

    Kafka's error: CORRUPT_MESSAGE (2). The bytes must not be appended or
    served; a log truncates its tail at the last valid batch on recovery.
    """

    code = Errors.CORRUPT_MESSAGE


class InvalidRecordError(CorruptRecordError):
    """A batch is well-formed bytes but breaks a rule (bad magic, bad counts)."""


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, decoded. Cheap: no records are touched.

    A NamedTuple rather than a frozen dataclass: it is built for every batch on
    the produce path, and a tuple is several times faster to create."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        """Whole batch size on disk and on the wire (header included)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps at int32 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch at `pos`. Raises CorruptRecordError when
    fewer than 61 bytes remain or batchLength/magic are impossible."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"batch header at position {pos} needs {RECORD_BATCH_OVERHEAD} bytes, "
            f"only {len(buf) - pos} remain"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise InvalidRecordError(
            f"batch at position {pos} has magic {header.magic}; kafkalab reads only "
            "RecordBatch v2 (magic 2), as Kafka 3.0+ clients write"
        )
    if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(
            f"batch at position {pos} claims batchLength {header.batch_length}, "
            f"smaller than a header ({RECORD_BATCH_OVERHEAD - LOG_OVERHEAD})"
        )
    if header.attributes & COMPRESSION_CODEC_MASK > CompressionType.ZSTD:
        raise InvalidRecordError(
            f"batch at position {pos} names compression codec "
            f"{header.attributes & COMPRESSION_CODEC_MASK}, which Kafka does not define "
            "(0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"
        )
    return header


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """Whole size of the batch at `pos` from its first 12 bytes, or None when
    fewer than 12 bytes remain. Used to frame batches in a stream or a file."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return _PREFIX.unpack_from(buf, pos)[1] + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over attributes to the end of the batch at [pos, pos+size)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def is_valid(buf: bytes | bytearray | memoryview, pos: int = 0) -> bool:
    """True when the batch at `pos` is complete and its CRC matches."""
    try:
        ensure_valid(buf, pos)
    except CorruptRecordError:
        return False
    return True


def ensure_valid(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Check the batch at `pos` is whole and its CRC matches; return its header.

    Kafka: DefaultRecordBatch.ensureValid.
    """
    header = read_header(buf, pos)
    size = header.size_in_bytes
    if len(buf) - pos < size:
        raise CorruptRecordError(
            f"batch at position {pos} is {size} bytes but only {len(buf) - pos} remain "
            "(a torn write?)"
        )
    actual = compute_crc(buf, pos, size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {header.base_offset}) has CRC "
            f"{header.crc:#010x} but its bytes give {actual:#010x}"
        )
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"batch at position {pos} has recordsCount {header.records_count} and "
            f"lastOffsetDelta {header.last_offset_delta}; both must be >= 0"
        )
    return header


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
    """Yield (position, header) for each whole batch in buf[pos:end].

    Stops quietly at a trailing partial batch (as a fetch response may end with
    one); raises CorruptRecordError for an impossible header. CRCs are not
    checked here: call ensure_valid where they matter.
    """
    end = len(buf) if end is None else end
    view = memoryview(buf)[:end]
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = read_header(view, pos)
        if pos + header.size_in_bytes > end:
            return
        yield pos, header
        pos += header.size_in_bytes


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (the leader assigning offsets). CRC stays valid."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (the leader stamping its epoch). CRC stays valid."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def write_header(
    buf: bytearray | memoryview,
    pos: int,
    size: int,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> None:
    """Write the 61-byte header of the v2 batch of `size` bytes at `pos`, whose
    records already follow it, and its CRC-32C (Kafka: DefaultRecordBatch.writeHeader)."""
    _HEADER.pack_into(
        buf,
        pos,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # the CRC, below: it covers the attributes onwards
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, pos: int, timestamp: int, timestamp_type: TimestampType
) -> None:
    """Stamp LogAppendTime (Kafka: DefaultRecordBatch.setMaxTimestamp): set the
    timestamp-type bit and maxTimestamp, then recompute the CRC."""
    attributes = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0]
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    size = _PREFIX.unpack_from(buf, pos)[1] + LOG_OVERHEAD
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))
