"""Compatibility proof: kafkalab's batches against kafka-python's record builder.

kafka-python (a real Kafka client library) builds RecordBatch v2 with its own
code. For the same records and producer fields, kafkalab must write the same
bytes, and each side must decode (and CRC-check) the other's batches.

Byte identity holds for NONE, GZIP (same zlib level, mtime 0), SNAPPY (both
write Xerial framing with 32 KiB blocks) and ZSTD (level 3, same libzstd). For
LZ4 it cannot: kafkalab writes frames as Kafka's Java client does (no content
size field, level 9) while kafka-python stores the content size and uses level
0, so the compressed bytes differ while both are valid LZ4 frames. For LZ4 the
test checks instead that every header field but the length and CRC agrees and
that both sides decode both batches to the same records.

confluent-kafka (librdkafka) builds batches inside its C library and only hands
them to a broker, so its batches are checked against the kafkalab broker in the
wire-protocol tests rather than here.
"""

from __future__ import annotations

import gzip
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkalab.records import CompressionType, Header, SimpleRecord, build_batch, decode_batch

TIMESTAMP = 1_700_000_000_000
IDENTICAL = [
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.ZSTD,
]

record_lists = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=50),  # key
        st.binary(min_size=0, max_size=300).map(lambda b: b * 3),  # compressible value
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=2),
        st.integers(0, 10_000),  # timestamp delta
    ),
    min_size=1,
    max_size=20,
)


@pytest.fixture(autouse=True)
def fixed_gzip_mtime(monkeypatch):
    """kafka-python stamps gzip members with the current time; Java (and kafkalab)
    write mtime 0. Freeze gzip's clock at 0 so the two can be compared."""
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: 0))


def kafka_python_batch(
    recs, codec, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, (key, value, headers, delta) in enumerate(recs):
        assert builder.append(offset, TIMESTAMP + delta, key, value, headers) is not None
    return bytes(builder.build())


def kafkalab_batch(
    recs, codec, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False
) -> bytes:
    level = 9 if codec == CompressionType.GZIP else None  # kafka-python's gzip level
    return build_batch(
        [
            SimpleRecord(
                value,
                key=key,
                headers=tuple(Header(k, v) for k, v in headers),
                timestamp=TIMESTAMP + delta,
            )
            for key, value, headers, delta in recs
        ],
        compression=codec,
        compression_level=level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=0,  # kafka-python writes 0 where Java writes -1
    )


def decoded_by_kafka_python(data: bytes):
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc(), "kafka-python rejects the CRC"
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


def decoded_by_kafkalab(data: bytes):
    return [
        (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for r in decode_batch(data).records
    ]


@pytest.mark.parametrize("codec", IDENTICAL, ids=lambda c: c.name)
@settings(max_examples=40, deadline=None)
@given(recs=record_lists)
def test_byte_identical_batches(codec, recs):
    theirs = kafka_python_batch(recs, codec)
    ours = kafkalab_batch(recs, codec)
    if codec != CompressionType.NONE and decode_batch(theirs).header.compression_type != codec:
        # kafka-python sends a batch uncompressed when compression does not shrink
        # it; Kafka's Java client does not. Compare with our uncompressed batch.
        ours = kafkalab_batch(recs, CompressionType.NONE)
    assert ours == theirs
    assert decoded_by_kafkalab(theirs) == decoded_by_kafka_python(ours)


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_idempotent_and_transactional_fields_identical(codec):
    recs = [(b"key-%d" % i, b"value %d " % i * 40, [("h", b"v")], i) for i in range(30)]
    fields = dict(producer_id=4242, producer_epoch=3, base_sequence=1000, transactional=True)
    theirs = kafka_python_batch(recs, codec, **fields)
    ours = kafkalab_batch(recs, codec, **fields)
    expected = [(i, TIMESTAMP + i, k, v, h) for i, (k, v, h, _) in enumerate(recs)]
    assert decoded_by_kafka_python(ours) == expected == decoded_by_kafkalab(theirs)
    if codec in IDENTICAL:
        assert ours == theirs
    else:  # LZ4: see the module docstring
        a, b = decode_batch(ours).header, decode_batch(theirs).header
        differing = {f for f in a._fields if getattr(a, f) != getattr(b, f)}
        assert differing <= {"batch_length", "crc"}
        assert a.compression_type == b.compression_type == CompressionType.LZ4
