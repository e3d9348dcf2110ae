"""Faults on a real cluster under load, judged by the history checker.

Each test records what a librdkafka producer was told (History), reads the
healed partition back, and lets kafkalab.cluster.history.check say what was
lost, duplicated, reordered or diverged, and the Jepsen-grade checker
(kafkalab.cluster.checker, through its adapter) name the anomaly."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import (
    assert_nothing_found,
    controller_isr,
    judged,
    unseen_values,
    wait_until,
)

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)


def create(cluster, topic, replicas=(1, 2, 3), configs=None):
    """One partition with its replicas in this order (the first is the leader)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(
        topic, num_partitions=1, replica_assignment=[list(replicas)], config=configs or {}
    )
    for future in admin.create_topics([new]).values():
        future.result(10)
    wait_until(lambda: controller_isr(cluster, topic) == sorted(replicas))
    wait_until(lambda: len(cluster.describe(topic)) == len(replicas))


def leader_of(cluster, topic, not_in=()):
    """The running broker that leads the partition in the newest epoch."""

    def find():
        df = cluster.describe(topic)
        leaders = df[(df.role == "leader") & (df.status == "running")]
        leaders = leaders[~leaders.broker.isin(list(not_in))]
        if leaders.empty:
            return None
        return int(leaders.sort_values("leader epoch").broker.iloc[-1])

    return wait_until(find, timeout=60)


def describe_row(cluster, topic, broker):
    df = cluster.describe(topic)
    return df[df.broker == broker].iloc[0]


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "10000", "min.insync.replicas": "2"},
    ) as c:
        yield c


def test_acks_all_loses_nothing_while_the_leader_is_killed_again_and_again(cluster):
    create(cluster, "safe")
    history = History()
    with ProducerWorkload(cluster.bootstrap_servers, "safe", history, acks="all", rate=300):
        for _ in range(3):
            time.sleep(1.5)
            leader = leader_of(cluster, "safe")
            cluster.kill(leader)
            leader_of(cluster, "safe", not_in=[leader])  # a new leader serves
            time.sleep(1)
            cluster.restart(leader)
            wait_until(lambda b=leader: b in controller_isr(cluster, "safe"), timeout=60)
        time.sleep(1)
    wait_for_replicas_in_sync(cluster, "safe")
    read_final_log(cluster.bootstrap_servers, "safe", 0, history)
    record_replicas(cluster, "safe", 0, history)
    verdict = check(history)
    assert verdict.valid, verdict.summary()
    assert verdict.acknowledged > 500
    assert len(history.replicas[("safe", 0)]) == 3  # three replicas compared byte for byte
    assert_nothing_found(judged(history))


def test_acks_1_loses_acknowledged_records_when_the_leader_dies_and_the_checker_says_so(
    cluster,
):
    create(cluster, "risky")
    history = History()
    workload = ProducerWorkload(cluster.bootstrap_servers, "risky", history, acks="1")
    for n in range(50):
        workload.send(n)
    assert workload.producer.flush(30) == 0
    # On every replica before the cut (the brokers' reports can still show the log
    # before the sends: at its old end, all "in sync"; cut then, the followers may not
    # have the first 50 either, and all 100 are lost).
    wait_for_replicas_in_sync(cluster, "risky", log_end_offset=50)
    # The leader's answers stop reaching both followers (their fetches still reach
    # it): for less than replica.lag.time.max.ms they stay in the ISR, and the
    # leader acknowledges acks=1 writes that only it has.
    cluster.cut_link(1, 2, both_ways=False)
    cluster.cut_link(1, 3, both_ways=False)
    time.sleep(0.5)  # brokers re-read their link faults every 100 ms
    for n in range(50, 100):
        workload.send(n)
    assert workload.producer.flush(10) == 0
    cluster.kill(1)
    cluster.heal_links()
    leader_of(cluster, "risky", not_in=[1])
    cluster.restart(1)  # the old leader comes back, truncates and follows
    wait_for_replicas_in_sync(cluster, "risky")
    read_final_log(cluster.bootstrap_servers, "risky", 0, history)
    record_replicas(cluster, "risky", 0, history)
    verdict = check(history)
    assert not verdict.valid
    lost = {item["value"] for item in verdict.lost}
    assert lost == {b"v-%d" % n for n in range(50, 100)}, verdict.summary()
    assert not verdict.diverged  # lost, but every replica agrees on what is left
    # Nothing was written after the loss: no read went past it, so the new checker
    # calls it unseen (acknowledged, never polled), not lost-write.
    new = judged(history)
    assert set(new.anomalies) == {"unseen"} and not new.valid, new.summary()
    assert unseen_values(new) == {b"v-%d" % n for n in range(50, 100)}, new.summary()


@pytest.mark.parametrize("rule, loses", [("high-watermark", True), ("fenced-leader-epoch", False)])
def test_a_follower_truncating_to_its_stale_high_watermark_loses_a_committed_record(
    tmp_path, rule, loses
):
    """KIP-101's first scenario on real processes. Followers learn the HW one fetch
    late (replica.fetch.wait.max.ms is long here). The leader (1) dies right after
    acknowledging m5 to an acks=all producer; 2 is elected; 3 becomes its follower
    and, under the high-watermark rule, cuts m5 off. 3 cannot fetch it back from 2
    (that link is cut), and when 2 dies too, 3 leads without m5."""
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "replica.lag.time.max.ms": "30000",
            "replica.fetch.wait.max.ms": "5000",
            "kafkalab.follower.truncation.rule": rule,
        },
    ) as cluster:
        create(cluster, "kip101")
        history = History()
        workload = ProducerWorkload(cluster.bootstrap_servers, "kip101", history, acks="all")
        for n in range(5):
            workload.send(n)
        assert workload.producer.flush(30) == 0
        wait_for_replicas_in_sync(cluster, "kip101", timeout=30, log_end_offset=5)
        cluster.cut_link(2, 3, both_ways=False)  # 3 no longer hears 2
        workload.send(5)
        assert workload.producer.flush(30) == 0  # m5 is committed: on all three
        cluster.kill(1)  # before the followers hear the new HW
        assert leader_of(cluster, "kip101", not_in=[1]) == 2
        wait_until(lambda: describe_row(cluster, "kip101", 3)["leader"] == 2)
        time.sleep(0.5)  # 3 has applied the change (and truncated, or is still asking)
        expected_leo = 5 if loses else 6
        assert describe_row(cluster, "kip101", 3)["LEO"] == expected_leo
        cluster.kill(2)
        assert leader_of(cluster, "kip101", not_in=[1, 2]) == 3
        cluster.heal_links()
        cluster.restart(1)
        cluster.restart(2)
        wait_for_replicas_in_sync(cluster, "kip101")
        read_final_log(cluster.bootstrap_servers, "kip101", 0, history)
        record_replicas(cluster, "kip101", 0, history)
        verdict = check(history)
        new = judged(history)
        if loses:
            assert [item["value"] for item in verdict.lost] == [b"v-5"], verdict.summary()
            assert set(new.anomalies) == {"unseen"}, new.summary()
            (case,) = new.anomalies["unseen"]
            assert case["values"] == [b"v-5"] and case["key"] == ("kip101", 0), new.summary()
        else:
            assert verdict.valid, verdict.summary()
            assert_nothing_found(new)


@pytest.mark.parametrize(
    "rule, diverges", [("high-watermark", True), ("fenced-leader-epoch", False)]
)
def test_after_both_replicas_lose_unflushed_data_the_logs_diverge_only_without_epochs(
    tmp_path, rule, diverges
):
    """KIP-101's second scenario on real processes. Broker 1 fsyncs every record,
    broker 2 never does. Both die in power failures: 1 keeps m0 and m1 (below its
    HW), 2 loses everything. 2 comes back first as the last ISR member and leads,
    writing n0, n1 at offsets 0 and 1. Then 1 returns as a follower: truncating to
    its HW keeps m0, m1, so offsets 0 and 1 differ between the replicas forever;
    asking 2 where 1's epoch ended cuts them and copies n0, n1."""
    with LocalCluster(
        brokers=2,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            "log.flush.offset.checkpoint.interval.ms": "100",
            "kafkalab.follower.truncation.rule": rule,
        },
        props_by_broker={1: {"log.flush.interval.messages": "1"}},
    ) as cluster:
        create(cluster, "kip101b", replicas=(1, 2))
        history = History()
        workload = ProducerWorkload(
            cluster.bootstrap_servers, "kip101b", history, acks="all", prefix="m"
        )
        for n in range(2):
            workload.send(n)
        assert workload.producer.flush(30) == 0
        wait_for_replicas_in_sync(cluster, "kip101b", replicas=2, log_end_offset=2)
        time.sleep(1.5)  # broker 1's checkpoints (recovery point, HW) now say 2
        cluster.power_failure(1)
        assert leader_of(cluster, "kip101b", not_in=[1]) == 2
        assert cluster.power_failure(2)["kip101b-0"] > 0  # 2 never fsynced: all gone
        time.sleep(3)  # the controller fences 2 too; it stays the last ISR member
        cluster.restart(2)
        assert leader_of(cluster, "kip101b", not_in=[1]) == 2
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
        for n in range(2):
            producer.produce("kip101b", value=b"n-%d" % n, partition=0)
        assert producer.flush(30) == 0
        cluster.restart(1)
        wait_until(
            lambda: (
                describe_row(cluster, "kip101b", 1)["leader"] == 2
                and describe_row(cluster, "kip101b", 1)["LEO"] == 2
            ),
            timeout=30,
        )
        time.sleep(1)
        replicas = History()
        for broker in (1, 2):
            df = cluster.describe("kip101b")
            assert int(df[df.broker == broker].LEO.iloc[0]) == 2
        record_replicas(cluster, "kip101b", 0, replicas, below=2)
        verdict = check(replicas)
        assert bool(verdict.diverged) == diverges, verdict.summary()
        if diverges:
            assert verdict.diverged[0]["first differing batch"] == 0
