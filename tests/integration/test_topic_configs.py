"""Topic configs through real admin clients: every config Kafka 4.0 defines is
accepted by CreateTopics, bad values answer INVALID_CONFIG, and the ones with
behaviour change what the broker stores: compression.type recompresses batches
on append, message.timestamp.type=LogAppendTime stamps the broker's time,
message.timestamp.after.max.ms refuses records from the future (INVALID_TIMESTAMP)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import InvalidConfigurationError

from kafkalab.records.record_batch import CompressionType, iter_headers
from kafkalab.server.broker import BrokerThread

KAFKA_4_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "compression.type": "zstd",
    "compression.gzip.level": "9",
    "compression.lz4.level": "10",
    "compression.zstd.level": "5",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "100000",
    "flush.ms": "100000",
    "follower.replication.throttled.replicas": "0:1",
    "index.interval.bytes": "100",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "100000",
    "message.timestamp.after.max.ms": "100000",
    "message.timestamp.before.max.ms": "100000000000",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.2",
    "min.compaction.lag.ms": "10",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "100000000",
    "segment.bytes": "1000000",
    "segment.index.bytes": "100000",
    "segment.jitter.ms": "0",
    "segment.ms": "100000000",
    "unclean.leader.election.enable": "false",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        yield b


def stored_codecs(broker, topic: str) -> list[CompressionType]:
    directory = Path(broker.config.log_dirs[0]) / f"{topic}-0"
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    return [h.compression_type for _, h in iter_headers(data)]


def rd_create(bs: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(15)


def rd_produce(bs: str, topic: str, values: list[bytes], **extra) -> list:
    delivered = []
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5, **extra})
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda e, m: delivered.append((e, m)))
    assert producer.flush(30) == 0
    return delivered


def rd_consume(bs: str, topic: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "t", "enable.auto.commit": False})
    try:
        consumer.assign([RdTopicPartition(topic, 0, 0)])
        got, deadline = [], time.time() + 30
        while len(got) < expected and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        consumer.close()


def test_confluent_kafka_creates_a_topic_with_every_kafka_topic_config(broker):
    rd_create(broker.bootstrap_servers, "all-configs", KAFKA_4_TOPIC_CONFIGS)
    rd_produce(broker.bootstrap_servers, "all-configs", [b"a", b"b"])
    assert [m.value() for m in rd_consume(broker.bootstrap_servers, "all-configs", 2)] == [
        b"a",
        b"b",
    ]
    assert stored_codecs(broker, "all-configs") == [CompressionType.ZSTD]


def test_kafka_python_creates_a_topic_with_every_kafka_topic_config(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics(
            [KNewTopic("all-configs-kp", 1, 1, topic_configs=KAFKA_4_TOPIC_CONFIGS)]
        )
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics(
                [KNewTopic("bad-codec-kp", 1, 1, topic_configs={"compression.type": "brotli"})]
            )
    finally:
        admin.close()


@pytest.mark.parametrize(
    "key, value",
    [
        ("compression.type", "brotli"),
        ("compression.zstd.level", "99"),
        ("message.timestamp.type", "Now"),
        ("remote.storage.enable", "true"),
        ("no.such.config", "1"),
    ],
)
def test_confluent_kafka_gets_invalid_config_for_a_bad_value(broker, key, value):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    future = admin.create_topics([NewTopic(f"bad-{key}", 1, 1, config={key: value})])[f"bad-{key}"]
    with pytest.raises(KafkaException) as e:
        future.result(15)
    assert e.value.args[0].name() == "INVALID_CONFIG"


@pytest.mark.parametrize(
    "topic_codec, producer_codec, stored",
    [
        ("producer", "lz4", CompressionType.LZ4),
        ("gzip", "none", CompressionType.GZIP),
        ("uncompressed", "snappy", CompressionType.NONE),
        ("lz4", "zstd", CompressionType.LZ4),
    ],
)
def test_compression_type_recompresses_what_librdkafka_sends(
    broker, topic_codec, producer_codec, stored
):
    bs = broker.bootstrap_servers
    topic = f"codec-{topic_codec}-{producer_codec}"
    rd_create(bs, topic, {"compression.type": topic_codec})
    values = [b"value-%d" % i * 10 for i in range(50)]
    rd_produce(bs, topic, values, **{"compression.type": producer_codec})
    codecs = stored_codecs(broker, topic)
    assert codecs and set(codecs) == {stored}
    assert [m.value() for m in rd_consume(bs, topic, 50)] == values


def test_log_append_time_is_what_librdkafka_reads(broker):
    bs = broker.bootstrap_servers
    rd_create(bs, "append-time", {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    rd_produce(bs, "append-time", [b"x", b"y"], **{"compression.type": "gzip"})
    got = rd_consume(bs, "append-time", 2)
    assert [m.timestamp()[0] for m in got] == [TIMESTAMP_LOG_APPEND_TIME] * 2
    assert all(before <= m.timestamp()[1] <= int(time.time() * 1000) for m in got)


def test_a_record_from_the_future_is_refused_with_invalid_timestamp(broker):
    bs = broker.bootstrap_servers
    rd_create(bs, "future", {"message.timestamp.after.max.ms": "60000"})
    producer = Producer({"bootstrap.servers": bs, "retries": 0})
    results = []
    future_ts = int(time.time() * 1000) + 3_600_000
    producer.produce(
        "future",
        b"late",
        partition=0,
        timestamp=future_ts,
        on_delivery=lambda e, m: results.append(e),
    )
    producer.flush(30)
    producer.produce("future", b"now", partition=0, on_delivery=lambda e, m: results.append(e))
    producer.flush(30)
    assert len(results) == 2
    assert results[0] is not None and results[0].name() == "INVALID_TIMESTAMP"
    assert results[1] is None
    assert [m.value() for m in rd_consume(bs, "future", 1)] == [b"now"]


def test_confluent_kafka_describes_every_config_with_its_source(broker):
    from confluent_kafka.admin import ConfigResource, ConfigSource

    bs = broker.bootstrap_servers
    rd_create(bs, "described", {"compression.type": "gzip", "preallocate": "true"})
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "described")
    entries = admin.describe_configs([resource])[resource].result(15)
    assert set(KAFKA_4_TOPIC_CONFIGS) <= set(entries)
    assert entries["compression.type"].value == "gzip"
    assert entries["compression.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["preallocate"].value == "true"  # stored and described, not acted on
    assert entries["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["message.timestamp.after.max.ms"].value == "3600000"  # Kafka 4.0's default


def test_kafka_python_describes_a_topic(broker):
    from kafka.admin import ConfigResource, ConfigResourceType

    rd_create(broker.bootstrap_servers, "described-kp", {"cleanup.policy": "compact"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "described-kp", ["cleanup.policy"])]
        )
    finally:
        admin.close()
    entry = described["topic"]["described-kp"]["cleanup.policy"]
    assert (entry["value"], entry["config_source"], entry["config_type"]) == (
        "compact",
        "DYNAMIC_TOPIC_CONFIG",
        "LIST",
    )


def test_an_unknown_topic_is_described_as_unknown(broker):
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic")
    with pytest.raises(KafkaException) as e:
        admin.describe_configs([resource])[resource].result(15)
    assert e.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART"
