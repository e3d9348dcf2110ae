"""Followers replicate in fetch sessions (KIP-227) on a real three-broker cluster, and
stay in sync through a SIGKILLed leader: every follower opens a session with each
leader (the "fetch_session" events of its EventLog), acks=all writes made before
and after the kill are all there, and once the killed broker is back every
replica of every partition has the leader's log end offset and is in the ISR. The
restarted broker's followers open new sessions (the old ones died with the
process on one side, and the leaders answer an unknown session with
FETCH_SESSION_ID_NOT_FOUND)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.server.events import read_events

TOPIC = "sessions"
PARTITIONS = 12


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "2000"},
    ) as c:
        yield c


def sessions_opened(cluster, broker_id: int, since_ms: float = 0) -> set[int]:
    """The leaders `broker_id`'s followers opened a fetch session with."""
    return {
        e["leader"]
        for e in read_events(cluster.broker_dir(broker_id))
        if e["event"] == "fetch_session" and e["session_id"] != 0 and e["time_ms"] >= since_ms
    }


def produce(cluster, prefix: str, n: int) -> list[tuple[int, bytes]]:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 30000,
        }
    )
    acked = []

    def on_delivery(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.value()))

    for i in range(n):
        producer.produce(TOPIC, value=b"%s-%d" % (prefix.encode(), i), partition=i % PARTITIONS)
    # a second pass with the callback: the first one fills every partition's session
    producer.flush(30)
    for i in range(n):
        producer.produce(
            TOPIC,
            value=b"%s-again-%d" % (prefix.encode(), i),
            partition=i % PARTITIONS,
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    return acked


def test_followers_in_fetch_sessions_stay_in_sync_through_a_killed_leader(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
        future.result(10)
    cluster.wait_fully_replicated(60)
    acked = produce(cluster, "before", 120)
    # every broker leads some partitions: each follows the two others in a session
    for b in (1, 2, 3):
        assert sessions_opened(cluster, b) == {1, 2, 3} - {b}, b
    victim, _ = partition_state(cluster.bootstrap_servers, TOPIC)
    cluster.kill(victim)
    wait_until(
        lambda: (lambda s: s[0] not in (victim, -1))(
            partition_state(cluster.bootstrap_servers, TOPIC)
        )
    )
    acked += produce(cluster, "after", 120)
    back = time.time() * 1000
    cluster.start_broker(victim)
    cluster.wait_fully_replicated(90)
    assert sessions_opened(cluster, victim, since_ms=back), "no session after the restart"
    # fully replicated is the leaders' word; each follower's own report may lag a beat
    wait_until(
        lambda: all(
            r["LEO"].nunique() == 1 for _, r in cluster.describe(TOPIC).groupby("partition")
        )
    )
    rows = cluster.describe(TOPIC)
    for _, replicas in rows.groupby(["topic", "partition"]):
        assert replicas["LEO"].nunique() == 1, replicas
        assert all(sorted(isr) == [1, 2, 3] for isr in replicas[replicas.role == "leader"].ISR)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "check",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        got = []
        deadline = time.time() + 60
        while len(got) < 480 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.value()))
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        read = [v for q, v in got if q == p and b"again" in v]
        assert read == [v for q, v in acked if q == p], p  # acknowledged ones, in order
