"""Hundreds of partitions of RF=3 on three brokers with the labs' 500 ms sessions:
no broker is ever fenced (issue 28: at ~1,000 partitions the controller fenced a
broker every 4-5 s in turn, with no client connected).

Sized for CI on two cores: 300 partitions, a produce/consume pass across them,
then idle; one broker is paused past its session (a real fence) and must come
back without dragging the others into fences. Fences are counted from the
controller's own records (events.jsonl), not from any client's view. The
partition-scale benchmark (benchmarks/bench_partition_scale.py) runs the
1,000 and 3,000 partition versions."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_FAILOVER
from kafkalab.server.events import read_events

TOPICS, PER_TOPIC = 30, 10
IDLE_S = 15


def fenced(cluster) -> list[dict]:
    return [e for e in read_events(cluster.base_dir / "controller") if e["event"] == "fenced"]


def fully_replicated(admin, topics) -> bool:
    md = admin.list_topics(timeout=30).topics
    return all(
        t in md
        and len(md[t].partitions) == PER_TOPIC
        and all(p.leader >= 0 and len(p.isrs) == 3 for p in md[t].partitions.values())
        for t in topics
    )


def test_hundreds_of_partitions_idle_without_fences(tmp_path):
    topics = [f"wide-{i}" for i in range(TOPICS)]
    with LocalCluster(brokers=3, base_dir=tmp_path, **LABS_FAILOVER) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(0, TOPICS, 10):
            new = [NewTopic(t, PER_TOPIC, 3) for t in topics[i : i + 10]]
            for future in admin.create_topics(new).values():
                future.result(120)
        wait_until(lambda: fully_replicated(admin, topics), 120)

        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for t in topics:
            for p in range(PER_TOPIC):
                producer.produce(t, f"{t}-{p}".encode(), partition=p)
        assert producer.flush(120) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "scale",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(PER_TOPIC)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 120
        while len(seen) < TOPICS * PER_TOPIC and time.monotonic() < deadline:
            for m in consumer.consume(1000, 1.0):
                if m.error() is None:
                    seen.add(m.value())
        consumer.close()
        assert len(seen) == TOPICS * PER_TOPIC

        time.sleep(IDLE_S)  # no client connected
        assert fenced(cluster) == [], "fenced while busy or idle"

        # A real fence: broker 2 stops for four session timeouts. Its leaderships
        # move, and when it is back every leader proposes it into its ISRs again:
        # that must not get the other brokers fenced in turn (the storm).
        cluster.pause(2)
        wait_until(lambda: [e["broker"] for e in fenced(cluster)] == [2], 30)
        time.sleep(4 * LABS_FAILOVER["session_timeout_ms"] / 1000)
        cluster.resume(2)
        wait_until(lambda: fully_replicated(admin, topics), 120)
        time.sleep(IDLE_S)
        assert [e["broker"] for e in fenced(cluster)] == [2]
