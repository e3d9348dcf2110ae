"""Kafka's Java Admin `describeMetadataQuorum` against a kafkalab cluster with a
controller quorum: the broker forwards DescribeQuorum to the controllers and the
Java client reads the leader's answer (Kafka's QuorumInfo)."""

from __future__ import annotations

from java_peer import java_peer, require_java_peer

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.local_cluster import CONTROLLER_ID_BASE


def test_java_admin_describes_the_metadata_quorum(tmp_path):
    require_java_peer()
    with LocalCluster(brokers=1, controllers=3, base_dir=tmp_path) as cluster:
        ours = cluster.describe_quorum(timeout_s=20)
        (quorum,) = java_peer(
            "admin", "describeMetadataQuorum", "--bootstrap", cluster.bootstrap_servers
        )
        assert quorum["event"] == "quorum", quorum
        assert quorum["leaderId"] == ours.leader_id
        assert quorum["leaderEpoch"] == ours.leader_epoch
        assert quorum["highWatermark"] >= ours.high_watermark > 0
        voters = {v["replicaId"]: v for v in quorum["voters"]}
        assert sorted(voters) == [CONTROLLER_ID_BASE + i for i in (1, 2, 3)]
        assert voters[ours.leader_id]["logEndOffset"] >= ours.high_watermark
        assert quorum["observers"] == []
