"""KafkaRaftClient: one KRaft voter, sans-IO (Kafka: org.apache.kafka.raft.KafkaRaftClient).

No sockets, no threads, no clock: the caller passes the time and carries the
messages. Every call returns the messages the voter sends (RaftMessage), so a
notebook can step an election by hand and a hypothesis test can drop, delay,
reorder and duplicate them.

    poll(now_ms)              the timers: election and fetch timeouts, check-quorum,
                              requests to (re)send; returns outbound messages
    handle(message, now_ms)   one inbound request or response (dispatches to
                              handle_vote_request, handle_vote_response,
                              handle_begin_quorum_epoch(_response),
                              handle_end_quorum_epoch(_response),
                              handle_fetch_request, handle_fetch_response,
                              handle_fetch_snapshot_request(_response)); returns
                              the response, if a request, and what poll sends next
    append(records, now_ms)   the leader appends records in its epoch
    create_snapshot(end_offset, records)
                              a snapshot of the state machine at a committed offset
                              (KIP-630); the log drops the entries below it
    resign(now_ms)            the leader steps down gracefully (EndQuorumEpoch)
    describe_quorum(now_ms)   what DescribeQuorum answers

An election, as Kafka 4.x runs it (KIP-595, KIP-996): a voter whose election
timeout (Unattached) or fetch timeout (Follower) expires turns Prospective and
asks every voter for a pre-vote, in its current epoch (VoteRequest v2, PreVote);
a voter grants it if the asker's log is at least as up to date as its own and,
if it is a Follower, it has not fetched from its leader since it became one
(KAFKA-17641: so two voters that each lost the leader cannot send each other
back to following it forever) nor within the fetch timeout. A pre-vote moves
nobody's vote; one in a newer epoch moves the voter to that epoch, as any
request does. With a majority of pre-votes the voter becomes
Candidate: it persists epoch + 1 and its vote for itself, then asks for votes; a
voter grants one vote an epoch, persisted before the answer leaves. With a
majority the candidate becomes Leader, appends a LeaderChange record (the first
record of its epoch, at `epoch_start_offset`) and sends BeginQuorumEpoch.
Followers fetch from the leader with (FetchOffset, LastFetchedEpoch); a leader
whose log does not hold that epoch up to that offset answers DivergingEpoch and
the follower truncates (RaftLog.truncate_to_end_offset), never below its high
watermark. The high watermark rule and check-quorum are LeaderState's.

Snapshots (KIP-630): the state machine hands create_snapshot its state at a
committed offset (as records, written between a SnapshotHeader and a
SnapshotFooter, kafkalab/raft/snapshot.py); the log keeps it and drops the
entries below, so its log start offset moves up. A follower whose Fetch lies
before what the leader can check (below its log start, or in an epoch older than
its oldest snapshot) is answered a SnapshotId instead of records; it then sends
FetchSnapshot (SnapshotId, Position) until it holds all Size bytes, installs the
snapshot (its log becomes the snapshot, starting at its end offset, unless it
already holds that point) and fetches on from there (Kafka:
handleFetchSnapshotRequest, handleFetchSnapshotResponse).

A sole voter (a single controller: a quorum of one, as `kafka-storage format
--standalone` makes one) runs no timed election: it turns Prospective as it is
built and its first poll makes it Candidate and then Leader, a majority of one
(Kafka: KafkaRaftClient.initialize). Its high watermark is its own flushed log end
(every append is flushed before it counts), and it never resigns by check-quorum.

Requests are tracked per destination with their correlation id (Kafka:
RequestManager): one in flight to each voter, forgotten after the request
timeout or when the voter changes state, and a response that is not the one
awaited is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkalab.errors import Errors
from kafkalab.raft.errors import (
    CorruptSnapshotError,
    NotLeaderError,
    TruncationBelowHighWatermarkError,
)
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    QuorumState,
    ResignedState,
    StateName,
    UnattachedState,
)
from kafkalab.raft.quorum_state_store import UNKNOWN_LEADER, QuorumStateStore
from kafkalab.raft.raft_log import OffsetAndEpoch, RaftLog, ValidOffsetAndEpochKind
from kafkalab.raft.raft_message import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    RaftRequestData,
    RaftResponseData,
    VoteRequest,
    VoteResponse,
)


@dataclass(frozen=True)
class LeaderChangeMessage:
    """The control record a new leader appends first in its epoch (Kafka:
    LeaderChangeMessage: LeaderId, Voters, GrantingVoters)."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass
class _Outstanding:
    correlation_id: int
    sent_ms: int
    data: RaftRequestData


class KafkaRaftClient:
    """One voter of a static voter set, over a RaftLog and a QuorumStateStore."""

    def __init__(
        self,
        local_id: int,
        voters: Iterable[int],
        log: RaftLog,
        store: QuorumStateStore,
        config: QuorumConfig | None = None,
        rng: random.Random | None = None,
        now_ms: int = 0,
        cluster_id: str | None = None,
    ) -> None:
        self.local_id = local_id
        self.config = config or QuorumConfig()
        self.log = log
        self.cluster_id = cluster_id
        self.quorum = QuorumState(local_id, voters, store, self.config, rng)
        self.quorum.initialize(log.end_offset_and_epoch(), now_ms)
        if self.quorum.is_only_voter and not isinstance(self.quorum.state, CandidateState):
            # Kafka: KafkaRaftClient.initialize. A sole voter waits for no election
            # timeout (nobody else could lead): it starts its election now, and the
            # first poll takes it, holding a majority of one, to Candidate and Leader.
            self.quorum.transition_to_prospective(now_ms)
        # offsets below are committed; 0 until learnt (Kafka keeps it unknown after a
        # restart too: the high watermark is not persisted)
        self.high_watermark = 0
        # Kafka's QuorumState.highWatermark(): the HW known in the current epoch state.
        # It is carried from state to state, except into Leader: a new leader knows none
        # until a record of its own epoch is committed (Kafka: transitionToLeader). Read
        # only by the spec replay (kafkalab/specs/kraft_replay.py); high_watermark above
        # keeps what this voter ever learnt, and never goes back.
        self.quorum_high_watermark = 0
        self._outstanding: dict[int, _Outstanding] = {}
        self._next_correlation_id = 0
        self._state_seen = self._state_key()
        # snapshots this voter installed from its leader (the state machine reloads
        # from log.latest_snapshot_id when it grows)
        self.snapshots_installed = 0

    # -- reading -----------------------------------------------------------------------------

    @property
    def voters(self) -> frozenset[int]:
        return self.quorum.voters

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    @property
    def state_name(self) -> StateName:
        return self.quorum.name

    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, LeaderState)

    def _state_key(self) -> tuple[object, ...]:
        return (self.quorum.name, self.quorum.epoch)

    # -- sending -----------------------------------------------------------------------------

    def _send(self, destination: int, data: RaftRequestData, now_ms: int) -> RaftMessage | None:
        """A request to `destination`, unless one is still in flight to it."""
        if destination in self._outstanding:
            return None
        self._next_correlation_id += 1
        cid = self._next_correlation_id
        self._outstanding[destination] = _Outstanding(cid, now_ms, data)
        return RaftMessage(cid, self.local_id, destination, data)

    def _reply(self, request: RaftMessage, data: RaftResponseData) -> RaftMessage:
        return RaftMessage(request.correlation_id, self.local_id, request.source_id, data)

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.local_id})

    # -- the timers ----------------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[RaftMessage]:
        """Run the timers at `now_ms`; the requests to send."""
        for dest, out in list(self._outstanding.items()):
            if now_ms - out.sent_ms >= self.config.request_timeout_ms:
                del self._outstanding[dest]
        sent: list[RaftMessage] = []
        for _ in range(6):  # a state change may lead to another (a sole voter elects itself)
            self._check_state_change()
            before = self._state_key()
            sent.extend(self._poll_state(now_ms))
            if self._state_key() == before:
                break
        self._check_state_change()
        return sent

    def _check_state_change(self) -> None:
        key = self._state_key()
        if key != self._state_seen:  # Kafka: requestManager.resetAll() on a new state
            self._state_seen = key
            self._outstanding.clear()

    def _poll_state(self, now_ms: int) -> list[RaftMessage]:
        state = self.quorum.state
        out: list[RaftMessage | None] = []
        if isinstance(state, LeaderState):
            if self.config.check_quorum and state.time_until_check_quorum_expires(now_ms) == 0:
                self._resign(state, now_ms)
                return []
            for voter in state.non_acknowledging_voters():
                o = self._outstanding.get(voter)
                if o and now_ms - o.sent_ms < self.config.begin_quorum_epoch_timeout_ms:
                    continue
                self._outstanding.pop(voter, None)
                req = BeginQuorumEpochRequest(self.local_id, state.epoch, self.cluster_id)
                out.append(self._send(voter, req, now_ms))
        elif isinstance(state, FollowerState):
            if now_ms >= state.fetch_deadline_ms:
                self.quorum.transition_to_prospective(now_ms)
                return []
            if state.fetching_snapshot is not None:
                snapshot_id, written = state.fetching_snapshot
                req = FetchSnapshotRequest(
                    self.local_id,
                    state.epoch,
                    snapshot_id,
                    len(written),
                    self.config.fetch_snapshot_max_bytes,
                    self.cluster_id,
                )
                out.append(self._send(state.leader_id, req, now_ms))
                return [m for m in out if m is not None]
            fetch = FetchRequest(
                self.local_id,
                state.epoch,
                self.log.end_offset,
                self.log.last_fetched_epoch,
                self.cluster_id,
            )
            out.append(self._send(state.leader_id, fetch, now_ms))
        elif isinstance(state, UnattachedState):
            if now_ms >= state.election_deadline_ms:
                self.quorum.transition_to_prospective(now_ms)
        elif isinstance(state, ProspectiveState):
            if len(state.granted) >= self.quorum.majority or not self.config.pre_vote:
                # (without pre-vote, QuorumConfig.pre_vote=False, Prospective is only
                # passed through: the voter bumps its epoch at once, as before KIP-996)
                self.quorum.transition_to_candidate(now_ms)
            elif now_ms >= state.election_deadline_ms:
                self._lose_pre_vote(state, now_ms)
            else:
                out.extend(self._ask_votes(state, pre_vote=True, now_ms=now_ms))
        elif isinstance(state, CandidateState):
            if len(state.granted) >= self.quorum.majority:
                self._become_leader(now_ms)
            elif now_ms >= state.election_deadline_ms:
                self.quorum.transition_to_prospective(now_ms)
            else:
                out.extend(self._ask_votes(state, pre_vote=False, now_ms=now_ms))
        elif isinstance(state, ResignedState):
            if now_ms >= state.election_deadline_ms:
                self.quorum.transition_to_prospective(now_ms)
                return []
            for voter in sorted(state.unacknowledged):
                req = EndQuorumEpochRequest(
                    self.local_id, state.epoch, state.preferred_successors, self.cluster_id
                )
                out.append(self._send(voter, req, now_ms))
        return [m for m in out if m is not None]

    def _ask_votes(
        self, state: ProspectiveState | CandidateState, pre_vote: bool, now_ms: int
    ) -> list[RaftMessage | None]:
        end = self.log.end_offset_and_epoch()
        req = VoteRequest(
            state.epoch, self.local_id, end.epoch, end.offset, pre_vote, self.cluster_id
        )
        answered = state.granted | state.rejected
        return [self._send(v, req, now_ms) for v in self._others() if v not in answered]

    def _lose_pre_vote(self, state: ProspectiveState, now_ms: int) -> None:
        """The pre-vote timed out: back to the leader it followed, or Unattached (Kafka 4.x)."""
        if state.leader_id != UNKNOWN_LEADER:
            self.quorum.transition_to_follower(state.epoch, state.leader_id, now_ms)
        else:
            self.quorum.transition_to_unattached(state.epoch, now_ms)

    def _become_leader(self, now_ms: int) -> None:
        candidate = self.quorum.state
        assert isinstance(candidate, CandidateState)
        granting = tuple(sorted(candidate.granted))
        leader = self.quorum.transition_to_leader(self.log.end_offset, now_ms)
        self.quorum_high_watermark = 0
        record = LeaderChangeMessage(self.local_id, tuple(sorted(self.voters)), granting)
        self.log.append_as_leader([record], leader.epoch)
        self._leader_end_offset_moved(leader, now_ms)

    def _leader_end_offset_moved(self, leader: LeaderState, now_ms: int) -> None:
        self.log.flush()  # Kafka: flushLeaderLog, before the leader's own offset counts
        if leader.update_local_state(self.log.flushed_end_offset, now_ms):
            self._set_high_watermark(leader.high_watermark)

    def _set_high_watermark(self, offset: int | None) -> None:
        if offset is not None and offset > self.high_watermark:
            self.high_watermark = offset
        if offset is not None and offset > self.quorum_high_watermark:
            self.quorum_high_watermark = offset

    def _resign(self, leader: LeaderState, now_ms: int) -> None:
        self.quorum.transition_to_resigned(leader.voters_by_descending_fetch_offset(), now_ms)

    # -- the leader's API ----------------------------------------------------------------------

    def append(self, records: Sequence[object], now_ms: int) -> int:
        """Append `records` in the leader's epoch; the offset of the last one. They are
        committed once the high watermark passes it."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(self.local_id, self.leader_id, self.epoch)
        entries = self.log.append_as_leader(list(records), state.epoch)
        self._leader_end_offset_moved(state, now_ms)
        return entries[-1].offset if entries else self.log.end_offset - 1

    def resign(self, now_ms: int) -> list[RaftMessage]:
        """Step down gracefully (Kafka: the leader's shutdown): Resigned, and every
        voter is told by EndQuorumEpoch, so the next election starts without waiting
        for a fetch timeout."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(self.local_id, self.leader_id, self.epoch)
        self._resign(state, now_ms)
        return self.poll(now_ms)

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        """DescribeQuorum's answer: on the leader, every voter's log end offset and last
        fetch; elsewhere NOT_LEADER_OR_FOLLOWER with the leader known (Kafka:
        handleDescribeQuorumRequest)."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return DescribeQuorumResponse(
                Errors.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, self.high_watermark
            )
        hw = -1 if state.high_watermark is None else state.high_watermark
        return DescribeQuorumResponse(
            Errors.NONE, self.local_id, state.epoch, hw, state.describe_voters(now_ms), ()
        )

    # -- inbound -------------------------------------------------------------------------------

    def handle(self, message: RaftMessage, now_ms: int) -> list[RaftMessage]:
        """One inbound message; the response (for a request) and what poll sends next."""
        out: list[RaftMessage] = []
        data = message.data
        if message.destination_id != self.local_id:
            return out
        if message.source_id not in self.voters:
            if message.is_request:  # observers are a later step
                out.append(self._reply(message, self._error_response(data)))
            return out
        if message.is_request:
            response = self._handle_request(message, now_ms)
            out.append(self._reply(message, response))
        else:
            awaited = self._outstanding.get(message.source_id)
            if awaited is None or awaited.correlation_id != message.correlation_id:
                return out  # late, duplicated, or from before a state change
            del self._outstanding[message.source_id]
            self._handle_response(message.source_id, awaited.data, message, now_ms)
        out.extend(self.poll(now_ms))
        return out

    def _error_response(self, data: object) -> RaftResponseData:
        err, leader, epoch = Errors.INCONSISTENT_VOTER_SET, self.leader_id, self.epoch
        if isinstance(data, VoteRequest):
            return VoteResponse(err, leader, epoch, False)
        if isinstance(data, BeginQuorumEpochRequest):
            return BeginQuorumEpochResponse(err, leader, epoch)
        if isinstance(data, EndQuorumEpochRequest):
            return EndQuorumEpochResponse(err, leader, epoch)
        if isinstance(data, FetchSnapshotRequest):
            return FetchSnapshotResponse(err, leader, epoch)
        return FetchResponse(err, leader, epoch, self.high_watermark)

    def _handle_request(self, message: RaftMessage, now_ms: int) -> RaftResponseData:
        data = message.data
        if data.cluster_id is not None and self.cluster_id is not None:
            if data.cluster_id != self.cluster_id:
                bad = Errors.INCONSISTENT_CLUSTER_ID
                if isinstance(data, VoteRequest):
                    return VoteResponse(bad, self.leader_id, self.epoch, False)
                if isinstance(data, BeginQuorumEpochRequest):
                    return BeginQuorumEpochResponse(bad, self.leader_id, self.epoch)
                if isinstance(data, EndQuorumEpochRequest):
                    return EndQuorumEpochResponse(bad, self.leader_id, self.epoch)
                if isinstance(data, FetchSnapshotRequest):
                    return FetchSnapshotResponse(bad, self.leader_id, self.epoch)
                return FetchResponse(bad, self.leader_id, self.epoch)
        if isinstance(data, VoteRequest):
            return self.handle_vote_request(data, now_ms)
        if isinstance(data, BeginQuorumEpochRequest):
            return self.handle_begin_quorum_epoch(data, now_ms)
        if isinstance(data, EndQuorumEpochRequest):
            return self.handle_end_quorum_epoch(data, now_ms)
        if isinstance(data, FetchSnapshotRequest):
            return self.handle_fetch_snapshot_request(data, now_ms)
        assert isinstance(data, FetchRequest)
        return self.handle_fetch_request(data, now_ms)

    def _handle_response(
        self, source: int, request: RaftRequestData, message: RaftMessage, now_ms: int
    ) -> None:
        data = message.data
        if isinstance(data, VoteResponse) and isinstance(request, VoteRequest):
            self.handle_vote_response(source, data, request.pre_vote, now_ms)
        elif isinstance(data, BeginQuorumEpochResponse):
            self.handle_begin_quorum_epoch_response(source, data, now_ms)
        elif isinstance(data, EndQuorumEpochResponse):
            self.handle_end_quorum_epoch_response(source, data, now_ms)
        elif isinstance(data, FetchResponse) and isinstance(request, FetchRequest):
            self.handle_fetch_response(source, data, request, now_ms)
        elif isinstance(data, FetchSnapshotResponse) and isinstance(request, FetchSnapshotRequest):
            self.handle_fetch_snapshot_response(source, data, request, now_ms)

    def _maybe_transition(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """A peer told of `epoch` and its leader (Kafka: maybeTransition): move to it if
        it is newer, or if it names the leader of our epoch we did not know. True if we
        moved."""
        q = self.quorum
        if epoch > q.epoch:
            if isinstance(q.state, LeaderState):
                q.transition_to_unattached(epoch, now_ms)  # a leader steps down this way
            if leader_id != UNKNOWN_LEADER and leader_id != self.local_id:
                q.transition_to_follower(epoch, leader_id, now_ms)
            elif q.epoch != epoch:
                q.transition_to_unattached(epoch, now_ms)
            return True
        if (
            epoch == q.epoch
            and leader_id not in (UNKNOWN_LEADER, self.local_id)
            and q.leader_id != leader_id
            and isinstance(q.state, UnattachedState | ProspectiveState | CandidateState)
        ):
            q.transition_to_follower(epoch, leader_id, now_ms)
            return True
        return False

    # -- Vote ----------------------------------------------------------------------------------

    def handle_vote_request(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        """Grant or refuse a (pre-)vote. A granted real vote is persisted (fsynced)
        before this returns."""
        q = self.quorum

        def answer(error: Errors = Errors.NONE, granted: bool = False) -> VoteResponse:
            return VoteResponse(error, q.leader_id, q.epoch, granted)

        # a pre-vote carries the asker's current epoch, a real vote the epoch it runs in
        too_new = req.last_offset_epoch > req.replica_epoch or (
            not req.pre_vote and req.last_offset_epoch == req.replica_epoch
        )
        if req.last_offset < 0 or req.last_offset_epoch < 0 or too_new:
            return answer(Errors.INVALID_REQUEST)
        if req.replica_id not in self.voters:
            return answer(Errors.INCONSISTENT_VOTER_SET)
        if req.replica_epoch < q.epoch:
            return answer(Errors.FENCED_LEADER_EPOCH)
        if req.replica_epoch > q.epoch:
            # a newer epoch, also from a pre-vote (KAFKA-17641): this voter moves to it,
            # casting no vote
            q.transition_to_unattached(req.replica_epoch, now_ms)
        theirs = OffsetAndEpoch(req.last_offset, req.last_offset_epoch)
        up_to_date = theirs >= self.log.end_offset_and_epoch()
        granted = q.state.can_grant_vote(req.replica_id, up_to_date, req.pre_vote, now_ms)
        if granted and not req.pre_vote:
            state = q.state
            if isinstance(state, UnattachedState) and state.voted_id != req.replica_id:
                q.transition_to_unattached_voted(req.replica_epoch, req.replica_id, now_ms)
        return answer(granted=granted)

    def handle_vote_response(
        self, source: int, resp: VoteResponse, pre_vote: bool, now_ms: int
    ) -> None:
        if resp.error_code not in (Errors.NONE, Errors.FENCED_LEADER_EPOCH):
            return
        if self._maybe_transition(resp.leader_id, resp.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if resp.error_code != Errors.NONE:
            return
        if pre_vote and isinstance(state, ProspectiveState) and resp.leader_epoch <= state.epoch:
            (state.granted if resp.vote_granted else state.rejected).add(source)
        elif (
            not pre_vote and isinstance(state, CandidateState) and resp.leader_epoch == state.epoch
        ):
            (state.granted if resp.vote_granted else state.rejected).add(source)

    # -- BeginQuorumEpoch / EndQuorumEpoch ----------------------------------------------------

    def handle_begin_quorum_epoch(
        self, req: BeginQuorumEpochRequest, now_ms: int
    ) -> BeginQuorumEpochResponse:
        q = self.quorum
        if req.leader_id not in self.voters:
            return BeginQuorumEpochResponse(Errors.INCONSISTENT_VOTER_SET, q.leader_id, q.epoch)
        if req.leader_epoch < q.epoch:
            return BeginQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        self._maybe_transition(req.leader_id, req.leader_epoch, now_ms)
        return BeginQuorumEpochResponse(Errors.NONE, q.leader_id, q.epoch)

    def handle_begin_quorum_epoch_response(
        self, source: int, resp: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if self._maybe_transition(resp.leader_id, resp.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if (
            resp.error_code == Errors.NONE
            and isinstance(state, LeaderState)
            and resp.leader_epoch == state.epoch
        ):
            state.add_acknowledgement_from(source)

    def handle_end_quorum_epoch(
        self, req: EndQuorumEpochRequest, now_ms: int
    ) -> EndQuorumEpochResponse:
        """The leader of `req.leader_epoch` resigned: a follower of it stops waiting for
        its fetch timeout; the first of the preferred successors starts at once, the
        others after a backoff that grows with their place (Kafka:
        handleEndQuorumEpochRequest, strictExponentialElectionBackoffMs)."""
        q = self.quorum
        if req.leader_epoch < q.epoch:
            return EndQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        self._maybe_transition(req.leader_id, req.leader_epoch, now_ms)
        state = q.state
        if (
            isinstance(state, FollowerState)
            and state.leader_id == req.leader_id
            and state.epoch == req.leader_epoch
        ):
            successors = list(req.preferred_successors)
            position = successors.index(self.local_id) if self.local_id in successors else -1
            backoff = self._strict_exponential_election_backoff_ms(position, len(successors))
            state.last_fetch_ms = None  # the leader is gone: pre-votes may be granted
            state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + backoff)
        return EndQuorumEpochResponse(Errors.NONE, q.leader_id, q.epoch)

    def _strict_exponential_election_backoff_ms(self, position: int, successors: int) -> int:
        """0 for the first preferred successor, the maximum for a voter not named, and
        in between a base of max >> (successors - 1) doubled per place (Kafka:
        strictExponentialElectionBackoffMs)."""
        top = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position < 0 or position >= successors:
            return top
        return min(top, (top >> (successors - 1)) << (position - 1))

    def handle_end_quorum_epoch_response(
        self, source: int, resp: EndQuorumEpochResponse, now_ms: int
    ) -> None:
        if self._maybe_transition(resp.leader_id, resp.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if isinstance(state, ResignedState) and resp.leader_epoch == state.epoch:
            state.unacknowledged.discard(source)

    def _leader_only_error(self, current_leader_epoch: int) -> Errors | None:
        """Why a request only the leader of the current epoch serves (Fetch,
        FetchSnapshot) is refused here, or None (Kafka: validateLeaderOnlyRequest)."""
        if current_leader_epoch < self.quorum.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.quorum.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if not isinstance(self.quorum.state, LeaderState):
            return Errors.NOT_LEADER_OR_FOLLOWER
        return None

    # -- Fetch ---------------------------------------------------------------------------------

    def handle_fetch_request(self, req: FetchRequest, now_ms: int) -> FetchResponse:
        """A follower's Fetch: its log end offset counts for the high watermark if the
        leader's log holds its last epoch up to there; otherwise DivergingEpoch."""
        q = self.quorum
        state = q.state

        def answer(error: Errors, **kw: object) -> FetchResponse:
            return FetchResponse(error, q.leader_id, q.epoch, **kw)  # type: ignore[arg-type]

        refused = self._leader_only_error(req.current_leader_epoch)
        if refused is not None:
            return answer(refused)
        if (
            req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch
        ):
            return answer(Errors.INVALID_REQUEST)
        state.update_check_quorum_for_following_voter(req.replica_id, now_ms)
        state.add_acknowledgement_from(req.replica_id)
        hw = -1 if state.high_watermark is None else state.high_watermark
        valid = self.log.validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
        if valid.kind is ValidOffsetAndEpochKind.DIVERGING:
            return answer(Errors.NONE, high_watermark=hw, diverging_epoch=valid.offset_and_epoch)
        if valid.kind is ValidOffsetAndEpochKind.SNAPSHOT:
            return answer(Errors.NONE, high_watermark=hw, snapshot_id=valid.offset_and_epoch)
        if state.update_replica_state(
            req.replica_id, req.fetch_offset, now_ms, self.log.end_offset
        ):
            self._set_high_watermark(state.high_watermark)
            hw = self.high_watermark
        records = self.log.read(req.fetch_offset, self.config.fetch_max_entries)
        return answer(Errors.NONE, high_watermark=hw, records=records)

    def handle_fetch_response(
        self, source: int, resp: FetchResponse, req: FetchRequest, now_ms: int
    ) -> None:
        if self._maybe_transition(resp.leader_id, resp.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if (
            resp.error_code != Errors.NONE
            or not isinstance(state, FollowerState)
            or state.leader_id != source
            or resp.leader_epoch != state.epoch
            or req.fetch_offset != self.log.end_offset
        ):
            return
        state.last_fetch_ms = now_ms
        state.fetch_deadline_ms = now_ms + state.fetch_timeout_ms
        if resp.snapshot_id is not None:
            # our log ends before what the leader keeps: fetch its snapshot instead
            state.fetching_snapshot = (resp.snapshot_id, bytearray())
            return
        if resp.diverging_epoch is not None:
            target = self.log.truncation_offset_for(resp.diverging_epoch)
            if target < self.high_watermark:
                raise TruncationBelowHighWatermarkError(self.local_id, target, self.high_watermark)
            self.log.truncate_to(target)
            self.log.flush()
            return
        if resp.records:
            self.log.append_as_follower(resp.records)
            self.log.flush()  # a voter flushes before its next Fetch reports the offset
        if resp.high_watermark >= 0:
            self._set_high_watermark(min(resp.high_watermark, self.log.end_offset))

    # -- FetchSnapshot (KIP-630) ---------------------------------------------------------------

    def handle_fetch_snapshot_request(
        self, req: FetchSnapshotRequest, now_ms: int
    ) -> FetchSnapshotResponse:
        """A follower's FetchSnapshot: up to max_bytes of the snapshot from `position`
        (Kafka: handleFetchSnapshotRequest). SNAPSHOT_NOT_FOUND if this leader no longer
        holds it, POSITION_OUT_OF_RANGE if the position is not inside it."""
        q = self.quorum
        state = q.state

        def answer(error: Errors, **kw: object) -> FetchSnapshotResponse:
            return FetchSnapshotResponse(error, q.leader_id, q.epoch, **kw)  # type: ignore[arg-type]

        refused = self._leader_only_error(req.current_leader_epoch)
        if refused is not None:
            return answer(refused)
        if req.max_bytes <= 0 or req.position < 0:
            return answer(Errors.INVALID_REQUEST)
        state.update_check_quorum_for_following_voter(req.replica_id, now_ms)
        data = self.log.read_snapshot(req.snapshot_id)
        if data is None:
            return answer(Errors.SNAPSHOT_NOT_FOUND)
        if req.position >= len(data):
            return answer(Errors.POSITION_OUT_OF_RANGE)
        chunk = data[
            req.position : req.position + min(req.max_bytes, self.config.fetch_snapshot_max_bytes)
        ]
        return answer(
            Errors.NONE,
            snapshot_id=req.snapshot_id,
            size=len(data),
            position=req.position,
            data=bytes(chunk),
        )

    def handle_fetch_snapshot_response(
        self, source: int, resp: FetchSnapshotResponse, req: FetchSnapshotRequest, now_ms: int
    ) -> None:
        """Append the chunk to the snapshot being fetched; with the last byte, check it
        (a header first, a footer last) and install it: the log becomes the snapshot,
        and the next poll fetches on from its end offset."""
        if self._maybe_transition(resp.leader_id, resp.leader_epoch, now_ms):
            return
        state = self.quorum.state
        if (
            not isinstance(state, FollowerState)
            or state.leader_id != source
            or resp.leader_epoch != state.epoch
            or state.fetching_snapshot is None
        ):
            return
        snapshot_id, written = state.fetching_snapshot
        if resp.error_code in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            state.fetching_snapshot = None  # the leader moved on: Fetch again to learn where
            return
        if (
            resp.error_code != Errors.NONE
            or resp.snapshot_id != snapshot_id
            or req.snapshot_id != snapshot_id
            or resp.position != len(written)
        ):
            return
        state.last_fetch_ms = now_ms
        state.fetch_deadline_ms = now_ms + state.fetch_timeout_ms
        written.extend(resp.data)
        if len(written) < resp.size:
            return
        state.fetching_snapshot = None
        from kafkalab.raft.snapshot import decode_snapshot  # noqa: PLC0415 (import cycle)

        try:
            decode_snapshot(written)
        except CorruptSnapshotError:
            return  # never install a torn snapshot: the next Fetch starts over
        self.log.install_snapshot(snapshot_id, bytes(written))
        self.snapshots_installed += 1
        self._set_high_watermark(snapshot_id.offset)  # a snapshot holds committed records only

    # -- snapshots -----------------------------------------------------------------------------

    def create_snapshot(
        self,
        end_offset: int,
        records: Sequence[object],
        last_contained_log_timestamp: int = -1,
        delete_before: bool = True,
    ) -> OffsetAndEpoch:
        """Snapshot the state machine's state after every record below `end_offset`
        (written as `records`), which must be committed: at most the high watermark,
        above the log start (Kafka: KafkaRaftClient.createSnapshot, whose log refuses an
        offset above the high watermark). With `delete_before` the log drops the
        entries below it at once (Kafka does so once its retention allows). The id."""
        if end_offset > self.high_watermark:
            raise ValueError(
                f"cannot snapshot at {end_offset}: above the high watermark {self.high_watermark}"
            )
        if end_offset <= self.log.log_start_offset:
            raise ValueError(
                f"cannot snapshot at {end_offset}: the log already starts at "
                f"{self.log.log_start_offset}"
            )
        from kafkalab.raft.snapshot import encode_snapshot  # noqa: PLC0415 (import cycle)

        epoch = self.log.read(end_offset - 1, 1)[0].epoch
        snapshot_id = OffsetAndEpoch(end_offset, epoch)
        self.log.create_snapshot(
            snapshot_id, encode_snapshot(snapshot_id, records, last_contained_log_timestamp)
        )
        if delete_before:
            self.log.delete_before_snapshot(snapshot_id)
        return snapshot_id
