"""RecordBatch v2 codec: round trips, header-only access, corruption, control markers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.records import (
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    Header,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    decode_batch,
    ensure_valid,
    iter_batches,
    parse_control_record,
    read_header,
)
from kafkalab.records.compression import compress, decompress
from kafkalab.records.record_batch import (
    iter_headers,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
)
from kafkalab.records.varint import (
    read_varint,
    read_varlong,
    size_of_varint,
    write_varint,
    write_varlong,
)

FAST = settings(max_examples=150, deadline=None)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
maybe_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(st.builds(Header, st.text(max_size=20), maybe_bytes), max_size=3).map(tuple)
records = st.lists(
    st.builds(
        SimpleRecord,
        value=maybe_bytes,
        key=maybe_bytes,
        headers=headers,
        timestamp=st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=12,
)


@FAST
@given(int32)
def test_varint_round_trip(value):
    out = bytearray()
    write_varint(out, value)
    assert len(out) == size_of_varint(value) <= 5
    assert read_varint(out, 0) == (value, len(out))


@FAST
@given(int64)
def test_varlong_round_trip(value):
    out = bytearray()
    write_varlong(out, value)
    assert len(out) == size_of_varint(value) <= 10
    assert read_varlong(out, 0) == (value, len(out))


def test_zigzag_known_encodings():
    # Values from the protobuf / Kafka ByteUtils documentation.
    for value, encoded in (
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ):
        out = bytearray()
        write_varint(out, value)
        assert bytes(out) == encoded, value
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(CorruptRecordError, match="past the end"):
        read_varint(b"\xff", 0)


@FAST
@given(
    records,
    st.sampled_from(list(CompressionType)),
    st.integers(0, 2**40),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**62),
    st.integers(-1, 2**15 - 1),
    st.integers(-1, 2**31 - 1000),
    st.booleans(),
)
def test_batch_round_trip_every_field(
    recs, codec, base_offset, leader_epoch, producer_id, producer_epoch, base_sequence, txn
):
    if txn and producer_id < 0:
        producer_id = 1
    data = build_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        is_transactional=txn,
    )
    batch = decode_batch(data)
    h = batch.header
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (base_offset, leader_epoch, 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert h.compression_type == codec and h.is_transactional == txn
    assert h.timestamp_type == TimestampType.CREATE_TIME and not h.is_control_batch
    assert h.records_count == len(recs) and h.last_offset_delta == len(recs) - 1
    assert h.base_timestamp == recs[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert h.size_in_bytes == len(data)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)
    ]
    assert ensure_valid(data) == h == read_header(data)


@FAST
@given(records, st.data())
def test_any_flipped_byte_after_the_crc_field_is_detected(recs, data):
    batch = bytearray(build_batch(recs))
    at = data.draw(st.integers(21, len(batch) - 1))
    batch[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptRecordError):
        ensure_valid(batch)
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)


@FAST
@given(records, st.data())
def test_truncated_batches_are_refused_and_skipped_when_trailing(recs, data):
    batch = build_batch(recs)
    cut = data.draw(st.integers(0, len(batch) - 1))
    with pytest.raises(CorruptRecordError):
        ensure_valid(batch[:cut])
    # A fetch response may end with part of a batch: iteration stops before it.
    whole = build_batch([SimpleRecord(b"first", timestamp=1)])
    assert [b.records[0].value for b in iter_batches(whole + batch[:cut])] == [b"first"]


def test_header_patches_keep_or_recompute_the_crc():
    data = bytearray(
        build_batch([SimpleRecord(b"a", timestamp=5), SimpleRecord(b"b", timestamp=9)])
    )
    crc = read_header(data).crc
    set_base_offset(data, 0, 1234)
    set_partition_leader_epoch(data, 0, 7)
    header = ensure_valid(data)  # the CRC does not cover these two fields
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (1234, 7, crc)
    set_max_timestamp_and_type(data, 0, 99_999, TimestampType.LOG_APPEND_TIME)
    header = ensure_valid(data)
    assert header.crc != crc and header.max_timestamp == 99_999
    assert [r.timestamp for r in decode_batch(data).records] == [99_999, 99_999]


def test_header_only_iteration_agrees_with_decoding():
    stream = b"".join(
        build_batch([SimpleRecord(bytes([i]) * i, timestamp=i)] * (i + 1), base_offset=10 * i)
        for i in range(1, 6)
    )
    headers = [h for _, h in iter_headers(stream)]
    decoded = list(iter_batches(stream))
    assert headers == [b.header for b in decoded]
    assert [h.last_offset for h in headers] == [b.records[-1].offset for b in decoded]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_codecs_round_trip_and_reject_garbage(codec):
    data = b"kafkalab " * 10_000  # more than one 32 KiB xerial / 64 KiB lz4 block
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    if codec != CompressionType.NONE:
        assert len(packed) < len(data)
        with pytest.raises(CorruptRecordError, match=codec.name):
            decompress(codec, b"\x00\x01garbage" + packed[:7])


def test_snappy_reads_xerial_and_raw_and_lz4_writes_independent_blocks():
    import cramjam

    data = b"abc" * 50_000
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data  # what librdkafka sends
    frame = compress(CompressionType.LZ4, data)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little endian
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20  # version 01, block independence set
    assert not flg & 0x08  # no content size, as Java's KafkaLZ4BlockOutputStream


@pytest.mark.parametrize("marker", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_end_transaction_markers(marker):
    data = build_end_txn_marker_batch(
        42, 3, marker, coordinator_epoch=17, base_offset=100, timestamp=5000
    )
    batch = decode_batch(data)
    assert batch.header.is_control_batch and batch.header.is_transactional
    assert (batch.header.producer_id, batch.header.producer_epoch) == (42, 3)
    assert batch.header.base_sequence == -1 and len(batch.records) == 1
    (record,) = batch.records
    assert record.key == struct.pack(">hh", 0, int(marker))
    assert record.value == struct.pack(">hi", 0, 17)
    parsed = parse_control_record(record)
    assert (parsed.type, parsed.coordinator_epoch) == (marker, 17)
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(1, 0, ControlRecordType.LEADER_CHANGE, 0)


def test_builder_refuses_what_kafka_refuses():
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    with pytest.raises(ValueError, match="producer id"):
        build_batch([b"x"], is_transactional=True)
    with pytest.raises(TypeError):
        build_batch([42])
