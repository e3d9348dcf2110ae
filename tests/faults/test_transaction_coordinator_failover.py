"""Transactions on the three-broker cluster with confluent-kafka: markers on every
replica, a zombie fenced, and the transaction coordinator's broker dying — after a
commit (the next transaction goes on with the new coordinator), and between EndTxn
and the markers (the new coordinator loads PrepareCommit and writes them)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader
from kafkalab.cluster.workload import read_all as read_all_from
from kafkalab.coordinator.transaction.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    describe_record,
    partition_for,
)
from kafkalab.records import iter_batches
from kafkalab.records.control_record import parse_control_record
from kafkalab.storage.dump_log_segments import dump_paths

TXN_PARTITIONS = 3
PROPS = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "offsets.topic.num.partitions": "3",
    "replica.lag.time.max.ms": "2000",
    "request.timeout.ms": "3000",  # the marker channel gives up on a hung leader sooner
}


def create(cluster, topic: str, partitions: int = 2, rf: int = 3, assignment=None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = (
        NewTopic(topic, len(assignment), replica_assignment=assignment)
        if assignment
        else NewTopic(topic, partitions, rf)
    )
    for f in admin.create_topics([new]).values():
        f.result(30)


def producer(cluster, tid: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": tid,
            "transaction.timeout.ms": 60_000,
        }
    )


def markers(cluster, broker_id: int, topic: str, partition: int) -> list[str]:
    d = cluster.broker_dir(broker_id) / f"{topic}-{partition}"
    out = []
    for f in sorted(d.glob("*.log")):
        for b in iter_batches(f.read_bytes()):
            if b.header.is_control_batch:
                out.append(parse_control_record(b.records[0]).type.name)
    return out


def txn_states(cluster, broker_id: int, tid: str) -> list[tuple[str, int]]:
    """(state, epoch) of every __transaction_state record of `tid` on a broker's disk."""
    d = cluster.broker_dir(broker_id) / (
        f"{TRANSACTION_STATE_TOPIC}-{partition_for(tid, TXN_PARTITIONS)}"
    )
    lines, _ = dump_paths([d], print_data_log=True, decoder=describe_record)
    out = []
    for line in lines:
        if f"transactionalId={tid} " in line and "state=" in line:
            state = line.split("state=")[1].split(",")[0]
            epoch = int(line.split("producerEpoch=")[1].split(",")[0])
            out.append((state, epoch))
    return out


def read_all(cluster, topic: str, partitions: int, isolation: str) -> list[bytes]:
    return read_all_from(cluster.bootstrap_servers, topic, partitions, isolation)


def wait_for(what, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout_s} s: {what.__doc__ or what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(
        brokers=3, base_dir=tmp_path_factory.mktemp("txn-cluster"), broker_props=PROPS
    ) as c:
        yield c


def test_commit_abort_and_fencing_on_the_cluster(cluster):
    create(cluster, "txn-data")
    p = producer(cluster, "cluster-app")
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(20):
        p.produce("txn-data", b"c-%d" % i, partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    p.produce("txn-data", b"a", partition=0)
    assert p.flush(30) == 0  # sent, so the partition is in the transaction
    p.abort_transaction(60)
    zombie, p2 = p, producer(cluster, "cluster-app")
    p2.init_transactions(60)
    with pytest.raises(KafkaException):
        zombie.begin_transaction()
        zombie.produce("txn-data", b"zombie", partition=1)
        zombie.commit_transaction(30)

    def replicated():
        """the markers on every replica"""
        return all(
            markers(cluster, b, "txn-data", 0) == ["COMMIT", "ABORT"]
            and markers(cluster, b, "txn-data", 1) == ["COMMIT"]
            for b in (1, 2, 3)
        )

    wait_for(replicated)
    committed = {b"c-%d" % i for i in range(20)}
    assert sorted(read_all(cluster, "txn-data", 2, "read_committed")) == sorted(committed)
    assert sorted(read_all(cluster, "txn-data", 2, "read_uncommitted")) == sorted(
        committed | {b"a"}
    )
    states = txn_states(cluster, current_leader(cluster, "txn-data", 0), "cluster-app")
    assert [s for s, _ in states[:4]] == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]


def test_the_coordinator_dies_between_end_txn_and_the_markers(cluster):
    """The data partition's only replica is paused, so the markers cannot be
    written; the coordinator is killed with PrepareCommit on disk; the new one
    loads it and writes the COMMIT marker once the partition is back."""
    tid = "dies-before-markers"
    p = producer(cluster, tid)
    p.init_transactions(60)  # __transaction_state exists from here on
    coordinator = current_leader(cluster, TRANSACTION_STATE_TOPIC, partition_for(tid, 3))
    data_broker = next(b for b in (1, 2, 3) if b != coordinator)
    create(cluster, "txn-lonely", assignment=[[data_broker]])
    p.begin_transaction()
    p.produce("txn-lonely", b"v", partition=0)
    assert p.flush(30) == 0
    cluster.pause(data_broker)
    try:
        p.commit_transaction(60)  # answered at PrepareCommit: the markers are still to go
        assert markers(cluster, data_broker, "txn-lonely", 0) == []
        assert ("PrepareCommit", 0) in txn_states(cluster, coordinator, tid)
        cluster.kill(coordinator)
    finally:
        cluster.resume(data_broker)
    wait_for(lambda: markers(cluster, data_broker, "txn-lonely", 0) == ["COMMIT"], 90)
    survivor = next(b for b in (1, 2, 3) if b not in (coordinator,))

    def completed():
        """CompleteCommit written by the new coordinator"""
        return ("CompleteCommit", 0) in txn_states(cluster, survivor, tid)

    wait_for(completed, 90)
    assert read_all(cluster, "txn-lonely", 1, "read_committed") == [b"v"]
    cluster.start_broker(coordinator)


def test_the_partition_leader_dies_during_the_commit(cluster):
    """EndTxn is answered, then the data partition's leader hangs and is killed
    before its marker is written: the marker channel follows the leadership to the
    new leader, the transaction completes, and read_committed sees it whole."""
    tid = "leader-dies"
    p = producer(cluster, tid)
    p.init_transactions(60)  # __transaction_state exists from here on
    coordinator = current_leader(cluster, TRANSACTION_STATE_TOPIC, partition_for(tid, 3))
    others = [b for b in (1, 2, 3) if b != coordinator]
    # the first replica leads: the data partition's leader is not the coordinator
    create(cluster, "txn-moving", assignment=[[others[0], others[1], coordinator]])
    leader = current_leader(cluster, "txn-moving", 0)
    assert leader != coordinator
    p.begin_transaction()
    values = [b"m-%d" % i for i in range(10)]
    for v in values:
        p.produce("txn-moving", v, partition=0)
    assert p.flush(30) == 0
    cluster.pause(leader)
    try:
        p.commit_transaction(60)  # PrepareCommit is written; the marker is not
        assert markers(cluster, leader, "txn-moving", 0) == []
    finally:
        cluster.kill(leader)
    new_leader = current_leader(cluster, "txn-moving", 0)
    assert new_leader != leader
    wait_for(lambda: markers(cluster, new_leader, "txn-moving", 0) == ["COMMIT"], 90)
    wait_for(lambda: ("CompleteCommit", 0) in txn_states(cluster, coordinator, tid), 90)
    assert sorted(read_all(cluster, "txn-moving", 1, "read_committed")) == sorted(values)
    cluster.start_broker(leader)
