"""KafkaRaftClient, rule by rule, on a simulated network (tests/unit/raft_harness.py).
Each test names the KIP or JIRA whose rule it guards."""

from __future__ import annotations

import json
import random

import pytest
from raft_harness import TEST_CONFIG, RaftNetwork

from kafkalab.errors import Errors
from kafkalab.raft.errors import (
    NotLeaderError,
    QuorumStateStoreError,
    TruncationBelowHighWatermarkError,
)
from kafkalab.raft.kafka_raft_client import KafkaRaftClient, LeaderChangeMessage
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_state import StateName
from kafkalab.raft.quorum_state_store import (
    QUORUM_STATE_FILE,
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
)
from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch, RaftLog
from kafkalab.raft.raft_message import (
    FetchRequest,
    FetchResponse,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)

VOTERS = (1, 2, 3)


def client(local_id, store=None, log=None, now_ms=0) -> KafkaRaftClient:
    return KafkaRaftClient(
        local_id,
        VOTERS,
        log if log is not None else RaftLog(),
        store or MemoryQuorumStateStore(),
        TEST_CONFIG,
        random.Random(local_id),
        now_ms,
    )


def vote(candidate, epoch, last_epoch=0, last_offset=0, pre_vote=False, to=2, cid=1):
    return RaftMessage(
        cid, candidate, to, VoteRequest(epoch, candidate, last_epoch, last_offset, pre_vote)
    )


def test_a_healthy_quorum_elects_one_leader_whose_epoch_starts_with_leader_change():
    """KIP-595: pre-vote, vote, BeginQuorumEpoch; the LeaderChange record opens the epoch."""
    net = RaftNetwork(seed=1)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    first = leader.log.entries[0]
    assert first.epoch == leader.epoch == 1
    assert isinstance(first.record, LeaderChangeMessage)
    assert first.record.leader_id == leader.local_id
    assert set(first.record.granting_voters) >= {leader.local_id}
    assert len(first.record.granting_voters) >= 2
    leader.append(["a", "b"], net.now)
    net.run_until(lambda: all(c.high_watermark == 3 for c in net.live()), max_ms=2_000)
    assert all(c.log.entries == leader.log.entries for c in net.live())


def test_vote_is_fsynced_to_quorum_state_before_the_response_leaves(tmp_path):
    """KIP-595: `quorum-state` is written and fsynced before a vote is granted."""
    store = FileQuorumStateStore.in_directory(tmp_path)
    voter = client(2, store)
    [response] = [m for m in voter.handle(vote(1, 1), 0) if isinstance(m.data, VoteResponse)]
    assert response.data.vote_granted and response.correlation_id == 1
    on_disk = json.loads((tmp_path / QUORUM_STATE_FILE).read_text())
    assert (on_disk["leaderEpoch"], on_disk["votedId"]) == (1, 1)


def test_a_vote_that_cannot_be_persisted_is_never_granted():
    """KIP-595: no fsync, no vote: the handler fails and sends nothing."""

    class FullDisk(MemoryQuorumStateStore):
        def write_election_state(self, state):
            raise QuorumStateStoreError("No space left on device")

    voter = client(2, FullDisk())
    with pytest.raises(QuorumStateStoreError):
        voter.handle(vote(1, 1), 0)
    assert voter.quorum.state.voted_id == -1


def test_one_vote_an_epoch_also_across_a_restart():
    """KIP-595 / KAFKA-10527: the persisted vote survives a restart."""
    store, log = MemoryQuorumStateStore(), RaftLog()
    voter = client(2, store, log)
    assert voter.handle(vote(1, 4), 0)[0].data.vote_granted
    assert voter.handle(vote(1, 4, cid=2), 0)[0].data.vote_granted  # the same vote again
    assert not voter.handle(vote(3, 4, to=2), 0)[0].data.vote_granted
    restarted = client(2, store, log, now_ms=10)
    assert (restarted.state_name, restarted.epoch) == (StateName.UNATTACHED, 4)
    assert not restarted.handle(vote(3, 4), 10)[0].data.vote_granted
    assert restarted.handle(vote(3, 5), 10)[0].data.vote_granted  # a new epoch, a new vote


def test_a_vote_is_refused_to_a_candidate_whose_log_is_behind():
    """KIP-595: the candidate's (last epoch, end offset) must be at least the voter's."""
    log = RaftLog([LogEntry(0, 1, "x"), LogEntry(1, 2, "y")])
    voter = client(2, log=log)
    assert not voter.handle(vote(1, 3, last_epoch=1, last_offset=5), 0)[0].data.vote_granted
    assert not voter.handle(vote(3, 3, last_epoch=2, last_offset=1, cid=2), 0)[0].data.vote_granted
    assert voter.handle(vote(3, 3, last_epoch=2, last_offset=2, cid=3), 0)[0].data.vote_granted


def test_restarted_leader_comes_back_resigned_and_never_leads_its_epoch_again():
    """KAFKA-10527: a voter restarted after leading epoch e never becomes leader in e."""
    net = RaftNetwork(seed=2)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    old = net.leader()
    old_epoch, old_id = old.epoch, old.local_id
    restarted = net.restart(old_id)
    assert (restarted.state_name, restarted.epoch) == (StateName.RESIGNED, old_epoch)
    led_again_in_old_epoch = False

    def stable() -> bool:
        nonlocal led_again_in_old_epoch
        c = net.clients[old_id]
        led_again_in_old_epoch |= c.is_leader() and c.epoch == old_epoch
        return net.has_stable_leader()

    net.run_until(stable, max_ms=20_000)
    assert not led_again_in_old_epoch
    assert net.leader().epoch > old_epoch


def test_high_watermark_waits_for_a_record_of_the_leaders_own_epoch():
    """KAFKA-12619: records of older epochs held by a majority are not exposed until the
    new leader's LeaderChange (its own epoch) is committed by a majority."""
    old = [LogEntry(i, 1, f"old{i}") for i in range(3)]
    logs = {v: RaftLog(old) for v in VOTERS}
    net = RaftNetwork(seed=3, logs=logs)
    net.run_until(lambda: net.leader() is not None, max_ms=10_000)
    leader = net.leader()
    assert leader.epoch == 2 and leader.log.end_offset == 4  # 3 old records + LeaderChange
    state = leader.quorum.state
    assert isinstance(state, LeaderState) and state.epoch_start_offset == 3
    # a majority holds offsets 0..2 already; a follower fetching at 3 does not commit them
    follower = next(v for v in VOTERS if v != leader.local_id)
    req = RaftMessage(99, follower, leader.local_id, FetchRequest(follower, 2, 3, 1))
    [resp] = [m for m in leader.handle(req, net.now) if isinstance(m.data, FetchResponse)]
    assert resp.data.high_watermark == -1 and leader.high_watermark == 0
    assert state.voter_states[follower].end_offset == 3
    # once it has the LeaderChange (fetch at 4), everything up to 4 is committed
    req = RaftMessage(100, follower, leader.local_id, FetchRequest(follower, 2, 4, 2))
    leader.handle(req, net.now)
    assert leader.high_watermark == 4


def test_leader_state_high_watermark_rule_in_isolation():
    """KAFKA-12619 at LeaderState's level: majority offset > epoch start offset, never back."""
    s = LeaderState(1, 5, 10, (1, 2, 3), (1, 2), 1500, 0)
    assert not s.update_local_state(11, 0)
    assert not s.update_replica_state(2, 10, 0, 11)  # majority at 10 = epoch start: not yet
    assert s.high_watermark is None
    assert s.update_replica_state(3, 11, 0, 11)
    assert s.high_watermark == 11
    assert not s.update_replica_state(3, 10, 1, 11)  # a late, lower fetch
    assert s.high_watermark == 11


def test_check_quorum_a_leader_cut_off_from_the_majority_resigns():
    """KAFKA-15489: no fetch from a majority within 1.5 x fetch.timeout -> Resigned,
    and the others elect a leader in a higher epoch."""
    net = RaftNetwork(seed=4)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    old = net.leader()
    net.isolate(old.local_id)
    took = net.run_until(lambda: old.state_name is not StateName.LEADER, max_ms=5_000)
    assert took <= TEST_CONFIG.check_quorum_timeout_ms + 20
    assert old.state_name is StateName.RESIGNED
    others = [c for c in net.live() if c is not old]
    net.run_until(lambda: any(c.is_leader() for c in others), max_ms=10_000)
    assert max(c.epoch for c in others) > old.epoch
    net.heal()
    net.run_until(net.has_stable_leader, max_ms=10_000)
    assert net.leader() is not old


def test_pre_vote_a_voter_cut_from_the_leader_cannot_disturb_a_quorum_that_hears_it():
    """KIP-996: voters that fetched from the leader within the fetch timeout refuse
    pre-votes, so the cut-off voter never bumps the epoch."""
    net = RaftNetwork(seed=5)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    epoch = leader.epoch
    loner = next(v for v in VOTERS if v != leader.local_id)
    net.cut.add(frozenset((loner, leader.local_id)))
    seen = set()
    for _ in range(1000):  # 10 simulated seconds
        net.step()
        seen.add(net.clients[loner].state_name)
    assert StateName.PROSPECTIVE in seen  # it did try
    assert StateName.CANDIDATE not in seen  # and never got the pre-votes to run
    assert leader.is_leader() and leader.epoch == epoch
    assert all(c.epoch == epoch for c in net.live())


def test_follower_state_refuses_pre_votes_while_it_hears_from_its_leader():
    """KIP-996 at the state's level."""
    voter = client(2)
    voter.handle(RaftMessage(1, 1, 2, vote(1, 1).data), 0)  # voted for 1 in epoch 1
    voter.quorum.transition_to_follower(1, 1, 0)
    state = voter.quorum.state
    state.last_fetch_ms = 100
    assert not state.can_grant_vote(3, True, True, 100 + TEST_CONFIG.fetch_timeout_ms - 1)
    assert state.can_grant_vote(3, True, True, 100 + TEST_CONFIG.fetch_timeout_ms)
    assert not state.can_grant_vote(3, True, False, 10**9)  # never a real vote in its epoch


def test_pre_vote_casts_no_vote():
    """KIP-996 (KAFKA-17641): a granted pre-vote is not a vote: in the voter's epoch it
    changes nothing and writes nothing; from a newer epoch it moves the voter to that
    epoch, as any request does, still without a vote."""
    store = MemoryQuorumStateStore()
    voter = client(2, store)
    writes = store.writes
    [resp] = voter.handle(vote(1, 0, pre_vote=True), 0)
    assert resp.data.vote_granted
    assert voter.epoch == 0 and voter.quorum.state.voted_id == -1 and store.writes == writes
    [resp] = voter.handle(vote(1, 7, pre_vote=True, cid=2), 0)
    assert resp.data.vote_granted and resp.data.leader_epoch == 7
    assert store.read_election_state().voted_id == -1
    assert voter.handle(vote(3, 7, cid=3), 0)[0].data.vote_granted  # its vote is still free


def test_diverging_follower_truncates_its_uncommitted_tail_and_catches_up():
    """KIP-595 Fetch: LastFetchedEpoch, DivergingEpoch, truncation (as KIP-101/279)."""
    common = [LogEntry(0, 1, "a"), LogEntry(1, 1, "b")]
    logs = {
        1: RaftLog([*common, LogEntry(2, 3, "c3")]),
        2: RaftLog([*common, LogEntry(2, 3, "c3")]),
        # voter 3 led epoch 2 alone and wrote records nobody else has
        3: RaftLog([*common, LogEntry(2, 2, "x"), LogEntry(3, 2, "y"), LogEntry(4, 2, "z")]),
    }
    stores = {1: ElectionState(3, 1, 1), 2: ElectionState(3, 1, 1), 3: ElectionState(2, 3, 3)}

    def store_for(v):
        s = MemoryQuorumStateStore()
        s.state = ElectionState(
            stores[v].epoch, stores[v].leader_id, stores[v].voted_id, frozenset(VOTERS)
        )
        return s

    net = RaftNetwork(seed=6, logs=logs, store_factory=store_for)
    net.isolate(3)
    net.run_until(lambda: net.leader() is not None and net.leader().local_id != 3, max_ms=20_000)
    leader = net.leader()
    net.heal()
    leader.append(["d"], net.now)
    net.run_until(
        lambda: (
            net.clients[3].log.entries == leader.log.entries
            and net.clients[3].high_watermark == leader.log.end_offset
        ),
        max_ms=10_000,
    )
    assert [e.record for e in net.clients[3].log.entries][:3] == ["a", "b", "c3"]
    assert "x" not in [e.record for e in net.clients[3].log.entries]


def test_a_truncation_below_the_high_watermark_is_refused():
    """A committed record is never dropped: Kafka raises, and so do we."""
    log = RaftLog([LogEntry(0, 1, "a"), LogEntry(1, 1, "b")])
    store = MemoryQuorumStateStore()
    store.state = ElectionState(2, 1, -1, frozenset(VOTERS))
    follower = client(2, store, log)
    follower.high_watermark = 2
    [fetch] = follower.poll(1)
    assert isinstance(fetch.data, FetchRequest) and fetch.data.fetch_offset == 2
    bad = FetchResponse(Errors.NONE, 1, 2, 2, diverging_epoch=OffsetAndEpoch(1, 1))
    with pytest.raises(TruncationBelowHighWatermarkError):
        follower.handle(RaftMessage(fetch.correlation_id, 1, 2, bad), 2)
    assert log.end_offset == 2


def test_graceful_resign_sends_end_quorum_epoch_and_the_next_election_is_fast():
    """KIP-595 EndQuorumEpoch: the preferred successor starts at once instead of
    waiting out its fetch timeout."""
    net = RaftNetwork(seed=7)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    old = net.leader()
    epoch = old.epoch
    net.in_flight.extend(old.resign(net.now))
    assert old.state_name is StateName.RESIGNED
    start = net.now
    net.step()  # the EndQuorumEpoch requests arrive; then the old leader is gone
    net.crash(old.local_id)
    net.run_until(lambda: net.leader() is not None, max_ms=10_000)
    took = net.now - start
    assert net.leader().epoch == epoch + 1
    assert took < TEST_CONFIG.fetch_timeout_ms


def test_end_quorum_epoch_backoff_by_place_among_preferred_successors():
    """Kafka's strictExponentialElectionBackoffMs: the first successor at once, the
    others later by place, a voter not named after the longest backoff."""
    c = client(1)
    top = TEST_CONFIG.election_backoff_max_ms
    assert c._strict_exponential_election_backoff_ms(0, 4) == 0
    assert c._strict_exponential_election_backoff_ms(1, 4) == top >> 3
    assert c._strict_exponential_election_backoff_ms(3, 4) == (top >> 3) << 2
    assert c._strict_exponential_election_backoff_ms(-1, 4) == top


def test_responses_that_are_not_awaited_are_dropped():
    """Kafka's RequestManager: a duplicated or stale response changes nothing."""
    net = RaftNetwork(seed=8)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    follower = next(c for c in net.live() if c is not leader)
    stale = FetchResponse(Errors.NONE, leader.local_id, leader.epoch, 0, None, ())
    before = follower.log.entries
    follower.handle(RaftMessage(-7, leader.local_id, follower.local_id, stale), net.now)
    assert follower.log.entries == before


def test_append_and_resign_on_a_follower_name_the_leader():
    net = RaftNetwork(seed=9)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    follower = next(c for c in net.live() if c is not leader)
    with pytest.raises(NotLeaderError) as e:
        follower.append(["x"], net.now)
    assert e.value.leader_id == leader.local_id
    assert e.value.code is Errors.NOT_LEADER_OR_FOLLOWER


def test_describe_quorum_reports_leader_epoch_high_watermark_and_each_voter():
    """DescribeQuorumResponse's fields (KIP-595, v1 timestamps KIP-836)."""
    net = RaftNetwork(seed=10)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    leader.append(["a"], net.now)
    net.run_until(lambda: all(c.high_watermark == 2 for c in net.live()), max_ms=2_000)
    d = leader.describe_quorum(net.now)
    assert (d.error_code, d.leader_id, d.leader_epoch, d.high_watermark) == (
        Errors.NONE,
        leader.local_id,
        leader.epoch,
        2,
    )
    assert [r.replica_id for r in d.current_voters] == list(VOTERS)
    assert all(r.log_end_offset == 2 for r in d.current_voters)
    me = next(r for r in d.current_voters if r.replica_id == leader.local_id)
    assert me.last_fetch_timestamp == me.last_caught_up_timestamp == net.now
    others = [r for r in d.current_voters if r.replica_id != leader.local_id]
    assert all(0 < r.last_fetch_timestamp <= net.now for r in others)
    assert d.observers == ()
    follower = next(c for c in net.live() if c is not leader)
    f = follower.describe_quorum(net.now)
    assert f.error_code is Errors.NOT_LEADER_OR_FOLLOWER and f.leader_id == leader.local_id


@pytest.mark.parametrize("voters", [(1,), (1, 2, 3), (1, 2, 3, 4, 5)])
def test_liveness_smoke_a_healthy_network_elects_a_leader_and_again_after_it_dies(voters):
    """Liveness is not an invariant here (nor model-checked): an example, on a healthy
    network with random election timeouts, of an election that ends."""
    net = RaftNetwork(voters=voters, seed=11)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    first = net.leader()
    if len(voters) == 1:
        assert first.epoch == 1 and first.high_watermark == 1
        return
    net.crash(first.local_id)
    net.run_until(net.has_stable_leader, max_ms=20_000)
    assert net.leader().epoch > first.epoch


class _DiskLog(RaftLog):
    """A RaftLog whose fsync can be held back: `flushed_end_offset` stays where the
    last allowed flush left it, as a disk's recovery point does."""

    def __init__(self) -> None:
        super().__init__()
        self.fsync_allowed = True
        self.durable = 0

    @property
    def flushed_end_offset(self) -> int:
        return self.durable

    def flush(self) -> None:
        if self.fsync_allowed:
            self.durable = self.end_offset


def sole_voter(log=None, store=None, now_ms=0) -> KafkaRaftClient:
    return KafkaRaftClient(
        7,
        [7],
        log if log is not None else RaftLog(),
        store or MemoryQuorumStateStore(),
        TEST_CONFIG,
        random.Random(7),
        now_ms,
    )


def test_a_sole_voter_elects_itself_at_once_and_its_high_watermark_is_its_flushed_end():
    """Kafka: KafkaRaftClient.initialize. A quorum of one (a single controller,
    `kafka-storage format --standalone`) waits for no election timeout: built
    Prospective, its first poll makes it Candidate then Leader of epoch 1 (a
    majority of one), with its LeaderChange committed; then its high watermark is
    what it has flushed."""
    log = _DiskLog()
    voter = sole_voter(log, now_ms=1_000)
    assert voter.state_name == StateName.PROSPECTIVE  # no election deadline to wait for
    assert voter.poll(1_000) == []  # nobody to ask
    assert voter.is_leader() and voter.epoch == 1 and voter.leader_id == 7
    [change] = log.entries
    assert change.record == LeaderChangeMessage(7, (7,), (7,))
    assert voter.high_watermark == 1
    log.fsync_allowed = False  # appended, not yet on disk: not committed
    voter.append(["a", "b"], 1_000)
    assert (log.end_offset, voter.high_watermark) == (3, 1)
    log.fsync_allowed = True
    voter.append(["c"], 1_000)
    assert voter.high_watermark == log.end_offset == 4
    assert voter.poll(1_000 + 100 * TEST_CONFIG.fetch_timeout_ms) == []
    assert voter.is_leader() and voter.epoch == 1  # check-quorum never resigns it


def test_a_restarted_sole_voter_leads_again_at_once_in_a_higher_epoch():
    """Restarted after leading (Resigned in its epoch, KAFKA-10527), a sole voter
    leads again at its first poll, one epoch up, its records all still committed."""
    log, store = RaftLog(), MemoryQuorumStateStore()
    first = sole_voter(log, store)
    first.poll(0)
    first.append(["a", "b"], 0)
    again = sole_voter(log, store, now_ms=5)
    again.poll(5)
    assert again.is_leader() and again.epoch == 2
    assert [e.epoch for e in log.entries] == [1, 1, 1, 2]
    assert again.high_watermark == log.end_offset == 4
