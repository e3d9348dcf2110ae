"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments in the
sans-IO controller: Kafka's errors, the three steps of a reassignment (start,
complete on the AlterPartition that brings the last adding replica into the ISR,
cancel), and a reassignment that survives a controller restart (replay)."""

from __future__ import annotations

from kafkalab.controller.partition_reassignment import PartitionReassignmentReplicas
from kafkalab.controller.quorum_controller import NO_LEADER, QuorumController
from kafkalab.errors import Errors

PREFERRED, UNCLEAN = 0, 1


def cluster(tmp_path, brokers=(1, 2, 3, 4)) -> tuple[QuorumController, dict[int, int]]:
    c = QuorumController(tmp_path / "controller", session_timeout_ms=1000)
    epochs = {b: c.register_broker(b, "127.0.0.1", 9090 + b, f"inc-{b}", now_ms=0) for b in brokers}
    for b, e in epochs.items():
        c.heartbeat(b, e, now_ms=0)
    return c, epochs


def part(c: QuorumController, topic="t", p=0):
    return c.topics[topic].partitions[p]


def test_preferred_election_moves_leadership_back_and_says_when_not_needed(tmp_path):
    c, _ = cluster(tmp_path)
    c.create_topic("t", 2, 2, assignments={0: [1, 2], 1: [2, 3]})
    c.fence_broker(1, now_ms=1)
    assert part(c).leader == 2
    # The preferred replica is fenced: not available.
    assert c.elect_leaders(PREFERRED, [("t", 0)]) == [
        ("t", 0, Errors.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.")
    ]
    epoch = c.register_broker(1, "127.0.0.1", 9091, "inc-1b", now_ms=2)
    c.heartbeat(1, epoch, now_ms=2)
    # Back, but not in the ISR yet (the fence dropped it): still not available.
    assert c.elect_leaders(PREFERRED, [("t", 0)])[0][2] == Errors.PREFERRED_LEADER_NOT_AVAILABLE
    c.alter_partition(
        2, c.brokers[2].broker_epoch, "t", 0, part(c).leader_epoch, part(c).partition_epoch, [1, 2]
    )
    before = part(c).leader_epoch
    assert c.elect_leaders(PREFERRED, [("t", 0), ("t", 1), ("t", 9), ("nope", 0)]) == [
        ("t", 0, Errors.NONE, None),
        ("t", 1, Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        ("t", 9, Errors.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-9"),
        ("nope", 0, Errors.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
    ]
    assert part(c).leader == 1 and part(c).leader_epoch == before + 1
    # Every partition: those already led by their preferred replica are left out.
    assert c.elect_leaders(PREFERRED, None) == []


def test_unclean_election_by_hand_picks_a_live_out_of_sync_replica(tmp_path):
    c, _ = cluster(tmp_path)
    c.create_topic("t", 1, 2, assignments={0: [1, 2]})
    assert c.elect_leaders(UNCLEAN, [("t", 0)])[0][2] == Errors.ELECTION_NOT_NEEDED
    c.fence_broker(2, now_ms=1)  # the follower leaves the ISR
    c.fence_broker(1, now_ms=1)  # the last ISR member goes: no leader
    assert part(c).leader == NO_LEADER and part(c).isr == [1]
    assert c.elect_leaders(UNCLEAN, [("t", 0)]) == [
        (
            "t",
            0,
            Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            "Eligible topic partition leaders are not available.",
        )
    ]
    epoch = c.register_broker(2, "127.0.0.1", 9092, "inc-2b", now_ms=2)
    c.heartbeat(2, epoch, now_ms=2)
    assert part(c).leader == NO_LEADER  # the topic does not allow unclean elections itself
    assert c.elect_leaders(UNCLEAN, [("t", 0)]) == [("t", 0, Errors.NONE, None)]
    assert part(c).leader == 2 and part(c).isr == [2]


def test_reassignment_starts_completes_on_alter_partition_and_moves_the_leader(tmp_path):
    c, epochs = cluster(tmp_path)
    c.create_topic("t", 1, 2, assignments={0: [1, 2]})
    assert c.alter_partition_reassignments([("t", 0, [3, 4])]) == [("t", 0, Errors.NONE, None)]
    p0 = part(c)
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ([3, 4, 1, 2], [3, 4], [1, 2])
    assert p0.leader == 1 and p0.isr == [1, 2]
    assert list(c.list_partition_reassignments()) == ["t"]
    # Broker 3 catches up: still waiting for 4.
    c.alter_partition(1, epochs[1], "t", 0, p0.leader_epoch, p0.partition_epoch, [1, 2, 3])
    assert part(c).adding_replicas == [3, 4]
    epoch = part(c).leader_epoch
    c.alter_partition(1, epochs[1], "t", 0, epoch, part(c).partition_epoch, [1, 2, 3, 4])
    p0 = part(c)
    assert (p0.replicas, p0.isr, p0.adding_replicas, p0.removing_replicas) == (
        [3, 4],
        [3, 4],
        [],
        [],
    )
    assert p0.leader == 3 and p0.leader_epoch == epoch + 1
    assert c.list_partition_reassignments() == {}
    # No reassignment left to cancel.
    assert c.alter_partition_reassignments([("t", 0, None)])[0][2] == (
        Errors.NO_REASSIGNMENT_IN_PROGRESS
    )


def test_removing_only_completes_at_once_and_bumps_the_leader_epoch(tmp_path):
    c, _ = cluster(tmp_path)
    c.create_topic("t", 1, 3, assignments={0: [1, 2, 3]})
    epoch = part(c).leader_epoch
    c.alter_partition_reassignments([("t", 0, [2, 3])])
    p0 = part(c)
    assert (p0.replicas, p0.isr, p0.leader) == ([2, 3], [2, 3], 2)
    assert p0.leader_epoch == epoch + 1 and not p0.removing_replicas


def test_cancel_reverts_to_the_replicas_before(tmp_path):
    c, _ = cluster(tmp_path)
    c.create_topic("t", 1, 2, assignments={0: [1, 2]})
    c.alter_partition_reassignments([("t", 0, [1, 3])])
    assert part(c).adding_replicas == [3] and part(c).removing_replicas == [2]
    assert c.alter_partition_reassignments([("t", 0, None)]) == [("t", 0, Errors.NONE, None)]
    p0 = part(c)
    assert (p0.replicas, p0.isr, p0.adding_replicas, p0.removing_replicas) == (
        [1, 2],
        [1, 2],
        [],
        [],
    )


def test_invalid_targets_get_kafkas_errors(tmp_path):
    c, _ = cluster(tmp_path)
    c.create_topic("t", 1, 2, assignments={0: [1, 2]})
    got = c.alter_partition_reassignments(
        [("t", 0, []), ("t", 0, [1, 1]), ("t", 0, [1, 7]), ("t", 5, [1, 2]), ("x", 0, [1])]
    )
    assert [(e, m) for _, _, e, m in got] == [
        (
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:5."),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition x:0."),
    ]
    got = c.alter_partition_reassignments(
        [("t", 0, [1, 2, 3])], allow_replication_factor_change=False
    )
    assert got[0][2] == Errors.INVALID_REPLICATION_FACTOR
    assert part(c).replicas == [1, 2]


def test_a_reassignment_survives_a_controller_restart(tmp_path):
    c, epochs = cluster(tmp_path)
    c.create_topic("t", 1, 2, assignments={0: [1, 2]})
    c.alter_partition_reassignments([("t", 0, [2, 3])])
    c.close()
    c = QuorumController(tmp_path / "controller", session_timeout_ms=1000)
    p0 = part(c)
    assert (p0.replicas, p0.adding_replicas, p0.removing_replicas) == ([2, 3, 1], [3], [1])
    assert c.list_partition_reassignments([("t", [0, 1]), ("gone", [0])])["t"][0] is p0
    c.alter_partition(1, epochs[1], "t", 0, p0.leader_epoch, p0.partition_epoch, [1, 2, 3])
    p0 = part(c)
    assert (p0.replicas, p0.isr, p0.leader) == ([2, 3], [2, 3], 2)


def test_reassignment_replicas_match_kafkas_example():
    # Kafka's PartitionReassignmentReplicasTest: [0, 1, 2] -> [0, 1, 3]
    moving = PartitionReassignmentReplicas.of([0, 1, 2], [0, 1, 3])
    assert (moving.replicas, moving.adding, moving.removing) == ([0, 1, 3, 2], [3], [2])
    assert moving.completed([0, 1, 2]) is None
    assert moving.completed([0, 1, 2, 3]) == ([0, 1, 3], [0, 1, 3])
