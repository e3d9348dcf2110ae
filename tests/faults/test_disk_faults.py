"""Power failures as lazyfs has them, on real processes: every file of a node
(segments, indexes, checkpoints, producer snapshots, quorum-state, the KRaft log)
goes back to its last fsync, with torn writes (kafkalab.storage.durability_ledger,
`LocalCluster.power_failure(node, lose_unsynced=True, seed=...)`). Judged by the
history checker (kafkalab.cluster.history.check)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import controller_isr, partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.history import History, check
from kafkalab.cluster.local_cluster import CONTROLLER_ID_BASE
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.record_serde import decode_entries

LAZYFS = {"kafkalab.lazyfs.enable": "true"}


def _create(cluster, topic, replicas=(1, 2, 3)):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[list(replicas)])
    for future in admin.create_topics([new]).values():
        future.result(20)
    wait_until(lambda: controller_isr(cluster, topic) == sorted(replicas), timeout=30)
    wait_until(lambda: len(cluster.describe(topic)) == len(replicas), timeout=30)


def test_fsync_per_record_keeps_every_acknowledged_record_when_every_broker_loses_power(
    tmp_path,
):
    """flush.messages=1 (log.flush.interval.messages): a record is fsynced by each
    replica as it appends it, so acks=all acknowledges only fsynced records. All
    three brokers lose power at once, under load, with torn writes: nothing
    acknowledged is lost."""
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={
            **LAZYFS,
            "log.flush.interval.messages": "1",
            "min.insync.replicas": "2",
            "replica.lag.time.max.ms": "10000",
        },
    ) as cluster:
        _create(cluster, "synced")
        history = History()
        workload = ProducerWorkload(
            cluster.bootstrap_servers, "synced", history, acks="all", rate=200
        ).start()
        try:
            wait_until(lambda: workload.acked >= 200, timeout=60)
            cut = {}
            for broker in (1, 2, 3):
                cut[broker] = cluster.power_failure(broker, lose_unsynced=True, seed=broker)
            acked_at_crash = workload.acked
            for broker in (1, 2, 3):
                cluster.restart(broker)
            wait_until(lambda: workload.acked >= acked_at_crash + 200, timeout=90)
        finally:
            workload.stop()
        wait_for_replicas_in_sync(cluster, "synced", timeout=90)
        read_final_log(cluster.bootstrap_servers, "synced", 0, history)
        record_replicas(cluster, "synced", 0, history)
        verdict = check(history)
        assert verdict.valid, (verdict.summary(), cut)
        assert verdict.acknowledged >= 400


def test_a_controller_losing_power_in_a_quorum_keeps_the_quorum_safe(tmp_path):
    """A 3-voter KRaft quorum, every voter keeping a durability ledger. The active
    controller loses power (its KRaft log, quorum-state and checkpoints back to their
    last fsync, torn writes kept): a new leader is elected, topics created before are
    still there, a topic can be created, the old voter rejoins and catches up. Every
    voter's log names one leader per epoch, and the logs agree where they overlap."""
    with LocalCluster(
        brokers=1,
        controllers=3,
        base_dir=tmp_path,
        session_timeout_ms=3000,
        controller_props={
            **LAZYFS,
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "1000",
            "controller.quorum.request.timeout.ms": "800",
        },
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for name in ("before-1", "before-2"):
            for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
                future.result(20)
        first = cluster.describe_quorum(timeout_s=20)
        # the leader loses power while a burst of CreateTopics is being written
        burst = admin.create_topics([NewTopic(f"burst-{i}", 1, 1) for i in range(30)])
        time.sleep(0.05)
        cluster.power_failure(first.leader_id, lose_unsynced=True, seed=7)
        report = cluster.last_power_failure
        quorum = wait_until(
            lambda: (lambda q: q if q.leader_id != first.leader_id else None)(
                cluster.describe_quorum(timeout_s=20)
            ),
            timeout=30,
        )
        assert quorum.leader_epoch > first.leader_epoch
        _create_while_the_broker_finds_the_new_controller(admin, "after")
        wait_until(lambda: partition_state(cluster.bootstrap_servers, "after")[0] == 1)
        created = set()
        for name, future in burst.items():
            try:
                future.result(30)
                created.add(name)
            except KafkaException:  # not created, or not known: no promise was made
                pass
        topics = set(admin.list_topics(timeout=10).topics)
        # committed metadata kept: every topic whose creation was answered
        assert {"before-1", "before-2", "after"} | created <= topics, (report, created, topics)

        cluster.restart(first.leader_id)
        wait_until(
            lambda: (lambda q: all(r.log_end_offset == q.high_watermark for r in q.current_voters))(
                cluster.describe_quorum(timeout_s=20)
            ),
            timeout=60,
        )
        dirs = {c: cluster.controllers[c].dir for c in cluster.controller_ids}
    logs = {c: _metadata_log(d) for c, d in dirs.items()}  # read once every voter stopped
    leaders: dict[int, set[int]] = {}
    for entries in logs.values():
        for entry in entries:
            if isinstance(entry.record, LeaderChangeMessage):
                leaders.setdefault(entry.epoch, set()).add(entry.record.leader_id)
    assert leaders and all(len(ids) == 1 for ids in leaders.values()), leaders
    assert max(leaders) >= quorum.leader_epoch
    shortest = min(len(entries) for entries in logs.values())
    prefixes = {
        c: [(e.offset, e.epoch, repr(e.record)) for e in entries[:shortest]]
        for c, entries in logs.items()
    }
    assert len({tuple(p) for p in prefixes.values()}) == 1  # the logs agree
    assert sorted(logs) == [CONTROLLER_ID_BASE + i for i in (1, 2, 3)]


def _create_while_the_broker_finds_the_new_controller(admin, topic: str) -> None:
    """CreateTopics until the broker forwards it to the new active controller
    (NOT_CONTROLLER, retriable, until it has learnt who leads)."""

    def created() -> bool:
        try:
            for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                future.result(20)
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return True
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            return False
        return True

    wait_until(created, timeout=60)


def _metadata_log(directory: Path):
    """A voter's `__cluster_metadata-0`, read from its segment files (read-only)."""
    entries = []
    for segment in sorted((directory / METADATA_LOG_DIR).glob("*.log")):
        entries.extend(decode_entries(segment.read_bytes()))
    return entries


def test_without_fsync_per_record_the_last_isr_member_losing_power_loses_acknowledged_records(
    tmp_path,
):
    """Kafka's defaults: no fsync per record (flush.messages and flush.ms unbounded;
    Kafka counts on replication instead), min.insync.replicas=1. The followers die
    (SIGKILL: their page cache survives), the leader goes on alone as the last ISR
    member and acknowledges records that only its page cache holds, then loses power.
    Those acknowledged records are gone, and the checker names them."""
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={**LAZYFS, "replica.lag.time.max.ms": "2000"},
    ) as cluster:
        _create(cluster, "unsynced")
        history = History()
        workload = ProducerWorkload(cluster.bootstrap_servers, "unsynced", history, acks="all")
        for n in range(50):
            workload.send(n)
        assert workload.producer.flush(30) == 0
        wait_for_replicas_in_sync(cluster, "unsynced")
        cluster.kill(2)
        cluster.kill(3)
        wait_until(lambda: controller_isr(cluster, "unsynced") == [1], timeout=30)
        for n in range(50, 100):
            workload.send(n)
        assert workload.producer.flush(30) == 0
        assert workload.acked == 100
        cut = cluster.power_failure(1, lose_unsynced=True, seed=1)
        assert cut, "the leader had nothing unsynced to lose"
        for broker in (1, 2, 3):
            cluster.restart(broker)
        wait_for_replicas_in_sync(cluster, "unsynced", timeout=90)
        read_final_log(cluster.bootstrap_servers, "unsynced", 0, history)
        verdict = check(history)
    lost = sorted(int(item["value"].split(b"-")[1]) for item in verdict.lost)
    # records only the leader's page cache held: acknowledged, then gone
    assert any(n >= 50 for n in lost), verdict.summary()
    # the evidence: each lost value, the offset it was acknowledged at, what is there now
    for item in verdict.lost:
        assert item["partition"] == ("unsynced", 0)
        assert item["acked offset"] == int(item["value"].split(b"-")[1])


def _kafkalab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalab", *args], capture_output=True, text=True, timeout=120
    )


def test_the_cli_power_failure_loses_unsynced_files(tmp_path):
    """`kafkalab cluster up --lazyfs`, then `power-failure N --lose-unsynced --seed S`
    as a user runs them: the broker's unsynced segment is gone, it restarts on what
    is left; without the ledger the verb refuses (and says how to get one)."""
    d = str(tmp_path / "k")
    up = _kafkalab("cluster", "up", "--brokers", "1", "--lazyfs", "--dir", d)
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((tmp_path / "k" / "cluster.json").read_text())
    try:
        bootstrap = state["brokers"]["1"]["address"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("cli", 1, 1)]).values():
            future.result(20)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
        for n in range(20):
            producer.produce("cli", value=b"r-%d" % n)
        assert producer.flush(30) == 0
        out = _kafkalab(
            "cluster", "power-failure", "1", "--lose-unsynced", "--seed", "3", "--dir", d
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert re.search(r"cli-0/0+\.log: \d+ bytes not fsynced are gone", out.stdout), out.stdout
        restarted = _kafkalab("cluster", "restart", "1", "--dir", d)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        status = _kafkalab("cluster", "status", "--dir", d)
        assert status.returncode == 0 and "cli" in status.stdout, status.stdout
    finally:
        down = _kafkalab("cluster", "down", "--dir", d)
        assert down.returncode == 0, down.stdout + down.stderr

    plain = str(tmp_path / "plain")
    assert _kafkalab("cluster", "up", "--brokers", "1", "--dir", plain).returncode == 0
    try:
        refused = _kafkalab("cluster", "power-failure", "1", "--lose-unsynced", "--dir", plain)
        assert refused.returncode == 1
        assert "kafkalab cluster up --lazyfs" in refused.stderr
    finally:
        assert _kafkalab("cluster", "down", "--dir", plain).returncode == 0
