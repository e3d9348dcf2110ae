"""kafkalab/raft's deliberately broken modes (QuorumConfig.defects), off by default,
each named for the Kafka JIRA whose bug it brings back: what the spec replay
switches on to reproduce the KafkaRaft spec's broken variants."""

from __future__ import annotations

import random

from kafkalab.raft.kafka_raft_client import KafkaRaftClient
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import KAFKA_10527, KAFKA_12619, QuorumConfig
from kafkalab.raft.quorum_state import QuorumState, StateName
from kafkalab.raft.quorum_state_store import ElectionState, MemoryQuorumStateStore
from kafkalab.raft.raft_log import OffsetAndEpoch, RaftLog

VOTERS = (1, 2, 3)


def test_kafka_12619_moves_the_hw_when_a_majority_reaches_the_epoch_start():
    """Epoch 5 starts at offset 10 (its LeaderChange record). A majority at 10 holds
    the older records below it but not the LeaderChange: the fixed rule waits, the
    broken one exposes offset 10 as committed."""
    fixed = LeaderState(1, 5, 10, VOTERS, (1, 2), 1500, 0)
    broken = LeaderState(1, 5, 10, VOTERS, (1, 2), 1500, 0, kafka_12619=True)
    for s in (fixed, broken):
        s.update_local_state(11, 0)
        s.update_replica_state(2, 10, 0, 11)
    assert fixed.high_watermark is None and broken.high_watermark == 10
    fixed.update_replica_state(2, 11, 0, 11)
    assert fixed.high_watermark == 11


def test_kafka_10527_keeps_the_epoch_and_loses_the_vote_across_a_restart():
    for defects, expected in [
        (frozenset(), (StateName.UNATTACHED, 4, 2)),
        (frozenset({KAFKA_10527}), (StateName.UNATTACHED, 4, -1)),
    ]:
        store = MemoryQuorumStateStore()
        config = QuorumConfig(defects=defects)
        q = QuorumState(3, VOTERS, store, config, random.Random(0))
        q.initialize(OffsetAndEpoch(0, 0), 0)
        q.transition_to_unattached_voted(4, 2, 0)
        assert q.state.voted_id == 2  # granted, in memory either way
        again = QuorumState(3, VOTERS, store, config, random.Random(0))
        again.initialize(OffsetAndEpoch(0, 0), 0)
        assert (again.name, again.epoch, again.state.voted_id) == expected


def test_kafka_10527_brings_a_restarted_leader_back_unattached_not_resigned():
    for defects, expected in [
        (frozenset(), StateName.RESIGNED),
        (frozenset({KAFKA_10527}), StateName.UNATTACHED),
    ]:
        store = MemoryQuorumStateStore()
        store.state = ElectionState(2, -1, 1, frozenset(VOTERS))  # a candidate of epoch 2
        log = RaftLog()
        config = QuorumConfig(defects=defects)
        client = KafkaRaftClient(1, VOTERS, log, store, config, random.Random(0))
        client.quorum.state.granted.add(2)
        client.poll(0)  # a majority: Leader of epoch 2, its LeaderChange appended
        assert client.is_leader() and log.last_fetched_epoch == 2
        back = KafkaRaftClient(1, VOTERS, log, store, config, random.Random(0))
        assert (back.state_name, back.epoch) == (expected, 2)


def test_a_new_leader_knows_no_high_watermark_until_its_own_epoch_commits():
    """Kafka's QuorumState.transitionToLeader keeps no HW from the previous state;
    KafkaRaftClient.high_watermark keeps what the voter ever learnt."""
    store = MemoryQuorumStateStore()
    store.state = ElectionState(2, -1, 1, frozenset(VOTERS))
    log = RaftLog()
    log.append_as_leader(["a", "b"], 1)
    client = KafkaRaftClient(1, VOTERS, log, store, QuorumConfig(), random.Random(0))
    client._set_high_watermark(2)  # learnt as a follower of epoch 1
    assert client.quorum_high_watermark == 2
    client.quorum.state.granted.add(2)
    client.poll(0)
    assert client.is_leader() and (client.high_watermark, client.quorum_high_watermark) == (2, 0)
    assert KAFKA_12619 not in client.config.defects
