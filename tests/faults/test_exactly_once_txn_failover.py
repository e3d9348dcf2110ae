"""Exactly once through the death of the transaction coordinator, and of an output
partition's leader: the confluent-kafka consume-transform-produce loop of
test_exactly_once_group_failover on the three-broker cluster, with the broker
leading the job's __transaction_state partition (or the leader of an output
partition) SIGKILLed mid-run. The new coordinator loads the job's transactional
state (finishing a transaction caught between EndTxn and its markers), the
producer finds it and goes on, and every input record is in the output exactly
once (read_committed), with the group's committed offsets at the ends of the input."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.cluster.workload import read_all
from kafkalab.coordinator.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    partition_for,
)

SOURCE, SINK, GROUP, TID = "eos-in", "eos-out", "eos-group", "eos-job"
PARTITIONS, RECORDS, BATCH = 2, 200, 20
TXN_PARTITIONS = 3


@pytest.mark.parametrize("victim", ["transaction coordinator", "output leader"])
def test_consume_transform_produce_survives_a_kill(tmp_path, victim):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "replica.lag.time.max.ms": "2000",
            "request.timeout.ms": "5000",
        },
    ) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for future in admin.create_topics(
            [
                NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
                for t in (SOURCE, SINK)
            ]
        ).values():
            future.result(30)
        feeder = Producer({"bootstrap.servers": bs, "acks": "all"})
        for i in range(RECORDS):
            feeder.produce(SOURCE, b"%d" % i, partition=i % PARTITIONS)
        assert feeder.flush(60) == 0

        consumer = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        tps = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        producer = Producer(
            {"bootstrap.servers": bs, "transactional.id": TID, "transaction.timeout.ms": 20_000}
        )
        producer.init_transactions(60)

        def rewind() -> None:
            for tp in consumer.committed(tps, 30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

        coordinator = current_leader(
            cluster, TRANSACTION_STATE_TOPIC, partition_for(TID, TXN_PARTITIONS)
        )
        target = (
            coordinator if victim == "transaction coordinator" else current_leader(cluster, SINK, 0)
        )
        transactions, aborted, killed = 0, 0, False
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
            if not messages:
                done = {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}
                if all(done.get(p, -1) >= RECORDS // PARTITIONS for p in range(PARTITIONS)):
                    break
                continue
            positions = {m.partition(): m.offset() + 1 for m in messages}
            try:
                producer.begin_transaction()
                for m in messages:
                    producer.produce(SINK, b"out-" + m.value(), partition=m.partition())
                producer.send_offsets_to_transaction(
                    [TopicPartition(SOURCE, p, o) for p, o in positions.items()],
                    consumer.consumer_group_metadata(),
                    60,
                )
                producer.commit_transaction(60)
                transactions += 1
            except KafkaException as e:
                error = e.args[0]
                if not (error.txn_requires_abort() or error.retriable()):
                    raise
                producer.abort_transaction(60)
                aborted += 1
                rewind()
            if transactions == 3 and not killed:
                cluster.kill(target)  # SIGKILL, right after EndTxn was answered
                killed = True
        assert killed and transactions >= RECORDS // BATCH
        if victim == "transaction coordinator":
            assert coordinator != current_leader(
                cluster, TRANSACTION_STATE_TOPIC, partition_for(TID, TXN_PARTITIONS)
            )
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}
        assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
        consumer.close()
        out = read_all(bs, SINK, PARTITIONS, "read_committed", timeout_s=60)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(RECORDS)), (
        f"{len(out)} records out, {len(set(out))} distinct; {aborted} transactions aborted"
    )
