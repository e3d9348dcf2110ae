"""Three controllers (a KRaft quorum) and three brokers as processes: SIGKILL the
active controller under an acks=all load (librdkafka). A new controller leads in a
higher epoch, a topic can be created under it, a killed broker's partitions fail over
under it, no acknowledged record is lost, and the old controller, restarted, follows
again."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_QUORUM
from kafkalab.cluster.local_cluster import CONTROLLER_ID_BASE


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        controllers=3,
        base_dir=tmp_path,
        session_timeout_ms=3000,
        broker_props={"replica.lag.time.max.ms": "2000"},
        controller_props=LABS_QUORUM,
    ) as c:
        yield c


def _quorum(cluster):
    return cluster.describe_quorum(timeout_s=20)


def test_the_active_controller_killed_under_acks_all(cluster):
    quorum = _quorum(cluster)
    first, first_epoch = quorum.leader_id, quorum.leader_epoch
    assert sorted(r.replica_id for r in quorum.current_voters) == [
        CONTROLLER_ID_BASE + i for i in (1, 2, 3)
    ]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic("safe", 1, 3)]).values():
        future.result(10)
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "safe")[1] == [1, 2, 3])
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    acked: list[bytes] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())

    def produce(prefix: bytes, n: int) -> None:
        for i in range(n):
            producer.produce("safe", value=b"%s-%d" % (prefix, i), on_delivery=on_delivery)
            producer.poll(0)

    produce(b"before", 200)
    cluster.kill(first)  # SIGKILL the active controller while records are in flight
    produce(b"during", 200)
    assert producer.flush(60) == 0

    quorum = wait_until(
        lambda: (lambda q: q if q.leader_id != first else None)(_quorum(cluster)), timeout=30
    )
    assert quorum.leader_epoch > first_epoch

    # the new controller creates topics (a broker forwards CreateTopics to it)
    for future in admin.create_topics([NewTopic("after", 1, 3)]).values():
        future.result(20)
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "after")[1] == [1, 2, 3])

    # and fails partitions over: the partition's leader broker is killed
    leader, _ = partition_state(cluster.bootstrap_servers, "safe")
    cluster.kill(leader)
    wait_until(
        lambda: partition_state(cluster.bootstrap_servers, "safe")[0] not in (leader, -1),
        timeout=30,
    )
    produce(b"after", 100)
    assert producer.flush(60) == 0
    assert len(acked) == 500

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "check",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("safe", 0, 0)])
        got: list[bytes] = []
        deadline = time.time() + 30
        while len(got) < len(acked) and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(acked) and len(got) == len(set(got))  # none lost, none twice
    assert got == acked  # and in the order they were acknowledged

    # the old active controller restarts and catches up as a follower
    cluster.restart(first)
    final = wait_until(
        lambda: (
            lambda q: (
                q if all(r.log_end_offset == q.high_watermark for r in q.current_voters) else None
            )
        )(_quorum(cluster)),
        timeout=30,
    )
    assert final.leader_id != first and final.leader_epoch >= quorum.leader_epoch
