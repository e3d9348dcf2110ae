"""Exactly once through a group coordinator's death: a confluent-kafka
consume-transform-produce loop (read_committed consumer, transactional producer,
send_offsets_to_transaction) on the three-broker cluster; the broker leading the
group's __consumer_offsets partition is SIGKILLed mid-run. The new leader loads
the partition, transactional offset commits and their markers included, so the
loop resumes where its last committed transaction left it: every input record is
in the output exactly once (read_committed), and the group's committed offsets
are the ends of the input."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, partition_for

SOURCE, SINK, GROUP = "eos-in", "eos-out", "eos-group"
PARTITIONS, RECORDS, BATCH = 2, 200, 20
OFFSETS_PARTITIONS = 6


def read_committed(bootstrap: str, topic: str, expected: int, timeout_s: float = 60) -> list:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-checker",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got, deadline = [], time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) >= expected and m is None:
                break  # caught up, and nothing more comes
    finally:
        c.close()
    return got


def test_consume_transform_produce_survives_the_group_coordinators_death(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "transaction.state.log.num.partitions": "3",
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
            {
                "bootstrap.servers": bs,
                "transactional.id": "eos-job",
                "transaction.timeout.ms": 20_000,
            }
        )
        producer.init_transactions(60)

        def rewind() -> None:
            """After an abort: back to what the last committed transaction committed."""
            for tp in consumer.committed(tps, 30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

        coordinator = current_leader(
            cluster, OFFSETS_TOPIC, partition_for(GROUP, OFFSETS_PARTITIONS)
        )
        transactions, aborted, killed = 0, 0, False
        committed_so_far: dict[int, int] = {}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
            if not messages:
                done = {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}
                if all(done.get(p, -1) >= RECORDS // PARTITIONS for p in range(PARTITIONS)):
                    break
                continue
            positions: dict[int, int] = {}
            for m in messages:
                positions[m.partition()] = m.offset() + 1
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
                committed_so_far.update(positions)
            except KafkaException as e:
                error = e.args[0]
                if not (error.txn_requires_abort() or error.retriable()):
                    raise
                producer.abort_transaction(60)
                aborted += 1
                rewind()
            if transactions == 3 and not killed:
                # A read_committed consumer's OffsetFetch (require_stable) waits out
                # pending transactional offsets: once it answers, every marker is in
                # the log, and what the next coordinator knows comes from loading it.
                stable = {tp.partition: tp.offset for tp in consumer.committed(tps, 60)}
                assert {p: o for p, o in stable.items() if o >= 0} == committed_so_far
                cluster.kill(coordinator)  # SIGKILL: its __consumer_offsets partition moves
                killed = True
                # the new coordinator loaded the transactional commits, markers honoured
                loaded = {tp.partition: tp.offset for tp in consumer.committed(tps, 60)}
                assert {p: o for p, o in loaded.items() if o >= 0} == committed_so_far
        assert killed and transactions >= RECORDS // BATCH
        new_coordinator = current_leader(
            cluster, OFFSETS_TOPIC, partition_for(GROUP, OFFSETS_PARTITIONS)
        )
        assert new_coordinator != coordinator
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, 30)}
        assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
        consumer.close()
        out = read_committed(bs, SINK, RECORDS)
    assert sorted(out) == sorted(b"out-%d" % i for i in range(RECORDS)), (
        f"{len(out)} records out, {len(set(out))} distinct; {aborted} transactions aborted"
    )
