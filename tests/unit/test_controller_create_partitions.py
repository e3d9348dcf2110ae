"""CreatePartitions in the controller (sans-IO): new PartitionRecords in the metadata
log, placed by the assignment or as the caller says, with Kafka's errors; a
restarted controller replays them; validate_only writes nothing."""

from __future__ import annotations

import pytest

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.errors import Errors, KafkaError


def three_brokers(tmp_path) -> QuorumController:
    c = QuorumController(tmp_path / "controller", session_timeout_ms=1000)
    for b in (1, 2, 3):
        epoch = c.register_broker(b, "127.0.0.1", 9090 + b, f"inc-{b}", now_ms=0)
        c.heartbeat(b, epoch, now_ms=0)
    return c


def refused(call) -> tuple[Errors, str]:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code, info.value.message


def test_new_partitions_have_the_topics_replication_factor_and_a_leader(tmp_path):
    c = three_brokers(tmp_path)
    c.create_topic("orders", 2, 2)
    end = c.metadata_offset
    records = c.create_partitions("orders", 5)
    assert [r["partition"] for r in records] == [2, 3, 4]
    assert c.metadata_offset == end + 3  # one PartitionRecord each, in the log
    parts = c.topics["orders"].partitions
    assert sorted(parts) == [0, 1, 2, 3, 4]
    for p in (2, 3, 4):
        assert len(set(parts[p].replicas)) == 2
        assert parts[p].isr == parts[p].replicas and parts[p].leader == parts[p].replicas[0]
        assert (parts[p].leader_epoch, parts[p].partition_epoch) == (0, 0)
    c.close()
    again = QuorumController(tmp_path / "controller")
    assert again.topics["orders"].partitions == parts  # replayed from the log
    again.close()


def test_an_assignment_places_the_new_partitions(tmp_path):
    c = three_brokers(tmp_path)
    c.create_topic("orders", 1, 2)
    c.create_partitions("orders", 3, [[3, 1], [2, 3]])
    parts = c.topics["orders"].partitions
    assert (parts[1].replicas, parts[1].leader) == ([3, 1], 3)
    assert (parts[2].replicas, parts[2].leader) == ([2, 3], 2)


def test_a_fenced_replica_is_left_out_of_the_new_isr(tmp_path):
    c = three_brokers(tmp_path)
    c.create_topic("orders", 1, 2)
    c.fence_broker(3, now_ms=10)
    c.create_partitions("orders", 2, [[3, 1]])
    part = c.topics["orders"].partitions[1]
    assert (part.replicas, part.isr, part.leader) == ([3, 1], [1], 1)


def test_validate_only_checks_and_writes_nothing(tmp_path):
    c = three_brokers(tmp_path)
    c.create_topic("orders", 1, 3)
    end = c.metadata_offset
    assert len(c.create_partitions("orders", 4, validate_only=True)) == 3
    assert c.metadata_offset == end and len(c.topics["orders"].partitions) == 1
    code, _ = refused(lambda: c.create_partitions("orders", 1, validate_only=True))
    assert code == Errors.INVALID_PARTITIONS


def test_kafkas_errors(tmp_path):
    c = three_brokers(tmp_path)
    c.create_topic("orders", 3, 2)
    assert refused(lambda: c.create_partitions("orders", 2)) == (
        Errors.INVALID_PARTITIONS,
        "The topic orders currently has 3 partition(s); 2 would not be an increase.",
    )
    assert refused(lambda: c.create_partitions("orders", 3)) == (
        Errors.INVALID_PARTITIONS,
        "Topic already has 3 partition(s).",
    )
    assert refused(lambda: c.create_partitions("nope", 3))[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    for assignment, why in [
        ([[1, 9]], "no such broker is registered"),
        ([[1]], "not consistent with previous partitions, which have 2 replica(s)"),
        ([[1, 1]], "more than once"),
        ([[]], "empty replica list"),
        ([[1, 2], [2, 3]], "Attempted to add 1 additional partition(s), but only 2"),
    ]:
        code, message = refused(lambda a=assignment: c.create_partitions("orders", 4, a))
        assert code == Errors.INVALID_REPLICA_ASSIGNMENT and why in message
    c.fence_broker(1, now_ms=10)
    c.fence_broker(2, now_ms=10)
    end = c.metadata_offset
    code, message = refused(lambda: c.create_partitions("orders", 4, [[1, 2]]))
    assert code == Errors.INVALID_REPLICA_ASSIGNMENT and "fenced" in message
    assert refused(lambda: c.create_partitions("orders", 4))[0] == (
        Errors.INVALID_REPLICATION_FACTOR
    )  # RF 2 with one unfenced broker
    assert c.metadata_offset == end and len(c.topics["orders"].partitions) == 3
