"""Fetch sessions (KIP-227) with real clients on one broker: kafka-python keeps a
session (its FetchSessionHandler: a full fetch, then incremental ones), librdkafka
fetches sessionless (session 0, epoch -1); both read every record, in order, while
records keep coming, and the broker's session cache shows which did what."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.server.broker import BrokerThread

kafka = pytest.importorskip("kafka")

TOPIC = "sessions"
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("fetch-sessions"))}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            future.result(10)
        yield b


def produce(broker, prefix: str, n: int) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(n):
        value = b"%s-%d" % (prefix.encode(), i)
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
        sent[i % PARTITIONS].append(value)
    assert producer.flush(10) == 0
    return sent


def merged(*sents: dict[int, list[bytes]]) -> dict[int, list[bytes]]:
    return {p: [v for s in sents for v in s[p]] for p in range(PARTITIONS)}


def sessions(broker) -> dict[int, tuple[int, int]]:
    """Session id -> (epoch, partitions) in the broker's cache."""
    cache = broker.broker.apis.fetch_manager.cache
    return {s.id: (s.epoch, len(s.partitions)) for s in list(cache.sessions.values())}


def test_kafka_python_reads_in_a_session_and_librdkafka_without(broker):
    first = produce(broker, "first", 200)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        max_poll_records=10,  # many fetches: most of them incremental
    )
    try:
        tps = [kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}

        def read_until(expected: dict[int, list[bytes]]) -> None:
            deadline = time.time() + 30
            while got != expected and time.time() < deadline:
                for tp, records in consumer.poll(timeout_ms=200).items():
                    got[tp.partition] += [r.value for r in records]

        read_until(first)
        assert got == first
        second = produce(broker, "second", 100)  # arrives while the session is idle
        read_until(merged(first, second))
        assert got == merged(first, second)
        # a session with incremental fetches (each moves the epoch on); kafka-python
        # forgets a partition while it holds fetched records of it, so not always all 4
        held = sessions(broker)
        assert any(epoch > 2 and size >= 1 for epoch, size in held.values()), held
    finally:
        consumer.close()

    before = sessions(broker)
    rd = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "rd", "fetch.wait.max.ms": 100}
    )
    try:
        rd.assign([RdTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.time() + 30
        while sum(map(len, read.values())) < 300 and time.time() < deadline:
            m = rd.poll(0.2)
            if m is not None and m.error() is None:
                read[m.partition()].append(m.value())
    finally:
        rd.close()
    assert read == merged(first, second)
    assert sessions(broker).keys() == before.keys()  # librdkafka opened no session
