"""What the group coordinator answers, and the effects it asks its caller to carry out.

The coordinator is sans-IO: it never writes to a log, answers a socket or sleeps.
Each call returns an `Effects` list of:

    Respond(request, result)     answer the request whose handle is `request` with
                                 `result` (one of the *Result types below). A
                                 JoinGroup or SyncGroup that must wait is answered by
                                 a later call's effects, with the handle it came with
                                 (Kafka: the DelayedJoin / DelayedSync purgatories).
    AppendRecords(partition, records, timestamp_ms, append_id[, producer_id, producer_epoch])
                                 append these (key, value) records to
                                 __consumer_offsets-<partition> as one batch
                                 (transactional when a producer id is given), with
                                 acks=all; when the append is acknowledged (or failed),
                                 call `coordinator.append_completed(append_id, error,
                                 now_ms)`. append_id None: nothing waits for it
                                 (tombstones, an empty generation), as in Kafka.

Timers are deadlines kept inside the coordinator: `next_deadline_ms()` says when
the next one is due and `tick(now_ms)` fires every due one (every other call
also fires those due at its `now_ms` first, since that time has passed).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kafkalab.errors import Errors

TopicPartition = tuple[str, int]
ResultT_co = TypeVar("ResultT_co", covariant=True)


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error: Errors
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()  # only the leader gets them
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatResult:
    error: Errors


@dataclass(frozen=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True)
class LeaveGroupResult:
    """LeaveGroup v3+ answers per member; v0-v2 (one member) put that member's
    error at the top level, which the broker adapter does."""

    error: Errors
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True)
class OffsetCommitResult:
    partitions: dict[TopicPartition, Errors]


@dataclass(frozen=True)
class CommitOffset:
    """One partition of an OffsetCommit request."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True)
class PartitionOffset:
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str = ""
    error: Errors = Errors.NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    error: Errors
    partitions: dict[TopicPartition, PartitionOffset] = field(default_factory=dict)


@dataclass(frozen=True)
class OffsetDeleteResult:
    error: Errors
    partitions: dict[TopicPartition, Errors] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteGroupsResult:
    groups: dict[str, Errors]


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    """DescribeGroups for one group. Metadata and assignments are filled only in
    Stable; an unknown group is described as Dead with no members (Kafka does so)."""

    error: Errors
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class ListGroupsResult:
    error: Errors
    groups: tuple[ListedGroup, ...] = ()


# -- effects ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Respond(Generic[ResultT_co]):
    """Answer the request whose handle is `request` with `result`: one of the
    *Result types of the coordinator that made it (None: an answer with no body,
    as WriteTxnMarkers' end of a transaction)."""

    request: Hashable
    result: ResultT_co


@dataclass(frozen=True)
class AppendRecords:
    """With a producer id (TxnOffsetCommit), the records go as a transactional
    batch of that producer and epoch, as Kafka writes them: the transaction's
    COMMIT or ABORT marker, written later into the same partition, ends them."""

    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]
    timestamp_ms: int
    append_id: int | None
    producer_id: int = -1
    producer_epoch: int = -1

    @property
    def is_transactional(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True)
class TxnMarker:
    """Loading a state topic partition: the COMMIT (committed=True) or ABORT marker
    that ends a producer's transaction there. Transactional records come to
    `complete_load` as (key, value, producer_id); plain ones as (key, value)."""

    producer_id: int
    committed: bool


class Effects(list[object]):
    """The effects of one call, in order: Respond, AppendRecords and, from the
    transaction coordinator, its own kinds. `response` is the answer to the call's
    own request (of the call's result type), or None while it waits."""

    def __init__(self, request: Hashable | None = None) -> None:
        super().__init__()
        self.request = request

    @property
    def response(self) -> object:
        for effect in self:
            if isinstance(effect, Respond) and effect.request == self.request:
                return effect.result
        return None

    def responses(self) -> list[Respond[object]]:
        return [e for e in self if isinstance(e, Respond)]

    def appends(self) -> list[AppendRecords]:
        return [e for e in self if isinstance(e, AppendRecords)]
