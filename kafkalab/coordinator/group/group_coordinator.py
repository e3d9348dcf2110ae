"""GroupCoordinator: consumer groups (classic and KIP-848) and their offsets, sans-IO.

Kafka's class: org.apache.kafka.coordinator.group.GroupCoordinatorShard, which
holds the managers and replays records into them; here the managers are
ClassicGroupManager (with ClassicGroupRebalance), ConsumerGroupManager,
OffsetMetadataManager and GroupMetadataManager, a module each, and the
partitions, pending appends and deadlines live in the shared
CoordinatorRuntimeCore (kafkalab.coordinator.runtime). The classic protocol
answers as Kafka 3.x's kafka.coordinator.group.GroupCoordinator does (the Java
rewrite, GroupMetadataManager.classicGroup*, answers the same).

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
partition's records into groups and offsets, one `replay` per record (the log is
the state, as the metadata log is the controller's; offset and classic group
records go through the same replay when they are written), `on_resign(p)`
unloads them (NOT_COORDINATOR: clients find the new coordinator). A load that
finishes after the partition was resigned is thrown away. Built with
`partitions=None` it owns every partition at once, which is what a notebook wants.

Where kafkalab differs from Kafka (each to leave no request unanswered): a
parked JoinGroup or SyncGroup superseded by a newer one from the same member is
answered REBALANCE_IN_PROGRESS (Kafka drops it), and a member removed while its
SyncGroup waits gets UNKNOWN_MEMBER_ID. Ties in the protocol vote go to the
alphabetically first protocol (Kafka: HashMap order).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from kafkalab.coordinator.group import consumer_group_records as cgrec
from kafkalab.coordinator.group import coordinator_records as rec
from kafkalab.coordinator.group.classic_group import ClassicGroup
from kafkalab.coordinator.group.classic_group_manager import ClassicGroupManager
from kafkalab.coordinator.group.classic_group_requests import (
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    SyncGroupRequestData,
)
from kafkalab.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupHeartbeatRequestData,
    DescribedConsumerGroup,
    TopicMetadata,
)
from kafkalab.coordinator.group.consumer_group_manager import (
    ConsumerGroupContext,
    ConsumerGroupManager,
)
from kafkalab.coordinator.group.coordinator_records import (
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    OtherKey,
    partition_for,
)
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_metadata_manager import GroupMetadataManager
from kafkalab.coordinator.group.group_runtime import (
    DEAD,
    EMPTY,
    EXPIRE_OFFSETS,
    UNKNOWN_MEMBER_ID,
    AppendKind,
    AppendPayload,
    ConsumerGroupAppend,
    StaticRejoinAppend,
    SyncAppend,
    TimerKey,
    TimerKind,
    TopicPartition,
)
from kafkalab.coordinator.group.offset_metadata_manager import (
    OFFSET_COMMIT_LATEST_VERSION,
    OffsetMetadataManager,
)
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    DescribedGroup,
    Effects,
    ListGroupsResult,
    OffsetFetchResult,
    Respond,
    TxnMarker,
)
from kafkalab.coordinator.runtime import (
    CoordinatorRuntimeCore,
    CoordinatorState,
    request_handle,
)
from kafkalab.errors import Errors

# APIs that accept the empty group id (Kafka: isValidGroupId)
_EMPTY_ID_OK = {"offset_commit", "offset_fetch", "describe_groups", "delete_groups"}
# how complete_load receives a state topic's records: a plain record, a record of a
# transactional batch (with its producer id), or the marker ending a transaction
LoadedRecord = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int] | TxnMarker
)


@dataclass(frozen=True)
class GroupCoordinatorRecord:
    """A record of __consumer_offsets-<partition>, as the shard replays it (one
    GroupCoordinator serves many partitions: the record says whose it is)."""

    partition: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1  # >= 0: a record of that producer's transaction


def default_member_id(client_id: str, group_instance_id: str | None) -> str:
    """Kafka's member ids: `<group.instance.id or client.id>-<UUID>`."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"


class GroupCoordinator:
    """The group coordinator's shard: it implements runtime.CoordinatorShard over
    GroupCoordinatorRecord (replay, replay_end_transaction_marker, on_loaded,
    on_unloaded; tests/unit/test_coordinator_shard_protocol.py checks the
    signatures) and runtime.Coordinator (what the broker's runtime calls)."""

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
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer groups, and the topic metadata their assignors need
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.topic_metadata = TopicMetadata()
        self.member_id_factory = member_id_factory
        self.classic_manager = ClassicGroupManager(self, member_id_factory)
        self.offset_manager = OffsetMetadataManager(self)
        self.consumer_manager = ConsumerGroupManager(
            ConsumerGroupContext(
                groups=self.consumer_groups,
                topics=self.topic_metadata,
                runtime=self.runtime,
                config=self.config,
                member_id_factory=member_id_factory,
                partition_for=self.partition_for,
                group_status=self.group_status,
                classic_group_in_use=self._classic_group_in_use,
            )
        )
        self.group_manager = GroupMetadataManager(self)
        # while a partition loads: the time replay reads (Kafka: the shard's Time),
        # and the classic groups whose latest group record is not a tombstone
        self._load_time_ms = 0
        self._recorded: dict[int, set[str]] = {}

    @property
    def partitions_per_topic(self) -> dict[str, int]:
        """The cluster's topics and partition counts (update_topic_metadata)."""
        return self.topic_metadata.partitions_per_topic

    @property
    def topic_ids(self) -> dict[str, uuid.UUID]:
        return self.topic_metadata.topic_ids

    def _classic_group_in_use(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.is_(EMPTY)

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

    def schedule(self, key: TimerKey, at_ms: int) -> None:
        self.runtime.schedule(key, at_ms)

    def cancel(self, key: TimerKey) -> None:
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
                self.classic_manager.rebalance.on_expire_heartbeat(group_id, member_id, at, effects)
            case TimerKind.PENDING_MEMBER:
                self.classic_manager.rebalance.on_expire_pending_member(
                    group_id, member_id, at, effects
                )
            case TimerKind.JOIN:
                self.classic_manager.rebalance.on_join_deadline(group_id, at, effects)
            case TimerKind.SYNC:
                self.classic_manager.rebalance.on_expire_pending_sync(group_id, at, effects)
            case TimerKind.CONSUMER_SESSION:
                self.consumer_manager.fence_consumer_group_member(
                    group_id, member_id, None, at, effects
                )
            case TimerKind.CONSUMER_REVOCATION:
                self.consumer_manager.on_revocation_deadline(group_id, member_id, at, effects)
            case TimerKind.EXPIRE_OFFSETS:
                self.offset_manager.expire_offsets(at, effects)
                self.schedule(key, at + self.config.offsets_retention_check_interval_ms)

    def begin_call(self, now_ms: int, request: Hashable | None) -> Effects:
        effects = Effects(request_handle(request))
        self._fire_due(now_ms, effects)
        return effects

    def end_call(self, effects: Effects, now_ms: int) -> Effects:
        self._fire_due(now_ms, effects)  # zero delays (group.initial.rebalance.delay.ms=0)
        return effects

    # ======================================================================================
    # ownership of __consumer_offsets partitions
    # ======================================================================================

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def group_status(self, group_id: str | None, api: str) -> Errors | None:
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
        self._unload(partition, effects)
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
        self._load_time_ms = now_ms
        self._recorded[partition] = set()
        for item in records:
            if isinstance(item, TxnMarker):
                self.replay_end_transaction_marker(item.producer_id, item.committed, partition)
            else:
                producer_id = item[2] if len(item) > 2 else -1
                self.replay(GroupCoordinatorRecord(partition, item[0], item[1], producer_id))
        self.on_loaded(partition, now_ms)
        self.runtime.complete_load(partition)
        return self.tick(now_ms)

    def replay_end_transaction_marker(
        self, producer_id: int, committed: bool, partition: int | None = None
    ) -> None:
        """The marker ending the producer's transaction in `partition` (None: in every
        partition served here): its offsets replayed so far count or are dropped."""
        for group in self.groups.values():
            if partition in (None, self.partition_for(group.group_id)):
                self.offset_manager.replay_end_transaction_marker(group, producer_id, committed)

    def replay(self, record: GroupCoordinatorRecord) -> None:
        """Apply one record of __consumer_offsets-<partition> (Kafka:
        GroupCoordinatorShard.replay), by its key's type: an offset commit (plain or of
        a transaction), a classic group, a KIP-848 record. Records of groups another
        partition serves are skipped."""
        partition, key, value = record.partition, record.key, record.value
        producer_id, now_ms = record.producer_id, self._load_time_ms
        recorded = self._recorded.setdefault(partition, set())
        if key is None:
            return
        k = rec.read_key(key)
        if isinstance(k, OtherKey):
            if k.version in cgrec.CONSUMER_GROUP_RECORD_TYPES:
                group_id = cgrec.decode_key(key).group_id
                if self.partition_for(group_id) == partition:
                    self.consumer_manager.replay_consumer_group_record(
                        self.consumer_groups, key, value
                    )
        elif isinstance(k, OffsetKey):
            seq = self.runtime.next_sequence()  # log order, below every later append
            if self.partition_for(k.group) != partition:
                return
            group = self.groups.get(k.group)
            if group is None:  # offsets only: a group that uses Kafka just to store offsets
                group = self.groups[k.group] = ClassicGroup(k.group, EMPTY, now_ms)
            om = None if value is None else rec.read_offset_value(value)
            self.offset_manager.replay_offset_commit(
                group, (k.topic, k.partition), om, producer_id, seq
            )
        elif isinstance(k, GroupKey) and self.partition_for(k.group) == partition:
            group_value = None if value is None else rec.read_group_value(value)
            self.classic_manager.rebalance.replay_group_metadata(k.group, group_value, now_ms)
            if group_value is None:
                recorded.discard(k.group)
            else:
                recorded.add(k.group)

    def on_loaded(self, partition: int, now_ms: int) -> None:
        """The partition's records are replayed: drop what no record keeps (a group
        deleted, with no offsets left), arm the timers the log does not carry."""
        recorded = self._recorded.pop(partition, set())
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups[group_id]
            has_offsets = group.offsets or any(group.pending_transactional_offset_commits.values())
            if group_id not in recorded and not has_offsets:
                del self.groups[group_id]
                continue
            for member in group.members.values():
                self.classic_manager.rebalance.schedule_heartbeat(group, member, now_ms)
        self.consumer_manager.on_loaded(partition, now_ms)

    def on_resign(self, partition: int, epoch: int | None = None) -> Effects:
        """This broker no longer leads the partition: unload its groups (Kafka:
        onResignation). Parked requests get NOT_COORDINATOR."""
        effects = Effects()
        if not self.partitions.resign(partition, epoch):
            return effects
        self._unload(partition, effects)
        return effects

    def on_unloaded(self, partition: int) -> None:
        """Forget the partition's groups (Kafka: GroupCoordinatorShard.onUnloaded),
        answering no one: on_resign and on_become_leader unload and answer the
        requests parked on them (NOT_COORDINATOR)."""
        self._unload(partition, Effects())

    def _unload(self, partition: int, effects: Effects) -> None:
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self.classic_manager.rebalance.unload_group(self.groups.pop(group_id), effects)
        self.consumer_manager.unload_consumer_groups(partition)

    def shutdown(self) -> Effects:
        """The broker stops: every group unloaded, every request refused."""
        effects = Effects()
        for group in list(self.groups.values()):
            self.classic_manager.rebalance.unload_group(group, effects)
        self.groups.clear()
        self.consumer_manager.unload_consumer_groups(None)
        self.runtime.close()
        self.consumer_manager.revocation_epochs.clear()
        return effects

    def append_completed(
        self, append_id: int, error: Errors | int = Errors.NONE, now_ms: int = 0
    ) -> Effects:
        """The append asked for by AppendRecords(append_id) is acknowledged (error
        NONE, after acks=all) or failed with `error`."""
        effects = self.begin_call(now_ms, None)
        pending = self.runtime.take_append(append_id)
        if pending is None:
            return self.end_call(effects, now_ms)
        error = Errors(error)
        payload = pending.payload
        if isinstance(payload, SyncAppend):
            self.classic_manager.rebalance.complete_sync(payload, error, now_ms, effects)
        elif isinstance(payload, StaticRejoinAppend):
            self.classic_manager.complete_static_rejoin(pending, payload, error, now_ms, effects)
        elif isinstance(payload, ConsumerGroupAppend):
            self.consumer_manager.complete_write(append_id, payload, error, now_ms)
        else:  # AppendKind.OFFSETS, AppendKind.TXN_OFFSETS
            self.offset_manager.complete_offset_commit(pending, payload, error, effects)
        return self.end_call(effects, now_ms)

    def is_live(self, group: ClassicGroup) -> bool:
        """The group an append was for is still the one served (not unloaded, not Dead)."""
        return self.groups.get(group.group_id) is group and not group.is_(DEAD)

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

    # -- requests, answered by the managers ----------------------------------------------------

    # The classic protocol's requests, each as its request data (what the
    # GroupCoordinatorService passes; Kafka: GroupCoordinatorShard.classicGroupJoin,
    # classicGroupSync, classicGroupHeartbeat, classicGroupLeave) ...

    def classic_group_join(
        self, data: JoinGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        return self.classic_manager.join_group(data, now_ms=now_ms, request=request)

    def classic_group_sync(
        self, data: SyncGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        return self.classic_manager.sync_group(data, now_ms=now_ms, request=request)

    def classic_group_heartbeat(
        self, data: HeartbeatRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        return self.classic_manager.heartbeat(data, now_ms=now_ms, request=request)

    def classic_group_leave(
        self, data: LeaveGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        return self.classic_manager.leave_group(data, now_ms=now_ms, request=request)

    # ... and the same with the request's fields as arguments, for notebooks and tests
    # that step the coordinator by hand

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
        data = JoinGroupRequestData(
            group_id,
            member_id,
            protocol_type,
            tuple(protocols),
            session_timeout_ms,
            rebalance_timeout_ms,
            group_instance_id,
            client_id,
            client_host,
            require_known_member_id,
        )
        return self.classic_group_join(data, now_ms=now_ms, request=request)

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
        data = SyncGroupRequestData(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            tuple((assignments or {}).items()),
        )
        return self.classic_group_sync(data, now_ms=now_ms, request=request)

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
        data = HeartbeatRequestData(group_id, generation_id, member_id, group_instance_id)
        return self.classic_group_heartbeat(data, now_ms=now_ms, request=request)

    def leave_group(
        self,
        group_id: str,
        members: list[tuple[str, str | None]],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        data = LeaveGroupRequestData(group_id, tuple(members))
        return self.classic_group_leave(data, now_ms=now_ms, request=request)

    def commit_offsets(
        self,
        group_id: str,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        expire_timestamp_ms: int | None = None,
        api_version: int = OFFSET_COMMIT_LATEST_VERSION,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        return self.offset_manager.commit_offsets(
            group_id,
            offsets,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            expire_timestamp_ms=expire_timestamp_ms,
            api_version=api_version,
            now_ms=now_ms,
            request=request,
        )

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
        return self.offset_manager.commit_transactional_offsets(
            group_id,
            producer_id,
            producer_epoch,
            offsets,
            transactional_id=transactional_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            now_ms=now_ms,
            request=request,
        )

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        committed: bool,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        return self.offset_manager.complete_transaction(
            partition, producer_id, committed, now_ms=now_ms, request=request
        )

    def pending_transactional_offsets(
        self, group_id: str
    ) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        return self.offset_manager.pending_transactional_offsets(group_id)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        return self.offset_manager.fetch_offsets(
            group_id,
            partitions,
            require_stable=require_stable,
            member_id=member_id,
            member_epoch=member_epoch,
        )

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        return self.offset_manager.delete_offsets(
            group_id, partitions, now_ms=now_ms, request=request
        )

    def expire_offsets(self, now_ms: int, effects: Effects | None = None) -> Effects:
        return self.offset_manager.expire_offsets(now_ms, effects)

    def update_topic_metadata(
        self,
        partitions_per_topic: dict[str, int],
        topic_ids: dict[str, uuid.UUID] | None = None,
        now_ms: int = 0,
    ) -> Effects:
        """The cluster's topics for the KIP-848 groups (ConsumerGroupManager)."""
        return self.consumer_manager.update_topic_metadata(partitions_per_topic, topic_ids, now_ms)

    def handle_consumer_group_heartbeat(
        self,
        data: ConsumerGroupHeartbeatRequestData,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """ConsumerGroupHeartbeat (KIP-848): the answer is always immediate; the
        records of what changed in the group come before it."""
        effects = self.begin_call(now_ms, request)
        result = self.consumer_manager.consumer_group_heartbeat(data, now_ms, effects)
        effects.append(Respond(effects.request, result))
        return self.end_call(effects, now_ms)

    def consumer_group_heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        now_ms: int,
        request: Hashable | None = None,
        owned_partitions: Iterable[TopicPartition] | None = None,
        subscribed_topic_names: Iterable[str] | None = None,
        **fields: str | int | None,
    ) -> Effects:
        """ConsumerGroupHeartbeat stepped by hand (notebooks, tests): the request's
        fields as keywords (ConsumerGroupHeartbeatRequestData's names)."""
        data = ConsumerGroupHeartbeatRequestData(
            group_id,
            member_id,
            member_epoch,
            owned_partitions=None if owned_partitions is None else tuple(owned_partitions),
            subscribed_topic_names=(
                None if subscribed_topic_names is None else tuple(subscribed_topic_names)
            ),
            **fields,  # the dataclass refuses a name it does not have
        )
        return self.handle_consumer_group_heartbeat(data, now_ms=now_ms, request=request)

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        return self.consumer_manager.consumer_group_describe(group_id)

    def delete_groups(
        self, group_ids: list[str], *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        return self.group_manager.delete_groups(group_ids, now_ms=now_ms, request=request)

    def describe_group(self, group_id: str) -> DescribedGroup:
        return self.group_manager.describe_group(group_id)

    def list_groups(self, states: Iterable[str] | None = None) -> ListGroupsResult:
        return self.group_manager.list_groups(states)
