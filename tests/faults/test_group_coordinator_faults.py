"""The group coordinator's broker SIGKILLed at the worst moments, with real
librdkafka members on the three-broker cluster:

* mid-rebalance: a second member has joined and the group waits in
  PreparingRebalance for the first to rejoin when the coordinator dies. The new
  coordinator (the new leader of the group's __consumer_offsets partition) loads
  the group from its log, the members find it, the group completes a rebalance
  there with every partition owned by exactly one member, and they resume exactly
  from the offsets committed before the kill.
* mid-sync: the same with kafka-python members, whose assignor (it runs in
  the group leader, between JoinGroup and SyncGroup) kills the coordinator
  while the group is in CompletingRebalance: the assignment the leader then
  sends has nowhere to go, and the group must rebalance again on the new one.
* mid-commit: a member commits synchronously, back to back, when the coordinator
  dies. Every commit that returned success was written with acks=all, so the new
  coordinator's OffsetFetch returns at least it; a new member resumes from there
  and every produced record is consumed at least once overall.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, partition_for

PARTITIONS, RECORDS, OFFSETS_PARTITIONS = 6, 300, 6
BROKER_PROPS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
}
REBALANCING = (ConsumerGroupState.PREPARING_REBALANCING, ConsumerGroupState.COMPLETING_REBALANCING)


def produce(cluster, topic: str) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    values = [b"r-%d" % i for i in range(RECORDS)]
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


def member(cluster, group: str, topic: str, **extra) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )
    c.subscribe([topic])
    return c


def consume(consumer, n: int, timeout_s: float = 60) -> list:
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m)
    return got


def describe(admin, group: str):
    """DescribeGroups through whichever broker is the coordinator now; None while
    the coordinator is moving (the request fails with a retriable error)."""
    try:
        return admin.describe_consumer_groups([group], request_timeout=5)[group].result(10)
    except KafkaException:
        return None


def committed(cluster, group: str, topic: str) -> dict[int, int] | None:
    """OffsetFetch from the group's coordinator, asked by a consumer that is not a
    member; None while the coordinator is moving. (Not AdminClient's
    list_consumer_group_offsets: librdkafka 2.16 crashes, SIGSEGV, when its
    OffsetFetch is answered NOT_COORDINATOR, as a coordinator that has just moved
    answers; see confluent-kafka-javascript#374.)"""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        answer = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    except KafkaException:
        return None
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in answer}


def assert_each_once(read: list[bytes], values: list[bytes]) -> None:
    twice = sorted(v for v, n in Counter(read).items() if n > 1)
    assert not twice, f"read more than once: {twice[:10]}"
    assert set(read) == set(values), f"never read: {sorted(set(values) - set(read))[:10]}"


def test_coordinator_killed_mid_rebalance(tmp_path):
    group = topic = "mid-rebalance"
    with LocalCluster(
        brokers=3, base_dir=tmp_path, session_timeout_ms=2000, broker_props=BROKER_PROPS
    ) as cluster:
        values = produce(cluster, topic)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        a = member(cluster, group, topic)
        b = None
        try:
            first = consume(a, RECORDS // 3)
            a.commit(asynchronous=False)
            before = committed(cluster, group, topic)
            assert before is not None and sum(o for o in before.values() if o > 0) == len(first)

            # a reads nothing more until the group has settled again: what it read but
            # did not commit before handing its partitions over would be read twice.
            a.pause(a.assignment())
            # b joins; a, not polling, has not rejoined yet: the join round is open.
            b = member(cluster, group, topic)

            def rebalancing():
                assert b.poll(0.05) is None  # b owns nothing before the round completes
                d = describe(admin, group)
                return d if d is not None and d.state in REBALANCING else None

            described = wait_until(rebalancing)
            assert described.state in REBALANCING
            coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
            cluster.kill(coordinator)

            # Both members poll on: they find the new coordinator and finish a rebalance.
            rest: list = []

            def poll_both():
                for c in (a, b):
                    m = c.poll(0.05)
                    if m is not None and m.error() is None:
                        rest.append(m)

            def settled():
                poll_both()
                owned = [{tp.partition for tp in c.assignment()} for c in (a, b)]
                return owned if all(owned) and sum(map(len, owned)) == PARTITIONS else None

            owned = wait_until(settled, timeout=90)
            assert owned[0] | owned[1] == set(range(PARTITIONS)) and not owned[0] & owned[1]
            a.resume(a.assignment())
            new_coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
            assert new_coordinator != coordinator
            stable = wait_until(
                lambda: (
                    (d := describe(admin, group)) is not None
                    and d.state == ConsumerGroupState.STABLE
                    and len(d.members) == 2
                    and d
                ),
                timeout=60,
            )
            assigned = [
                {tp.partition for tp in m.assignment.topic_partitions} for m in stable.members
            ]
            assert sorted(map(sorted, assigned)) == sorted(map(sorted, owned))
            assert stable.coordinator.id == new_coordinator
            # Nothing committed was lost: the new coordinator answers the same offsets...
            assert committed(cluster, group, topic) == before

            # ...and the members resume exactly there: every record once, none twice.
            deadline = time.monotonic() + 60
            while len(first) + len(rest) < RECORDS and time.monotonic() < deadline:
                poll_both()
            starts: dict[int, int] = {}
            for m in rest:
                starts.setdefault(m.partition(), m.offset())
            assert starts == {p: max(o, 0) for p, o in before.items() if p in starts}
        finally:
            a.close()
            if b is not None:
                b.close()
    read = [m.value() for m in first + rest]
    assert_each_once(read, values)


def test_coordinator_killed_mid_commit(tmp_path):
    group = topic = "mid-commit"
    with LocalCluster(
        brokers=3, base_dir=tmp_path, session_timeout_ms=2000, broker_props=BROKER_PROPS
    ) as cluster:
        values = produce(cluster, topic)
        a = member(cluster, group, topic)
        try:
            seen = consume(a, RECORDS // 2)
            assert len(seen) == RECORDS // 2
            successes: list[tuple[int, int]] = []  # (partition, offset) acknowledged
            attempts: list[tuple[float, float, bool]] = []  # (start, end, succeeded)
            committing, killed = threading.Event(), threading.Event()

            def to_commit():
                """One commit per record, then the last one again until the kill, so a
                commit is in flight when it comes however fast commits are (the last
                record's offset is its partition's highest: no offset goes back)."""
                yield from seen
                deadline = time.monotonic() + 60
                while not killed.is_set() and time.monotonic() < deadline:
                    yield seen[-1]

            def commit_loop():
                for m in to_commit():  # synchronous commits, back to back
                    start = time.monotonic()
                    committing.set()
                    tp = TopicPartition(topic, m.partition(), m.offset() + 1)
                    try:
                        a.commit(offsets=[tp], asynchronous=False)
                        ok = True
                    except KafkaException:
                        ok = False
                    attempts.append((start, time.monotonic(), ok))
                    if ok:
                        successes.append((m.partition(), m.offset() + 1))
                    if killed.is_set():
                        return  # the commit that was in flight at the kill has returned

            committer = threading.Thread(target=commit_loop)
            committer.start()
            committing.wait(30)
            wait_until(lambda: len(successes) >= 20)
            coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
            kill_at = time.monotonic()
            cluster.kill(coordinator)
            killed.set()
            committer.join(120)
            assert not committer.is_alive()
            assert any(start < kill_at < end for start, end, _ in attempts), "no commit in flight"

            # The new coordinator answers at least every acknowledged commit.
            fetched = wait_until(
                lambda: (
                    current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6)) != coordinator
                    and committed(cluster, group, topic)
                ),
                timeout=60,
            )
            for partition, offset in successes:
                assert fetched[partition] >= offset, (partition, offset, fetched)
        finally:
            a.close()

        # A new member resumes from the committed offsets: with what the first member
        # processed below them, every produced record is consumed at least once.
        b = member(cluster, group, topic)
        try:
            rest = consume(b, RECORDS - sum(max(o, 0) for o in fetched.values()), timeout_s=90)
        finally:
            b.close()
    starts: dict[int, int] = {}
    for m in rest:
        starts.setdefault(m.partition(), m.offset())
    assert all(starts[p] == max(o, 0) for p, o in fetched.items() if p in starts), (starts, fetched)
    processed = [m.value() for m in seen if m.offset() < fetched[m.partition()]]
    consumed = set(processed) | {m.value() for m in rest}
    assert consumed == set(values), f"never consumed: {sorted(set(values) - consumed)[:10]}"


def test_coordinator_killed_mid_sync(tmp_path):
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    group = topic = "mid-sync"
    seen_states: list = []

    class KillingRange(RangePartitionAssignor):
        """The range assignor, but the first time it assigns for two members it
        first SIGKILLs the coordinator: the group waits in CompletingRebalance
        for this very SyncGroup."""

        def assign(self, cluster_metadata, members):
            if len(members) == 2 and not seen_states:
                seen_states.append(describe(admin, group).state)
                cluster.kill(current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6)))
            return super().assign(cluster_metadata, members)

    with LocalCluster(
        brokers=3, base_dir=tmp_path, session_timeout_ms=2000, broker_props=BROKER_PROPS
    ) as cluster:
        values = produce(cluster, topic)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

        def member():
            return KafkaConsumer(
                topic,
                bootstrap_servers=cluster.bootstrap_servers,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=500,
                session_timeout_ms=6000,
                partition_assignment_strategy=[KillingRange()],
            )

        a = member()
        first: list = []
        deadline = time.monotonic() + 60
        while len(first) < RECORDS // 3 and time.monotonic() < deadline:
            for records in a.poll(200, max_records=RECORDS // 3 - len(first)).values():
                first += records
        a.commit()
        before = committed(cluster, group, topic)
        assert before is not None and sum(o for o in before.values() if o > 0) == len(first)
        coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
        # a reads nothing more until the group has settled again: what it read but did
        # not commit would be read twice (kafka-python keeps partitions paused across
        # the rebalance; a resumes them once the group has settled).
        a.pause(*a.assignment())

        # Each member polls in its own thread (kafka-python joins inside poll()).
        stop, resume = threading.Event(), threading.Event()
        rest: list = []
        consumers = {"a": a}

        def run(name):
            c = consumers[name] if name in consumers else consumers.setdefault(name, member())
            while not stop.is_set():
                if resume.is_set() and c.paused():
                    c.resume(*c.paused())
                for records in c.poll(100).values():
                    rest.extend(records)

        threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        try:

            def settled():
                if len(consumers) < 2 or not seen_states:
                    return None
                owned = [{tp.partition for tp in c.assignment()} for c in consumers.values()]
                return owned if all(owned) and sum(map(len, owned)) == PARTITIONS else None

            owned = wait_until(settled, timeout=90)
            assert owned[0] | owned[1] == set(range(PARTITIONS)) and not owned[0] & owned[1]
            assert seen_states == [ConsumerGroupState.COMPLETING_REBALANCING]
            new_coordinator = current_leader(cluster, OFFSETS_TOPIC, partition_for(group, 6))
            assert new_coordinator != coordinator
            stable = wait_until(
                lambda: (
                    (d := describe(admin, group)) is not None
                    and d.state == ConsumerGroupState.STABLE
                    and len(d.members) == 2
                    and d
                ),
                timeout=60,
            )
            assert stable.coordinator.id == new_coordinator
            assigned = [
                {tp.partition for tp in m.assignment.topic_partitions} for m in stable.members
            ]
            assert sorted(map(sorted, assigned)) == sorted(map(sorted, owned))
            assert committed(cluster, group, topic) == before
            resume.set()
            wait_until(lambda: len(first) + len(rest) >= RECORDS, timeout=60)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
            for c in consumers.values():
                c.close(autocommit=False)
    starts: dict[int, int] = {}
    for r in rest:
        starts.setdefault(r.partition, r.offset)
    assert starts == {p: max(o, 0) for p, o in before.items() if p in starts}
    read = [r.value for r in first + rest]
    assert_each_once(read, values)


def test_the_coordinator_comes_back(tmp_path):
    """Killed, the coordinator's broker restarts, catches up as a follower of the
    group's partition and, as its preferred replica, is elected leader again: it
    loads the offsets committed while it was away, the broker that stood in for it
    unloads the group, and the member follows the coordinator back."""
    group = topic = "comes-back"
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props=BROKER_PROPS,
        controller_props={"leader.imbalance.check.interval.seconds": "1"},
    ) as cluster:
        values = produce(cluster, topic)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        a = member(cluster, group, topic)
        read: list = []
        try:

            def read_and_commit(n: int) -> dict[int, int]:
                read.extend(consume(a, n))
                deadline = time.monotonic() + 60
                while True:  # retriable errors while the coordinator moves
                    try:
                        a.commit(asynchronous=False)
                        break
                    except KafkaException:
                        assert time.monotonic() < deadline
                        a.poll(0.1)
                return wait_until(lambda: committed(cluster, group, topic), timeout=60)

            read_and_commit(RECORDS // 4)
            offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
            first = current_leader(cluster, OFFSETS_TOPIC, offsets_partition)
            cluster.kill(first)
            while_away = read_and_commit(RECORDS // 4)
            stand_in = current_leader(cluster, OFFSETS_TOPIC, offsets_partition)
            assert stand_in != first

            cluster.start_broker(first)
            wait_until(
                lambda: current_leader(cluster, OFFSETS_TOPIC, offsets_partition) == first,
                timeout=90,
            )
            # The returned coordinator answers what was committed while it was away...
            assert wait_until(lambda: committed(cluster, group, topic), timeout=60) == while_away
            # ...and takes the member's next commit.
            back = read_and_commit(RECORDS // 4)
            assert describe(admin, group).coordinator.id == first
            assert all(back[p] >= while_away[p] for p in back)
        finally:
            a.close()
        b = member(cluster, group, topic)
        try:
            rest = consume(b, RECORDS - len(read), timeout_s=90)
        finally:
            b.close()
    starts: dict[int, int] = {}
    for m in rest:
        starts.setdefault(m.partition(), m.offset())
    assert starts == {p: max(o, 0) for p, o in back.items() if p in starts}
    assert_each_once([m.value() for m in read + rest], values)
