"""The messages voters exchange, as data: Kafka's KRaft request and response JSONs.

Kafka's schemas (clients/src/main/resources/common/message/): VoteRequest and
VoteResponse (api key 52), BeginQuorumEpochRequest/Response (53),
EndQuorumEpochRequest/Response (54), DescribeQuorumResponse (55), Fetch (1)
with the fields KRaft uses (ReplicaId, CurrentLeaderEpoch, FetchOffset,
LastFetchedEpoch; in the answer CurrentLeader, HighWatermark, DivergingEpoch,
SnapshotId), and FetchSnapshotRequest/Response (59, KIP-630: SnapshotId,
Position, MaxBytes; in the answer Size, Position and the bytes).
Each holds the one partition of the metadata topic (`__cluster_metadata-0`)
flattened: the Topics/Partitions arrays of the wire carry exactly one entry for
KRaft. Field names are the JSONs' in snake_case, as of Kafka 4.0: VoteRequest v2
(KIP-996, KAFKA-17641) added PreVote and renamed CandidateEpoch/CandidateId to
ReplicaEpoch/ReplicaId (same wire positions). Directory ids and endpoints (KIP-853) are not
here: the voter set is static in this step.

A RaftMessage is the envelope (Kafka: RaftRequest.Outbound / RaftResponse.Inbound):
who sends, to whom, under which correlation id. A response carries its request's
correlation id; a client takes only the response it still waits for, so a
duplicated, late or reordered response is dropped, as Kafka's RequestManager does.
Wire encoding comes with the step that puts the quorum on sockets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalab.errors import Errors
from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch


@dataclass(frozen=True)
class VoteRequest:
    replica_epoch: int  # the epoch the sender runs in (a pre-vote: its current epoch)
    replica_id: int
    last_offset_epoch: int  # the epoch of the last record in its log
    last_offset: int  # its log end offset
    pre_vote: bool = False  # KIP-996: a vote that changes nobody's state
    cluster_id: str | None = None


@dataclass(frozen=True)
class VoteResponse:
    error_code: Errors
    leader_id: int  # the responder's known leader, or -1
    leader_epoch: int  # the responder's epoch
    vote_granted: bool


@dataclass(frozen=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    cluster_id: str | None = None


@dataclass(frozen=True)
class BeginQuorumEpochResponse:
    error_code: Errors
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()  # v1: PreferredCandidates, best first
    cluster_id: str | None = None


@dataclass(frozen=True)
class EndQuorumEpochResponse:
    error_code: Errors
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    cluster_id: str | None = None


@dataclass(frozen=True)
class FetchResponse:
    error_code: Errors
    leader_id: int  # CurrentLeader.LeaderId
    leader_epoch: int  # CurrentLeader.LeaderEpoch
    high_watermark: int = -1
    diverging_epoch: OffsetAndEpoch | None = None  # DivergingEpoch {EndOffset, Epoch}
    records: tuple[LogEntry, ...] = ()
    snapshot_id: OffsetAndEpoch | None = None  # SnapshotId: fetch this snapshot instead


@dataclass(frozen=True)
class FetchSnapshotRequest:
    """A follower asks for `max_bytes` of the snapshot `snapshot_id` from `position`."""

    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = 0x7FFFFFFF
    cluster_id: str | None = None


@dataclass(frozen=True)
class FetchSnapshotResponse:
    error_code: Errors
    leader_id: int  # CurrentLeader.LeaderId
    leader_epoch: int  # CurrentLeader.LeaderEpoch
    snapshot_id: OffsetAndEpoch = OffsetAndEpoch(-1, -1)
    size: int = -1  # the whole snapshot's size in bytes
    position: int = -1  # where `data` starts in it
    data: bytes = b""  # UnalignedRecords: a slice, not cut at a batch boundary


@dataclass(frozen=True)
class ReplicaState:
    """DescribeQuorumResponse's ReplicaState (v1 fields, KIP-836)."""

    replica_id: int
    log_end_offset: int  # -1 if unknown
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True)
class DescribeQuorumResponse:
    """What DescribeQuorum answers for the metadata partition; a voter that is not the
    leader answers NOT_LEADER_OR_FOLLOWER with the leader and epoch it knows."""

    error_code: Errors
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = field(default_factory=tuple)


RaftRequestData = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponseData = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)


@dataclass(frozen=True)
class RaftMessage:
    """One request or response on its way between two voters."""

    correlation_id: int
    source_id: int
    destination_id: int
    data: RaftRequestData | RaftResponseData

    @property
    def is_request(self) -> bool:
        return isinstance(
            self.data,
            VoteRequest
            | BeginQuorumEpochRequest
            | EndQuorumEpochRequest
            | FetchRequest
            | FetchSnapshotRequest,
        )
