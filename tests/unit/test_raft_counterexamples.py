"""The broken variants of KRaft, replayed against kafkalab.raft: each scenario runs once
with the module as it is (the rule holds) and once with the rule broken (the scenario
is a counterexample: a safety property fails). A test that passed both ways would
prove nothing; these show the rule is what keeps the property.

    KAFKA-12619   the high watermark before a record of the leader's own epoch is
                  committed: the Raft paper's Figure 8, three voters
    KIP-595       a vote granted before `quorum-state` is fsynced, then a power failure:
                  two leaders in one epoch
    KAFKA-15489   without check-quorum, a leader cut off from every voter stays Leader
                  forever (a liveness bug, not a safety one: the others elect another)
    KAFKA-10527   a leader restarted with the tail of its log lost (appended, fetched
                  by the followers, not yet flushed) leads its old epoch again: two
                  different records at one (offset, epoch), LogMatching broken
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from raft_harness import TEST_CONFIG, RaftNetwork, check_log_matching

from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_state import QuorumState, ResignedState
from kafkalab.raft.quorum_state_store import MemoryQuorumStateStore
from kafkalab.raft.raft_message import RaftMessage, VoteRequest

ONE_ENTRY_A_FETCH = replace(TEST_CONFIG, fetch_max_entries=1)


def broken_high_watermark(self: LeaderState) -> bool:
    """KAFKA-12619's bug: the majority offset becomes the high watermark at once, even
    while it covers only records of older epochs."""
    offsets = sorted(
        (-1 if s.end_offset is None else s.end_offset for s in self.voter_states.values()),
        reverse=True,
    )
    candidate = offsets[len(offsets) // 2]
    if candidate <= 0 or (self.high_watermark is not None and candidate <= self.high_watermark):
        return False
    self.high_watermark = candidate
    return True


def figure_8(net: RaftNetwork) -> tuple[list[object], list[object]]:
    """Figure 8 of the Raft paper on three voters; returns (the records the first
    leader exposed as committed, the records the final leader holds)."""
    net.run_until(
        lambda: net.has_stable_leader() and all(c.high_watermark == 1 for c in net.live()),
        max_ms=10_000,
    )
    a = net.leader().local_id
    b, c = (v for v in net.voters if v != a)
    # (a) A writes X in epoch 1 and crashes before anyone has it
    net.paused |= {b, c}
    net.clients[a].append(["X"], net.now)
    net.step()
    net.crash(a)
    net.paused.clear()
    # (b) one of B, C wins epoch 2; the other is stopped before it fetches that
    #     leader's LeaderChange, and the winner crashes: its epoch-2 record is alone
    net.run_until(lambda: any(net.clients[v].is_leader() for v in (b, c)), max_ms=10_000)
    winner = b if net.clients[b].is_leader() else c
    loser = c if winner == b else b
    assert net.clients[winner].log.end_offset == 2
    net.paused.add(loser)
    net.crash(winner)
    # (c) A restarts and wins epoch 3 with the loser's vote; the loser fetches X (one
    #     entry a fetch), its next Fetch reaches A, A's answer (with A's LeaderChange)
    #     is lost, and A crashes. X is on a majority (A, the loser), as an epoch-1 record
    net.restart(a)
    net.paused.discard(loser)
    net.run_until(lambda: net.clients[a].is_leader(), max_ms=20_000)
    assert net.clients[a].epoch >= 3
    net.run_until(lambda: net.clients[loser].log.end_offset == 2, max_ms=5_000)
    net.paused.add(loser)
    net.step()  # the loser's Fetch at offset 2 reaches A
    exposed = [e.record for e in net.clients[a].log.entries[: net.clients[a].high_watermark]]
    net.crash(a)
    net.paused.discard(loser)
    # (d) the epoch-2 winner restarts and wins epoch 4 with the loser's vote: its log
    #     is more up to date (epoch 2 > epoch 1); the loser truncates X
    net.restart(winner)
    net.run_until(
        lambda: (
            net.clients[winner].is_leader()
            and net.clients[loser].log.entries == net.clients[winner].log.entries
        ),
        max_ms=30_000,
    )
    final = [e.record for e in net.clients[winner].log.entries]
    return exposed, final


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kafka_12619_figure_8_the_rule_keeps_x_uncommitted(seed):
    exposed, final = figure_8(RaftNetwork(config=ONE_ENTRY_A_FETCH, seed=seed))
    assert "X" not in exposed  # never exposed, so its loss loses nothing committed
    assert "X" not in final
    assert final[: len(exposed)] == exposed


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kafka_12619_figure_8_without_the_rule_a_committed_record_is_lost(seed, monkeypatch):
    monkeypatch.setattr(LeaderState, "_maybe_update_high_watermark", broken_high_watermark)
    exposed, final = figure_8(RaftNetwork(config=ONE_ENTRY_A_FETCH, seed=seed))
    assert "X" in exposed  # the leader of epoch 3 exposed X as committed ...
    assert "X" not in final  # ... and the leader of epoch 4 does not have it


class UnsyncedQuorumStateStore(MemoryQuorumStateStore):
    """A disk that acknowledges a write without fsync: a power failure loses it."""

    def __init__(self) -> None:
        super().__init__()
        self.synced = None

    def power_failure(self) -> None:
        self.state = self.synced


class SyncedQuorumStateStore(UnsyncedQuorumStateStore):
    """What FileQuorumStateStore does: every write is fsynced before it returns."""

    def write_election_state(self, state) -> None:
        super().write_election_state(state)
        self.synced = state


def two_candidates_one_voter_power_failure(
    store_factory: Callable[[int], UnsyncedQuorumStateStore],
) -> dict[int, set[int]]:
    """Voters 1 and 2 run for epoch 1 at once; voter 3 votes for 1, loses power,
    restarts, and is asked by 2. Returns the leaders seen in each epoch."""
    net = RaftNetwork(store_factory=store_factory, seed=0)
    net.now = 2 * TEST_CONFIG.election_timeout_ms  # every election timeout has expired

    def deliver(pred: Callable[[RaftMessage], bool]) -> None:
        batch = [m for m in net.in_flight if pred(m)]
        net.in_flight = [m for m in net.in_flight if not pred(m)]
        for m in batch:
            net.deliver(m)

    net.poll(1)
    net.poll(2)  # both Prospective: pre-votes to everyone
    deliver(lambda m: m.destination_id == 3)  # 3 grants both pre-votes
    deliver(lambda m: m.source_id == 3)  # 1 and 2 become Candidates of epoch 1
    assert {net.clients[1].epoch, net.clients[2].epoch} == {1}
    deliver(lambda m: m.source_id == 1 and m.destination_id == 3)  # 3 votes for 1
    deliver(lambda m: m.source_id == 3 and m.destination_id == 1)  # 1 leads epoch 1
    # 2's vote request is still on its way to 3 when 3 loses power; it arrives (as
    # a resend would) once 3 is back
    [late] = [
        m
        for m in net.in_flight
        if (m.source_id, m.destination_id) == (2, 3)
        and isinstance(m.data, VoteRequest)
        and not m.data.pre_vote
    ]
    assert late.data.replica_epoch == 1
    net.stores[3].power_failure()
    net.restart(3)
    net.deliver(late)
    deliver(lambda m: m.source_id == 3 and m.destination_id == 2)
    leaders: dict[int, set[int]] = {}
    for c in net.live():
        if c.is_leader():
            leaders.setdefault(c.epoch, set()).add(c.local_id)
    return leaders


def test_vote_fsynced_before_it_is_granted_one_leader_an_epoch():
    leaders = two_candidates_one_voter_power_failure(lambda _v: SyncedQuorumStateStore())
    assert leaders == {1: {1}}


def test_vote_not_persisted_before_a_power_failure_two_leaders_in_one_epoch():
    leaders = two_candidates_one_voter_power_failure(lambda _v: UnsyncedQuorumStateStore())
    assert leaders == {1: {1, 2}}  # ElectionSafety broken


def leader_restarts_with_its_unflushed_tail_lost(net: RaftNetwork) -> tuple[int, int]:
    """The leader appends a and b, the followers fetch them, the leader crashes before
    its own copy reached the disk and restarts, then writes c if it can. Returns
    (leader id, its old epoch)."""
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    lid, epoch = leader.local_id, leader.epoch
    leader.append(["a", "b"], net.now)
    net.run_until(lambda: all(c.log.end_offset == 3 for c in net.live()), max_ms=5_000)
    net.crash(lid)
    net.logs[lid].truncate_to(1)  # only its LeaderChange was flushed
    restarted = net.restart(lid)
    if restarted.is_leader():
        restarted.append(["c"], net.now)
    return lid, epoch


def test_kafka_10527_restarted_leader_never_writes_in_its_old_epoch():
    net = RaftNetwork(seed=3)
    lid, epoch = leader_restarts_with_its_unflushed_tail_lost(net)
    assert net.clients[lid].state_name == "resigned"
    net.run_until(
        lambda: (
            net.has_stable_leader()
            and len({c.log.entries for c in net.live()}) == 1
            and net.clients[lid].log.end_offset >= 4
        ),
        max_ms=20_000,
    )
    assert net.leader().epoch > epoch
    assert [e.record for e in net.clients[lid].log.entries][1:3] == ["a", "b"]
    logs = [net.logs[v].entries for v in net.voters]
    for i, a in enumerate(logs):
        for b in logs[i + 1 :]:
            check_log_matching(a, b)


def test_kafka_10527_a_leader_resuming_its_epoch_breaks_log_matching(monkeypatch):
    resume = QuorumState.initialize

    def initialize_as_leader_again(self, log_end, now_ms):
        state = resume(self, log_end, now_ms)
        if isinstance(state, ResignedState):  # the bug: it leads its stored epoch again
            self._state = LeaderState(
                self.local_id,
                state.epoch,
                log_end.offset,
                self.voters,
                self.voters,
                self.config.check_quorum_timeout_ms,
                now_ms,
            )
        return self._state

    monkeypatch.setattr(QuorumState, "initialize", initialize_as_leader_again)
    net = RaftNetwork(seed=3)
    lid, epoch = leader_restarts_with_its_unflushed_tail_lost(net)
    entries = net.logs[lid].entries
    assert (entries[1].epoch, entries[1].record) == (epoch, "c")
    follower = next(v for v in net.voters if v != lid)
    assert net.logs[follower].entries[1].epoch == epoch
    assert net.logs[follower].entries[1].record == "a"  # same (offset, epoch), another record
    with pytest.raises(AssertionError, match="logs agree on epoch"):
        check_log_matching(entries, net.logs[follower].entries)


def test_kafka_15489_without_check_quorum_a_cut_off_leader_never_resigns(monkeypatch):
    monkeypatch.setattr(LeaderState, "time_until_check_quorum_expires", lambda self, now_ms: 1)
    net = RaftNetwork(seed=4)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    old = net.leader()
    net.isolate(old.local_id)
    net.run(10 * TEST_CONFIG.check_quorum_timeout_ms)
    assert old.is_leader()  # still answering as the leader of its old epoch
    assert max(c.epoch for c in net.live() if c is not old) > old.epoch
