"""Shared by the Spark integration tests: a module's SparkSession, topics, a
librdkafka reader to check what Spark wrote."""

from __future__ import annotations

import shutil
import time

import pytest


def spark_session(app_name: str):
    """A local SparkSession for one test module (2 cores, no UI); the caller stops it."""
    pytest.importorskip("pyspark", reason="pyspark is in the labs extra")
    pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java 17 runtime (scripts/ensure-system-deps.sh installs it)")
    from kafkalab.spark import build_local_spark

    return build_local_spark(cores=2, app_name=app_name, **{"spark.sql.shuffle.partitions": "2"})


def create_topic(
    bs: str, topic: str, partitions: int = 1, rf: int = 1, config: dict | None = None
) -> None:
    """Create a topic and wait until every partition has a leader and a full ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    new = NewTopic(topic, partitions, rf, config=config or {})
    for future in admin.create_topics([new]).values():
        future.result(30)
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        ps = md.partitions
        if (
            md.error is None
            and len(ps) == partitions
            and all(p.leader >= 0 and len(p.isrs) == rf for p in ps.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} not ready: {md.error} {ps}")
        time.sleep(0.1)


def produce(bs: str, topic: str, records, **config) -> None:
    """records: (key, value, partition or None, timestamp ms or None) tuples; acks=all."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, **config})
    for key, value, partition, ts in records:
        kwargs = {}
        if partition is not None:
            kwargs["partition"] = partition
        if ts is not None:
            kwargs["timestamp"] = ts
        p.produce(topic, value, key, **kwargs)
    assert p.flush(60) == 0


def consume_all(bs: str, topic: str, partitions: int) -> list:
    """Every record of the topic (up to the high watermarks) as librdkafka Messages."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "check", "enable.auto.commit": False})
    try:
        ends = {}
        for p in range(partitions):
            ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got, deadline = [], time.monotonic() + 60
        while len(got) < sum(ends.values()):
            assert time.monotonic() < deadline, f"read {len(got)} of {sum(ends.values())}"
            for m in c.consume(10_000, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
        return got
    finally:
        c.close()
