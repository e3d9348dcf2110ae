"""Members that fail: a member SIGKILLed mid-group is removed after
session.timeout.ms and its partitions go to the others; a member that stops
calling poll() for longer than max.poll.interval.ms leaves, and the others take
over its partitions."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster

PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path_factory.mktemp("members"),
        broker_props={"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "6"},
    ) as c:
        yield c


def create(cluster, topic):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(40):
        producer.produce(topic, b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def member(cluster, topic, **extra):
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )
    c.subscribe([topic])
    return c


def poll_until(consumer, done, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        consumer.poll(0.1)
        if done(len(consumer.assignment())):
            return True
    return False


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_a_killed_member_is_removed_after_its_session_timeout(cluster):
    create(cluster, "killed-member")
    survivor = member(cluster, "killed-member")
    try:
        assert poll_until(survivor, lambda n: n == PARTITIONS)
        other = subprocess.Popen(
            ["kcat", "-b", cluster.bootstrap_servers, "-G", "killed-member", "killed-member"]
            + ["-q", "-X", "session.timeout.ms=6000", "-X", "auto.offset.reset=earliest"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert poll_until(survivor, lambda n: 0 < n < PARTITIONS), "no rebalance for kcat"
        finally:
            other.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session can tell
            other.wait()
        killed_at = time.monotonic()
        assert poll_until(survivor, lambda n: n == PARTITIONS), "the dead member kept partitions"
        assert time.monotonic() - killed_at > 3  # removed by its session, not at once
    finally:
        survivor.close()


def test_a_member_that_stops_polling_leaves_the_group(cluster):
    create(cluster, "slow-member")
    busy = member(cluster, "slow-member")
    slow = member(cluster, "slow-member", **{"max.poll.interval.ms": 6000})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy.poll(0.05)
            slow.poll(0.05)
            held = (len(busy.assignment()), len(slow.assignment()))
            if sum(held) == PARTITIONS and min(held) > 0:
                break
        assert min(held) > 0, held
        # `slow` stops polling: after max.poll.interval.ms librdkafka leaves the group
        # (LeaveGroup), and the coordinator gives its partitions to `busy`.
        assert poll_until(busy, lambda n: n == PARTITIONS, timeout_s=30)
    finally:
        busy.close()
        slow.close()
