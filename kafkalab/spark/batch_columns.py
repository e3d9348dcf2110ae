"""RecordBatch v2 bytes (a Fetch response's records) -> the Spark source's Arrow columns.

What a consumer's Fetcher does with a partition's fetched bytes (Kafka:
CompletedFetch), but into columns and with no Python object per record: Python
walks the batches' 61-byte headers (kafkalab.records.record_batch), checks their
CRCs, drops control batches and, under read_committed, the batches of aborted
transactions (kafkalab.client.aborted_transactions), and decompresses the rest
(kafkalab.records.compression); compiled loops (numba) then walk the records'
varints, and copy keys, values and headers into Arrow buffers.

    columns = BatchColumns("t", 0, arrow_schema(read_schema(False)))
    batch, next_offset = columns.decode(records_bytes, start, until)

Without numba the same loops run as plain Python (correct, and some hundred
times slower): the source then reads through librdkafka unless told otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kafkalab.client.aborted_transactions import AbortedTransactions
from kafkalab.records.compression import decompress
from kafkalab.records.memory_records import decode_batch
from kafkalab.records.record_batch import (
    COMPRESSION_CODEC_MASK,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    CorruptRecordError,
    compute_crc,
    iter_headers,
)

try:
    from numba import njit

    COMPILED = True
except ImportError:  # pragma: no cover - numba is in the labs extra
    COMPILED = False

    def njit(**_options):
        return lambda fn: fn


# What a record's walk found wrong, by the code the loops return.
_CORRUPT = {
    1: "a varint runs past the end of its record",
    2: "a record's length is impossible",
    3: "a key or value runs past the end of its record",
    4: "a header runs past the end of its record, or has a null or negative-length key",
    5: "a record's fields do not fill its length",
    6: "record offsets are out of order or past the batch's last offset",
    7: "bytes are left after the batch's last record",
    8: "a record has a negative header count",
}


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """Zigzag varint (or varlong) at `pos`: (value, position after); position -1
    when it runs past `end` or past 10 bytes."""
    result = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return 0, -1
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return ((result >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(result & 1), pos


@njit(cache=True, nogil=True)
def _scan(
    buf,
    starts,
    ends,
    counts,
    base_offsets,
    last_offsets,
    base_stamps,
    max_stamps,
    append_time,
    offsets,
    stamps,
    key_pos,
    key_len,
    value_pos,
    value_len,
    header_pos,
    header_count,
):
    """Walk every record of every batch body ([starts[b], ends[b]) of buf), filling
    one row per record of the output arrays. Returns (0, 0), or (error code,
    batch index) for the first corrupt record."""
    i = 0
    for b in range(starts.shape[0]):
        pos = starts[b]
        end = ends[b]
        previous = base_offsets[b] - 1
        for _ in range(counts[b]):
            length, pos = _varint(buf, pos, end)
            if pos < 0:
                return 1, b
            stop = pos + length
            if length < 1 or stop > end:
                return 2, b
            pos += 1  # attributes
            ts_delta, pos = _varint(buf, pos, stop)
            if pos < 0:
                return 1, b
            offset_delta, pos = _varint(buf, pos, stop)
            if pos < 0:
                return 1, b
            klen, pos = _varint(buf, pos, stop)
            if pos < 0:
                return 1, b
            if klen < -1 or pos + max(klen, 0) > stop:
                return 3, b
            key_pos[i] = pos
            key_len[i] = klen
            pos += max(klen, 0)
            vlen, pos = _varint(buf, pos, stop)
            if pos < 0:
                return 1, b
            if vlen < -1 or pos + max(vlen, 0) > stop:
                return 3, b
            value_pos[i] = pos
            value_len[i] = vlen
            pos += max(vlen, 0)
            hcount, pos = _varint(buf, pos, stop)
            if pos < 0:
                return 1, b
            if hcount < 0:
                return 8, b
            header_pos[i] = pos
            header_count[i] = hcount
            for _h in range(hcount):
                hk, pos = _varint(buf, pos, stop)
                if pos < 0:
                    return 1, b
                if hk < 0 or pos + hk > stop:
                    return 4, b
                pos += hk
                hv, pos = _varint(buf, pos, stop)
                if pos < 0:
                    return 1, b
                if hv < -1 or pos + max(hv, 0) > stop:
                    return 4, b
                pos += max(hv, 0)
            if pos != stop:
                return 5, b
            offset = base_offsets[b] + offset_delta
            if offset <= previous or offset > last_offsets[b]:
                return 6, b
            previous = offset
            offsets[i] = offset
            stamps[i] = max_stamps[b] if append_time[b] else base_stamps[b] + ts_delta
            i += 1
        if pos != end:
            return 7, b
    return 0, 0


@njit(cache=True, nogil=True)
def _gather(buf, pos, lengths, out_offsets, out_data):
    """Copy buf[pos[i] : pos[i] + lengths[i]] (nothing for a null, length -1) one
    after another into out_data; out_offsets gets Arrow's n + 1 offsets."""
    o = 0
    for i in range(pos.shape[0]):
        out_offsets[i] = o
        n = lengths[i]
        if n > 0:
            p = pos[i]
            out_data[o : o + n] = buf[p : p + n]
            o += n
    out_offsets[pos.shape[0]] = o


@njit(cache=True, nogil=True)
def _headers(buf, header_pos, header_count, key_pos, key_len, value_pos, value_len):
    """Where each header's key and value are (records already checked by _scan)."""
    j = 0
    for i in range(header_pos.shape[0]):
        pos = header_pos[i]
        end = buf.shape[0]
        for _ in range(header_count[i]):
            hk, pos = _varint(buf, pos, end)
            key_pos[j] = pos
            key_len[j] = hk
            pos += hk
            hv, pos = _varint(buf, pos, end)
            value_pos[j] = pos
            value_len[j] = hv
            pos += max(hv, 0)
            j += 1


class _HeaderOnly(NamedTuple):
    """A data batch as AbortedTransactions.keep sees it: only its header is read."""

    header: BatchHeader


class BatchColumns:
    """Decodes one partition's fetched records into Arrow record batches of the
    source schema (key, value, topic, partition, offset, timestamp, timestampType
    [, headers]). One per partition read; under read_committed each Fetch
    response's records are filtered by that response's aborted transactions, as
    the consumer's CompletedFetch does (the broker lists every aborted transaction
    that overlaps the fetched offsets, those begun before them too)."""

    def __init__(self, topic: str, partition: int, schema, *, read_committed: bool = False) -> None:
        """`schema`: the Arrow schema (kafkalab.spark.schema.arrow_schema)."""
        self.topic, self.partition = topic, partition
        self.schema = schema
        self.headers = "headers" in schema.names
        self.read_committed = read_committed

    def decode(
        self,
        data: bytes | bytearray | memoryview,
        start: int,
        until: int,
        aborted: list[tuple[int, int]] = (),
    ):
        """(record batch or None, next offset): the records of `data` (whole v2
        batches; a trailing partial one is ignored) at offsets [start, until),
        and the offset after the last whole batch (where the next fetch starts;
        `start` when there is none). `aborted`: the Fetch response's
        (producer id, first offset) of aborted transactions (read_committed)."""
        view = memoryview(data)
        filt = AbortedTransactions(aborted) if self.read_committed else None
        bodies, meta = [], []
        at = 0
        next_offset = start
        for pos, h in iter_headers(view):
            next_offset = max(next_offset, h.next_offset)
            size = h.size_in_bytes
            if compute_crc(view, pos, size) != h.crc:
                raise CorruptRecordError(
                    f"batch at offset {h.base_offset} of {self.topic}-{self.partition} fails "
                    "its CRC check"
                )
            if h.records_count < 0 or h.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"batch at offset {h.base_offset} has recordsCount {h.records_count} and "
                    f"lastOffsetDelta {h.last_offset_delta}; both must be >= 0"
                )
            if filt is not None:
                batch = decode_batch(view, pos) if h.is_control_batch else _HeaderOnly(h)
                if not filt.keep(batch):
                    continue
            elif h.is_control_batch:
                continue
            if h.last_offset < start or h.base_offset >= until or not h.records_count:
                continue
            raw = view[pos + RECORD_BATCH_OVERHEAD : pos + size]
            codec = h.attributes & COMPRESSION_CODEC_MASK
            body = decompress(codec, raw) if codec else raw
            bodies.append(body)
            meta.append(
                (
                    at,
                    at + len(body),
                    h.records_count,
                    h.base_offset,
                    h.last_offset,
                    h.base_timestamp,
                    h.max_timestamp,
                    bool(h.attributes & TIMESTAMP_TYPE_MASK),
                )
            )
            at += len(body)
        if not meta:
            return None, next_offset
        return self._columns(bodies, meta, start, until), next_offset

    def _columns(self, bodies: list, meta: list, start: int, until: int):
        import pyarrow as pa

        buf = np.frombuffer(b"".join(bodies), np.uint8)
        m = np.array(meta, dtype=np.int64)
        starts, ends, counts = m[:, 0], m[:, 1], m[:, 2]
        total = int(counts.sum())
        offsets = np.empty(total, np.int64)
        stamps = np.empty(total, np.int64)
        key_pos, key_len = np.empty(total, np.int64), np.empty(total, np.int64)
        value_pos, value_len = np.empty(total, np.int64), np.empty(total, np.int64)
        header_pos, header_count = np.empty(total, np.int64), np.empty(total, np.int64)
        append_time = m[:, 7].astype(np.bool_)
        code, bad = _scan(
            buf,
            starts,
            ends,
            counts,
            m[:, 3],
            m[:, 4],
            m[:, 5],
            m[:, 6],
            append_time,
            offsets,
            stamps,
            key_pos,
            key_len,
            value_pos,
            value_len,
            header_pos,
            header_count,
        )
        if code:
            raise CorruptRecordError(
                f"batch at offset {int(m[bad, 3])} of {self.topic}-{self.partition}: "
                f"{_CORRUPT[int(code)]}"
            )
        # Offsets only grow: the records in [start, until) are one slice.
        lo, hi = np.searchsorted(offsets, [start, until])
        sel = slice(int(lo), int(hi))
        n = int(hi - lo)
        if n == 0:
            return None
        # Which batch each record came from: its timestamp type.
        types = np.repeat(append_time.astype(np.int32), counts)[sel]
        arrays = [
            _binary(buf, key_pos[sel], key_len[sel], pa.binary()),
            _binary(buf, value_pos[sel], value_len[sel], pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(offsets[sel], pa.int64()),
            pa.array(stamps[sel] * 1000, self.schema.field(5).type),
            pa.array(types, pa.int32()),
        ]
        if self.headers:
            arrays.append(self._header_column(buf, header_pos[sel], header_count[sel]))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _header_column(self, buf, header_pos, header_count):
        """array<struct<key string, value binary>>, null for a record without headers
        (as the librdkafka path gives it)."""
        import pyarrow as pa

        list_type = self.schema.field(7).type
        struct_type = list_type.value_type
        n = header_pos.shape[0]
        total = int(header_count.sum())
        kp, kl = np.empty(total, np.int64), np.empty(total, np.int64)
        vp, vl = np.empty(total, np.int64), np.empty(total, np.int64)
        _headers(buf, header_pos, header_count, kp, kl, vp, vl)
        keys = _binary(buf, kp, kl, pa.string())
        keys.validate(full=True)  # header keys are UTF-8 strings
        values = _binary(buf, vp, vl, pa.binary())
        entries = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
        list_offsets = np.zeros(n + 1, np.int32)
        np.cumsum(header_count, out=list_offsets[1:])
        present = header_count > 0
        return pa.Array.from_buffers(
            list_type,
            n,
            [_validity(present), pa.py_buffer(list_offsets)],
            null_count=int(n - present.sum()),
            children=[entries],
        )


def _validity(present):
    """An Arrow validity bitmap (None when every value is there)."""
    import pyarrow as pa

    if present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little"))


def _binary(buf, pos, lengths, arrow_type):
    """A binary (or string) Arrow array of buf's slices; length -1 is null."""
    import pyarrow as pa

    n = pos.shape[0]
    present = lengths >= 0
    size = int(lengths[present].sum())
    out_offsets = np.empty(n + 1, np.int32)
    out_data = np.empty(size, np.uint8)
    _gather(buf, pos, lengths, out_offsets, out_data)
    return pa.Array.from_buffers(
        arrow_type,
        n,
        [_validity(present), pa.py_buffer(out_offsets), pa.py_buffer(out_data)],
        null_count=int(n - present.sum()),
    )
