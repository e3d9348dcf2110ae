"""Configs on the three-broker cluster, through confluent-kafka's AdminClient (and
the teaching Admin for the cluster-wide broker default, which librdkafka will not
name): IncrementalAlterConfigs goes from a broker to the controller, which writes
ConfigRecords; every broker applies them live.

- min.insync.replicas raised to 3 with a follower stopped: an acks=all producer's
  sends fail with NOT_ENOUGH_REPLICAS; lowered to 2, they go through;
- the change survives a controller restart and a broker restart (each broker,
  the restarted one too, describes it, and the restarted one acts on it);
- retention.ms lowered: old segments go on every replica, the earliest offset
  (ListOffsets) moves;
- a topic deleted and created again under its name does not inherit its overrides."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from faults_helpers import controller_isr, partition_state, wait_until

from kafkalab.client.admin import Admin
from kafkalab.cluster import LocalCluster

SET = AlterConfigOpType.SET


def alter_topic(bs: str, topic: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def send(bs: str, topic: str, n: int = 1) -> list:
    """acks=all sends without retries, a batch each: each one's error (None: written)."""
    errors: list = []
    producer = Producer(
        {"bootstrap.servers": bs, "acks": "all", "retries": 0, "message.timeout.ms": 20_000}
    )
    for i in range(n):
        producer.produce(topic, b"v%d" % i * 20, on_delivery=lambda e, m: errors.append(e))
        assert producer.flush(30) == 0
    return errors


def described(bs: str, topic: str) -> dict[str, tuple[str | None, str]]:
    """(value, source) of each config, as the broker at `bs` itself answers."""
    with Admin(bs) as admin:
        return {n: (e.value, e.source) for n, e in admin.describe_configs("topics", topic).items()}


def low_watermark(bs: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        consumer.close()


def test_min_insync_replicas_and_retention_live_and_across_restarts(tmp_path):
    with LocalCluster(
        brokers=3, base_dir=tmp_path, broker_props={"log.retention.check.interval.ms": "200"}
    ) as cluster:
        bs = cluster.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topic("guarded", 1, 3)
            admin.create_topic("retained", 1, 3, {"segment.bytes": "1000"})
        assert wait_until(lambda: len(partition_state(bs, "guarded")[1]) == 3, 30)
        alter_topic(bs, "guarded", "min.insync.replicas", "3")
        assert send(bs, "guarded") == [None]  # all three in sync

        leader, _ = partition_state(bs, "guarded")
        follower = next(b for b in (1, 2, 3) if b != leader)
        cluster.kill(follower)
        assert wait_until(lambda: len(controller_isr(cluster, "guarded")) == 2, 30)
        assert wait_until(
            lambda: len(partition_state(cluster.bootstrap_servers, "guarded")[1]) == 2
        )
        bs = cluster.bootstrap_servers
        (error,) = send(bs, "guarded")
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
        alter_topic(bs, "guarded", "min.insync.replicas", "2")
        assert send(bs, "guarded") == [None]
        # the cluster-wide broker default too (librdkafka will not name the "" broker)
        with Admin(bs) as admin:
            admin.incremental_alter_configs("brokers", "", [("log.segment.bytes", "SET", "4000")])

        # the controller restarts on its address, then the stopped broker comes back
        controller = cluster.controller
        address = controller.bootstrap_servers
        controller.stop()
        controller.props["listeners"] = f"CONTROLLER://{address}"
        controller.start()
        cluster.start_broker(follower)
        for b in (1, 2, 3):
            configs = described(cluster.brokers[b].bootstrap_servers, "guarded")
            assert configs["min.insync.replicas"] == ("2", "DYNAMIC_TOPIC_CONFIG"), b
            assert configs["segment.bytes"] == ("4000", "DYNAMIC_DEFAULT_BROKER_CONFIG"), b

        # the restarted broker acts on it: it leads now, and refuses with one short
        cluster.wait_fully_replicated(60)
        # the leaders' ISRs are full; the controller must have written it too, or the
        # restarted broker is not eligible when the two others die
        assert wait_until(lambda: len(controller_isr(cluster, "guarded")) == 3, 30)
        alter_topic(cluster.bootstrap_servers, "guarded", "min.insync.replicas", "3")
        others = [b for b in (1, 2, 3) if b != follower]
        cluster.kill(others[0])
        cluster.kill(others[1])
        assert wait_until(lambda: controller_isr(cluster, "guarded") == [follower], 30)
        bs = cluster.brokers[follower].bootstrap_servers
        assert wait_until(lambda: partition_state(bs, "guarded") == (follower, [follower]))
        (error,) = send(bs, "guarded")
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
        for b in others:
            cluster.start_broker(b)
        cluster.wait_fully_replicated(60)

        # retention.ms lowered: every replica drops its old segments
        bs = cluster.bootstrap_servers
        assert send(bs, "retained", 40) == [None] * 40
        cluster.wait_fully_replicated(60)
        before = {
            b: len(list((cluster.broker_dir(b) / "retained-0").glob("*.log"))) for b in (1, 2, 3)
        }
        assert all(n > 2 for n in before.values()), before
        assert low_watermark(bs, "retained") == 0
        time.sleep(0.01)  # every record is older than 1 ms
        alter_topic(bs, "retained", "retention.ms", "1")
        assert wait_until(lambda: low_watermark(bs, "retained") > 0, 30)
        for b in (1, 2, 3):
            directory = cluster.broker_dir(b) / "retained-0"
            assert wait_until(lambda d=directory, b=b: len(list(d.glob("*.log"))) < before[b], 30)

        # a topic deleted and created again under its name starts from the defaults
        with Admin(bs) as admin:
            admin.delete_topic("guarded")
        assert wait_until(lambda: partition_state(bs, "guarded")[0] == -1, 30)
        with Admin(bs) as admin:
            admin.create_topic("guarded", 1, 3)
        assert wait_until(lambda: len(partition_state(bs, "guarded")[1]) == 3, 30)
        for b in (1, 2, 3):
            configs = described(cluster.brokers[b].bootstrap_servers, "guarded")
            assert configs["min.insync.replicas"] == ("1", "DEFAULT_CONFIG"), b
