"""LeaderState: what the leader of an epoch knows of its voters (Kafka: LeaderState).

Kafka's class: org.apache.kafka.raft.LeaderState. Created when a candidate wins
(QuorumState.transition_to_leader) at `epoch_start_offset`, the log end offset at
that moment, where the client appends the LeaderChange record of the new epoch.

The high watermark (Kafka: LeaderState.maybeUpdateHighWatermark):
- every voter's end offset is what its last Fetch in this epoch said (a Fetch
  the leader validated: the voter's log matches the leader's up to there); the
  leader's own is its log end offset;
- sorted in descending order, the value at index len(voters) // 2 is held by a
  majority;
- it becomes the high watermark only once it is *greater than
  epoch_start_offset*, i.e. once a record of the leader's own epoch (the
  LeaderChange at epoch_start_offset) is committed by a majority. Before that a
  new leader exposes nothing, not even records of older epochs that a majority
  holds: such a record can still be overwritten by a later leader (the Raft
  paper's Figure 8). Kafka had this wrong once: KAFKA-12619;
- it never moves back.

Check-quorum (Kafka: LeaderState.checkQuorumTimer, KAFKA-15489): a leader that
has not been fetched from by a majority (itself included) within 1.5x the fetch
timeout resigns, so a leader cut off from the quorum stops claiming leadership
and the voters that still see each other can elect another.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkalab.raft import raft_message
from kafkalab.raft.quorum_state_store import ElectionState


@dataclass
class ReplicaState:
    """The leader's view of one voter (Kafka: LeaderState.ReplicaState)."""

    replica_id: int
    end_offset: int | None = None  # None: no valid Fetch in this epoch yet
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    last_fetch_leader_end_offset: int = 0  # the leader's log end offset at that fetch
    has_acknowledged_leader: bool = False  # answered BeginQuorumEpoch, or fetched


class LeaderState:
    """The leader of `epoch`: its voters' fetch offsets, the high watermark, check-quorum."""

    def __init__(
        self,
        local_id: int,
        epoch: int,
        epoch_start_offset: int,
        voters: Iterable[int],
        granting_voters: Iterable[int],
        check_quorum_timeout_ms: int,
        now_ms: int,
        kafka_12619: bool = False,
    ) -> None:
        self.local_id = local_id
        # the broken rule, on purpose (QuorumConfig.defects): the HW moves once a majority
        # reaches epoch_start_offset, before the LeaderChange record there is committed
        self.kafka_12619 = kafka_12619
        self.epoch = epoch
        self.epoch_start_offset = epoch_start_offset
        self.granting_voters = frozenset(granting_voters)
        self.voter_states = {
            v: ReplicaState(v, has_acknowledged_leader=(v == local_id)) for v in sorted(voters)
        }
        self.high_watermark: int | None = None  # unknown until an own-epoch record commits
        self.check_quorum_timeout_ms = check_quorum_timeout_ms
        self._check_quorum_deadline_ms = now_ms + check_quorum_timeout_ms
        self._fetched_voters: set[int] = set()

    # -- what QuorumState asks of every state --------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    def election_state(self, voters: frozenset[int]) -> ElectionState:
        """The leader and its own vote of this epoch. Kafka's LeaderState persists the
        leader alone and drops the self-vote (KAFKA-18389 proposes keeping it); we keep
        it, so the file never says less than the voter did."""
        return ElectionState(self.epoch, self.local_id, self.local_id, voters)

    def can_grant_vote(
        self, candidate_id: int, log_up_to_date: bool, pre_vote: bool, now_ms: int
    ) -> bool:
        """A leader grants no vote and no pre-vote in its epoch: it is alive."""
        return False

    # -- the high watermark --------------------------------------------------------------------

    def update_local_state(self, end_offset: int, now_ms: int) -> bool:
        """The leader's log now ends at `end_offset`; True if the high watermark moved."""
        me = self.voter_states[self.local_id]
        me.end_offset = end_offset
        me.last_fetch_timestamp = me.last_caught_up_timestamp = now_ms
        return self._maybe_update_high_watermark()

    def update_replica_state(
        self, replica_id: int, fetch_offset: int, now_ms: int, leader_end_offset: int
    ) -> bool:
        """A validated Fetch from `replica_id` at `fetch_offset` (its log end offset);
        True if the high watermark moved."""
        state = self.voter_states[replica_id]
        if fetch_offset >= leader_end_offset:
            state.last_caught_up_timestamp = now_ms
        elif fetch_offset >= state.last_fetch_leader_end_offset:
            state.last_caught_up_timestamp = max(
                state.last_caught_up_timestamp, state.last_fetch_timestamp
            )
        state.last_fetch_leader_end_offset = leader_end_offset
        state.last_fetch_timestamp = now_ms
        state.end_offset = fetch_offset
        state.has_acknowledged_leader = True
        return self._maybe_update_high_watermark()

    def _maybe_update_high_watermark(self) -> bool:
        offsets = sorted(
            (-1 if s.end_offset is None else s.end_offset for s in self.voter_states.values()),
            reverse=True,
        )
        candidate = offsets[len(offsets) // 2]
        if candidate < self.epoch_start_offset or (
            candidate == self.epoch_start_offset and not self.kafka_12619
        ):  # no own-epoch record committed (KAFKA-12619)
            return False
        if self.high_watermark is not None and candidate <= self.high_watermark:
            return False  # never backwards
        self.high_watermark = candidate
        return True

    # -- BeginQuorumEpoch ----------------------------------------------------------------------

    def add_acknowledgement_from(self, replica_id: int) -> None:
        self.voter_states[replica_id].has_acknowledged_leader = True

    def non_acknowledging_voters(self) -> list[int]:
        """The voters still to be told of this epoch by BeginQuorumEpoch."""
        return [v for v, s in self.voter_states.items() if not s.has_acknowledged_leader]

    # -- check-quorum --------------------------------------------------------------------------

    def update_check_quorum_for_following_voter(self, replica_id: int, now_ms: int) -> None:
        """A voter fetched in this epoch. Once a majority has (counting the leader), the
        check-quorum timer starts over (Kafka: updateCheckQuorumForFollowingVoter)."""
        if replica_id == self.local_id:
            return
        self._fetched_voters.add(replica_id)
        if len(self._fetched_voters) >= len(self.voter_states) // 2:
            self._fetched_voters.clear()
            self._check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def time_until_check_quorum_expires(self, now_ms: int) -> int:
        """0 once the leader must resign; a sole voter never has to."""
        if len(self.voter_states) == 1:
            return self.check_quorum_timeout_ms
        return max(0, self._check_quorum_deadline_ms - now_ms)

    # -- DescribeQuorum ------------------------------------------------------------------------

    def voters_by_descending_fetch_offset(self) -> list[int]:
        """The other voters, the most caught up first: the leader's preferred successors."""
        others = [s for v, s in self.voter_states.items() if v != self.local_id]
        others.sort(key=lambda s: -1 if s.end_offset is None else s.end_offset, reverse=True)
        return [s.replica_id for s in others]

    def describe_voters(self, now_ms: int) -> tuple[raft_message.ReplicaState, ...]:
        """DescribeQuorumResponse's CurrentVoters: the leader reports itself at `now_ms`."""
        out = []
        for v, s in self.voter_states.items():
            if v == self.local_id:
                out.append(raft_message.ReplicaState(v, s.end_offset or 0, now_ms, now_ms))
            else:
                out.append(
                    raft_message.ReplicaState(
                        v,
                        -1 if s.end_offset is None else s.end_offset,
                        s.last_fetch_timestamp,
                        s.last_caught_up_timestamp,
                    )
                )
        return tuple(out)
