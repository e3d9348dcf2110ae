"""The group coordinator's broker dies: committed offsets survive (they were
written to __consumer_offsets with acks=all), the new leader of the group's
partition loads them, and members find the new coordinator and go on. For the
classic protocol and for KIP-848 (group.protocol=consumer), whose groups the new
coordinator loads from their records, assignments named by topic id."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, partition_for
from kafkalab.errors import Errors, KafkaError

PARTITIONS, RECORDS = 4, 100
#: What a client is told while a group's coordinator moves (retriable, as in Kafka).
COORDINATOR_MOVING = {
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.NETWORK_EXCEPTION,
    Errors.REQUEST_TIMED_OUT,
}


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


def test_a_kip848_group_survives_the_coordinators_death(tmp_path):
    """group.protocol=consumer: the new coordinator loads the group from its records
    in __consumer_offsets (epochs, and assignments by topic id), so both members keep
    their partitions with no new assignment; commits go on through it, and when one
    member leaves the other takes over at the committed offsets."""
    from confluent_kafka import TopicPartition

    from kafkalab.client import Admin

    group = "survivor-kip848"
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "offsets.topic.num.partitions": "6",
            "group.consumer.heartbeat.interval.ms": "500",
        },
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("data", PARTITIONS, 3)]).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        values = [b"r-%d" % i for i in range(RECORDS)]
        for i, v in enumerate(values):
            producer.produce("data", v, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        consumers: list[Consumer] = []
        teaching = Admin(cluster.bootstrap_servers)

        def member():
            c = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "group.id": group,
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            consumers.append(c)
            c.subscribe(["data"])
            return c

        def held(c) -> set[int]:
            return {tp.partition for tp in c.assignment()}

        def poll_until(done, *members, timeout_s=60):
            deadline = time.monotonic() + timeout_s
            while not done() and time.monotonic() < deadline:
                for c in members:
                    c.poll(0.1)
            assert done(), [held(c) for c in members]

        asked = [TopicPartition("data", p) for p in range(PARTITIONS)]

        def group_committed(c) -> dict[int, int]:
            """The group's committed offsets, as the coordinator answers OffsetFetch."""
            return {tp.partition: tp.offset for tp in c.committed(asked, timeout=30)}

        def described(timeout_s: float = 60):
            """Retry only what a moving coordinator answers, and only for `timeout_s`:
            any other error is a bug and fails the test at once, with its cause."""
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    return teaching.describe_consumer_group(group)
                except (KafkaError, OSError) as e:
                    code = getattr(e, "code", None)
                    if code is not None and code not in COORDINATOR_MOVING:
                        raise
                    if time.monotonic() > deadline:
                        raise AssertionError(
                            f"no coordinator answered ConsumerGroupDescribe in {timeout_s} s"
                        ) from e
                    time.sleep(0.2)

        try:
            a, b = member(), member()
            poll_until(lambda: held(a) and held(b) and held(a) | held(b) == set(range(4)), a, b)
            poll_until(lambda: described().state == "Stable", a, b)
            before = {m.member_id: (m.member_epoch, m.partitions) for m in described().members}
            consume(a, 10)
            consume(b, 10)
            commit_with_retries(a)
            commit_with_retries(b)
            coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
            cluster.kill(coordinator)
            assert current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6)) != coordinator
            # the new coordinator has the group as it was: same members, epochs, partitions
            poll_until(lambda: set(before) <= {m.member_id for m in described().members}, a, b)
            after = {m.member_id: (m.member_epoch, m.partitions) for m in described().members}
            assert after == before
            consume(a, 10)
            consume(b, 10)
            commit_with_retries(a)
            commit_with_retries(b)  # at its epoch, through the new coordinator
            b_positions = {tp.partition: tp.offset for tp in b.position(b.assignment())}
            b.close()
            committed = group_committed(a)
            assert all(committed[p] == o for p, o in b_positions.items()), (committed, b_positions)
            poll_until(lambda: held(a) == set(range(4)), a)
            consume(a, 10)  # now from b's partitions too
            commit_with_retries(a)
            committed = {p: max(o, 0) for p, o in group_committed(a).items()}
            a.close()
            # a new member reads every partition exactly from the committed offset on
            c = member()
            offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
            per_partition = RECORDS // PARTITIONS
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                committed[p] + len(offsets[p]) < per_partition for p in offsets
            ):
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    offsets[m.partition()].append(m.offset())
            c.close()
            for p in range(PARTITIONS):
                assert offsets[p] == list(range(committed[p], per_partition)), (p, committed)
            assert sum(committed.values()) > 0
        finally:
            teaching.close()
            for c in consumers:
                try:
                    c.close()
                except RuntimeError:
                    pass  # closed already
