"""The group coordinator on the shared runtime core (kafkalab.coordinator.runtime):
what its pending appends wait for and what its deadlines are for, as types.

    AppendKind, *Append      an append to __consumer_offsets that a request waits
                             for, and what to do once it commits or fails
    TimerKind, TimerKey      a deadline: which kind, for which group and member

and the names the group modules share (the classic group states, the empty
member id).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkalab.coordinator.group.classic_group import ClassicGroup, GroupState
from kafkalab.coordinator.group.coordinator_records import GroupMetadataRecord, OffsetAndMetadata
from kafkalab.coordinator.runtime import PendingAppend

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
UNKNOWN_MEMBER_ID = ""
TopicPartition = tuple[str, int]


class AppendKind(enum.Enum):
    """What waits for an append to __consumer_offsets to commit."""

    SYNC = "sync"  # the leader's SyncGroup: the generation's assignment
    STATIC_REJOIN = "static"  # a restarted static member's new id, in a Stable group
    OFFSETS = "offsets"  # OffsetCommit
    TXN_OFFSETS = "txn_offsets"  # TxnOffsetCommit
    CONSUMER_GROUP = "consumer_group"  # a KIP-848 group's records (undone if not written)


@dataclass(frozen=True)
class SyncAppend:
    group: ClassicGroup
    record: GroupMetadataRecord  # the generation with its assignment, replayed once written


@dataclass(frozen=True)
class StaticRejoinAppend:
    group: ClassicGroup
    record: GroupMetadataRecord  # the member's new id, replayed once written
    instance_id: str
    old_id: str
    new_id: str
    saved: tuple[list[tuple[str, bytes]], int, int]  # protocols and timeouts to restore
    current_leader: str | None


@dataclass(frozen=True)
class OffsetsAppend:
    group: ClassicGroup
    to_write: dict[TopicPartition, OffsetAndMetadata]
    too_large: frozenset[TopicPartition]
    producer_id: int = -1  # >= 0: a TxnOffsetCommit of this producer


@dataclass(frozen=True)
class ConsumerGroupAppend:
    """A KIP-848 group's records, already replayed into the group; if the append
    fails, the group is rebuilt from what the log holds (ConsumerGroupManager)."""

    group_id: str


AppendPayload = SyncAppend | StaticRejoinAppend | OffsetsAppend | ConsumerGroupAppend
GroupPendingAppend = PendingAppend[AppendKind, AppendPayload]


class TimerKind(enum.Enum):
    """What a deadline of the group coordinator is for."""

    HEARTBEAT = "heartbeat"  # a classic member's session
    PENDING_MEMBER = "pending"  # a member id handed out by MEMBER_ID_REQUIRED, not yet used
    JOIN = "join"  # the end of a join phase (DelayedJoin, InitialDelayedJoin)
    SYNC = "sync"  # the members that never sent SyncGroup (DelayedSync)
    CONSUMER_SESSION = "cg_session"  # a KIP-848 member's session
    CONSUMER_REVOCATION = "cg_revocation"  # a KIP-848 member's revocation timeout
    EXPIRE_OFFSETS = "expire_offsets"  # offsets.retention.check.interval.ms


@dataclass(frozen=True)
class TimerKey:
    kind: TimerKind
    group_id: str = ""
    member_id: str = ""


EXPIRE_OFFSETS = TimerKey(TimerKind.EXPIRE_OFFSETS)
