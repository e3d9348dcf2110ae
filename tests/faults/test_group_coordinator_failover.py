"""The group coordinator's broker dies: committed offsets survive (they were
written to __consumer_offsets with acks=all), the new leader of the group's
partition loads them, and members find the new coordinator and go on."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, partition_for

PARTITIONS, RECORDS = 4, 100


def consume(consumer, n: int, timeout_s: float = 60) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def commit_with_retries(consumer, timeout_s: float = 60) -> None:
    """A commit while the coordinator moves fails with a retriable error: retry."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            consumer.poll(0.2)


def test_committed_offsets_survive_the_coordinators_death(tmp_path):
    group = "survivor"
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "6"},
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("data", PARTITIONS, 3)]).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        values = [b"r-%d" % i for i in range(RECORDS)]
        for i, v in enumerate(values):
            producer.produce("data", v, partition=i % PARTITIONS)
        assert producer.flush(30) == 0

        def member():
            c = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            c.subscribe(["data"])
            return c

        a = member()
        first = consume(a, 40)
        commit_with_retries(a)
        coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
        cluster.kill(coordinator)
        second = consume(a, 20)  # the member goes on, with partitions it still holds
        commit_with_retries(a)  # ...and commits through the new coordinator
        new_coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
        assert new_coordinator != coordinator
        a.close()
        b = member()
        rest = consume(b, RECORDS - len(first) - len(second))
        b.close()
    read = first + second + rest
    assert len(read) == len(set(read)) == RECORDS and set(read) == set(values)
