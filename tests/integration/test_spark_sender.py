"""kafkalab.spark's own produce (kafkalab.spark.sender) against a real kafkalab
broker: what it writes, librdkafka (a confluent-kafka Consumer) reads back
identically, keys in the partitions Java's murmur2 picks, headers, null keys and
values, a topic column; many requests in flight; Kafka's error for a refused
write; and `auto` choosing librdkafka for an option only librdkafka honours.
No Spark session: the executors' produce_batches itself."""

from __future__ import annotations

import pytest
from spark_helpers import consume_all, create_topic

from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.integration
pa = pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")

from kafkalab.client.partitioner import partition_for_key  # noqa: E402
from kafkalab.spark import kafka_io, sender  # noqa: E402
from kafkalab.spark.errors import KafkaWriteError  # noqa: E402
from kafkalab.spark.options import Producer, parse_write_options  # noqa: E402

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("spark-sender-broker"))}) as b:
        yield b


def options(bs: str, topic: str | None, producer: str = "kafkalab", **extra):
    opts = parse_write_options(
        {"kafka.bootstrap.servers": bs, "kafkalab.producer": producer, **extra}
        | ({} if topic is None else {"topic": topic})
    )
    assert opts.producer == Producer(producer)
    return opts


def test_what_the_own_produce_writes_librdkafka_reads_back(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "own-write", partitions=4)
    n = 3000
    keys = [None if i % 7 == 0 else b"key-%d" % (i % 50) for i in range(n)]
    values = [None if i % 11 == 0 else b"value-%d" % i for i in range(n)]
    headers = [
        None if i % 3 else [{"key": "h", "value": b"%d" % i}, {"key": "z", "value": None}]
        for i in range(n)
    ]
    batches = [
        pa.RecordBatch.from_arrays(
            [
                pa.array(keys[s : s + 500], pa.binary()),
                pa.array(values[s : s + 500], pa.binary()),
                pa.array(headers[s : s + 500], HEADERS),
            ],
            names=["key", "value", "headers"],
        )
        for s in range(0, n, 500)
    ]
    # small batches: many Produce requests, several in flight per connection
    opts = options(bs, "own-write", **{"kafka.batch.size": "4000"})
    assert kafka_io.produce_batches(opts, batches) == n
    got = consume_all(bs, "own-write", 4)
    assert len(got) == n
    for m in got:
        if m.key() is not None:
            assert m.partition() == partition_for_key(m.key(), 4)
    # Each partition holds its rows in the order given.
    by_partition: dict = {}
    for m in sorted(got, key=lambda m: (m.partition(), m.offset())):
        by_partition.setdefault(m.partition(), []).append(
            (m.key(), m.value(), tuple(m.headers() or ()))
        )
    expected_rows = [
        (k, v, () if h is None else (("h", h[0]["value"]), ("z", None)))
        for k, v, h in zip(keys, values, headers, strict=True)
    ]
    for rows in by_partition.values():
        positions = [expected_rows.index(r) for r in rows if rows.count(r) == 1]
        assert positions == sorted(positions)
    assert sorted(map(repr, (r for rows in by_partition.values() for r in rows))) == sorted(
        map(repr, expected_rows)
    )


def test_a_topic_column_and_an_explicit_partition(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "own-t1", partitions=2)
    create_topic(bs, "own-t2", partitions=3)
    batch = pa.RecordBatch.from_pydict(
        {
            "value": pa.array(["a", "b", "c", "d"]),
            "topic": pa.array(["own-t1", "own-t2", "own-t2", "own-t1"]),
            "partition": pa.array([1, 2, None, 0], pa.int32()),
            "key": pa.array(["x", None, "k", None]),
        }
    )
    assert kafka_io.produce_batches(options(bs, None), [batch]) == 4
    t1 = {(m.partition(), m.value()) for m in consume_all(bs, "own-t1", 2)}
    t2 = {(m.partition(), m.value()) for m in consume_all(bs, "own-t2", 3)}
    assert t1 == {(1, b"a"), (0, b"d")}
    assert t2 == {(2, b"b"), (partition_for_key(b"k", 3), b"c")}


def test_a_refused_write_is_kafkas_error_for_its_partition(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "own-small", partitions=1, config={"max.message.bytes": "1000"})
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"x" * 5000])})
    with pytest.raises(
        KafkaWriteError, match="own-small-0 failed: Kafka's error MESSAGE_TOO_LARGE"
    ):
        kafka_io.produce_batches(options(bs, "own-small"), [batch])


def test_auto_writes_with_the_own_produce_unless_an_option_needs_librdkafka(broker, monkeypatch):
    bs = broker.bootstrap_servers
    create_topic(bs, "own-auto", partitions=1)
    used = []
    real = sender.produce_batches
    monkeypatch.setattr(sender, "produce_batches", lambda *a: used.append("own") or real(*a))
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v%d" % i for i in range(10)])})
    auto = options(bs, "own-auto", "auto")
    assert kafka_io.produce_batches(auto, [batch]) == 10
    assert used == ["own"]
    # a security setting, a codec's level, a transactional id: librdkafka writes
    for extra in (
        {"kafka.security.protocol": "SSL"},
        {"kafka.compression.level": "5"},
        {"kafka.transactional.id": "tx"},
    ):
        assert not options(bs, "own-auto", "auto", **extra).own_produce(True)
    lib = options(
        bs,
        "own-auto",
        "auto",
        **{"kafka.security.protocol": "plaintext", "kafka.compression.level": "5"},
    )
    assert kafka_io.produce_batches(lib, [batch]) == 10
    assert used == ["own"]
    assert [m.value() for m in consume_all(bs, "own-auto", 1)] == [
        b"v%d" % i for i in range(10)
    ] * 2


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_reads_what_the_own_produce_compressed(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"own-{codec}"
    create_topic(bs, topic, partitions=2)
    values = [b"%d-" % i + b"abc" * 30 for i in range(2000)]
    keys = [b"k%d" % (i % 20) for i in range(2000)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(values, pa.binary()), pa.array(keys, pa.binary())], names=["value", "key"]
    )
    opts = options(bs, topic, **{"kafka.compression.type": codec})
    assert kafka_io.produce_batches(opts, [batch]) == 2000
    got = consume_all(bs, topic, 2)
    assert sorted((m.key(), m.value()) for m in got) == sorted(zip(keys, values, strict=True))
    assert all(m.partition() == partition_for_key(m.key(), 2) for m in got)
    in_order = {p: [m.value() for m in got if m.partition() == p] for p in (0, 1)}
    for p, vs in in_order.items():
        assert vs == [v for k, v in zip(keys, values, strict=True) if partition_for_key(k, 2) == p]
    # The log holds the batches as the own produce compressed them.
    from kafkalab.client.network_client import NetworkClient
    from kafkalab.protocol.api_keys import ApiKeys
    from kafkalab.records import CompressionType
    from kafkalab.records.record_batch import iter_headers
    from kafkalab.spark.fetcher import fetch_request

    client = NetworkClient(bs)
    try:
        conn = client.connection(client.leader_for(topic, 0))
        part = conn.request(ApiKeys.FETCH, fetch_request(topic, 0, 0, 8 << 20, False))
        data = part["responses"][0]["partitions"][0]["records"]
        codecs = {h.compression_type for _, h in iter_headers(data)}
        assert codecs == {CompressionType[codec.upper()]}
    finally:
        client.close()


def test_a_batch_sent_twice_is_written_once(broker):
    """The same batch (same producer id, epoch and sequence) sent again, as after a
    lost answer: the broker's answer (its offset again, or DUPLICATE_SEQUENCE_NUMBER)
    counts as written, and the log holds the records once."""
    bs = broker.bootstrap_servers
    create_topic(bs, "own-dup", partitions=1)
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"a", b"b", b"c"])})
    s = sender.Sender(options(bs, "own-dup"))
    try:
        [encoded] = s.encoder.encode(batch, "own-dup", s._partition_count)
        assert encoded.base_sequence == 0 and s.encoder.producer_id >= 0
        for _ in range(2):
            s._dispatch([encoded])
            s.flush()
        assert s.written == 2 * encoded.count and not s.failed
    finally:
        s.close()
    assert [m.value() for m in consume_all(bs, "own-dup", 1)] == [b"a", b"b", b"c"]
