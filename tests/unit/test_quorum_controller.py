"""The controller as a log of records: registration and fencing, clean and unclean
elections, AlterPartition checks, preferred leaders, and state rebuilt by replay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.controller.quorum_controller import (
    NO_LEADER,
    QuorumController,
    assign_replicas_rack_unaware,
)
from kafkalab.errors import Errors, KafkaError


def three_brokers(tmp_path, **kw) -> tuple[QuorumController, dict[int, int]]:
    c = QuorumController(tmp_path / "controller", session_timeout_ms=1000, **kw)
    epochs = {
        b: c.register_broker(b, "127.0.0.1", 9090 + b, f"inc-{b}", now_ms=0) for b in (1, 2, 3)
    }
    for b, e in epochs.items():
        assert c.heartbeat(b, e, now_ms=0) is False  # the first heartbeat unfences
    return c, epochs


def test_assignment_matches_kafkas_rack_unaware_layout():
    # 3 brokers, 6 partitions, RF 3, start index 0, shift 0 (Kafka's AdminUtils scheme)
    layout = assign_replicas_rack_unaware([1, 2, 3], 6, 3, 0, 0)
    assert layout == {
        0: [1, 2, 3],
        1: [2, 3, 1],
        2: [3, 1, 2],
        3: [1, 3, 2],
        4: [2, 1, 3],
        5: [3, 2, 1],
    }


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 20), st.data())
def test_assignment_spreads_distinct_replicas(n_brokers, partitions, data):
    rf = data.draw(st.integers(1, n_brokers))
    start, shift = data.draw(st.integers(0, n_brokers - 1)), data.draw(st.integers(0, n_brokers))
    layout = assign_replicas_rack_unaware(
        list(range(1, n_brokers + 1)), partitions, rf, start, shift
    )
    for replicas in layout.values():
        assert len(set(replicas)) == rf
    leaders = [r[0] for r in layout.values()]
    counts = [leaders.count(b) for b in range(1, n_brokers + 1)]
    assert max(counts) - min(counts) <= 1  # leaderships go round robin


def test_fencing_a_leader_elects_from_the_isr_and_bumps_the_epoch(tmp_path):
    c, epochs = three_brokers(tmp_path)
    c.create_topic("orders", 1, 3)
    part = c.topics["orders"].partitions[0]
    old_leader, old_epoch = part.leader, part.leader_epoch
    for b, e in epochs.items():
        if b != old_leader:
            c.heartbeat(b, e, now_ms=900)
    assert c.tick(now_ms=1500) == [old_leader]  # silent for more than 1000 ms
    part = c.topics["orders"].partitions[0]
    assert part.leader != old_leader and part.leader in part.isr
    assert old_leader not in part.isr and part.leader_epoch == old_epoch + 1
    # Comes back: re-registers (new epoch), heartbeats, and is a follower again.
    new_epoch = c.register_broker(old_leader, "127.0.0.1", 9090 + old_leader, "inc-new", 1600)
    assert new_epoch > epochs[old_leader]
    with pytest.raises(KafkaError) as stale:
        c.heartbeat(old_leader, epochs[old_leader], 1600)
    assert stale.value.code == Errors.STALE_BROKER_EPOCH
    c.heartbeat(old_leader, new_epoch, 1600)
    assert old_leader in c.alive() and c.topics["orders"].partitions[0].leader != old_leader
    # Rejoining the ISR is the leader's call (AlterPartition); then the preferred
    # leader election gives it its leadership back.
    part = c.topics["orders"].partitions[0]
    c.alter_partition(
        part.leader,
        c.brokers[part.leader].broker_epoch,
        "orders",
        0,
        part.leader_epoch,
        part.partition_epoch,
        part.isr + [old_leader],
    )
    if part.replicas[0] == old_leader:
        c.elect_preferred_leaders()
        assert c.topics["orders"].partitions[0].leader == old_leader


@pytest.mark.parametrize("unclean", [False, True])
def test_when_the_whole_isr_is_gone(tmp_path, unclean):
    c, epochs = three_brokers(tmp_path, unclean_leader_election_enable=unclean)
    c.create_topic("t", 1, 3)
    part = c.topics["t"].partitions[0]
    leader = part.leader
    followers = [b for b in part.replicas if b != leader]
    # The ISR shrinks to the leader alone, then the leader dies.
    c.alter_partition(
        leader, epochs[leader], "t", 0, part.leader_epoch, part.partition_epoch, [leader]
    )
    c.fence_broker(leader, now_ms=10)
    part = c.topics["t"].partitions[0]
    if unclean:
        assert part.leader in followers  # an out-of-sync replica leads: data may be lost
        assert c.topics["t"].partitions[0].isr == [part.leader]
    else:
        assert part.isr == [leader]  # the last ISR member stays in the ISR
        assert part.leader == NO_LEADER  # offline until the last ISR member returns
        c.register_broker(leader, "127.0.0.1", 1, "again", 20)
        c.heartbeat(leader, c.brokers[leader].broker_epoch, 20)
        assert c.topics["t"].partitions[0].leader == leader


def test_alter_partition_refuses_stale_or_unsafe_requests(tmp_path):
    c, epochs = three_brokers(tmp_path)
    c.create_topic("t", 1, 3)
    part = c.topics["t"].partitions[0]
    leader = part.leader
    follower = next(b for b in part.replicas if b != leader)
    cases = [
        (
            (follower, epochs[follower], part.leader_epoch, part.partition_epoch, part.isr),
            Errors.NOT_LEADER_OR_FOLLOWER,
        ),
        (
            (leader, epochs[leader] + 99, part.leader_epoch, part.partition_epoch, part.isr),
            Errors.STALE_BROKER_EPOCH,
        ),
        (
            (leader, epochs[leader], part.leader_epoch - 1, part.partition_epoch, part.isr),
            Errors.FENCED_LEADER_EPOCH,
        ),
        (
            (leader, epochs[leader], part.leader_epoch, part.partition_epoch + 1, part.isr),
            Errors.INVALID_UPDATE_VERSION,
        ),
        (
            (leader, epochs[leader], part.leader_epoch, part.partition_epoch, [follower]),
            Errors.INVALID_REQUEST,
        ),
    ]
    for (broker, epoch, leader_epoch, partition_epoch, isr), code in cases:
        with pytest.raises(KafkaError) as err:
            c.alter_partition(broker, epoch, "t", 0, leader_epoch, partition_epoch, isr)
        assert err.value.code == code
    c.alter_partition(
        leader, epochs[leader], "t", 0, part.leader_epoch, part.partition_epoch, [leader]
    )
    assert c.topics["t"].partitions[0].isr == [leader]
    assert c.topics["t"].partitions[0].partition_epoch == 1


def test_alter_partition_refuses_a_fenced_broker_as_kafka_does(tmp_path):
    """A fenced replica may not join the ISR: OPERATION_NOT_ATTEMPTED (what Kafka
    answers AlterPartition v0-1 for an ineligible replica; INELIGIBLE_REPLICA from
    v2); an ISR naming a broker that is no replica is INVALID_REQUEST."""
    c, epochs = three_brokers(tmp_path)
    c.create_topic("t", 1, 2)
    part = c.topics["t"].partitions[0]
    leader, follower = part.leader, next(b for b in part.replicas if b != part.leader)
    outsider = next(b for b in (1, 2, 3) if b not in part.replicas)
    c.alter_partition(leader, epochs[leader], "t", 0, part.leader_epoch, 0, [leader])
    c.fence_broker(follower, now_ms=10)
    for isr, code in (
        ([leader, follower], Errors.OPERATION_NOT_ATTEMPTED),
        ([leader, outsider], Errors.INVALID_REQUEST),
    ):
        with pytest.raises(KafkaError) as err:
            c.alter_partition(leader, epochs[leader], "t", 0, part.leader_epoch, 1, isr)
        assert err.value.code == code, isr
    assert c.topics["t"].partitions[0].isr == [leader]


def test_state_is_the_replay_of_the_metadata_log(tmp_path):
    c, _ = three_brokers(tmp_path)
    c.create_topic("a", 3, 2, {"retention.ms": "1000"})
    c.create_topic("b", 1, 1)
    c.fence_broker(2, now_ms=5)
    c.delete_topic("b")
    with pytest.raises(KafkaError) as err:
        c.create_topic("a", 1, 1)
    assert err.value.code == Errors.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as err:
        c.create_topic("c", 1, 3)  # only two brokers are alive now
    assert err.value.code == Errors.INVALID_REPLICATION_FACTOR
    before = c.describe()
    records = c.records_since(0)
    assert [r["type"] for _, r in records[:2]] == ["RegisterBrokerRecord"] * 2
    assert [o for o, _ in records] == list(range(len(records)))
    c.close()
    again = QuorumController(tmp_path / "controller")
    after = again.describe()
    for b in after["brokers"].values():
        b["last_heartbeat_ms"] = 0
    for b in before["brokers"].values():
        b["last_heartbeat_ms"] = 0
    assert after == before
    assert again.topics["a"].configs == {"retention.ms": "1000"}
    again.close()


def test_every_topic_gets_a_random_id_that_survives_a_restart(tmp_path):
    """Kafka names topics by id too (Metadata v10+, KIP-848 assignments): the controller
    gives each a random UUID in its TopicRecord, so a topic deleted and created again
    under the same name is another topic, and the id replays from the log."""
    import uuid

    from kafkalab.controller.metadata_image import MetadataImage, name_based_topic_id

    c, _ = three_brokers(tmp_path)
    c.create_topic("orders", 1, 3)
    c.create_topic("payments", 1, 3)
    first = c.topics["orders"].topic_id
    assert first.version == 4 and first != c.topics["payments"].topic_id
    assert first != name_based_topic_id("orders")
    c.delete_topic("orders")
    c.create_topic("orders", 1, 3)
    second = c.topics["orders"].topic_id
    assert second != first
    c.close()
    again = QuorumController(tmp_path / "controller")
    assert again.topics["orders"].topic_id == second
    again.close()
    # a TopicRecord written before ids were recorded: every replica derives the same one
    image = MetadataImage()
    image.replay({"type": "TopicRecord", "name": "old"})
    assert image.topics["old"].topic_id == name_based_topic_id("old") != uuid.UUID(int=0)


def test_producer_id_blocks_are_in_the_metadata_log_and_never_handed_out_twice(tmp_path):
    """AllocateProducerIds: each block is a ProducerIdsRecord, so blocks never overlap,
    across brokers and across controller restarts (the controller's state is its log);
    a broker that is not registered in that epoch gets none."""
    from kafkalab.controller.quorum_controller import PRODUCER_ID_BLOCK_SIZE

    c = QuorumController(tmp_path)
    epochs = {b: c.register_broker(b, "127.0.0.1", 9090 + b, f"inc-{b}", now_ms=0) for b in (1, 2)}
    blocks = []
    for _ in range(5):
        for b in (1, 2, 1):
            blocks.append(c.allocate_producer_ids(b, epochs[b]))
        c.close()
        c = QuorumController(tmp_path)  # restarted: replays its log
    ids = [i for start, n in blocks for i in range(start, start + n)]
    assert len(ids) == len(set(ids)) == 15 * PRODUCER_ID_BLOCK_SIZE
    assert blocks[0] == (0, PRODUCER_ID_BLOCK_SIZE)
    assert [s for s, _ in blocks] == sorted(s for s, _ in blocks), "each block follows the last"
    with pytest.raises(KafkaError) as stale:
        c.allocate_producer_ids(1, epochs[1] + 1)
    assert stale.value.code == Errors.STALE_BROKER_EPOCH
    with pytest.raises(KafkaError) as unknown:
        c.allocate_producer_ids(7, 0)
    assert unknown.value.code == Errors.BROKER_ID_NOT_REGISTERED
    c.close()


def test_one_alter_partition_request_is_one_metadata_log_batch(tmp_path):
    """After a fenced broker comes back, its leaders ask to add it back to hundreds of
    ISRs at once: one request is judged partition by partition and written as one
    batch with one flush (not one flush a partition, which kept the controller
    from answering heartbeats)."""
    from kafkalab.records import iter_batches

    c, epochs = three_brokers(tmp_path)
    c.create_topic("t", 6, 3, assignments={p: [1, 2, 3] for p in range(6)})
    for p in range(6):
        c.alter_partition(1, epochs[1], "t", p, 0, 0, [1, 2])  # the ISR shrank first

    def batches() -> int:
        return sum(1 for _ in iter_batches(c.log.read(0, 1 << 24).read_bytes()))

    before = batches()
    asked = [("t", p, 0, 1, [1, 2, 3]) for p in range(5)]
    asked.append(("t", 5, 0, 0, [1, 2, 3]))  # stale partition epoch: refused
    asked.append(("nope", 0, 0, 0, [1]))  # unknown partition: refused
    outcomes = c.alter_partitions(1, epochs[1], asked)
    assert batches() == before + 1
    assert [o.isr for o in outcomes[:5]] == [[1, 2, 3]] * 5
    assert [o.partition_epoch for o in outcomes[:5]] == [2] * 5
    assert outcomes[5].code == Errors.INVALID_UPDATE_VERSION
    assert outcomes[6].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    # The same partition twice in one request is judged as two requests in a row.
    twice = c.alter_partitions(1, epochs[1], [("t", 0, 0, 2, [1, 2]), ("t", 0, 0, 2, [1])])
    assert twice[0].isr == [1, 2] and twice[1].code == Errors.INVALID_UPDATE_VERSION
