"""The sink's Arrow record batches -> Kafka RecordBatch v2 bytes, one or more per partition.

The mirror of kafkalab.spark.batch_columns, for the write: what a producer's
RecordAccumulator and MemoryRecordsBuilder do with a partition's records, but
from columns and with no Python object per record. Python reads the Arrow
buffers of the sink's columns (value, and optionally key, topic, partition,
headers), compiled loops (numba) pick each row's partition and write the
records' varints, keys, values and headers into one buffer, and Python fills
each batch's 61-byte header (producer id, epoch, base sequence) and its CRC-32C,
compressing its records first with a codec (kafkalab.records.compression, as
Kafka's producer writes each: batch.size bounds the records before compression).

Partitions, as the librdkafka path with `partitioner=murmur2_random` (and
Java's producer) picks them: a row's `partition` wins; else a key goes to
`toPositive(murmur2(key)) % partitions` (kafkalab.client.partitioner);
else (a null key) the row goes to one partition per topic and Arrow batch,
picked at random (sticky per batch, as KIP-480's sticky partitioner keeps one
partition until its batch is sent). Every record of a batch gets the batch's
timestamp (CreateTime: now, as librdkafka's produce() stamps a record without one).

    encoder = BatchEncoder(producer_id, producer_epoch, batch_size=1_000_000)
    for b in encoder.encode(arrow_batch, "orders", partition_count):
        ...  # b.topic, b.partition, b.base_sequence, b.count, b.data (one RecordBatch)

Without numba the same loops run as plain Python (correct, and some hundred
times slower): the sink then writes through librdkafka unless told otherwise.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from kafkalab.records.compression import compress
from kafkalab.records.record_batch import (
    NO_PARTITION_LEADER_EPOCH,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    write_header,
)
from kafkalab.spark.batch_columns import njit
from kafkalab.spark.errors import KafkaWriteError

#: Most bytes a record's fixed fields take beyond its key, value and headers: its
#: length (5), attributes (1), timestamp delta (1: always 0), offset delta (5),
#: key and value lengths (5 each), header count (5).
_RECORD_OVERHEAD = 27
_HEADER_OVERHEAD = 10  # a header's key and value lengths


@njit(cache=True, nogil=True)
def _mul32(a, b):
    """a * b modulo 2**32 (in 64 bits: no overflow, compiled or not)."""
    return np.uint32((np.uint64(a) * np.uint64(b)) & np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True)
def _murmur2(data, start, end):
    """Kafka's murmur2 (Utils.murmur2, seed 0x9747b28c) of data[start:end], as a
    non-negative int (toPositive)."""
    m = np.uint32(0x5BD1E995)
    length = end - start
    h = np.uint32(0x9747B28C) ^ np.uint32(length)
    whole = length - length % 4
    for i in range(0, whole, 4):
        p = start + i
        k = (
            np.uint32(data[p])
            | (np.uint32(data[p + 1]) << np.uint32(8))
            | (np.uint32(data[p + 2]) << np.uint32(16))
            | (np.uint32(data[p + 3]) << np.uint32(24))
        )
        k = _mul32(k, m)
        k ^= k >> np.uint32(24)
        k = _mul32(k, m)
        h = _mul32(h, m)
        h ^= k
    rest = length % 4
    tail = start + whole
    if rest == 3:
        h ^= np.uint32(data[tail + 2]) << np.uint32(16)
    if rest >= 2:
        h ^= np.uint32(data[tail + 1]) << np.uint32(8)
    if rest >= 1:
        h ^= np.uint32(data[tail])
        h = _mul32(h, m)
    h ^= h >> np.uint32(13)
    h = _mul32(h, m)
    h ^= h >> np.uint32(15)
    return np.int64(h & np.uint32(0x7FFFFFFF))


@njit(cache=True, nogil=True)
def _partitions(
    topic_index,
    counts,
    sticky,
    key_off,
    key_data,
    key_valid,
    part,
    part_valid,
    out,
):
    """Each row's partition: its `partition` where valid, else murmur2 of its key,
    else its topic's sticky partition. Returns -1, or the first row whose explicit
    partition its topic does not have."""
    for i in range(out.shape[0]):
        t = topic_index[i]
        if part_valid[i]:
            p = np.int64(part[i])
            if p < 0 or p >= counts[t]:
                return i
            out[i] = p
        elif key_valid[i]:
            out[i] = _murmur2(key_data, key_off[i], key_off[i + 1]) % counts[t]
        else:
            out[i] = sticky[t]
    return -1


@njit(cache=True, nogil=True)
def _varint_size(v):
    z = np.uint64((v << 1) ^ (v >> 63))
    n = 1
    while z > 0x7F:
        z >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True, nogil=True)
def _put_varint(out, pos, v):
    z = np.uint64((v << 1) ^ (v >> 63))
    while z > 0x7F:
        out[pos] = np.uint8((z & np.uint64(0x7F)) | np.uint64(0x80))
        z >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(z)
    return pos + 1


@njit(cache=True, nogil=True)
def _put_bytes(out, pos, data, start, length):
    pos = _put_varint(out, pos, np.int64(length))
    if length > 0:
        out[pos : pos + length] = data[start : start + length]
        pos += length
    return pos


@njit(cache=True, nogil=True)
def _close(bounds, nb, start, pos, count, group):
    bounds[nb, 0] = start
    bounds[nb, 1] = pos
    bounds[nb, 2] = count
    bounds[nb, 3] = group
    return nb + 1


@njit(cache=True, nogil=True)
def _encode(
    order,
    group,
    key_off,
    key_data,
    key_valid,
    val_off,
    val_data,
    val_valid,
    h_start,
    h_end,
    h_key_off,
    h_key_data,
    h_val_off,
    h_val_data,
    h_val_valid,
    batch_size,
    out,
    bounds,
):
    """Write the rows `order` (grouped: the rows of one partition, `group[row]`,
    are consecutive and in their input order) as records into `out`: a new batch
    at each group change and wherever the next record would take a batch past
    `batch_size` bytes (a batch holds at least one record). Each batch's first
    61 bytes are left for its header. bounds[b] = (start, end, records, group).
    Returns the number of batches."""
    nb = 0
    pos = 0
    count = 0
    start = 0
    current = -1
    for j in range(order.shape[0]):
        i = order[j]
        g = group[i]
        klen = key_off[i + 1] - key_off[i] if key_valid[i] else -1
        vlen = val_off[i + 1] - val_off[i] if val_valid[i] else -1
        hfirst = h_start[i]
        hlast = h_end[i]
        hbytes = 0
        for h in range(hfirst, hlast):
            hk = h_key_off[h + 1] - h_key_off[h]
            hv = h_val_off[h + 1] - h_val_off[h] if h_val_valid[h] else -1
            hbytes += _varint_size(hk) + hk + _varint_size(hv) + max(hv, 0)
        # Everything but the offset delta: attributes, timestamp delta (0), key, value, headers.
        fixed = (
            2
            + _varint_size(klen)
            + max(klen, 0)
            + _varint_size(vlen)
            + max(vlen, 0)
            + _varint_size(np.int64(hlast - hfirst))
            + hbytes
        )
        if count > 0 and g != current:
            nb = _close(bounds, nb, start, pos, count, current)
            count = 0
        body = fixed + _varint_size(np.int64(count))
        if count > 0 and pos + _varint_size(np.int64(body)) + body - start > batch_size:
            nb = _close(bounds, nb, start, pos, count, current)
            count = 0
            body = fixed + 1
        if count == 0:
            start = pos
            pos += 61
            current = g
        pos = _put_varint(out, pos, np.int64(body))
        out[pos] = 0  # attributes
        out[pos + 1] = 0  # timestamp delta 0
        pos = _put_varint(out, pos + 2, np.int64(count))  # offset delta
        pos = _put_bytes(out, pos, key_data, key_off[i], klen)
        pos = _put_bytes(out, pos, val_data, val_off[i], vlen)
        pos = _put_varint(out, pos, np.int64(hlast - hfirst))
        for h in range(hfirst, hlast):
            hk = h_key_off[h + 1] - h_key_off[h]
            hv = h_val_off[h + 1] - h_val_off[h] if h_val_valid[h] else -1
            pos = _put_bytes(out, pos, h_key_data, h_key_off[h], hk)
            pos = _put_bytes(out, pos, h_val_data, h_val_off[h], hv)
        count += 1
    if count > 0:
        nb = _close(bounds, nb, start, pos, count, current)
    return nb


class EncodedBatch(NamedTuple):
    """One RecordBatch v2 for one partition, ready to send (and to resend as it is)."""

    topic: str
    partition: int
    base_sequence: int
    count: int
    data: memoryview


_EMPTY = np.zeros(0, np.uint8)


def _binary(arr, n: int):
    """(offsets int64[n + 1] into data, data uint8, valid bool[n]) of a binary or
    string Arrow array; a missing column is every row null."""
    if arr is None:
        return np.zeros(n + 1, np.int64), _EMPTY, np.zeros(n, np.bool_)
    import pyarrow as pa

    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        width = np.int64
    elif pa.types.is_binary(arr.type) or pa.types.is_string(arr.type):
        width = np.int32
    else:
        raise KafkaWriteError(
            f"a column of type {arr.type} cannot be written as bytes: CAST it to string or binary"
        )
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], width)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data = _EMPTY if bufs[2] is None else np.frombuffer(bufs[2], np.uint8)
    return offsets, data, _valid(arr, n)


def _valid(arr, n: int):
    if arr.null_count == 0:
        return np.ones(n, np.bool_)
    return ~arr.is_null().to_numpy(zero_copy_only=False)


class BatchEncoder:
    """Encodes the sink's Arrow record batches for one producer: its producer id
    and epoch (-1 for a producer that is not idempotent) and, per partition, the
    next sequence number (Kafka numbers each partition's records from 0 for a new
    producer id; the sequence wraps at 2**31)."""

    def __init__(
        self,
        producer_id: int = -1,
        producer_epoch: int = -1,
        batch_size: int = 1_000_000,
        rng: random.Random | None = None,
        compression: CompressionType = CompressionType.NONE,
    ) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.batch_size = batch_size
        self.compression = CompressionType(compression)
        self.sequences: dict[tuple[str, int], int] = {}
        self._rng = rng or random.Random()

    def encode(
        self,
        batch,
        topic: str | None,
        partition_count: Callable[[str], int],
        timestamp_ms: int | None = None,
    ) -> list[EncodedBatch]:
        """The RecordBatches of every row of `batch` (a pyarrow RecordBatch with
        column value, and optionally key, topic, partition, headers), in row order
        within each partition. `topic`: the sink's topic option (None: each row's
        `topic`); `partition_count(topic)`: how many partitions it has."""
        n = batch.num_rows
        if n == 0:
            return []
        names = batch.schema.names
        col = {name: batch.column(names.index(name)) for name in names}
        topics, topic_index = self._topics(col, topic, n)
        counts = np.array([partition_count(t) for t in topics], np.int64)
        sticky = np.array([self._rng.randrange(c) for c in counts], np.int64)
        key_off, key_data, key_valid = _binary(col.get("key"), n)
        val_off, val_data, val_valid = _binary(col["value"], n)
        if "partition" in col:
            parts = col["partition"]
            part = parts.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            part_valid = _valid(parts, n)
        else:
            part, part_valid = np.zeros(n, np.int64), np.zeros(n, np.bool_)
        partition = np.empty(n, np.int64)
        bad = _partitions(
            topic_index, counts, sticky, key_off, key_data, key_valid, part, part_valid, partition
        )
        if bad >= 0:
            t = topics[topic_index[bad]]
            raise KafkaWriteError(
                f"Row {bad} names partition {int(part[bad])} of {t}, which has partitions "
                f"0..{counts[topic_index[bad]] - 1}: Kafka's error UNKNOWN_TOPIC_OR_PARTITION"
            )
        h = self._headers(col.get("headers"), n)
        width = int(counts.max())
        group = topic_index * width + partition
        order = np.argsort(group, kind="stable")
        hcount = len(h[2]) - 1  # every header entry the column holds: a bound
        bound = (
            int(key_off[-1] - key_off[0])
            + int(val_off[-1] - val_off[0])
            + int(h[2][-1] - h[2][0])
            + int(h[4][-1] - h[4][0])
            + n * (_RECORD_OVERHEAD + RECORD_BATCH_OVERHEAD)
            + hcount * _HEADER_OVERHEAD
        )
        out = np.empty(bound, np.uint8)
        bounds = np.empty((n, 4), np.int64)
        nb = _encode(
            order,
            group,
            key_off,
            key_data,
            key_valid,
            val_off,
            val_data,
            val_valid,
            *h,
            self.batch_size,
            out,
            bounds,
        )
        stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        view = memoryview(out)
        result = []
        for start, end, count, g in bounds[:nb].tolist():
            t = topics[g // width]
            p = g % width
            seq = self._next_sequence(t, p, count)
            if self.compression == CompressionType.NONE:
                buf, at, size = out, start, end - start
            else:
                records = compress(self.compression, view[start + RECORD_BATCH_OVERHEAD : end])
                size = RECORD_BATCH_OVERHEAD + len(records)
                buf, at = bytearray(size), 0
                buf[RECORD_BATCH_OVERHEAD:] = records
            write_header(
                buf,
                at,
                size,
                base_offset=0,
                partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
                attributes=int(self.compression),  # the codec, CreateTime, not transactional
                last_offset_delta=count - 1,
                base_timestamp=stamp,
                max_timestamp=stamp,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=seq,
                records_count=count,
            )
            result.append(EncodedBatch(t, p, seq, count, memoryview(buf)[at : at + size]))
        return result

    def _next_sequence(self, topic: str, partition: int, count: int) -> int:
        if self.producer_id < 0:
            return -1
        first = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = (first + count) % 2**31
        return first

    @staticmethod
    def _topics(col: dict, topic: str | None, n: int):
        """(topic names, each row's index into them)."""
        if topic is not None:
            return [topic], np.zeros(n, np.int64)
        if "topic" not in col:
            raise KafkaWriteError(
                "Topic option required when no 'topic' attribute is present. Use the 'topic' "
                "option for setting a topic."
            )
        column = col["topic"]
        if column.null_count:
            raise KafkaWriteError(
                "Null topic present in the data. Use the 'topic' option to set a topic."
            )
        encoded = column.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        return names, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)

    @staticmethod
    def _headers(column, n: int):
        """(first and end header of each row, header key offsets, key data, value
        offsets, value data, value valid) of the headers column; a null list has
        no headers (as an empty one), and without the column no row has any."""
        if column is None:
            z = np.zeros(1, np.int64)
            none = np.zeros(n, np.int64)
            return none, none, z, _EMPTY, z, _EMPTY, np.zeros(0, np.bool_)
        lists = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        h_start, h_end = lists[:-1], lists[1:].copy()
        if column.null_count:
            h_end = np.where(_valid(column, n), h_end, h_start)
        entries = column.values
        if entries.null_count:
            raise KafkaWriteError(
                "A header is null: every header needs a key (and a value or null)"
            )
        keys, values = entries.field(0), entries.field(1)
        if keys.null_count:
            raise KafkaWriteError("A header's key is null: header keys must be strings")
        k_off, k_data, _ = _binary(keys, len(keys))
        v_off, v_data, v_valid = _binary(values, len(values))
        return h_start, h_end, k_off, k_data, v_off, v_data, v_valid
