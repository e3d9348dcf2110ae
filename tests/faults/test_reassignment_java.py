"""Kafka's own Java Admin (kafka-clients 4.3, tests/java/KafkaPeer.java) electing
leaders and moving replicas on the three-broker cluster: AlterPartitionReassignments
v1 with AllowReplicationFactorChange (KIP-860), ListPartitionReassignments while a
move waits for a killed broker, a cancel, and the move completing after the restart;
ElectLeaders' answers as Java's exceptions. Skipped with the reason when there is no
JDK or the jars cannot be fetched."""

from __future__ import annotations

import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import controller_isr, wait_until

from kafkalab.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from java_peer import java_peer, require_java_peer  # noqa: E402


def by_partition(events: list[dict], kind: str) -> dict[str, dict]:
    return {f"{e['topic']}-{e['partition']}": e for e in events if e["event"] == kind}


def test_java_admin_moves_a_replica_and_elects_leaders(tmp_path):
    require_java_peer()
    with LocalCluster(brokers=3, base_dir=tmp_path, session_timeout_ms=2000) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = [NewTopic(t, num_partitions=1, replica_assignment=[[1, 2]]) for t in ("jm", "jr")]
        for future in admin.create_topics(topics).values():
            future.result(30)
        wait_until(lambda: controller_isr(cluster, "jm") == controller_isr(cluster, "jr") == [1, 2])
        cluster.kill(3)  # the move to broker 3 has to wait for it

        def java(*args: str) -> list[dict]:
            return java_peer("admin", *args, "--bootstrap", cluster.bootstrap_servers)

        got = by_partition(
            java(
                "alterPartitionReassignments", "--reassignments", "jm:0=2/3,jr:0=1/2/3,jm:5=1/2",
                "--allow-replication-factor-change", "false",
            ),
            "reassignment",
        )  # fmt: skip
        assert got["jm-0"]["error"] is None
        assert got["jr-0"]["error"] == "InvalidReplicationFactorException"
        assert got["jm-5"]["error"] == "UnknownTopicOrPartitionException"
        ongoing = by_partition(java("listPartitionReassignments"), "ongoing")
        assert list(ongoing) == ["jm-0"]
        assert (ongoing["jm-0"]["replicas"], ongoing["jm-0"]["adding"]) == ([2, 3, 1], [3])
        assert ongoing["jm-0"]["removing"] == [1]

        # Cancelled: back to [1, 2], nothing left to list or to cancel.
        got = by_partition(
            java("alterPartitionReassignments", "--reassignments", "jm:0=cancel"), "reassignment"
        )
        assert got["jm-0"]["error"] is None
        assert by_partition(java("listPartitionReassignments"), "ongoing") == {}
        got = by_partition(
            java("alterPartitionReassignments", "--reassignments", "jm:0=cancel"), "reassignment"
        )
        assert got["jm-0"]["error"] == "NoReassignmentInProgressException"

        # Again, and this time broker 3 comes back: the move completes.
        java("alterPartitionReassignments", "--reassignments", "jm:0=2/3")
        cluster.restart(3)
        wait_until(
            lambda: by_partition(java("listPartitionReassignments"), "ongoing") == {}, timeout=60
        )
        wait_until(lambda: controller_isr(cluster, "jm") == [2, 3])

        got = by_partition(
            java("electLeaders", "--election-type", "preferred", "--partitions", "jm:0,jr:0,jx:0"),
            "election",
        )
        assert got["jm-0"]["error"] == "ElectionNotNeededException"  # 2 leads, 2 is first
        assert got["jr-0"]["error"] == "ElectionNotNeededException"
        assert got["jx-0"]["error"] == "UnknownTopicOrPartitionException"
        got = by_partition(
            java("electLeaders", "--election-type", "unclean", "--partitions", "jm:0"), "election"
        )
        assert got["jm-0"]["error"] == "ElectionNotNeededException"
