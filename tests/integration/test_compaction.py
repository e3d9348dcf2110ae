"""Log compaction on a running broker: a topic with cleanup.policy=compact keeps
the latest record of every key once the LogCleaner has run, with offsets that
have gaps, and a consumer reads it from the start as Kafka's would."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.server.broker import BrokerThread

KEYS, ROUNDS = 10, 30


def read_all(bs: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        while True:
            m = c.poll(5)
            assert m is not None, "no end of partition in 5 s"
            if m.error():
                return out
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()


def test_a_compacted_topic_keeps_the_latest_value_per_key(tmp_path):
    with BrokerThread({"log.dirs": str(tmp_path), "log.cleaner.backoff.ms": "100"}) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        config = {
            "cleanup.policy": "compact",
            "segment.bytes": "2048",
            "min.cleanable.dirty.ratio": "0.01",
        }
        for future in admin.create_topics([NewTopic("compacted", 1, 1, config=config)]).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for r in range(ROUNDS):
            for k in range(KEYS):
                producer.produce("compacted", b"v%d" % r, key=b"k%d" % k, partition=0)
            producer.flush(10)  # one small batch a round: many segments to clean
        deadline = time.monotonic() + 60
        while True:
            records = read_all(bs, "compacted")
            if len(records) < KEYS * ROUNDS or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert len(records) < KEYS * ROUNDS, "the cleaner never ran"
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and offsets[-1] == KEYS * ROUNDS - 1  # gaps, in order
    latest = {}
    for _, key, value in records:
        latest[key] = value
    assert latest == {b"k%d" % k: b"v%d" % (ROUNDS - 1) for k in range(KEYS)}
