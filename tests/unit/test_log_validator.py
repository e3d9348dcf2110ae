"""LogValidator: records inside a batch whose CRC is valid, checked as Kafka checks them.

Every corrupt batch here carries a correct CRC-32C (recomputed after the damage),
so only the record walk can refuse it. The property: whatever bytes a client
sends, the log either refuses them with the index of a record, or stores a batch
that decodes completely (what a consumer then reads).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalab.errors import Errors
from kafkalab.records.compression import compress
from kafkalab.records.memory_records import SimpleRecord, build_batch, decode_batch, iter_batches
from kafkalab.records.record import Header, encode_record
from kafkalab.records.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    CompressionType,
    TimestampType,
    compute_crc,
    iter_headers,
    read_header,
)
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.storage.errors import (
    CompactedRecordWithoutKeyError,
    InvalidTimestampError,
    RecordValidationError,
)
from kafkalab.storage.log_config import InvalidConfigError, LogConfig
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.unified_log import UnifiedLog

NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def with_body(batch: bytes, body: bytes, count: int | None = None) -> bytearray:
    """`batch` with its records replaced by `body` (and recordsCount by `count`),
    batchLength and CRC made right again: only the records are wrong."""
    out = bytearray(batch[:RECORD_BATCH_OVERHEAD]) + body
    struct.pack_into(">i", out, LENGTH_OFFSET, len(out) - LOG_OVERHEAD)
    if count is not None:
        struct.pack_into(">i", out, RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def three() -> bytes:
    return build_batch([SimpleRecord(b"v%d" % i, key=b"k", timestamp=NOW + i) for i in range(3)])


def log_at(tmp_path, **config) -> UnifiedLog:
    return UnifiedLog(tmp_path / "t-0", LogConfig(**config), clock=Clock())


def refused(log: UnifiedLog, data: bytes | bytearray) -> RecordValidationError:
    with pytest.raises(RecordValidationError) as e:
        log.append_as_leader(bytearray(data))
    assert log.log_end_offset == 0, "a refused batch must not be written"
    return e.value


# -- records not well formed ------------------------------------------------------------------


def test_a_count_larger_than_the_records_is_refused_at_the_first_missing_record(tmp_path):
    batch = three()
    damaged = with_body(batch, batch[RECORD_BATCH_OVERHEAD:], count=4)
    struct.pack_into(">i", damaged, 23, 3)  # lastOffsetDelta agrees: 4 records
    struct.pack_into(">I", damaged, CRC_OFFSET, compute_crc(damaged, 0, len(damaged)))
    error = refused(log_at(tmp_path), damaged)
    assert error.code == Errors.INVALID_RECORD
    assert [i for i, _ in error.record_errors] == [3]


def test_bytes_after_the_declared_records_are_refused(tmp_path):
    batch = three()
    error = refused(log_at(tmp_path), with_body(batch, batch[RECORD_BATCH_OVERHEAD:] + b"\x00"))
    assert error.code == Errors.INVALID_RECORD
    assert [i for i, _ in error.record_errors] == [3]
    assert "declared batch size" in error.record_errors[0][1]


def test_a_record_length_past_the_batch_names_that_record(tmp_path):
    batch = three()
    records = [encode_record(i, i, b"k", b"v%d" % i) for i in range(3)]
    bad = bytearray(records[1])
    bad[0] = 0x7E  # zigzag 63: far more than the record holds
    error = refused(log_at(tmp_path), with_body(batch, records[0] + bad + records[2]))
    assert error.code == Errors.INVALID_RECORD
    assert error.record_errors[0][0] == 1


@pytest.mark.parametrize(
    "field, what",
    [
        ("key", "key length"),
        ("value", "value length"),
    ],
)
def test_a_negative_length_other_than_null_is_refused(tmp_path, field, what):
    batch = three()
    good = encode_record(0, 0, b"k", b"v")
    # body: attributes, ts delta, offset delta, key length (2 -> 1), 'k', value length
    body = bytearray(good[1:])
    at = 3 if field == "key" else 5
    body[at] = 0x03  # zigzag -2
    record = bytes([len(body) << 1]) + body
    error = refused(log_at(tmp_path), _one(batch, record))
    assert error.record_errors[0][0] == 0
    assert what in error.record_errors[0][1]


def _one(batch: bytes, record: bytes) -> bytearray:
    out = bytearray(with_body(batch, record, count=1))
    struct.pack_into(">i", out, 23, 0)  # lastOffsetDelta 0: one record
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def test_a_null_header_key_is_refused(tmp_path):
    batch = three()
    good = encode_record(0, 0, b"k", b"v", (Header("h", b"x"),))
    body = bytearray(good[1:])
    # after attributes, ts, offset, key length, 'k', value length, 'v', header count
    body[8] = 0x01  # the header key's length, zigzag -1: a null header key
    error = refused(log_at(tmp_path), _one(batch, bytes([len(body) << 1]) + body))
    assert "header key" in error.record_errors[0][1]


def test_a_varint_longer_than_five_bytes_is_refused(tmp_path):
    batch = three()
    body = b"\x00" + b"\x00" + b"\x00" + b"\xff\xff\xff\xff\xff\x01" + b"\x01" + b"\x00"
    error = refused(log_at(tmp_path), _one(batch, bytes([len(body) << 1]) + body))
    assert error.code == Errors.INVALID_RECORD
    assert "varint" in error.record_errors[0][1]


def test_compressed_records_are_walked_too(tmp_path):
    batch = three()
    records = b"".join(encode_record(i, i, b"k", b"v%d" % i) for i in range(3))
    body = compress(CompressionType.GZIP, records + b"\x02")  # a trailing stray byte
    damaged = with_body(batch, body)
    struct.pack_into(">h", damaged, ATTRIBUTES_OFFSET, int(CompressionType.GZIP))
    struct.pack_into(">I", damaged, CRC_OFFSET, compute_crc(damaged, 0, len(damaged)))
    error = refused(log_at(tmp_path), damaged)
    assert [i for i, _ in error.record_errors] == [3]


def test_records_that_cannot_be_decompressed_are_refused(tmp_path):
    batch = three()
    damaged = with_body(batch, b"not gzip at all")
    struct.pack_into(">h", damaged, ATTRIBUTES_OFFSET, int(CompressionType.GZIP))
    struct.pack_into(">I", damaged, CRC_OFFSET, compute_crc(damaged, 0, len(damaged)))
    error = refused(log_at(tmp_path), damaged)
    assert error.code == Errors.INVALID_RECORD


# -- the property: refused with an index, or stored and readable --------------------------------


values = st.lists(
    st.tuples(st.binary(max_size=40) | st.none(), st.binary(max_size=40) | st.none()),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    records=values,
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(-3, 3),
)
def test_damaged_records_with_a_valid_crc_are_refused_or_stored_readable(
    tmp_path_factory, records, codec, edits, cut
):
    simple = [SimpleRecord(v, key=k, timestamp=NOW + i) for i, (k, v) in enumerate(records)]
    plain = b"".join(
        encode_record(i, r.timestamp - NOW, r.key, r.value) for i, r in enumerate(simple)
    )
    body = bytearray(plain)
    for at, value in edits:
        body[at % len(body)] = value
    if cut < 0:
        body = body[:cut]
    elif cut > 0:
        body += bytes(cut)
    batch = build_batch(simple, compression=codec)
    damaged = with_body(batch, compress(codec, bytes(body)))
    log = UnifiedLog(tmp_path_factory.mktemp("p") / "t-0", LogConfig(), clock=Clock())
    try:
        log.append_as_leader(damaged)
    except RecordValidationError as e:
        assert e.record_errors, "a refusal names the records"
        assert all(0 <= i <= len(simple) for i, _ in e.record_errors)
        assert log.log_end_offset == 0
        return
    stored = log.read(0, 1 << 20).read_bytes()
    batches = list(iter_batches(stored))  # decodes every record, or raises
    assert sum(len(b.records) for b in batches) == len(simple)
    assert [r.offset for b in batches for r in b.records] == list(range(len(simple)))


# -- what a valid batch becomes --------------------------------------------------------------


def test_the_batch_max_timestamp_is_set_from_its_records(tmp_path):
    batch = bytearray(
        build_batch([SimpleRecord(b"a", timestamp=NOW), SimpleRecord(b"b", timestamp=NOW + 5)])
    )
    struct.pack_into(">q", batch, 35, NOW + 999)  # a lying maxTimestamp
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    log = log_at(tmp_path)
    info = log.append_as_leader(batch)
    assert info.max_timestamp == NOW + 5
    header = read_header(log.read(0, 1 << 20).read_bytes())
    assert header.max_timestamp == NOW + 5


def test_offset_deltas_out_of_order_are_rebuilt_as_kafka_does(tmp_path):
    batch = build_batch([SimpleRecord(b"x%d" % i, timestamp=NOW) for i in range(3)])
    body = b"".join(encode_record(d, 0, None, b"x%d" % i) for i, d in enumerate((0, 2, 1)))
    log = log_at(tmp_path)
    log.append_as_leader(with_body(batch, body))
    got = decode_batch(log.read(0, 1 << 20).read_bytes())
    assert [(r.offset, r.value) for r in got.records] == [(0, b"x0"), (1, b"x1"), (2, b"x2")]


def test_a_compacted_topic_names_every_record_without_a_key(tmp_path):
    batch = build_batch(
        [
            SimpleRecord(b"a", key=b"k"),
            SimpleRecord(b"b"),
            SimpleRecord(b"c", key=b"k"),
            SimpleRecord(b"d"),
        ]
    )
    with pytest.raises(CompactedRecordWithoutKeyError) as e:
        log_at(tmp_path, cleanup_policy="compact").append_as_leader(bytearray(batch))
    assert e.value.code == Errors.INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [1, 3]


def test_timestamps_outside_the_topic_bounds_are_refused_per_record(tmp_path):
    batch = build_batch(
        [
            SimpleRecord(b"ok", timestamp=NOW),
            SimpleRecord(b"future", timestamp=NOW + 3_600_001),
            SimpleRecord(b"old", timestamp=NOW - 10_001),
        ]
    )
    log = log_at(
        tmp_path, message_timestamp_after_max_ms=3_600_000, message_timestamp_before_max_ms=10_000
    )
    with pytest.raises(InvalidTimestampError) as e:
        log.append_as_leader(bytearray(batch))
    assert e.value.code == Errors.INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [1, 2]
    assert log.log_end_offset == 0


def test_a_broker_takes_kafka_4_timestamp_defaults():
    from kafkalab.server.config import KafkaConfig

    config = KafkaConfig.from_properties({"log.dirs": "/tmp/x"})
    assert config.log_config.message_timestamp_after_max_ms == 3_600_000
    assert config.log_config.message_timestamp_before_max_ms == 2**63 - 1
    override = KafkaConfig.from_properties({"log.message.timestamp.after.max.ms": "5"})
    assert override.log_config.message_timestamp_after_max_ms == 5


def test_a_producer_may_not_claim_log_append_time_without_timestamps(tmp_path):
    batch = bytearray(build_batch([SimpleRecord(b"a", timestamp=NOW)]))
    struct.pack_into(">q", batch, 35, -1)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 0x08)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    with pytest.raises(InvalidTimestampError):
        log_at(tmp_path).append_as_leader(batch)


# -- compression.type ------------------------------------------------------------------------


def stored_codecs(log: UnifiedLog) -> list[CompressionType]:
    data = log.read(0, 1 << 20).read_bytes()
    return [h.compression_type for _, h in iter_headers(data)]


def stored_records(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None, int]]:
    data = log.read(0, 1 << 20).read_bytes()
    return [(r.offset, r.key, r.value, r.timestamp) for b in iter_batches(data) for r in b.records]


@pytest.mark.parametrize(
    "topic, sent, stored",
    [
        ("producer", CompressionType.LZ4, CompressionType.LZ4),
        ("producer", CompressionType.NONE, CompressionType.NONE),
        ("gzip", CompressionType.NONE, CompressionType.GZIP),
        ("zstd", CompressionType.SNAPPY, CompressionType.ZSTD),
        ("uncompressed", CompressionType.LZ4, CompressionType.NONE),
        ("lz4", CompressionType.LZ4, CompressionType.LZ4),
        ("snappy", CompressionType.GZIP, CompressionType.SNAPPY),
    ],
)
def test_compression_type_recompresses_on_append(tmp_path, topic, sent, stored):
    records = [
        SimpleRecord(
            b"value-%d" % i, key=b"k%d" % i, headers=(Header("h", b"1"),), timestamp=NOW + i
        )
        for i in range(5)
    ]
    log = log_at(tmp_path, compression_type=topic)
    info = log.append_as_leader(
        bytearray(
            build_batch(records, compression=sent, producer_id=7, producer_epoch=1, base_sequence=0)
        )
    )
    assert info.first_offset == 0 and info.last_offset == 4
    log.append_as_leader(bytearray(build_batch(records[:2], compression=sent)))
    assert stored_codecs(log) == [stored, stored]
    assert stored_records(log) == [(i, b"k%d" % i, b"value-%d" % i, NOW + i) for i in range(5)] + [
        (5 + i, b"k%d" % i, b"value-%d" % i, NOW + i) for i in range(2)
    ]
    first = read_header(log.read(0, 1 << 20).read_bytes())
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 1, 0)


def test_log_append_time_survives_recompression(tmp_path):
    clock = Clock(NOW + 60_000)
    log = UnifiedLog(
        tmp_path / "t-0",
        LogConfig(compression_type="gzip", message_timestamp_type="LogAppendTime"),
        clock=clock,
    )
    info = log.append_as_leader(bytearray(build_batch([SimpleRecord(b"a", timestamp=NOW)])))
    assert info.log_append_time == NOW + 60_000
    got = decode_batch(log.read(0, 1 << 20).read_bytes())
    assert got.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert got.header.compression_type == CompressionType.GZIP
    assert [r.timestamp for r in got.records] == [NOW + 60_000]


@pytest.mark.parametrize(
    "key, value",
    [
        ("compression.type", "brotli"),
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "0"),
        ("compression.zstd.level", "23"),
        ("message.timestamp.after.max.ms", "-1"),
        ("leader.replication.throttled.replicas", "0-1"),
        ("remote.storage.enable", "true"),
        ("local.retention.ms", "-3"),
        ("preallocate", "maybe"),
    ],
)
def test_topic_configs_are_validated_as_kafka_validates_them(key, value):
    with pytest.raises(InvalidConfigError):
        LogConfig().with_overrides({key: value})


def test_every_kafka_topic_config_is_accepted_and_described():
    kafka_4_topic_configs = {
        "cleanup.policy": "compact,delete",
        "compression.type": "zstd",
        "compression.gzip.level": "9",
        "compression.lz4.level": "17",
        "compression.zstd.level": "-5",
        "delete.retention.ms": "1000",
        "file.delete.delay.ms": "1000",
        "flush.messages": "10",
        "flush.ms": "1000",
        "follower.replication.throttled.replicas": "0:1,1:2",
        "index.interval.bytes": "100",
        "leader.replication.throttled.replicas": "*",
        "local.retention.bytes": "-2",
        "local.retention.ms": "-2",
        "max.compaction.lag.ms": "1000",
        "max.message.bytes": "1000",
        "message.timestamp.after.max.ms": "1000",
        "message.timestamp.before.max.ms": "1000",
        "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": "0.1",
        "min.compaction.lag.ms": "10",
        "min.insync.replicas": "2",
        "preallocate": "true",
        "remote.log.copy.disable": "true",
        "remote.log.delete.on.disable": "true",
        "remote.storage.enable": "false",
        "retention.bytes": "1000",
        "retention.ms": "1000",
        "segment.bytes": "100000",
        "segment.index.bytes": "1000",
        "segment.jitter.ms": "10",
        "segment.ms": "1000",
        "unclean.leader.election.enable": "true",
    }
    described = LogConfig().with_overrides(kafka_4_topic_configs).to_properties()
    assert {k: described[k] for k in kafka_4_topic_configs} == kafka_4_topic_configs


# -- on the wire: Produce v8+ record_errors ---------------------------------------------------


class Timers:
    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        return self.Handle()


def test_the_produce_response_lists_the_refused_records(tmp_path):
    from kafkalab.protocol import RequestHeader
    from kafkalab.protocol.api_keys import ApiKeys
    from kafkalab.protocol.header import decode_response, encode_response
    from kafkalab.protocol.messages import APIS
    from kafkalab.server.apis.produce import handle_produce
    from kafkalab.server.config import KafkaConfig
    from kafkalab.server.kafka_apis import KafkaApis
    from kafkalab.server.metadata_cache import StandaloneMetadataCache

    config = KafkaConfig(log_dirs=[str(tmp_path)])
    rm = ReplicaManager(LogManager(tmp_path, LogConfig()), Timers(), broker_id=1)
    cache = StandaloneMetadataCache(config, rm, lambda: ("127.0.0.1", 9092))
    apis = KafkaApis(config, rm, cache, producer_ids=None)
    rm.make_leader(("t", 0), 0, [1], [1], 0)
    batch = three()
    damaged = with_body(batch, batch[RECORD_BATCH_OVERHEAD:] + b"\x00\x00")
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "records": bytes(damaged)}]}
        ],
    }
    answer = handle_produce(apis, RequestHeader(0, 9, 1, "c"), body)
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == Errors.INVALID_RECORD
    assert [e["batch_index"] for e in part["record_errors"]] == [3]
    # and the bytes a v9 client reads carry them
    api = APIS[ApiKeys.PRODUCE]
    frame = b"".join(bytes(p) for p in encode_response(api, 9, 5, answer))
    _, decoded = decode_response(api, 9, frame[4:])
    assert decoded["responses"][0]["partitions"][0]["record_errors"] == [
        {
            "batch_index": 3,
            "batch_index_error_message": part["record_errors"][0]["batch_index_error_message"],
        }
    ]


# -- the vectorized walk agrees with the record-by-record walk -----------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.lists(st.binary(max_size=300) | st.none(), min_size=64, max_size=200),
    keys=st.booleans(),
    headers=st.booleans(),
    spread=st.integers(0, 10**7),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
)
def test_the_vectorized_walk_agrees_with_the_one_by_one_walk(values, keys, headers, spread, edits):
    from kafkalab.storage.log_validator import _walk_vectorized, walk_records_one_by_one

    body = bytearray()
    for i, v in enumerate(values):
        hdrs = (Header(f"h{i % 3}", v),) if headers and i % 5 == 0 else ()
        body += encode_record(i, (i * 7919) % (spread + 1), b"k%d" % i if keys else None, v, hdrs)
    for at, value in edits:
        body[at % len(body)] = value
    count = len(values)
    try:
        expected = walk_records_one_by_one(body, 0, len(body), count, need_keys=True)
    except RecordValidationError:
        expected = None
    got = _walk_vectorized(bytes(body), 0, len(body), count, True)
    if got is not None:
        assert got == expected
    elif not edits and all(v is None or len(v) < 8000 for v in values):
        raise AssertionError("a well-formed batch of small records fell back to one by one")


def test_a_large_batch_takes_the_vectorized_walk():
    from kafkalab.storage.log_validator import _walk_vectorized

    records = [SimpleRecord(b"x" * 100, timestamp=NOW + (i * 37) % 1000) for i in range(1000)]
    batch = build_batch(records)
    found = _walk_vectorized(batch, RECORD_BATCH_OVERHEAD, len(batch), 1000, False)
    assert found is not None
    max_delta, max_index, in_order, keyless = found
    assert (max_delta, in_order, keyless) == (999, True, [])
    assert records[max_index].timestamp == NOW + 999
