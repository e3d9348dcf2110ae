"""GroupCoordinator: the classic consumer-group protocol, sans-IO.

Kafka's classes: kafka.coordinator.group.GroupCoordinator (with DelayedJoin,
InitialDelayedJoin, DelayedSync, DelayedHeartbeat) and GroupMetadataManager
(storeGroup, storeOffsets, getOffsets, cleanupGroupMetadata, loading), as in
Kafka 3.x; the Java rewrite (GroupMetadataManager.classicGroup*) answers the same.

A consumer group in five requests:

    JoinGroup   "I am here, these are the protocols (assignors) I support."
                The coordinator waits until every known member has (re)joined (or
                rebalance.timeout.ms passes; an Empty group also waits
                group.initial.rebalance.delay.ms for more members), starts a new
                *generation*, picks the protocol by vote and a *leader*, and answers
                every member; the leader's answer lists all members' metadata.
    SyncGroup   The leader sends everyone's assignment; the coordinator writes the
                group to __consumer_offsets and then hands each member its part.
                Followers' SyncGroups wait for that.
    Heartbeat   "Still alive" (every member, every heartbeat.interval.ms). A member
                silent for session.timeout.ms is removed and the group rebalances;
                REBALANCE_IN_PROGRESS tells members to rejoin.
    LeaveGroup  Leave now instead of waiting for the session to time out.
    OffsetCommit / OffsetFetch   the group's committed positions, kept as records
                in __consumer_offsets.

How a caller (the broker, a notebook, a hypothesis test) drives it: every call
takes `now_ms` and returns `Effects` (see results.py): `Respond` answers a
request (now, or later for a parked Join/Sync), `AppendRecords` asks for a write
to __consumer_offsets and `append_completed(append_id, error, now_ms)` reports
it back. Deadlines (session timeouts, join and sync phases, the initial delay,
offset expiry) fire in `tick(now_ms)`; `next_deadline_ms()` says when to call it.

The broker adapter, in a few lines:

    effects = coordinator.join_group(group_id, member_id, ..., now_ms=now, request=fut)
    for e in effects:
        if isinstance(e, Respond):        e.request.set_result(e.result)
        elif isinstance(e, AppendRecords): append with acks=all, then
                                          coordinator.append_completed(e.append_id, err, now)
    re-arm one timer for coordinator.next_deadline_ms() that calls tick()

Partitions: the coordinator serves the groups whose __consumer_offsets partition
it leads. `on_become_leader(p)` starts loading (requests for its groups get
COORDINATOR_LOAD_IN_PROGRESS), `complete_load(p, records, now_ms)` replays the
partition's records into groups and offsets (the log is the state, as the
metadata log is the controller's), `on_resign(p)` unloads them (NOT_COORDINATOR:
clients find the new coordinator). Built with `partitions=None` it owns every
partition at once, which is what a notebook wants.

Where kafkalab differs from Kafka (each to leave no request unanswered): a
parked JoinGroup or SyncGroup superseded by a newer one from the same member is
answered REBALANCE_IN_PROGRESS (Kafka drops it), and a member removed while its
SyncGroup waits gets UNKNOWN_MEMBER_ID. Ties in the protocol vote go to the
alphabetically first protocol (Kafka: HashMap order).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from kafkalab.coordinator.group import consumer_group_records as cgrec
from kafkalab.coordinator.group import coordinator_records as rec
from kafkalab.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupMember,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    MemberState,
)
from kafkalab.coordinator.group.coordinator_records import (
    GroupKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    OtherKey,
    partition_for,
)
from kafkalab.coordinator.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from kafkalab.coordinator.group.group_metadata import GroupMetadata, GroupState
from kafkalab.coordinator.group.member_metadata import MemberMetadata
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    DeleteGroupsResult,
    DescribedGroup,
    DescribedMember,
    Effects,
    HeartbeatResult,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    ListGroupsResult,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionOffset,
    Respond,
    SyncGroupResult,
    TxnMarker,
)
from kafkalab.coordinator.group.server_assignors import SERVER_ASSIGNORS
from kafkalab.coordinator.runtime import (
    CoordinatorRuntimeCore,
    CoordinatorState,
    PendingAppend,
    request_handle,
)
from kafkalab.errors import Errors
from kafkalab.protocol.consumer_protocol import PROTOCOL_TYPE

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
UNKNOWN_MEMBER_ID = ""
TopicPartition = tuple[str, int]

# APIs that accept the empty group id (Kafka: isValidGroupId)
_EMPTY_ID_OK = {"offset_commit", "offset_fetch", "describe_groups", "delete_groups"}
# how complete_load receives a state topic's records: a plain record, a record of a
# transactional batch (with its producer id), or the marker ending a transaction
LoadedRecord = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int] | TxnMarker
)


def default_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's member ids: `<group.instance.id or client.id>-<UUID>`."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"


def store_group_error(error: Errors) -> Errors:
    """What a failed write of the group record becomes for the client (Kafka: storeGroup)."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error == Errors.REQUEST_TIMED_OUT:
        return Errors.REBALANCE_IN_PROGRESS
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


def store_offsets_error(error: Errors) -> Errors:
    """What a failed write of offset records becomes for the client (Kafka: storeOffsets)."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error


@dataclass
class _JoinPhase:
    """The pending end of a join phase (Kafka: DelayedJoin / InitialDelayedJoin)."""

    initial: bool
    delay_ms: int = 0
    remaining_ms: int = 0


class AppendKind(enum.Enum):
    """What waits for an append to __consumer_offsets to commit."""

    SYNC = "sync"  # the leader's SyncGroup: the generation's assignment
    STATIC_REJOIN = "static"  # a restarted static member's new id, in a Stable group
    OFFSETS = "offsets"  # OffsetCommit
    TXN_OFFSETS = "txn_offsets"  # TxnOffsetCommit


@dataclass(frozen=True)
class SyncAppend:
    group: GroupMetadata
    generation: int
    assignment: dict[str, bytes]


@dataclass(frozen=True)
class StaticRejoinAppend:
    group: GroupMetadata
    instance_id: str
    old_id: str
    new_id: str
    saved: tuple[list[tuple[str, bytes]], int, int]  # protocols and timeouts to restore
    current_leader: str | None


@dataclass(frozen=True)
class OffsetsAppend:
    group: GroupMetadata
    to_write: dict[TopicPartition, OffsetAndMetadata]
    too_large: frozenset[TopicPartition]
    producer_id: int = -1  # >= 0: a TxnOffsetCommit of this producer


AppendPayload = SyncAppend | StaticRejoinAppend | OffsetsAppend
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


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        partitions: Iterable[int] | None = None,
        member_id_factory: Callable[[str, str | None], str] = default_member_id,
    ) -> None:
        self.config = config or GroupConfig()
        n = self.config.offsets_topic_num_partitions
        # the partitions served, the appends waiting to commit, the deadlines
        self.runtime = CoordinatorRuntimeCore[AppendKind, AppendPayload, TimerKey](
            range(n) if partitions is None else partitions
        )
        self.groups: dict[str, GroupMetadata] = {}
        self.member_id_factory = member_id_factory
        self._revocation_epochs: dict[tuple[str, str], int] = {}
        self._join_phases: dict[str, _JoinPhase] = {}
        self._sync_generation: dict[str, int] = {}
        # KIP-848 consumer groups, and the topic metadata their assignors need
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.partitions_per_topic: dict[str, int] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}

    @property
    def partitions(self) -> CoordinatorRuntimeCore[AppendKind, AppendPayload, TimerKey]:
        """Which __consumer_offsets partitions are served (owned, loading, status)."""
        return self.runtime

    # ======================================================================================
    # time
    # ======================================================================================

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has something to do (None: nothing scheduled)."""
        return self.runtime.next_deadline_ms()

    def tick(self, now_ms: int) -> Effects:
        """Fire every deadline due at `now_ms`, earliest first."""
        effects = Effects()
        self._fire_due(now_ms, effects)
        return effects

    def _schedule(self, key: TimerKey, at_ms: int) -> None:
        self.runtime.schedule(key, at_ms)

    def _cancel(self, key: TimerKey) -> None:
        self.runtime.cancel(key)

    def _fire_due(self, now_ms: int, effects: Effects) -> None:
        self.runtime.schedule_if_absent(
            EXPIRE_OFFSETS, now_ms + self.config.offsets_retention_check_interval_ms
        )
        self.runtime.fire_due(now_ms, lambda key, at: self._fire(key, at, effects))

    def _fire(self, key: TimerKey, at: int, effects: Effects) -> None:
        group_id, member_id = key.group_id, key.member_id
        match key.kind:
            case TimerKind.HEARTBEAT:
                self._on_expire_heartbeat(group_id, member_id, at, effects)
            case TimerKind.PENDING_MEMBER:
                self._on_expire_pending_member(group_id, member_id, at, effects)
            case TimerKind.JOIN:
                self._on_join_deadline(group_id, at, effects)
            case TimerKind.SYNC:
                self._on_expire_pending_sync(group_id, at, effects)
            case TimerKind.CONSUMER_SESSION:
                self._fence_consumer_group_member(group_id, member_id, None, at, effects)
            case TimerKind.CONSUMER_REVOCATION:
                epoch = self._revocation_epochs.pop((group_id, member_id), None)
                if epoch is not None:
                    self._fence_consumer_group_member(group_id, member_id, epoch, at, effects)
            case TimerKind.EXPIRE_OFFSETS:
                self.expire_offsets(at, effects)
                self._schedule(key, at + self.config.offsets_retention_check_interval_ms)

    def _begin(self, now_ms: int, request: Hashable | None) -> Effects:
        effects = Effects(request_handle(request))
        self._fire_due(now_ms, effects)
        return effects

    def _end(self, effects: Effects, now_ms: int) -> Effects:
        self._fire_due(now_ms, effects)  # zero delays (group.initial.rebalance.delay.ms=0)
        return effects

    # ======================================================================================
    # ownership of __consumer_offsets partitions
    # ======================================================================================

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def _validate_group_status(self, group_id: str | None, api: str) -> Errors | None:
        if group_id is None or (group_id == "" and api not in _EMPTY_ID_OK):
            return Errors.INVALID_GROUP_ID
        return self.partitions.status(self.partition_for(group_id))

    def on_become_leader(self, partition: int, epoch: int = 0) -> Effects:
        """This broker now leads __consumer_offsets-<partition>: load it (Kafka:
        onElection). Until `complete_load`, its groups answer COORDINATOR_LOAD_IN_PROGRESS.
        Groups still cached from an earlier term are dropped first: the log decides."""
        effects = Effects()
        if not self.partitions.begin_load(partition, epoch):
            return effects
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self._unload(self.groups.pop(group_id), effects)
        self._unload_consumer_groups(partition)
        return effects

    def complete_load(
        self, partition: int, records: Iterable[LoadedRecord], now_ms: int
    ) -> Effects:
        """Replay the partition's records, oldest first, into groups and offsets
        (Kafka: GroupMetadataManager.loadGroupsAndOffsets). The latest record per key
        wins; a null value (tombstone) deletes.

        Transactional offset records, (key, value, producer_id), wait for the marker
        that ends their transaction: a COMMIT (TxnMarker) makes them committed unless
        a later plain commit of the partition is already in the log before it; an ABORT
        drops them; with no marker yet they stay pending, as TxnOffsetCommit left them.

        A load that finishes after the partition was resigned (or re-elected: a newer
        load runs) is stale: nothing is applied and the partition stays unserved."""
        if self.runtime.state(partition) is not CoordinatorState.LOADING:
            return Effects()
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        seqs: dict[str, dict[TopicPartition, int]] = {}  # log order of each committed offset
        pending: dict[int, dict[str, dict[TopicPartition, tuple[OffsetAndMetadata, int]]]] = {}
        groups: dict[str, GroupMetadataRecord] = {}
        removed: set[str] = set()
        consumer_groups: dict[str, ConsumerGroup] = {}
        for item in records:
            if isinstance(item, TxnMarker):
                ended = pending.pop(item.producer_id, {})
                for group_id, by_tp in ended.items() if item.committed else ():
                    for tp, (om, seq) in by_tp.items():
                        if seq > seqs.get(group_id, {}).get(tp, 0):
                            offsets.setdefault(group_id, {})[tp] = om
                            seqs.setdefault(group_id, {})[tp] = seq
                continue
            key, value = item[0], item[1]
            producer_id = item[2] if len(item) > 2 else -1
            if key is None:
                continue
            k = rec.read_key(key)
            if isinstance(k, OtherKey):
                if k.version in cgrec.CONSUMER_GROUP_RECORD_TYPES:
                    self._replay_consumer_group_record(consumer_groups, key, value)
            elif isinstance(k, OffsetKey):
                tp = (k.topic, k.partition)
                seq = self.runtime.next_sequence()  # log order, below every later append
                if producer_id >= 0:
                    by_tp = pending.setdefault(producer_id, {}).setdefault(k.group, {})
                    if value is None:
                        by_tp.pop(tp, None)
                    else:
                        by_tp[tp] = (rec.read_offset_value(value), seq)
                elif value is None:
                    offsets.get(k.group, {}).pop(tp, None)
                    seqs.get(k.group, {}).pop(tp, None)
                else:
                    offsets.setdefault(k.group, {})[tp] = rec.read_offset_value(value)
                    seqs.setdefault(k.group, {})[tp] = seq
            elif isinstance(k, GroupKey):
                if value is None:
                    groups.pop(k.group, None)
                    removed.add(k.group)
                else:
                    groups[k.group] = rec.read_group_value(value)
                    removed.discard(k.group)
        pending_groups = {g for by_group in pending.values() for g, o in by_group.items() if o}
        for group_id in set(groups) | {g for g, o in offsets.items() if o} | pending_groups:
            if self.partition_for(group_id) != partition:
                continue
            group = self._group_from_record(group_id, groups.get(group_id), now_ms)
            group.offsets = dict(offsets.get(group_id, {}))
            group.offset_append_seq = dict(seqs.get(group_id, {}))
            for producer_id, by_group in pending.items():
                if by_group.get(group_id):
                    group.pending_transactional_offset_commits[producer_id] = dict(
                        by_group[group_id]
                    )
            self.groups[group_id] = group
        for group_id, cg in consumer_groups.items():
            if self.partition_for(group_id) != partition:
                continue
            wanted = cg.subscribed_topics()
            cg.subscription_metadata = {
                t: n for t, n in self.partitions_per_topic.items() if t in wanted
            }
            self.consumer_groups[group_id] = cg
            for member in cg.members.values():
                self._schedule(
                    TimerKey(TimerKind.CONSUMER_SESSION, group_id, member.member_id),
                    now_ms + self.config.group_consumer_session_timeout_ms,
                )
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_revocation(group_id, member, now_ms)
        self.runtime.complete_load(partition)
        return self.tick(now_ms)

    def _replay_consumer_group_record(
        self, groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None
    ) -> None:
        """Apply one KIP-848 record (Kafka: GroupMetadataManager.replay)."""
        k = cgrec.decode_key(key)
        names = {self._topic_id(t): t for t in self.partitions_per_topic}
        names.update({tid: name for name, tid in self.topic_ids.items()})
        group = groups.get(k.group_id)
        if k.type == cgrec.GROUP_METADATA:
            if value is None:
                groups.pop(k.group_id, None)
                return
            group = groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
            group.group_epoch = cgrec.decode_value(k.type, value)["epoch"]
            return
        if k.type == cgrec.PARTITION_METADATA:
            return
        if group is None:
            if value is None:
                return
            group = groups[k.group_id] = ConsumerGroup(k.group_id)
        if k.type == cgrec.TARGET_ASSIGNMENT_METADATA:
            if value is not None:
                group.assignment_epoch = cgrec.decode_value(k.type, value)["assignment_epoch"]
            return
        if k.type == cgrec.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                group.target.pop(k.member_id, None)
            else:
                d = cgrec.decode_value(k.type, value)
                group.target[k.member_id] = cgrec.from_topic_partitions(
                    d["topic_partitions"], names
                )
            return
        if value is None:
            if k.type == cgrec.MEMBER_METADATA:
                group.members.pop(k.member_id, None)
            return
        member = group.members.setdefault(k.member_id, ConsumerGroupMember(k.member_id))
        d = cgrec.decode_value(k.type, value)
        if k.type == cgrec.MEMBER_METADATA:
            member.instance_id, member.rack_id = d["instance_id"], d["rack_id"]
            member.client_id, member.client_host = d["client_id"], d["client_host"]
            member.subscribed_topic_names = frozenset(d["subscribed_topic_names"])
            member.rebalance_timeout_ms = d["rebalance_timeout_ms"]
            member.server_assignor = d["server_assignor"]
        else:  # CURRENT_MEMBER_ASSIGNMENT
            member.member_epoch = d["member_epoch"]
            member.previous_member_epoch = d["previous_member_epoch"]
            by_byte = {v: name for name, v in cgrec.STATE_BYTES.items()}
            member.state = MemberState(by_byte.get(d["state"], "stable"))
            member.assigned = cgrec.from_topic_partitions(d["assigned_partitions"], names)
            member.pending_revocation = cgrec.from_topic_partitions(
                d["partitions_pending_revocation"], names
            )

    def _group_from_record(
        self, group_id: str, r: GroupMetadataRecord | None, now_ms: int
    ) -> GroupMetadata:
        if r is None:  # offsets only: a group that uses Kafka just to store offsets
            return GroupMetadata(group_id, EMPTY, now_ms)
        group = GroupMetadata(
            group_id,
            STABLE if r.members else EMPTY,
            r.current_state_timestamp,
            protocol_type=r.protocol_type or None,
            protocol_name=r.protocol,
            generation_id=r.generation,
            leader_id=r.leader if r.members else None,
        )
        for m in r.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                r.protocol_type,
                [(r.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
            self._schedule_heartbeat(group, member, now_ms)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def on_resign(self, partition: int, epoch: int | None = None) -> Effects:
        """This broker no longer leads the partition: unload its groups (Kafka:
        onResignation). Parked requests get NOT_COORDINATOR."""
        effects = Effects()
        if not self.partitions.resign(partition, epoch):
            return effects
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self._unload(self.groups.pop(group_id), effects)
        self._unload_consumer_groups(partition)
        return effects

    def _unload_consumer_groups(self, partition: int | None) -> None:
        for group_id in [
            g for g in self.consumer_groups if partition in (None, self.partition_for(g))
        ]:
            group = self.consumer_groups.pop(group_id)
            group.dead = True
            for member_id in group.members:
                self._cancel_cg_deadlines(group_id, member_id)

    def shutdown(self) -> Effects:
        """The broker stops: every group unloaded, every request refused."""
        effects = Effects()
        for group in list(self.groups.values()):
            self._unload(group, effects)
        self.groups.clear()
        self._unload_consumer_groups(None)
        self.runtime.close()
        self._revocation_epochs.clear()
        return effects

    def _unload(self, group: GroupMetadata, effects: Effects) -> None:
        group.transition_to(DEAD, group.state_timestamp_ms)
        for member in group.members.values():
            self._answer_join(
                group, member, JoinGroupResult(Errors.NOT_COORDINATOR, member.member_id), effects
            )
            self._answer_sync(member, SyncGroupResult(Errors.NOT_COORDINATOR), effects)
            self._cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        for member_id in group.pending_members:
            self._cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        self._cancel(TimerKey(TimerKind.JOIN, group.group_id))
        self._cancel(TimerKey(TimerKind.SYNC, group.group_id))
        self._join_phases.pop(group.group_id, None)

    # ======================================================================================
    # answering parked requests
    # ======================================================================================

    @staticmethod
    def _answer_join(
        group: GroupMetadata, member: MemberMetadata, result: JoinGroupResult, effects: Effects
    ) -> bool:
        if member.join_request is None:
            return False
        effects.append(Respond(member.join_request, result))
        member.join_request = None
        return True

    @staticmethod
    def _answer_sync(member: MemberMetadata, result: SyncGroupResult, effects: Effects) -> bool:
        if member.sync_request is None:
            return False
        effects.append(Respond(member.sync_request, result))
        member.sync_request = None
        return True

    @staticmethod
    def _await_join(member: MemberMetadata, request: Hashable, effects: Effects) -> None:
        if member.join_request is not None and member.join_request != request:
            effects.append(
                Respond(
                    member.join_request,
                    JoinGroupResult(Errors.REBALANCE_IN_PROGRESS, member.member_id),
                )
            )
        member.join_request = request

    @staticmethod
    def _await_sync(member: MemberMetadata, request: Hashable, effects: Effects) -> None:
        if member.sync_request is not None and member.sync_request != request:
            effects.append(
                Respond(member.sync_request, SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
            )
        member.sync_request = request

    # ======================================================================================
    # heartbeats and session timeouts
    # ======================================================================================

    def _schedule_heartbeat(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        now_ms: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Kafka: completeAndScheduleNextHeartbeatExpiration."""
        at = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        member.heartbeat_deadline_ms = at
        self._schedule(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id), at)

    def _on_expire_heartbeat(
        self, group_id: str, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD) or not group.has(member_id):
            return
        member = group.get(member_id)
        member.heartbeat_deadline_ms = None
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # members waiting in a rebalance need not heartbeat
        self._remove_member_and_update_group(group, member, now_ms, effects)

    def _on_expire_pending_member(
        self, group_id: str, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return
        self._remove_pending_member_and_update_group(group, member_id, now_ms, effects)

    def _remove_pending_member_and_update_group(
        self, group: GroupMetadata, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group.pending_members.discard(member_id)
        self._cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        if group.is_(PREPARING):
            self._check_join(group, now_ms, effects)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int, effects: Effects
    ) -> None:
        """Kafka: removeMemberAndUpdateGroup. A waiting JoinGroup is answered with
        UNKNOWN_MEMBER_ID so that a live client rejoins as a new member."""
        self._answer_join(
            group, member, JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID), effects
        )
        self._answer_sync(member, SyncGroupResult(Errors.UNKNOWN_MEMBER_ID), effects)
        group.remove(member.member_id)
        self._cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, now_ms, effects)
        elif group.is_(PREPARING):
            self._check_join(group, now_ms, effects)

    # ======================================================================================
    # rebalances
    # ======================================================================================

    def _maybe_prepare_rebalance(self, group: GroupMetadata, now_ms: int, effects: Effects) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms, effects)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, effects: Effects) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS, effects)
        self._cancel(TimerKey(TimerKind.SYNC, group.group_id))
        self._sync_generation.pop(group.group_id, None)
        if group.is_(EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            phase = _JoinPhase(True, delay, max(group.rebalance_timeout_ms() - delay, 0))
            self._schedule(TimerKey(TimerKind.JOIN, group.group_id), now_ms + delay)
        else:
            phase = _JoinPhase(False)
            self._schedule(
                TimerKey(TimerKind.JOIN, group.group_id), now_ms + group.rebalance_timeout_ms()
            )
        self._join_phases[group.group_id] = phase
        group.transition_to(PREPARING, now_ms)
        self._check_join(group, now_ms, effects)

    def _check_join(self, group: GroupMetadata, now_ms: int, effects: Effects) -> None:
        """Kafka: rebalancePurgatory.checkAndComplete(GroupJoinKey): a DelayedJoin
        completes once every member has rejoined; an InitialDelayedJoin never early."""
        phase = self._join_phases.get(group.group_id)
        if phase is None or phase.initial or not group.is_(PREPARING):
            return
        if group.has_all_members_joined():
            self._cancel(TimerKey(TimerKind.JOIN, group.group_id))
            self._on_complete_join(group, now_ms, effects)

    def _on_join_deadline(self, group_id: str, now_ms: int, effects: Effects) -> None:
        group = self.groups.get(group_id)
        phase = self._join_phases.get(group_id)
        if group is None or phase is None:
            return
        if phase.initial and group.new_member_added and phase.remaining_ms != 0:
            # members keep arriving: wait again, but never past rebalance.timeout.ms
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, phase.remaining_ms)
            self._join_phases[group_id] = _JoinPhase(
                True, delay, max(phase.remaining_ms - delay, 0)
            )
            self._schedule(TimerKey(TimerKind.JOIN, group_id), now_ms + delay)
            return
        self._on_complete_join(group, now_ms, effects)

    def _on_complete_join(self, group: GroupMetadata, now_ms: int, effects: Effects) -> None:
        """Kafka: onCompleteJoin. Dynamic members that did not rejoin are dropped;
        a new generation starts and every waiting JoinGroup is answered."""
        self._join_phases.pop(group.group_id, None)
        self._cancel(TimerKey(TimerKind.JOIN, group.group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self._cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that have not rejoined remain: wait for them, or for
            # their sessions to expire
            self._join_phases[group.group_id] = _JoinPhase(False)
            self._schedule(
                TimerKey(TimerKind.JOIN, group.group_id), now_ms + group.rebalance_timeout_ms()
            )
            return
        group.new_member_added = False
        group.init_next_generation(now_ms)
        if group.is_(EMPTY):
            effects.append(self._group_append(group, {}, now_ms, None))
            return
        everyone = tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )
        for member in group.members.values():
            result = JoinGroupResult(
                Errors.NONE,
                member.member_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                group.leader_id or "",
                everyone if group.is_leader(member.member_id) else (),
            )
            self._answer_join(group, member, result, effects)
            self._schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._sync_generation[group.group_id] = group.generation_id
        self._schedule(
            TimerKey(TimerKind.SYNC, group.group_id), now_ms + group.rebalance_timeout_ms()
        )

    def _on_expire_pending_sync(self, group_id: str, now_ms: int, effects: Effects) -> None:
        """Kafka: onExpirePendingSync. Members that never sent SyncGroup are removed."""
        group = self.groups.get(group_id)
        generation = self._sync_generation.pop(group_id, None)
        if group is None or generation != group.generation_id:
            return
        if group.state in (COMPLETING, STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                member = group.get(member_id)
                self._answer_join(
                    group,
                    member,
                    JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID),
                    effects,
                )
                group.remove(member_id)
                self._cancel(TimerKey(TimerKind.HEARTBEAT, group_id, member_id))
            self._prepare_rebalance(group, now_ms, effects)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (COMPLETING, STABLE) and not group.pending_sync_members:
            self._cancel(TimerKey(TimerKind.SYNC, group.group_id))
            self._sync_generation.pop(group.group_id, None)

    def _reset_and_propagate_assignment_error(
        self, group: GroupMetadata, error: Errors, effects: Effects
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        for member in group.members.values():
            self._answer_sync(member, SyncGroupResult(error), effects)

    def _set_and_propagate_assignment(
        self, group: GroupMetadata, assignment: dict[str, bytes], now_ms: int, effects: Effects
    ) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        for member in group.members.values():
            result = SyncGroupResult(
                Errors.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
            if self._answer_sync(member, result, effects):
                self._schedule_heartbeat(group, member, now_ms)

    # ======================================================================================
    # writes to __consumer_offsets
    # ======================================================================================

    def _group_record(
        self, group: GroupMetadata, assignment: dict[str, bytes], now_ms: int
    ) -> GroupMetadataRecord:
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name) if group.protocol_name else b"",
                assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        return GroupMetadataRecord(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
            members,
        )

    def _group_append(
        self,
        group: GroupMetadata,
        assignment: dict[str, bytes],
        now_ms: int,
        waiting: tuple[AppendKind, Hashable, SyncAppend | StaticRejoinAppend] | None,
    ) -> AppendRecords:
        """The group record; `waiting` (kind, request, payload): what its commit answers."""
        value = rec.group_metadata_value(self._group_record(group, assignment, now_ms))
        partition = self.partition_for(group.group_id)
        append_id = None
        if waiting is not None:
            append_id = self.runtime.add_append(waiting[0], partition, waiting[1], waiting[2])
        return AppendRecords(
            partition, ((rec.group_metadata_key(group.group_id), value),), now_ms, append_id
        )

    def append_completed(
        self, append_id: int, error: Errors | int = Errors.NONE, now_ms: int = 0
    ) -> Effects:
        """The append asked for by AppendRecords(append_id) is acknowledged (error
        NONE, after acks=all) or failed with `error`."""
        effects = self._begin(now_ms, None)
        pending = self.runtime.take_append(append_id)
        if pending is None:
            return self._end(effects, now_ms)
        error = Errors(error)
        payload = pending.payload
        if isinstance(payload, SyncAppend):
            self._complete_sync(payload, error, now_ms, effects)
        elif isinstance(payload, StaticRejoinAppend):
            self._complete_static_rejoin(pending, payload, error, now_ms, effects)
        elif pending.kind is AppendKind.OFFSETS:
            self._complete_offset_commit(pending, payload, error, effects)
        else:
            self._complete_txn_offset_commit(pending, payload, error, effects)
        return self._end(effects, now_ms)

    def _live(self, group: GroupMetadata) -> bool:
        """The group an append was for is still the one served (not unloaded, not Dead)."""
        return self.groups.get(group.group_id) is group and not group.is_(DEAD)

    def _complete_sync(
        self, payload: SyncAppend, error: Errors, now_ms: int, effects: Effects
    ) -> None:
        group = payload.group
        if (
            self._live(group)
            and group.is_(COMPLETING)
            and group.generation_id == payload.generation
        ):
            if error != Errors.NONE:
                self._reset_and_propagate_assignment_error(group, store_group_error(error), effects)
                self._maybe_prepare_rebalance(group, now_ms, effects)
            else:
                self._set_and_propagate_assignment(group, payload.assignment, now_ms, effects)
                group.transition_to(STABLE, now_ms)

    # ======================================================================================
    # JoinGroup
    # ======================================================================================

    def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int | None = None,
        group_instance_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        require_known_member_id: bool = True,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """JoinGroup. `require_known_member_id` is true for JoinGroup v4+ (a new
        dynamic member first gets MEMBER_ID_REQUIRED and its id, then rejoins with
        it); `rebalance_timeout_ms` defaults to the session timeout, as for v0."""
        effects = self._begin(now_ms, request)
        request = effects.request
        rebalance_timeout_ms = (
            session_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        )
        protocols = [(name, bytes(meta)) for name, meta in protocols]

        def answer(error: Errors, mid: str = member_id) -> Effects:
            effects.append(Respond(request, JoinGroupResult(error, mid)))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "join_group")
        if error is not None:
            return answer(error)
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return answer(Errors.INVALID_SESSION_TIMEOUT)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and consumer.members:
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)  # a KIP-848 group has this id
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return answer(Errors.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, now_ms)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                group.remove(member_id)
                self._cancel(TimerKey(TimerKind.HEARTBEAT, group_id, member_id))
            effects.append(
                Respond(request, JoinGroupResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            )
        else:
            args = (
                group,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                request,
                now_ms,
                effects,
            )
            if is_unknown:
                self._new_member_join(*args, require_known_member_id)
            else:
                self._current_member_join(member_id, *args)
        if group.is_(PREPARING):
            self._check_join(group, now_ms, effects)
        return self._end(effects, now_ms)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Kafka: acceptJoiningMember (group.max.size)."""
        max_size = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join() < max_size
            )
        return group.has(member_id) or group.size() < max_size

    def _new_member_join(
        self, group, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
        protocol_type, protocols, request, now_ms, effects, require_known_member_id,
    ) -> None:  # fmt: skip
        if group.is_(DEAD):
            effects.append(
                Respond(
                    request, JoinGroupResult(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
                )
            )
            return
        if not group.supports_protocols(protocol_type, protocols):
            effects.append(
                Respond(
                    request, JoinGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
                )
            )
            return
        new_id = self.member_id_factory(client_id, instance_id)
        if instance_id is not None:
            old_id = group.current_static_member_id(instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(
                    group, old_id, new_id, instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, request, now_ms, effects,
                )  # fmt: skip
                return
        elif require_known_member_id:
            group.pending_members.add(new_id)
            self._schedule(
                TimerKey(TimerKind.PENDING_MEMBER, group.group_id, new_id),
                now_ms + session_timeout_ms,
            )
            effects.append(Respond(request, JoinGroupResult(Errors.MEMBER_ID_REQUIRED, new_id)))
            return
        self._add_member_and_rebalance(
            group, new_id, instance_id, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols, request, now_ms, effects,
        )  # fmt: skip

    def _current_member_join(
        self, member_id, group, instance_id, client_id, client_host, rebalance_timeout_ms,
        session_timeout_ms, protocol_type, protocols, request, now_ms, effects,
    ) -> None:  # fmt: skip
        def answer(error: Errors) -> None:
            effects.append(Respond(request, JoinGroupResult(error, member_id)))

        if group.is_(DEAD):
            return answer(Errors.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(protocol_type, protocols):
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            self._cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
            self._add_member_and_rebalance(
                group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, request, now_ms, effects,
            )  # fmt: skip
            return None
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is not None and current != member_id:
                return answer(Errors.FENCED_INSTANCE_ID)
            if current is None:
                return answer(Errors.UNKNOWN_MEMBER_ID)
        if not group.has(member_id):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        member = group.get(member_id)

        def update_and_rebalance() -> None:
            member.protocols = protocols
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.session_timeout_ms = session_timeout_ms
            self._await_join(member, request, effects)
            self._maybe_prepare_rebalance(group, now_ms, effects)

        def current_generation(members: tuple = ()) -> None:
            effects.append(
                Respond(
                    request,
                    JoinGroupResult(
                        Errors.NONE,
                        member_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        group.leader_id or "",
                        members,
                    ),
                )
            )

        if group.is_(PREPARING):
            update_and_rebalance()
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # a retry of a join whose answer was lost: the same answer again
                everyone = tuple(
                    JoinGroupMember(
                        m.member_id, m.group_instance_id, m.metadata(group.protocol_name)
                    )
                    for m in group.members.values()
                )
                current_generation(everyone if group.is_leader(member_id) else ())
            else:
                update_and_rebalance()
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoining forces a rebalance (e.g. topic metadata changed)
                update_and_rebalance()
            else:
                current_generation()
        else:  # Empty: not expected for a known member; let it reset and rejoin
            answer(Errors.UNKNOWN_MEMBER_ID)
        return None

    def _add_member_and_rebalance(
        self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
        session_timeout_ms, protocol_type, protocols, request, now_ms, effects,
    ) -> None:  # fmt: skip
        member = MemberMetadata(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
            join_request=request,
            is_new=True,
        )
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # a new member cannot heartbeat yet; drop it if its join never completes
        self._schedule_heartbeat(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, now_ms, effects)

    def _update_static_member_and_rebalance(
        self, group, old_id, new_id, instance_id, protocols, rebalance_timeout_ms,
        session_timeout_ms, request, now_ms, effects,
    ) -> None:  # fmt: skip
        """A static member rejoins with an empty member id (it restarted): it takes
        its old place under a new id; the old id is fenced. A Stable group whose
        protocol would not change does not rebalance: the member gets the current
        generation back (KIP-345), after the new id is written to the log."""
        current_leader = group.leader_id
        old = group.get(old_id)
        self._answer_join(group, old, JoinGroupResult(Errors.FENCED_INSTANCE_ID, old_id), effects)
        self._answer_sync(old, SyncGroupResult(Errors.FENCED_INSTANCE_ID), effects)
        saved = (list(old.protocols), old.rebalance_timeout_ms, old.session_timeout_ms)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, old_id))
        self._schedule_heartbeat(group, member, now_ms)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_request = request
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                payload = StaticRejoinAppend(
                    group, instance_id, old_id, new_id, saved, current_leader
                )
                waiting = (AppendKind.STATIC_REJOIN, request, payload)
                effects.append(self._group_append(group, assignment, now_ms, waiting))
            else:
                self._maybe_prepare_rebalance(group, now_ms, effects)
        elif group.is_(COMPLETING):
            self._prepare_rebalance(group, now_ms, effects)
        # PreparingRebalance: the member now simply waits with the others

    def _complete_static_rejoin(
        self,
        pending: GroupPendingAppend,
        payload: StaticRejoinAppend,
        error: Errors,
        now_ms: int,
        effects: Effects,
    ) -> None:
        group, instance_id, old_id, new_id = (
            payload.group,
            payload.instance_id,
            payload.old_id,
            payload.new_id,
        )
        saved, current_leader = payload.saved, payload.current_leader
        if not group.has(new_id):
            return
        member = group.get(new_id)
        if member.join_request != pending.request:
            return
        member.join_request = None
        if error != Errors.NONE:
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = saved
            group.replace_static_member(instance_id, new_id, old_id)
            self._cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, new_id))
            self._schedule_heartbeat(group, member, now_ms)
            result = JoinGroupResult(
                store_group_error(error),
                UNKNOWN_MEMBER_ID,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                current_leader or "",
            )
        else:
            # the old leader id is returned on purpose: the rejoined member must not
            # think it leads (a Stable group would not broadcast a new assignment)
            result = JoinGroupResult(
                Errors.NONE,
                new_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                current_leader or "",
            )
        effects.append(Respond(pending.request, result))

    # ======================================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ======================================================================================

    def _member_of_generation(
        self,
        group_id: str,
        api: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> tuple[GroupMetadata | None, Errors | None]:
        """The checks SyncGroup and Heartbeat share, in Kafka's order: the group is
        ours and loaded, exists and is alive, knows this member, and is in the
        generation the member names. (group, None) when all pass."""
        error = self._validate_group_status(group_id, api)
        if error is not None:
            return None, error
        group = self.groups.get(group_id)
        if group is None:
            return None, Errors.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return None, Errors.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return None, error
        if generation_id != group.generation_id:
            return None, Errors.ILLEGAL_GENERATION
        return group, None

    @staticmethod
    def _validate_current_member(
        group: GroupMetadata, member_id: str, instance_id: str | None
    ) -> Errors | None:
        """Kafka: validateCurrentMember. A group.instance.id must map to this member
        id (else FENCED_INSTANCE_ID: another instance took its place); a member id
        must be known (else UNKNOWN_MEMBER_ID)."""
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            if current != member_id:
                return Errors.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return Errors.UNKNOWN_MEMBER_ID
        return None

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        assignments: dict[str, bytes] | None = None,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """SyncGroup. The leader passes every member's assignment; followers pass none
        and wait for the leader's to be written."""
        effects = self._begin(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, SyncGroupResult(error)))
            return self._end(effects, now_ms)

        group, error = self._member_of_generation(
            group_id, "sync_group", member_id, group_instance_id, generation_id
        )
        if error is not None:
            return answer(error)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(EMPTY):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        if group.is_(PREPARING):
            return answer(Errors.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        if group.is_(COMPLETING):
            self._await_sync(member, request, effects)
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                given = {k: bytes(v) for k, v in (assignments or {}).items()}
                assignment = {m: given.get(m, b"") for m in group.members}
                payload = SyncAppend(group, group.generation_id, assignment)
                waiting = (AppendKind.SYNC, request, payload)
                effects.append(self._group_append(group, assignment, now_ms, waiting))
        else:  # Stable: the assignment is already known
            self._remove_pending_sync_member(group, member_id)
            effects.append(
                Respond(
                    request,
                    SyncGroupResult(
                        Errors.NONE, group.protocol_type, group.protocol_name, member.assignment
                    ),
                )
            )
            self._schedule_heartbeat(group, member, now_ms)
        return self._end(effects, now_ms)

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        group_instance_id: str | None = None,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """Heartbeat: resets the member's session timer; REBALANCE_IN_PROGRESS tells
        it to rejoin."""
        effects = self._begin(now_ms, request)

        def answer(error: Errors) -> Effects:
            effects.append(Respond(effects.request, HeartbeatResult(error)))
            return self._end(effects, now_ms)

        group, error = self._member_of_generation(
            group_id, "heartbeat", member_id, group_instance_id, generation_id
        )
        if error is not None:
            return answer(error)
        if group.is_(EMPTY):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        self._schedule_heartbeat(group, group.get(member_id), now_ms)
        return answer(Errors.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else Errors.NONE)

    def leave_group(
        self,
        group_id: str,
        members: list[tuple[str, str | None]],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """LeaveGroup for (member_id, group_instance_id) pairs. An empty member id
        with an instance id removes that static member (the admin's way, KIP-345)."""
        effects = self._begin(now_ms, request)

        def answer(error: Errors, per_member: tuple = ()) -> Effects:
            effects.append(Respond(effects.request, LeaveGroupResult(error, per_member)))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "leave_group")
        if error is not None:
            return answer(error)
        group = self.groups.get(group_id)
        if group is None:
            return answer(
                Errors.NONE,
                tuple(LeaveMemberResult(m, i, Errors.UNKNOWN_MEMBER_ID) for m, i in members),
            )
        if group.is_(DEAD):
            return answer(Errors.COORDINATOR_NOT_AVAILABLE)
        results = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = (
                    group.current_static_member_id(instance_id) if instance_id is not None else None
                )
                if current is None:
                    error = Errors.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current), now_ms, effects)
                    error = Errors.NONE
            elif member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, member_id, now_ms, effects)
                error = Errors.NONE
            elif instance_id is not None and group.current_static_member_id(instance_id) not in (
                None,
                member_id,
            ):
                error = Errors.FENCED_INSTANCE_ID
            elif group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id), now_ms, effects)
                error = Errors.NONE
            else:
                error = Errors.UNKNOWN_MEMBER_ID
            results.append(LeaveMemberResult(member_id, instance_id, error))
        return answer(Errors.NONE, tuple(results))

    # ======================================================================================
    # offsets
    # ======================================================================================

    def commit_offsets(
        self,
        group_id: str,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        expire_timestamp_ms: int | None = None,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """OffsetCommit. Members commit with their generation; generation -1 with no
        member id is a consumer that only stores offsets here (allowed while the group
        is Empty). The answer comes once the records are written."""
        effects = self._begin(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, OffsetCommitResult({tp: error for tp in offsets})))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "offset_commit")
        if error is not None:
            return answer(error)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0 or member_id):
            # a KIP-848 group: members commit with their member epoch
            error = self._validate_consumer_group_commit(consumer, member_id, generation_id)
            if error is not None:
                return answer(error)
            group = self.groups.get(group_id)
            if group is None:  # its offsets live beside it, as an Empty holder
                group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, now_ms)
            self._store_offsets(group, offsets, expire_timestamp_ms, now_ms, request, effects)
            return self._end(effects, now_ms)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return answer(Errors.ILLEGAL_GENERATION)
            group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, now_ms)
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return answer(error)
        if group.is_(COMPLETING):
            return answer(Errors.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            # commits are allowed while rebalancing: the heartbeat tells the member
            self._schedule_heartbeat(group, group.get(member_id), now_ms)
        self._store_offsets(group, offsets, expire_timestamp_ms, now_ms, request, effects)
        return self._end(effects, now_ms)

    @classmethod
    def _validate_offset_commit(cls, group, generation_id, member_id, instance_id) -> Errors | None:
        if group.is_(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = cls._validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
            return None
        if not group.is_(EMPTY):
            return Errors.UNKNOWN_MEMBER_ID  # only members commit to a non-empty group
        return None

    @staticmethod
    def _validate_consumer_group_commit(consumer, member_id, member_epoch) -> Errors | None:
        """Kafka: ConsumerGroup.validateOffsetCommit. Epoch -1 with no members: an
        admin or a consumer without group management; otherwise the member must
        exist and commit at its current epoch (STALE_MEMBER_EPOCH: retry after the
        next heartbeat)."""
        if member_epoch < 0 and not consumer.members:
            return None
        member = consumer.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return None

    def _store_offsets(
        self, group, offsets, expire_timestamp_ms, now_ms, request, effects, producer=None
    ) -> None:
        """Write the offsets (Kafka: storeOffsets). `producer` (id, epoch): a
        TxnOffsetCommit, held pending for that producer until its transaction ends."""
        too_large = {
            tp
            for tp, c in offsets.items()
            if c.metadata is not None and len(c.metadata) > self.config.offset_metadata_max_bytes
        }
        if expire_timestamp_ms is not None:
            # now + a retention_time_ms from the wire: keep it an int64, as the
            # OffsetCommitValue v1 record field is (the fuzzer sent 2^63 - 1)
            expire_timestamp_ms = max(-(2**63), min(expire_timestamp_ms, 2**63 - 1))
        to_write = {
            tp: OffsetAndMetadata(
                c.offset, c.leader_epoch, c.metadata or "", now_ms, expire_timestamp_ms
            )
            for tp, c in offsets.items()
            if tp not in too_large
        }
        if not to_write:
            effects.append(
                Respond(
                    request,
                    OffsetCommitResult({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets}),
                )
            )
            return
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        kind = AppendKind.OFFSETS if producer is None else AppendKind.TXN_OFFSETS
        append_id = self.runtime.add_append(
            kind,
            self.partition_for(group.group_id),
            request,
            OffsetsAppend(group, to_write, frozenset(too_large), producer_id),
        )
        if producer is None:
            for tp in to_write:
                group.pending_offset_commits[tp] = group.pending_offset_commits.get(tp, 0) + 1
        else:  # Kafka: prepareTxnOffsetCommit, before the append
            mine = group.pending_transactional_offset_commits.setdefault(producer_id, {})
            mine.update({tp: (om, append_id) for tp, om in to_write.items()})
        records = tuple(
            (rec.offset_commit_key(group.group_id, t, p), rec.offset_commit_value(om))
            for (t, p), om in to_write.items()
        )
        effects.append(
            AppendRecords(
                self.partition_for(group.group_id),
                records,
                now_ms,
                append_id,
                producer_id,
                producer_epoch,
            )
        )

    def _complete_offset_commit(
        self, pending: GroupPendingAppend, payload: AppendPayload, error: Errors, effects: Effects
    ) -> None:
        assert isinstance(payload, OffsetsAppend)
        group, to_write, too_large = payload.group, payload.to_write, payload.too_large
        seq, live = pending.append_id, self._live(payload.group)
        for tp, om in to_write.items():
            left = group.pending_offset_commits.get(tp, 0) - 1
            if left > 0:
                group.pending_offset_commits[tp] = left
            else:
                group.pending_offset_commits.pop(tp, None)
            if live and error == Errors.NONE and seq > group.offset_append_seq.get(tp, 0):
                group.offsets[tp] = om
                group.offset_append_seq[tp] = seq
        answer = store_offsets_error(error) if error != Errors.NONE else Errors.NONE
        result = {tp: answer for tp in to_write}
        result.update({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in too_large})
        effects.append(Respond(pending.request, OffsetCommitResult(result)))

    def _complete_txn_offset_commit(
        self, pending: GroupPendingAppend, payload: AppendPayload, error: Errors, effects: Effects
    ) -> None:
        """A TxnOffsetCommit's records are written (they stay pending until the
        transaction ends) or failed (Kafka: failPendingTxnOffsetCommit: dropped,
        unless a newer commit of the same producer replaced them meanwhile)."""
        assert isinstance(payload, OffsetsAppend)
        group, to_write, too_large = payload.group, payload.to_write, payload.too_large
        seq, producer_id = pending.append_id, payload.producer_id
        if error != Errors.NONE:
            mine = group.pending_transactional_offset_commits.get(producer_id, {})
            for tp in to_write:
                if tp in mine and mine[tp][1] == seq:
                    del mine[tp]
            if not mine:
                group.pending_transactional_offset_commits.pop(producer_id, None)
        answer = store_offsets_error(error) if error != Errors.NONE else Errors.NONE
        result = {tp: answer for tp in to_write}
        result.update({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in too_large})
        effects.append(Respond(pending.request, OffsetCommitResult(result)))

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        transactional_id: str = "",
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """TxnOffsetCommit: offsets a transactional producer commits for `group_id`
        as part of its transaction (send_offsets_to_transaction). They are written
        now, as a transactional batch of the producer, and stay invisible to
        OffsetFetch until `complete_transaction` (the COMMIT marker) makes them the
        group's committed offsets; an ABORT drops them. v3+ carry the consumer's
        generation and member id, checked as Kafka does (Kafka:
        GroupCoordinator.handleTxnCommitOffsets); unlike OffsetCommit it is allowed
        while the group completes a rebalance."""
        effects = self._begin(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, OffsetCommitResult({tp: error for tp in offsets})))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "txn_offset_commit")
        if error is not None:
            return answer(error)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0 or member_id):
            error = self._validate_consumer_group_commit(consumer, member_id, generation_id)
            if error is not None:  # Kafka answers a stale epoch so for transactions
                return answer(
                    Errors.ILLEGAL_GENERATION if error == Errors.STALE_MEMBER_EPOCH else error
                )
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, EMPTY, now_ms)
        if group.is_(DEAD):
            return answer(Errors.COORDINATOR_NOT_AVAILABLE)
        if consumer is None:
            if group_instance_id is not None:
                current = group.current_static_member_id(group_instance_id)
                if current is not None and current != member_id:
                    return answer(Errors.FENCED_INSTANCE_ID)
            if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
                return answer(Errors.UNKNOWN_MEMBER_ID)
            if generation_id >= 0 and generation_id != group.generation_id:
                return answer(Errors.ILLEGAL_GENERATION)
        self._store_offsets(
            group, offsets, None, now_ms, request, effects, producer=(producer_id, producer_epoch)
        )
        return self._end(effects, now_ms)

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        committed: bool,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """The COMMIT (committed=True) or ABORT marker of `producer_id`'s transaction
        is written to __consumer_offsets-<partition>: its pending transactional
        offsets there become the groups' committed offsets (unless a plain commit of
        the same partition was written after them), or are dropped (Kafka:
        GroupCoordinator.scheduleHandleTxnCompletion, GroupMetadata.
        completePendingTxnOffsetCommit). A partition still loading reads the marker
        from the log itself. Answers None."""
        effects = self._begin(now_ms, request)
        if partition in self.partitions.owned and partition not in self.partitions.loading:
            for group in self.groups.values():
                if self.partition_for(group.group_id) != partition:
                    continue
                ended = group.pending_transactional_offset_commits.pop(producer_id, None)
                for tp, (om, seq) in (ended or {}).items() if committed else ():
                    if seq > group.offset_append_seq.get(tp, 0):
                        group.offsets[tp] = om
                        group.offset_append_seq[tp] = seq
        effects.append(Respond(effects.request, None))
        return self._end(effects, now_ms)

    def pending_transactional_offsets(
        self, group_id: str
    ) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        """What a group's open transactions would commit, by producer id (for labs)."""
        group = self.groups.get(group_id)
        if group is None:
            return {}
        return {
            pid: {tp: om for tp, (om, _) in by_tp.items()}
            for pid, by_tp in group.pending_transactional_offset_commits.items()
        }

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """OffsetFetch: the committed offset of each partition (-1: none); all of
        the group's when `partitions` is None. Reads no clock and changes nothing.
        Offsets of open transactions are not seen; with `require_stable` (OffsetFetch
        v7+, read_committed consumers) a partition with a commit still pending, plain
        or transactional, answers UNSTABLE_OFFSET_COMMIT: the client retries."""
        error = self._validate_group_status(group_id, "offset_fetch")
        if error is not None:
            return OffsetFetchResult(error)
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None and (member_id is not None or member_epoch >= 0):
            # OffsetFetch v9+ from a KIP-848 member carries its id and epoch
            member = consumer.members.get(member_id or "")
            if member is None:
                return OffsetFetchResult(Errors.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch:
                return OffsetFetchResult(Errors.STALE_MEMBER_EPOCH)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return OffsetFetchResult(
                Errors.NONE, {tp: PartitionOffset(-1) for tp in partitions or []}
            )
        wanted = list(group.offsets) if partitions is None else partitions
        out = {}
        for tp in wanted:
            om = group.offsets.get(tp)
            if require_stable and group.has_pending_offset_commits_for(tp):
                out[tp] = PartitionOffset(-1, error=Errors.UNSTABLE_OFFSET_COMMIT)
                continue
            out[tp] = (
                PartitionOffset(-1)
                if om is None
                else PartitionOffset(om.offset, om.leader_epoch, om.metadata)
            )
        return OffsetFetchResult(Errors.NONE, out)

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """OffsetDelete: only for partitions of topics the group does not read
        (GROUP_SUBSCRIBED_TO_TOPIC otherwise), or any partition of an Empty group."""
        effects = self._begin(now_ms, request)

        def answer(error: Errors, per_partition: dict | None = None) -> Effects:
            effects.append(Respond(effects.request, OffsetDeleteResult(error, per_partition or {})))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "offset_delete")
        if error is not None:
            return answer(error)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return answer(Errors.GROUP_ID_NOT_FOUND)
        errors: dict[TopicPartition, Errors] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors = {
                tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible
            }
        else:
            return answer(Errors.NON_EMPTY_GROUP)
        if eligible:
            self._cleanup_group_metadata(
                [group], lambda g: self._remove_offsets(g, eligible), now_ms, effects
            )
            errors.update({tp: Errors.NONE for tp in eligible})
        return answer(Errors.NONE, errors)

    @staticmethod
    def _remove_offsets(
        group: GroupMetadata, partitions: Iterable[TopicPartition]
    ) -> list[TopicPartition]:
        removed = []
        for tp in partitions:
            if group.offsets.pop(tp, None) is not None:
                removed.append(tp)
            group.offset_append_seq.pop(tp, None)
        return removed

    def _cleanup_group_metadata(
        self,
        groups: list[GroupMetadata],
        selector: Callable[[GroupMetadata], list[TopicPartition]],
        now_ms: int,
        effects: Effects,
    ) -> int:
        """Kafka: cleanupGroupMetadata. Remove the selected offsets, write their
        tombstones; an Empty group left with no offsets becomes Dead and (if it ever
        had a generation) gets a tombstone too. Returns how many offsets went."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            removed_total += len(removed)
            if (
                group.is_(EMPTY)
                and not group.offsets
                and not group.pending_transactional_offset_commits
            ):
                group.transition_to(DEAD, now_ms)
            records = [(rec.offset_commit_key(group.group_id, t, p), None) for t, p in removed]
            if group.is_(DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:
                    records.append((rec.group_metadata_key(group.group_id), None))
            if records:
                effects.append(
                    AppendRecords(self.partition_for(group.group_id), tuple(records), now_ms, None)
                )
        return removed_total

    def expire_offsets(self, now_ms: int, effects: Effects | None = None) -> Effects:
        """offsets.retention.minutes: drop committed offsets nobody needs (Kafka:
        removeExpiredOffsets). An Empty group's offsets expire retention after it
        became Empty; a Stable consumer group's, retention after their commit, for
        topics it no longer reads; a group that only stores offsets, retention after
        each commit. Offsets with a pending commit never expire. Runs by itself every
        offsets.retention.check.interval.ms."""
        effects = Effects() if effects is None else effects
        retention = self.config.offsets_retention_ms

        def expired(group: GroupMetadata) -> list[TopicPartition]:
            def select(
                base: Callable[[OffsetAndMetadata], int], keep_topics: set[str]
            ) -> list[TopicPartition]:
                out = []
                for tp, om in group.offsets.items():
                    if tp[0] in keep_topics or tp in group.pending_offset_commits:
                        continue
                    if om.expire_timestamp is not None:
                        if now_ms >= om.expire_timestamp:
                            out.append(tp)
                    elif now_ms - base(om) >= retention:
                        out.append(tp)
                return out

            consumer = self.consumer_groups.get(group.group_id)
            if consumer is not None and consumer.members:
                chosen = select(lambda om: om.commit_timestamp, consumer.subscribed_topics())
            elif group.protocol_type is not None and group.is_(EMPTY):
                since = group.state_timestamp_ms
                chosen = select(lambda om: since if since >= 0 else om.commit_timestamp, set())
            elif (
                group.protocol_type == PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_(STABLE)
            ):
                chosen = select(lambda om: om.commit_timestamp, group.subscribed_topics)
            elif group.protocol_type is None:
                chosen = select(lambda om: om.commit_timestamp, set())
            else:
                chosen = []
            return self._remove_offsets(group, chosen)

        owned = [
            g
            for g in self.groups.values()
            if self.partition_for(g.group_id) in self.partitions.owned
        ]
        self._cleanup_group_metadata(owned, expired, now_ms, effects)
        return effects

    # ======================================================================================
    # groups as a whole
    # ======================================================================================

    def delete_groups(
        self, group_ids: list[str], *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets
        and the group record are tombstoned."""
        effects = self._begin(now_ms, request)
        errors: dict[str, Errors] = {}
        doomed = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, "delete_groups")
            if error is not None:
                errors[group_id] = error
                continue
            consumer = self.consumer_groups.get(group_id)
            if consumer is not None:
                if consumer.members:
                    errors[group_id] = Errors.NON_EMPTY_GROUP
                    continue
                del self.consumer_groups[group_id]
                consumer.dead = True
                tombstones = tuple(
                    (cgrec.encode_key(t, group_id), None)
                    for t in (
                        cgrec.TARGET_ASSIGNMENT_METADATA,
                        cgrec.PARTITION_METADATA,
                        cgrec.GROUP_METADATA,
                    )
                )
                effects.append(
                    AppendRecords(self.partition_for(group_id), tombstones, now_ms, None)
                )
                if group_id not in self.groups:
                    errors[group_id] = Errors.NONE
                    continue
            group = self.groups.get(group_id)
            if group is None or group.is_(DEAD):
                errors[group_id] = Errors.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                group.transition_to(DEAD, now_ms)
                doomed.append(group)
                errors[group_id] = Errors.NONE
            else:
                errors[group_id] = Errors.NON_EMPTY_GROUP
        if doomed:
            self._cleanup_group_metadata(
                doomed, lambda g: self._remove_offsets(g, list(g.offsets)), now_ms, effects
            )
        effects.append(Respond(effects.request, DeleteGroupsResult(errors)))
        return self._end(effects, now_ms)

    def describe_group(self, group_id: str) -> DescribedGroup:
        """DescribeGroups for one group; changes nothing."""
        error = self._validate_group_status(group_id, "describe_groups")
        if error is not None:
            return DescribedGroup(error, group_id, "")
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(Errors.NONE, group_id, str(DEAD))
        stable = group.is_(STABLE)
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return DescribedGroup(
            Errors.NONE,
            group_id,
            str(group.state),
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(self, states: Iterable[str] | None = None) -> ListGroupsResult:
        """ListGroups (v4+ filters by state, case-insensitively). While a partition
        loads the error is COORDINATOR_LOAD_IN_PROGRESS, with the groups known so far."""
        if not self.partitions.active:
            return ListGroupsResult(Errors.COORDINATOR_NOT_AVAILABLE)
        wanted = {s.lower() for s in states} if states else None
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", str(g.state))
            for g in self.groups.values()
            if not g.is_(DEAD)
            and self.partition_for(g.group_id) in self.partitions.owned
            and (wanted is None or str(g.state).lower() in wanted)
        )
        groups = tuple(g for g in groups if g.group_id not in self.consumer_groups) + tuple(
            ListedGroup(g.group_id, PROTOCOL_TYPE, str(g.state))
            for g in self.consumer_groups.values()
            if self.partition_for(g.group_id) in self.partitions.owned
            and (wanted is None or str(g.state).lower() in wanted)
        )
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.partitions.loading else Errors.NONE
        return ListGroupsResult(error, groups)

    # ======================================================================================
    # convenience for notebooks and tests
    # ======================================================================================

    def complete_appends(
        self,
        effects: Effects,
        now_ms: int,
        log: list[tuple[int, bytes, bytes | None]] | None = None,
        error: Errors = Errors.NONE,
    ) -> Effects:
        """Acknowledge every AppendRecords in `effects` (and in what that produces)
        as the broker would after a successful acks=all write, appending each
        record to `log` as (partition, key, value) if given. Returns all effects,
        `effects` first. A notebook's stand-in for the replicated log."""
        out = Effects(effects.request)
        out.extend(effects)
        i = 0
        while i < len(out):
            e = out[i]
            i += 1
            if isinstance(e, AppendRecords):
                if log is not None and error == Errors.NONE:
                    log.extend((e.partition, k, v) for k, v in e.records)
                if e.append_id is not None:
                    out.extend(self.append_completed(e.append_id, error, now_ms))
        return out

    # ======================================================================================
    # KIP-848: ConsumerGroupHeartbeat and ConsumerGroupDescribe
    # ======================================================================================

    def update_topic_metadata(
        self,
        partitions_per_topic: dict[str, int],
        topic_ids: dict[str, uuid.UUID] | None = None,
        now_ms: int = 0,
    ) -> Effects:
        """The cluster's topics, partition counts and topic ids (from the metadata
        image; KIP-848 records name partitions by topic id). A consumer group whose
        subscribed topics changed gets a new group epoch, so its target assignment is
        computed again at its next heartbeat; the effects write that epoch."""
        effects = Effects()
        self.partitions_per_topic = dict(partitions_per_topic)
        self.topic_ids.update(topic_ids or {})
        for group in self.consumer_groups.values():
            wanted = group.subscribed_topics()
            now = {t: n for t, n in self.partitions_per_topic.items() if t in wanted}
            if group.members and now != group.subscription_metadata:
                before = self._cg_snapshot(group)
                group.bump_group_epoch()
                self._cg_append(group, before, now_ms, effects)
        return effects

    def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: list[str] | None = None,
        server_assignor: str | None = None,
        owned_partitions: list[TopicPartition] | None = None,
        client_id: str = "",
        client_host: str = "",
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """ConsumerGroupHeartbeat (KIP-848). Fields left None were not sent (the
        request sends only what changed). The answer is always immediate."""
        effects = self._begin(now_ms, request)

        def answer(error: Errors, message: str | None = None, **kw) -> Effects:
            kw.setdefault("member_id", member_id)
            result = ConsumerGroupHeartbeatResult(error, error_message=message, **kw)
            effects.append(Respond(effects.request, result))
            return self._end(effects, now_ms)

        error = self._validate_group_status(group_id, "consumer_group_heartbeat")
        if error is not None:
            return answer(error)
        if member_epoch == 0 and (subscribed_topic_names is None or rebalance_timeout_ms == -1):
            return answer(
                Errors.INVALID_REQUEST,
                "a joining member must send its subscription and rebalance timeout",
            )
        if member_epoch != 0 and not member_id:
            return answer(Errors.INVALID_REQUEST, "member id is required after joining")
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and instance_id is None:
            return answer(
                Errors.INVALID_REQUEST, "epoch -2 (temporary leave) is for static members"
            )
        if (
            server_assignor is not None
            and server_assignor not in self.config.group_consumer_assignors
        ):
            return answer(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"assignor {server_assignor!r} is not one of {', '.join(self.config.group_consumer_assignors)}",
            )
        classic = self.groups.get(group_id)
        if classic is not None and not classic.is_(EMPTY):
            return answer(
                Errors.GROUP_ID_NOT_FOUND,
                f"group {group_id} is a classic group, not a consumer group",
            )
        group = self.consumer_groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return answer(
                    Errors.GROUP_ID_NOT_FOUND, f"consumer group {group_id} does not exist"
                )
            group = self.consumer_groups[group_id] = ConsumerGroup(
                group_id, preferred_assignor=self.config.group_consumer_assignors[0]
            )
        interval = self.config.group_consumer_heartbeat_interval_ms
        before = self._cg_snapshot(group)
        respond = answer

        def answer(error: Errors, message: str | None = None, **kw) -> Effects:  # noqa: F811
            self._cg_append(group, before, now_ms, effects)  # the records of what changed
            return respond(error, message, **kw)

        # -- leaving ------------------------------------------------------------------------
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            member = group.members.get(member_id)
            if member is None:
                return answer(Errors.UNKNOWN_MEMBER_ID)
            if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                member.update_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH)  # keeps its partitions
            else:
                self._remove_consumer_group_member(group, member_id)
            return answer(Errors.NONE, member_epoch=member_epoch, heartbeat_interval_ms=0)

        # -- who is this --------------------------------------------------------------------
        member = group.members.get(member_id) if member_id else None
        changed = False
        if member_epoch == 0:
            if instance_id is not None:
                previous = group.static_member(instance_id)
                if previous is not None and previous.member_id != member_id:
                    if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        return answer(
                            Errors.UNRELEASED_INSTANCE_ID,
                            f"instance {instance_id} is still used by member {previous.member_id}",
                        )
                    # a restarted static member takes over its predecessor's place,
                    # partitions and epoch, without a new group epoch (no rebalance)
                    old_id = previous.member_id
                    old_target = group.target.get(old_id, previous.assigned)
                    group.remove_member(old_id)
                    self._cancel_cg_deadlines(group_id, old_id)
                    new_id = member_id or self.member_id_factory(client_id, instance_id)
                    previous.member_id = new_id
                    previous.member_epoch = previous.previous_member_epoch
                    group.members[new_id] = previous
                    group.target[new_id] = old_target
                    member, member_id = previous, new_id
            if member is None:
                if len(group.members) >= self.config.group_consumer_max_size:
                    return answer(Errors.GROUP_MAX_SIZE_REACHED)
                member_id = member_id or self.member_id_factory(client_id, instance_id)
                member = group.members[member_id] = ConsumerGroupMember(member_id)
                changed = True
            elif member.member_epoch != 0 and member.instance_id is None:
                # a dynamic member rejoining from scratch: it lost everything
                member.assigned = frozenset()
                member.pending_revocation = frozenset()
                member.update_epoch(0)
                member.state = MemberState.STABLE
                changed = True
        else:
            if member is None:
                return answer(
                    Errors.UNKNOWN_MEMBER_ID, f"member {member_id} is not in group {group_id}"
                )
            if member_epoch > member.member_epoch or (
                member_epoch < member.member_epoch
                and (
                    member_epoch != member.previous_member_epoch
                    or not set(owned_partitions or ()) <= member.assigned
                )
            ):
                return answer(
                    Errors.FENCED_MEMBER_EPOCH,
                    f"epoch {member_epoch} but the coordinator has {member.member_epoch}: "
                    "abandon all partitions and rejoin with epoch 0",
                )
            if instance_id is not None and member.instance_id != instance_id:
                return answer(Errors.FENCED_INSTANCE_ID)
        seen = (member.member_epoch, member.state, member.assigned)

        # -- update the member and, if needed, the group epoch and target --------------------
        member.instance_id = instance_id if instance_id is not None else member.instance_id
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        member.client_id, member.client_host = (
            client_id or member.client_id,
            client_host or member.client_host,
        )
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if server_assignor is not None:
            member.server_assignor = server_assignor
        if (
            subscribed_topic_names is not None
            and frozenset(subscribed_topic_names) != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = frozenset(subscribed_topic_names)
            changed = True
        if changed:
            group.bump_group_epoch()
        if group.group_epoch > group.assignment_epoch:
            group.compute_target(
                SERVER_ASSIGNORS[self._consumer_group_assignor(group)], self.partitions_per_topic
            )

        # -- reconcile ----------------------------------------------------------------------
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, owned_partitions)
        self._schedule(
            TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id),
            now_ms + self.config.group_consumer_session_timeout_ms,
        )
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_revoking:
            self._schedule_revocation(group_id, member, now_ms)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
            self._revocation_epochs.pop((group_id, member_id), None)
        send = (
            owned_partitions is not None
            or member_epoch == 0
            or seen
            != (
                member.member_epoch,
                member.state,
                member.assigned,
            )
        )
        return answer(
            Errors.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=member.assigned if send else None,
        )

    def _consumer_group_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for; ties and no preference: the first configured."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        order = self.config.group_consumer_assignors
        if not votes:
            return order[0]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def _schedule_revocation(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """The member must revoke within its rebalance timeout, at this epoch."""
        self._revocation_epochs[(group_id, member.member_id)] = member.member_epoch
        self._schedule(
            TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member.member_id),
            now_ms + member.rebalance_timeout_ms,
        )

    def _cancel_cg_deadlines(self, group_id: str, member_id: str) -> None:
        self._cancel(TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id))
        self._cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
        self._revocation_epochs.pop((group_id, member_id), None)

    def _remove_consumer_group_member(self, group: ConsumerGroup, member_id: str) -> None:
        if group.remove_member(member_id) is not None:
            self._cancel_cg_deadlines(group.group_id, member_id)
            group.bump_group_epoch()

    def _fence_consumer_group_member(
        self, group_id: str, member_id: str, epoch: int | None, now_ms: int, effects: Effects
    ) -> None:
        """Session expired, or (epoch given) the member did not revoke in time."""
        group = self.consumer_groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        member = group.members[member_id]
        if epoch is not None and (
            member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            return
        before = self._cg_snapshot(group)
        self._remove_consumer_group_member(group, member_id)
        self._cg_append(group, before, now_ms, effects)

    def _topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id; one made up from its name if the metadata did not say."""
        if topic not in self.topic_ids:
            self.topic_ids[topic] = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalab-topic:{topic}")
        return self.topic_ids[topic]

    @staticmethod
    def _cg_snapshot(group: ConsumerGroup) -> dict:
        return {
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "target": dict(group.target),
            "meta": {
                m.member_id: (
                    m.instance_id,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.rebalance_timeout_ms,
                    m.server_assignor,
                )
                for m in group.members.values()
            },
            "current": {
                m.member_id: (
                    m.member_epoch,
                    m.previous_member_epoch,
                    m.state,
                    m.assigned,
                    m.pending_revocation,
                )
                for m in group.members.values()
            },
        }

    def _cg_append(self, group: ConsumerGroup, before: dict, now_ms: int, effects: Effects) -> None:
        """The records that turn `before` into the group's state now, in Kafka's order:
        removed members' tombstones, member metadata, group epoch, target, current."""
        after = self._cg_snapshot(group)
        g = group.group_id
        key, value = cgrec.encode_key, cgrec.encode_value
        out: list[tuple[bytes, bytes | None]] = []
        for member_id in before["meta"]:
            if member_id not in after["meta"]:
                for t in (
                    cgrec.CURRENT_MEMBER_ASSIGNMENT,
                    cgrec.TARGET_ASSIGNMENT_MEMBER,
                    cgrec.MEMBER_METADATA,
                ):
                    out.append((key(t, g, member_id), None))
        for member_id, meta in after["meta"].items():
            if before["meta"].get(member_id) != meta:
                instance, rack, client, host, topics, timeout, assignor = meta
                fields = {
                    "instance_id": instance,
                    "rack_id": rack,
                    "client_id": client,
                    "client_host": host,
                    "subscribed_topic_names": sorted(topics),
                    "subscribed_topic_regex": None,
                    "rebalance_timeout_ms": timeout,
                    "server_assignor": assignor,
                }
                t = cgrec.MEMBER_METADATA
                out.append((key(t, g, member_id), value(t, fields)))
        if after["group_epoch"] != before["group_epoch"]:
            t = cgrec.GROUP_METADATA
            out.append((key(t, g), value(t, {"epoch": group.group_epoch})))
        for member_id, parts in after["target"].items():
            if before["target"].get(member_id) != parts:
                ids = {tp[0]: self._topic_id(tp[0]) for tp in parts}
                t = cgrec.TARGET_ASSIGNMENT_MEMBER
                fields = {"topic_partitions": cgrec.topic_partitions(parts, ids)}
                out.append((key(t, g, member_id), value(t, fields)))
        if after["assignment_epoch"] != before["assignment_epoch"]:
            t = cgrec.TARGET_ASSIGNMENT_METADATA
            out.append((key(t, g), value(t, {"assignment_epoch": group.assignment_epoch})))
        for member_id, cur in after["current"].items():
            if before["current"].get(member_id) != cur:
                epoch, previous, state, assigned, pending = cur
                ids = {tp[0]: self._topic_id(tp[0]) for tp in assigned | pending}
                fields = {
                    "member_epoch": epoch,
                    "previous_member_epoch": previous,
                    "state": cgrec.STATE_BYTES[state.value],
                    "assigned_partitions": cgrec.topic_partitions(assigned, ids),
                    "partitions_pending_revocation": cgrec.topic_partitions(pending, ids),
                }
                t = cgrec.CURRENT_MEMBER_ASSIGNMENT
                out.append((key(t, g, member_id), value(t, fields)))
        if out:
            effects.append(AppendRecords(self.partition_for(g), tuple(out), now_ms, None))

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe for one group."""
        error = self._validate_group_status(group_id, "consumer_group_describe")
        if error is not None:
            return DescribedConsumerGroup(error, group_id)
        group = self.consumer_groups.get(group_id)
        if group is None:
            return DescribedConsumerGroup(Errors.GROUP_ID_NOT_FOUND, group_id)
        members = tuple(
            DescribedConsumerGroupMember(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                tuple(sorted(m.subscribed_topic_names)),
                m.member_epoch,
                m.assigned,
                group.target.get(m.member_id, frozenset()),
            )
            for m in group.members.values()
        )
        return DescribedConsumerGroup(
            Errors.NONE,
            group_id,
            str(group.state),
            group.group_epoch,
            group.assignment_epoch,
            group.preferred_assignor,
            members,
        )
