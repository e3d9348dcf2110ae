"""Real Kafka clients against a kafkalab broker: confluent-kafka (librdkafka) and
kafka-python produce and consume through real sockets, unchanged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import NewTopic as KNewTopic

from kafkalab.records import iter_batches
from kafkalab.server.broker import BrokerProcess, BrokerThread

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {"log.dirs": str(tmp_path_factory.mktemp("broker")), "message.max.bytes": str(200_000)}
    ) as b:
        yield b


def rdkafka_consume(bs: str, topic: str, partitions: int, expected: int, **extra) -> list:
    consumer = Consumer(
        {"bootstrap.servers": bs, "group.id": "t", "enable.auto.commit": False, **extra}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, deadline = [], time.time() + 30
        while len(got) < expected and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_kafka_round_trip(broker, codec, acks):
    bs = broker.bootstrap_servers
    topic = f"rd-{codec}-{acks}"
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        future.result(10)
    idempotent = acks == "all"
    producer = Producer(
        {
            "bootstrap.servers": bs,
            "compression.type": codec,
            "acks": acks,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
        }
    )
    sent = {}
    for i in range(200):
        key = f"key-{i % 17}".encode() if i % 3 else None
        value = f"value-{i}".encode() * 5
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=[("n", str(i).encode())],
            timestamp=1_700_000_000_000 + i,
        )
        sent[str(i)] = (key, value, 1_700_000_000_000 + i)
    assert producer.flush(30) == 0
    del producer
    got = rdkafka_consume(bs, topic, 3, len(sent))
    assert len(got) == len(sent)
    for m in got:
        ((_, n),) = m.headers()
        key, value, ts = sent[n.decode()]
        assert (m.key(), m.value(), m.timestamp()[1]) == (key, value, ts)
    for p in range(3):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))
    # Same key, same partition: librdkafka's partitioner is deterministic per key.
    by_key = {}
    for m in got:
        if m.key() is not None:
            by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(parts) == 1 for parts in by_key.values())
    # The batches on disk are compressed as asked. (librdkafka compresses with lz4
    # only for a broker that speaks FindCoordinator: it sent lz4 batches
    # uncompressed before the group APIs came.)
    on_disk = set()
    for p in range(3):
        for segment in (Path(broker.config.log_dirs[0]) / f"{topic}-{p}").glob("*.log"):
            on_disk |= {b.header.compression_type for b in iter_batches(segment.read_bytes())}
    assert on_disk == {CODECS.index(codec)}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_kafka_python_round_trip_and_offsets_for_times(broker, codec, acks):
    bs = broker.bootstrap_servers
    topic = f"kp-{codec}-{acks}"
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([KNewTopic(topic, 2, 1)])
    admin.close()
    producer = KafkaProducer(
        bootstrap_servers=bs,
        compression_type=None if codec == "none" else codec,
        acks=acks,
        enable_idempotence=acks == "all",
    )
    futures = [
        producer.send(
            topic,
            key=b"k%d" % i,
            value=b"v%d" % i,
            headers=[("i", b"%d" % i)],
            timestamp_ms=2_000_000 + 10 * i,
        )
        for i in range(60)
    ]
    producer.flush()
    metadata = [f.get(10) for f in futures]
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    parts = [KTopicPartition(topic, 0), KTopicPartition(topic, 1)]
    consumer.assign(parts)
    consumer.seek_to_beginning()
    got = list(consumer)
    assert len(got) == 60
    by_index = {int(m.headers[0][1]): m for m in got}
    for i in range(60):
        m = by_index[i]
        assert (m.key, m.value, m.timestamp) == (b"k%d" % i, b"v%d" % i, 2_000_000 + 10 * i)
        if acks != 0:  # with acks=0 the producer never learns the offsets
            assert (m.partition, m.offset) == (metadata[i].partition, metadata[i].offset)
    for p in (0, 1):
        offsets = [m.offset for m in got if m.partition == p]
        assert offsets == list(range(len(offsets)))
    # ListOffsets by timestamp: the first record at or after the time.
    target = by_index[31]
    tp = KTopicPartition(topic, target.partition)
    found = consumer.offsets_for_times({tp: 2_000_000 + 10 * 31})
    assert found[tp].offset == target.offset
    assert sum(consumer.end_offsets(parts).values()) == 60
    assert set(consumer.beginning_offsets(parts).values()) == {0}
    consumer.close()


def test_message_near_the_size_limit_and_over_it(broker):
    bs = broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": bs, "message.max.bytes": 1_000_000, "linger.ms": 0})
    results = []
    # Separate flushes, so librdkafka sends each in a batch of its own.
    producer.produce("big", value=b"x" * 190_000, on_delivery=lambda e, m: results.append(e))
    producer.flush(30)
    producer.produce("big", value=b"y" * 250_000, on_delivery=lambda e, m: results.append(e))
    producer.flush(30)
    del producer
    assert results[0] is None
    assert results[1] is not None and "MSG_SIZE_TOO_LARGE" in results[1].name()
    got = rdkafka_consume(bs, "big", 1, 1)
    assert len(got) == 1 and len(got[0].value()) == 190_000


def test_broker_restart_between_produce_and_consume(tmp_path):
    props = {"log.dirs": str(tmp_path / "logs")}
    with BrokerProcess(props) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "1"})
        for i in range(100):
            producer.produce("restart", key=b"%d" % i, value=b"value %d" % i)
        assert producer.flush(30) == 0
        del producer
        assert broker.stop() == 0
        assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    with BrokerProcess(props) as broker:
        got = rdkafka_consume(broker.bootstrap_servers, "restart", 1, 100)
        assert [m.value() for m in got] == [b"value %d" % i for i in range(100)]


def test_sigkill_then_restart_recovers_the_log(tmp_path):
    props = {"log.dirs": str(tmp_path / "logs")}
    broker = BrokerProcess(props).start()
    try:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        for i in range(50):
            producer.produce("killed", value=b"before %d" % i)
        assert producer.flush(30) == 0
        del producer
    finally:
        broker.kill()
    assert not (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    with BrokerProcess(props) as broker:
        got = rdkafka_consume(broker.bootstrap_servers, "killed", 1, 50)
        # Acknowledged data reached the page cache before SIGKILL: the process died, not
        # the machine, so recovery keeps all of it.
        assert [m.value() for m in got] == [b"before %d" % i for i in range(50)]
