"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments against one
broker on its own (no controller): it leads everything, so no election is needed and
the only assignment there is, [itself], is the one it has. Through the teaching Admin,
kafka-python's KafkaAdminClient and confluent-kafka's AdminClient."""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

from kafkalab.client.admin import Admin
from kafkalab.errors import Errors
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        client = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for future in client.create_topics([NewTopic("t", 2, 1)]).values():
            future.result(15)
        yield b


def test_the_teaching_admin(broker):
    with Admin(broker.bootstrap_servers) as admin:
        me = admin.broker_ids()[0]
        got = admin.elect_leaders("preferred", [("t", 0), ("nope", 0)])
        assert got[("t", 0)].code == Errors.ELECTION_NOT_NEEDED
        assert got[("nope", 0)].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert admin.elect_leaders("unclean") == {}  # every partition: nothing to report
        got = admin.alter_partition_reassignments(
            {("t", 0): [me], ("t", 1): [me, me + 1], ("t", 7): [me]}
        )
        assert got[("t", 0)] is None
        assert got[("t", 1)].code == Errors.INVALID_REPLICA_ASSIGNMENT
        assert got[("t", 7)].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        got = admin.alter_partition_reassignments({("t", 0): None})
        assert got[("t", 0)].code == Errors.NO_REASSIGNMENT_IN_PROGRESS
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments([("t", 0)]) == {}
        assert admin.partition_replicas(["t"]) == {("t", 0): [me], ("t", 1): [me]}


def test_kafka_python_and_confluent_kafka(broker):
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with Admin(broker.bootstrap_servers) as admin:
            me = admin.broker_ids()[0]
        t0, t1 = KTopicPartition("t", 0), KTopicPartition("t", 1)
        got = kp.alter_partition_reassignments({t0: [me], t1: None})
        assert got[t0] is None and got[t1] is NoReassignmentInProgressError
        assert kp.alter_partition_reassignments({t0: [me, me + 5]})[t0] is (
            InvalidReplicationAssignmentError
        )
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = CTopicPartition("t", 0)
    result = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(15)
    assert result[tp].code() == Errors.ELECTION_NOT_NEEDED
    # No partitions named: every partition, and those needing no election are left out.
    assert client.elect_leaders(ElectionType.UNCLEAN, None).result(15) == {}
