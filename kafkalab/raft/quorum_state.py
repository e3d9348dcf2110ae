"""QuorumState: which state a voter is in, in which epoch, and the rules for moving.

Kafka's classes: org.apache.kafka.raft.QuorumState and the EpochState
implementations. The states, as in Kafka 4.x (KIP-996):

    Unattached    no leader known in this epoch; carries the vote cast in it, if any
                  (Kafka folded VotedState into UnattachedState with a votedKey,
                  KAFKA-17067, in 4.0; so do we: there is no separate Voted state)
    Prospective   the election timeout (or fetch timeout) expired: asks the voters for
                  pre-votes, which change nobody's vote (KIP-996)
    Candidate     a majority granted pre-votes: the epoch is bumped and persisted with a
                  vote for itself, and real votes are asked for (only Prospective
                  leads to Candidate, KAFKA-17642; a sole voter passes through it)
    Leader        a majority voted for it in its epoch (leader_state.py)
    Follower      fetches from the leader of its epoch
    Resigned      was the leader of this epoch and stepped down (check-quorum, a
                  graceful shutdown, or restarted after leading: it never leads again
                  in the same epoch, KAFKA-10527)

The transitions are data, `TRANSITIONS`: for every (from, to) edge, which epoch
changes it allows (SAME epoch, a HIGHER one, or exactly the NEXT one).
`VALID_PREVIOUS_STATES` is derived from it, like coordinator/runtime.py's table.
A move along any other edge, to a lower epoch, or that would change a vote already
cast in an epoch raises IllegalQuorumStateTransition.

Durability (Kafka: durableTransitionTo / memoryTransitionTo): a transition that
changes what the voter must not forget (its epoch, its vote, its leader) writes the
ElectionState to the QuorumStateStore, fsynced, *before* the state changes in
memory, so the handler that granted a vote returns its VoteResponse only after
the vote is on disk. Prospective and Resigned change nothing durable: memory only.

Restart (Kafka: QuorumState.initialize) rebuilds the state from the store and the
log: an epoch older than the log's last epoch is replaced by it (Unattached); the
leader of the stored epoch comes back Resigned; a voter that voted for itself
comes back Candidate in that epoch with its own vote (as Kafka 3.9 and 4.x do:
initialize builds a CandidateState, no pre-vote first); one that knew a leader
comes back its Follower; one that voted for another comes back Unattached with
that vote.

The defect KAFKA_10527 (QuorumConfig.defects, off by default) writes only the epoch
to the store, never the vote or the leader: the broken variant the KafkaRaft spec
checks (PersistElectionState = FALSE), for the replay of its counterexample.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from kafkalab.raft.errors import IllegalQuorumStateTransition
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import KAFKA_10527, KAFKA_12619, QuorumConfig
from kafkalab.raft.quorum_state_store import (
    NOT_VOTED,
    UNKNOWN_LEADER,
    ElectionState,
    QuorumStateStore,
)
from kafkalab.raft.raft_log import OffsetAndEpoch


class StateName(StrEnum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


class EpochChange(Enum):
    SAME = "same"  # the epoch stays
    HIGHER = "higher"  # any larger epoch (learnt from a peer)
    NEXT = "next"  # exactly epoch + 1 (a Candidate bumps its own)


_S, _H, _N = EpochChange.SAME, EpochChange.HIGHER, EpochChange.NEXT
U, P, C, L, F, R = (
    StateName.UNATTACHED,
    StateName.PROSPECTIVE,
    StateName.CANDIDATE,
    StateName.LEADER,
    StateName.FOLLOWER,
    StateName.RESIGNED,
)

#: every edge a voter may take, with the epoch changes it allows
TRANSITIONS: dict[tuple[StateName, StateName], frozenset[EpochChange]] = {
    (U, U): frozenset({_S, _H}),  # SAME: casting the epoch's one vote; HIGHER: a newer epoch
    (U, P): frozenset({_S}),  # election timeout
    (U, F): frozenset({_S, _H}),  # a leader is discovered
    (P, U): frozenset({_S, _H}),  # pre-vote lost or timed out (no leader known); a newer epoch
    (P, C): frozenset({_N}),  # a majority granted pre-votes
    (P, F): frozenset({_S, _H}),  # a leader is discovered (or known before and lost the pre-vote)
    (C, U): frozenset({_H}),
    (C, P): frozenset({_S}),  # the election timed out
    (C, L): frozenset({_S}),  # a majority voted for it
    (C, F): frozenset({_S, _H}),
    (L, U): frozenset({_H}),  # a newer epoch: a leader steps down through Unattached
    (L, R): frozenset({_S}),  # check-quorum, or a graceful resignation
    (F, U): frozenset({_H}),
    (F, P): frozenset({_S}),  # fetch timeout
    (F, F): frozenset({_H}),  # a newer leader
    (R, U): frozenset({_H}),
    (R, P): frozenset({_S}),  # the election timeout after resigning
    (R, F): frozenset({_H}),
}

#: the states a voter may come from, per state (Kafka: the comment atop QuorumState)
VALID_PREVIOUS_STATES: dict[StateName, frozenset[StateName]] = {
    to: frozenset(frm for (frm, t) in TRANSITIONS if t == to) for to in StateName
}

#: which transitions must be on disk before they take effect
DURABLE = frozenset({U, C, L, F})


def _epoch_change(old: int, new: int) -> EpochChange | None:
    if new == old:
        return EpochChange.SAME
    if new == old + 1:
        return EpochChange.NEXT
    if new > old:
        return EpochChange.HIGHER
    return None


# -- the states ---------------------------------------------------------------------------------


@dataclass
class UnattachedState:
    """No leader known in `epoch`; `voted_id` is the vote cast in it (-1: none)."""

    epoch: int
    election_deadline_ms: int
    voted_id: int = NOT_VOTED
    name: StateName = field(default=StateName.UNATTACHED, init=False)

    @property
    def leader_id(self) -> int:
        return UNKNOWN_LEADER

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, UNKNOWN_LEADER, self.voted_id, voters)

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        if pre_vote:
            return log_up_to_date
        if self.voted_id != NOT_VOTED:
            return self.voted_id == candidate_id  # one vote an epoch; repeating it is fine
        return log_up_to_date


@dataclass
class ProspectiveState:
    """Asking for pre-votes (to run in epoch + 1). `leader_id` is the leader it followed in
    `epoch` (-1: none), to go back to if the pre-vote fails; `voted_id` the vote it
    cast in `epoch`, kept."""

    epoch: int
    election_deadline_ms: int
    voted_id: int = NOT_VOTED
    leader_id: int = UNKNOWN_LEADER
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name: StateName = field(default=StateName.PROSPECTIVE, init=False)

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        if pre_vote:
            return log_up_to_date
        return self.voted_id == candidate_id


@dataclass
class CandidateState:
    """Runs for leader of `epoch`, having voted for itself."""

    local_id: int
    epoch: int
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name: StateName = field(default=StateName.CANDIDATE, init=False)

    @property
    def leader_id(self) -> int:
        return UNKNOWN_LEADER

    @property
    def voted_id(self) -> int:
        return self.local_id

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, UNKNOWN_LEADER, self.local_id, voters)

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        return pre_vote and log_up_to_date


@dataclass
class FollowerState:
    """Follows `leader_id` in `epoch`. `last_fetch_ms` is when it last fetched from the
    leader successfully (None: not since it became follower, or the leader resigned).
    `fetching_snapshot`: the id and the bytes so far of the leader's snapshot it
    fetches (KIP-630) instead of Fetch, after the leader answered a SnapshotId
    (Kafka: FollowerState.fetchingSnapshot; dropped with the state, as Kafka closes
    the partial snapshot on a transition)."""

    epoch: int
    leader_id: int
    fetch_timeout_ms: int
    fetch_deadline_ms: int
    voted_id: int = NOT_VOTED
    last_fetch_ms: int | None = None
    fetching_snapshot: tuple[OffsetAndEpoch, bytearray] | None = None
    name: StateName = field(default=StateName.FOLLOWER, init=False)

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, voters)

    def has_heard_from_leader(self, now_ms: int) -> bool:
        return (
            self.last_fetch_ms is not None and now_ms - self.last_fetch_ms < self.fetch_timeout_ms
        )

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        # KIP-996: a voter that hears from its leader refuses pre-votes, so a voter cut
        # off alone cannot disturb a healthy quorum; one that has not fetched since it
        # became Follower grants them (KAFKA-17641); a real vote in this epoch, never
        return pre_vote and log_up_to_date and not self.has_heard_from_leader(now_ms)


@dataclass
class ResignedState:
    """Was the leader of `epoch`; tells the voters (EndQuorumEpoch) until they answer."""

    local_id: int
    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...] = ()
    unacknowledged: set[int] = field(default_factory=set)
    name: StateName = field(default=StateName.RESIGNED, init=False)

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id, voters)

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        return pre_vote and log_up_to_date


EpochState = (
    UnattachedState
    | ProspectiveState
    | CandidateState
    | LeaderState
    | FollowerState
    | ResignedState
)


def state_name(state: EpochState) -> StateName:
    return StateName.LEADER if isinstance(state, LeaderState) else state.name


# -- the quorum state ---------------------------------------------------------------------------


class QuorumState:
    """One voter's state machine over EpochStates, persisted through a QuorumStateStore."""

    def __init__(
        self,
        local_id: int,
        voters: Iterable[int],
        store: QuorumStateStore,
        config: QuorumConfig | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.local_id = local_id
        self.voters = frozenset(voters)
        if local_id not in self.voters:
            raise ValueError(f"voter {local_id} is not in the voter set {sorted(self.voters)}")
        self.store = store
        self.config = config or QuorumConfig()
        self.rng = rng or random.Random()
        self._state: EpochState | None = None

    # -- reading -----------------------------------------------------------------------------

    @property
    def state(self) -> EpochState:
        if self._state is None:
            raise IllegalQuorumStateTransition("QuorumState used before initialize()")
        return self._state

    @property
    def name(self) -> StateName:
        return state_name(self.state)

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def is_only_voter(self) -> bool:
        """This voter is the whole quorum (Kafka: QuorumState.isOnlyVoter)."""
        return self.voters == {self.local_id}

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def random_election_timeout_ms(self) -> int:
        """Kafka: electionTimeoutMs + a random part in [0, electionTimeoutMs)."""
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    # -- restart -----------------------------------------------------------------------------

    def initialize(self, log_end: OffsetAndEpoch, now_ms: int) -> EpochState:
        """Rebuild the state after a (re)start from the store and the log's last epoch
        (Kafka: QuorumState.initialize)."""
        stored = self.store.read_election_state() or ElectionState(0, voters=self.voters)
        deadline = now_ms + self.random_election_timeout_ms()
        me = self.local_id
        state: EpochState
        if stored.epoch < log_end.epoch:
            state = UnattachedState(log_end.epoch, deadline)
        elif stored.is_leader(me):
            state = ResignedState(me, stored.epoch, deadline, (), set(self.voters - {me}))
        elif stored.is_voted_candidate(me):
            state = CandidateState(me, stored.epoch, deadline, granted={me})
        elif stored.has_leader:
            ft = self.config.fetch_timeout_ms
            state = FollowerState(stored.epoch, stored.leader_id, ft, now_ms + ft, stored.voted_id)
        else:
            state = UnattachedState(stored.epoch, deadline, stored.voted_id)
        self._state = state
        if self._durable(state.election_state(self.voters)) != stored:
            self.store.write_election_state(self._durable(state.election_state(self.voters)))
        return state

    def _durable(self, election: ElectionState) -> ElectionState:
        """What reaches the store: all of it, or with the defect KAFKA_10527 the epoch
        alone (the vote and the leader are lost)."""
        if KAFKA_10527 in self.config.defects:
            return ElectionState(election.epoch, voters=election.voters)
        return election

    # -- moving ------------------------------------------------------------------------------

    def _transition(self, new: EpochState) -> None:
        old = self.state
        edge = (state_name(old), state_name(new))
        change = _epoch_change(old.epoch, new.epoch)
        allowed = TRANSITIONS.get(edge, frozenset())
        if change is None or not (
            change in allowed or (change is EpochChange.NEXT and EpochChange.HIGHER in allowed)
        ):
            raise IllegalQuorumStateTransition(
                f"voter {self.local_id}: {edge[0]}(epoch {old.epoch}) -> "
                f"{edge[1]}(epoch {new.epoch}) is not a valid transition"
            )
        if new.epoch == old.epoch and old.voted_id != NOT_VOTED and new.voted_id != old.voted_id:
            raise IllegalQuorumStateTransition(
                f"voter {self.local_id} voted for {old.voted_id} in epoch {old.epoch}; "
                f"it cannot vote for {new.voted_id} in the same epoch"
            )
        if state_name(new) in DURABLE:
            # the fsync comes first: a crash after it keeps the vote, one before it the
            # old state, and no answer has left this voter in either case
            self.store.write_election_state(self._durable(new.election_state(self.voters)))
        self._state = new

    def transition_to_unattached(self, epoch: int, now_ms: int) -> None:
        """A newer epoch with no leader known (or a lost pre-vote: same epoch, vote kept)."""
        voted = self.state.voted_id if epoch == self.epoch else NOT_VOTED
        self._transition(UnattachedState(epoch, now_ms + self.random_election_timeout_ms(), voted))

    def transition_to_unattached_voted(self, epoch: int, candidate_id: int, now_ms: int) -> None:
        """Cast this voter's one vote of `epoch`, durably (Kafka: transitionToUnattachedVotedState)."""
        if candidate_id not in self.voters:
            raise IllegalQuorumStateTransition(f"cannot vote for {candidate_id}: not a voter")
        self._transition(
            UnattachedState(epoch, now_ms + self.random_election_timeout_ms(), candidate_id)
        )

    def transition_to_prospective(self, now_ms: int) -> ProspectiveState:
        old = self.state
        leader = old.leader_id if isinstance(old, FollowerState) else UNKNOWN_LEADER
        new = ProspectiveState(
            old.epoch,
            now_ms + self.random_election_timeout_ms(),
            voted_id=old.voted_id,
            leader_id=leader,
            granted={self.local_id},
        )
        self._transition(new)
        return new

    def transition_to_candidate(self, now_ms: int) -> CandidateState:
        new = CandidateState(
            self.local_id,
            self.epoch + 1,
            now_ms + self.random_election_timeout_ms(),
            granted={self.local_id},
        )
        self._transition(new)
        return new

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        old = self.state
        if not isinstance(old, CandidateState) or len(old.granted) < self.majority:
            raise IllegalQuorumStateTransition(
                f"voter {self.local_id} cannot lead epoch {old.epoch} without a majority of votes"
            )
        new = LeaderState(
            self.local_id,
            old.epoch,
            epoch_start_offset,
            self.voters,
            old.granted,
            self.config.check_quorum_timeout_ms,
            now_ms,
            kafka_12619=KAFKA_12619 in self.config.defects,
        )
        self._transition(new)
        return new

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> FollowerState:
        if leader_id == self.local_id or leader_id not in self.voters:
            raise IllegalQuorumStateTransition(
                f"voter {self.local_id} cannot follow {leader_id} in epoch {epoch}"
            )
        voted = self.state.voted_id if epoch == self.epoch else NOT_VOTED
        ft = self.config.fetch_timeout_ms
        new = FollowerState(epoch, leader_id, ft, now_ms + ft, voted)
        self._transition(new)
        return new

    def transition_to_resigned(
        self, preferred_successors: Iterable[int], now_ms: int
    ) -> ResignedState:
        new = ResignedState(
            self.local_id,
            self.epoch,
            now_ms + self.random_election_timeout_ms(),
            tuple(preferred_successors),
            set(self.voters - {self.local_id}),
        )
        self._transition(new)
        return new
