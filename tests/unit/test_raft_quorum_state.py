"""QuorumState and the `quorum-state` file: the transition table, durability before a
vote leaves, restart from the store and the log (KIP-595, KIP-996, KAFKA-10527)."""

from __future__ import annotations

import json
import random

import pytest

from kafkalab.raft.errors import IllegalQuorumStateTransition, QuorumStateStoreError
from kafkalab.raft.quorum_state import (
    TRANSITIONS,
    VALID_PREVIOUS_STATES,
    QuorumState,
    StateName,
)
from kafkalab.raft.quorum_state_store import (
    QUORUM_STATE_FILE,
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
)
from kafkalab.raft.raft_log import OffsetAndEpoch

VOTERS = (1, 2, 3)
EMPTY_LOG_END = OffsetAndEpoch(0, 0)


def new_state(local_id=1, store=None, log_end=EMPTY_LOG_END) -> QuorumState:
    q = QuorumState(local_id, VOTERS, store or MemoryQuorumStateStore(), rng=random.Random(0))
    q.initialize(log_end, 0)
    return q


def test_quorum_state_file_is_kafkas_json_line(tmp_path):
    store = FileQuorumStateStore.in_directory(tmp_path)
    store.write_election_state(ElectionState(3, -1, 2, frozenset(VOTERS)))
    text = (tmp_path / QUORUM_STATE_FILE).read_text()
    assert text == (
        '{"clusterId":"","leaderId":-1,"leaderEpoch":3,"votedId":2,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert store.read_election_state() == ElectionState(3, -1, 2, frozenset(VOTERS))
    assert not (tmp_path / (QUORUM_STATE_FILE + ".tmp")).exists()


def test_quorum_state_file_version_1_as_kip_853_kafka_writes_it_is_read(tmp_path):
    line = {
        "leaderId": 2,
        "leaderEpoch": 7,
        "votedId": 2,
        "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
        "data_version": 1,
    }
    (tmp_path / QUORUM_STATE_FILE).write_text(json.dumps(line))
    state = FileQuorumStateStore.in_directory(tmp_path).read_election_state()
    assert (state.epoch, state.leader_id, state.voted_id) == (7, 2, 2)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "not json",
        '{"leaderEpoch":1}',
        '{"data_version":9}',
        '{"leaderEpoch":"x","data_version":0}',
    ],
)
def test_unreadable_quorum_state_file_is_a_typed_error(tmp_path, content):
    (tmp_path / QUORUM_STATE_FILE).write_text(content)
    with pytest.raises(QuorumStateStoreError) as e:
        FileQuorumStateStore.in_directory(tmp_path).read_election_state()
    assert e.value.code.name == "KAFKA_STORAGE_ERROR"


def test_transition_table_is_data_and_derives_valid_previous_states():
    assert set(VALID_PREVIOUS_STATES) == set(StateName)
    assert VALID_PREVIOUS_STATES[StateName.LEADER] == {StateName.CANDIDATE}
    assert VALID_PREVIOUS_STATES[StateName.CANDIDATE] == {StateName.PROSPECTIVE}
    assert VALID_PREVIOUS_STATES[StateName.RESIGNED] == {StateName.LEADER}
    # KIP-996: nobody becomes Candidate (and bumps the epoch) without a pre-vote first
    assert all(to != StateName.CANDIDATE or frm == StateName.PROSPECTIVE for frm, to in TRANSITIONS)


def test_only_edges_in_the_table_are_taken():
    q = new_state()
    assert q.name is StateName.UNATTACHED
    with pytest.raises(IllegalQuorumStateTransition):
        q.transition_to_candidate(0)  # Unattached -> Candidate skips the pre-vote
    q.transition_to_prospective(0)
    with pytest.raises(IllegalQuorumStateTransition):
        q.transition_to_leader(0, 0)  # Prospective -> Leader
    q.transition_to_candidate(0)
    assert (q.name, q.epoch) == (StateName.CANDIDATE, 1)
    with pytest.raises(IllegalQuorumStateTransition, match="majority"):
        q.transition_to_leader(0, 0)  # one vote of three
    q.state.granted.add(2)
    q.transition_to_leader(0, 0)
    with pytest.raises(IllegalQuorumStateTransition):
        q.transition_to_follower(1, 2, 0)  # a second leader in the leader's own epoch
    with pytest.raises(IllegalQuorumStateTransition):
        q.transition_to_unattached(0, 0)  # epochs never go back


def test_a_vote_is_on_disk_before_the_state_changes_and_cannot_change_in_its_epoch(tmp_path):
    store = FileQuorumStateStore.in_directory(tmp_path)
    q = new_state(2, store)
    q.transition_to_unattached(4, 0)
    q.transition_to_unattached_voted(4, 1, 0)
    assert store.read_election_state() == ElectionState(4, -1, 1, frozenset(VOTERS))
    with pytest.raises(IllegalQuorumStateTransition, match="cannot vote for 3"):
        q.transition_to_unattached_voted(4, 3, 0)


class FailingStore(MemoryQuorumStateStore):
    def write_election_state(self, state):
        raise QuorumStateStoreError("disk full")


def test_a_failed_write_leaves_the_state_unchanged():
    q = new_state(2, FailingStore())
    with pytest.raises(QuorumStateStoreError):
        q.transition_to_unattached_voted(0, 1, 0)
    assert q.state.voted_id == -1


@pytest.mark.parametrize(
    ("stored", "log_end", "expected"),
    [
        (None, OffsetAndEpoch(0, 0), (StateName.UNATTACHED, 0, -1, -1)),
        # KAFKA-10527: the leader of epoch 5 restarts Resigned, never Leader of 5 again
        (ElectionState(5, 1, 1), OffsetAndEpoch(9, 5), (StateName.RESIGNED, 5, 1, 1)),
        # it voted for itself: Candidate of epoch 5 again, with that vote (Kafka 4.x's
        # QuorumState.initialize builds a CandidateState; found by the spec replay)
        (ElectionState(5, -1, 1), OffsetAndEpoch(9, 4), (StateName.CANDIDATE, 5, -1, 1)),
        # it voted for 3: still its one vote of epoch 5
        (ElectionState(5, -1, 3), OffsetAndEpoch(9, 4), (StateName.UNATTACHED, 5, -1, 3)),
        (ElectionState(5, 2, 2), OffsetAndEpoch(9, 5), (StateName.FOLLOWER, 5, 2, 2)),
        # a store older than the log (Kafka warns): the log's epoch wins
        (ElectionState(2, 2, -1), OffsetAndEpoch(9, 5), (StateName.UNATTACHED, 5, -1, -1)),
    ],
)
def test_restart_rebuilds_the_state_from_the_store_and_the_log(stored, log_end, expected):
    store = MemoryQuorumStateStore()
    if stored is not None:
        store.state = ElectionState(
            stored.epoch, stored.leader_id, stored.voted_id, frozenset(VOTERS)
        )
    q = new_state(1, store, log_end)
    assert (q.name, q.epoch, q.leader_id, q.state.voted_id) == expected
