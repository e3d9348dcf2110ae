"""ClassicGroupRebalance: how a classic group rebalances, and its record.

Kafka's pieces (3.x kafka.coordinator.group.GroupCoordinator): prepareRebalance,
onCompleteJoin, onExpirePendingSync, removeMemberAndUpdateGroup, and the
DelayedJoin, InitialDelayedJoin, DelayedSync and DelayedHeartbeat purgatories,
which here are deadlines (TimerKind.JOIN, SYNC, HEARTBEAT, PENDING_MEMBER) on the
shared runtime core. Also the group's GroupMetadata record: built for a write
and applied by one replay, `replay_group_metadata`, both when it is written and
when a partition is loaded (Kafka: GroupMetadataManager.storeGroup, replay).

Requests parked here (a JoinGroup waiting for the others, a follower's SyncGroup
waiting for the leader's assignment) are answered by later calls' effects, with
the handle they came with.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalab.coordinator.group import coordinator_records as rec
from kafkalab.coordinator.group.classic_group import ClassicGroup
from kafkalab.coordinator.group.classic_group_member import ClassicGroupMember
from kafkalab.coordinator.group.coordinator_records import (
    GroupMetadataRecord,
    MemberRecord,
)
from kafkalab.coordinator.group.group_runtime import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    UNKNOWN_MEMBER_ID,
    AppendKind,
    StaticRejoinAppend,
    SyncAppend,
    TimerKey,
    TimerKind,
)
from kafkalab.coordinator.group.results import (
    AppendRecords,
    Effects,
    JoinGroupMember,
    JoinGroupResult,
    Respond,
    SyncGroupResult,
)
from kafkalab.coordinator.runtime import CoordinatorState
from kafkalab.errors import Errors

if TYPE_CHECKING:
    from kafkalab.coordinator.group.group_coordinator import GroupCoordinator


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


@dataclass
class _JoinPhase:
    """The pending end of a join phase (Kafka: DelayedJoin / InitialDelayedJoin)."""

    initial: bool
    delay_ms: int = 0
    remaining_ms: int = 0


class ClassicGroupRebalance:
    """The rebalances of the classic groups of a GroupCoordinator."""

    def __init__(self, shard: GroupCoordinator) -> None:
        self.shard = shard
        self._join_phases: dict[str, _JoinPhase] = {}
        self._sync_generation: dict[str, int] = {}

    def replay_group_metadata(
        self, group_id: str, r: GroupMetadataRecord | None, now_ms: int
    ) -> ClassicGroup:
        """Apply one GroupMetadata record to the group (Kafka:
        GroupMetadataManager.replay of a GroupMetadataKey). The only code that sets
        what the record carries: the generation, the protocol type and name, the
        leader, the members (ids, instance ids, clients, timeouts, their metadata for
        the selected protocol) with their assignments, and the state's timestamp.
        It runs for every group record loaded and every one written live (live
        tombstones excepted: DeleteGroups and offset expiry write them for a group
        they have already made Dead and drop):

        - loading a partition: the group becomes what the record says (Stable with
          members, Empty without; a tombstone leaves an Empty holder of the
          group's offsets), as the log has it: no state machine is walked;
        - live, when a record the coordinator wrote is committed (SyncGroup's, a
          static member's new id) or as it is written (a generation that ends
          Empty, whose write nobody waits for): the group enters the record's
          state through `transition_to`, and its members keep their soft state
          (parked requests, heartbeats) and the protocols the record cannot carry.

        Everything else about a group in a rebalance (who has joined, the next
        generation before its record is written) is soft state, kept in memory as
        Kafka keeps it."""
        if r is None:
            r = GroupMetadataRecord("", 0, None, None, now_ms)
        group = self.shard.groups.get(group_id)
        if group is None:  # its first record, or offsets only so far
            group = self.shard.groups[group_id] = ClassicGroup(group_id, EMPTY, now_ms)
        group.generation_id = r.generation
        group.protocol_type = r.protocol_type or None
        group.protocol_name = r.protocol
        group.leader_id = r.leader if r.members else None
        group.members = {m.member_id: self._member_from_record(group, r, m) for m in r.members}
        group.static_members = {
            m.group_instance_id: m.member_id for m in r.members if m.group_instance_id is not None
        }
        group.subscribed_topics = group.compute_subscribed_topics()
        state = STABLE if r.members else EMPTY
        if self.shard.runtime.state(self.shard.partition_for(group_id)) is CoordinatorState.LOADING:
            group.state, group.state_timestamp_ms = state, r.current_state_timestamp
        elif not group.is_(state):
            group.transition_to(state, now_ms)
        return group

    @staticmethod
    def _member_from_record(
        group: ClassicGroup, r: GroupMetadataRecord, m: MemberRecord
    ) -> ClassicGroupMember:
        """The member as the record has it: the one the group holds, updated (its
        parked requests and heartbeat stay), or a new one. The record carries only
        the metadata of the selected protocol: a member that holds the same keeps
        its other protocols too."""
        protocol = r.protocol or ""
        member = group.members.get(m.member_id)
        if member is None:
            member = ClassicGroupMember(
                m.member_id, None, "", "", 0, 0, r.protocol_type, [(protocol, m.subscription)]
            )
        elif next((d for n, d in member.protocols if n == protocol), None) != m.subscription:
            member.protocols = [(protocol, m.subscription)]
        member.group_instance_id = m.group_instance_id
        member.client_id, member.client_host = m.client_id, m.client_host
        member.rebalance_timeout_ms = m.rebalance_timeout_ms
        member.session_timeout_ms = m.session_timeout_ms
        member.protocol_type = r.protocol_type
        member.assignment = m.assignment
        return member

    def unload_group(self, group: ClassicGroup, effects: Effects) -> None:
        group.transition_to(DEAD, group.state_timestamp_ms)
        for member in group.members.values():
            self.answer_join(
                group, member, JoinGroupResult(Errors.NOT_COORDINATOR, member.member_id), effects
            )
            self.answer_sync(member, SyncGroupResult(Errors.NOT_COORDINATOR), effects)
            self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        for member_id in group.pending_members:
            self.shard.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        self.shard.cancel(TimerKey(TimerKind.JOIN, group.group_id))
        self.shard.cancel(TimerKey(TimerKind.SYNC, group.group_id))
        self._join_phases.pop(group.group_id, None)

    # ======================================================================================
    # answering parked requests
    # ======================================================================================

    @staticmethod
    def answer_join(
        group: ClassicGroup, member: ClassicGroupMember, result: JoinGroupResult, effects: Effects
    ) -> bool:
        if member.join_request is None:
            return False
        effects.append(Respond(member.join_request, result))
        member.join_request = None
        return True

    @staticmethod
    def answer_sync(member: ClassicGroupMember, result: SyncGroupResult, effects: Effects) -> bool:
        if member.sync_request is None:
            return False
        effects.append(Respond(member.sync_request, result))
        member.sync_request = None
        return True

    @staticmethod
    def await_join(member: ClassicGroupMember, request: Hashable, effects: Effects) -> None:
        if member.join_request is not None and member.join_request != request:
            effects.append(
                Respond(
                    member.join_request,
                    JoinGroupResult(Errors.REBALANCE_IN_PROGRESS, member.member_id),
                )
            )
        member.join_request = request

    @staticmethod
    def await_sync(member: ClassicGroupMember, request: Hashable, effects: Effects) -> None:
        if member.sync_request is not None and member.sync_request != request:
            effects.append(
                Respond(member.sync_request, SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
            )
        member.sync_request = request

    # ======================================================================================
    # heartbeats and session timeouts
    # ======================================================================================

    def schedule_heartbeat(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        now_ms: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Kafka: completeAndScheduleNextHeartbeatExpiration."""
        at = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        member.heartbeat_deadline_ms = at
        self.shard.schedule(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id), at)

    def on_expire_heartbeat(
        self, group_id: str, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group = self.shard.groups.get(group_id)
        if group is None or group.is_(DEAD) or not group.has(member_id):
            return
        member = group.get(member_id)
        member.heartbeat_deadline_ms = None
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # members waiting in a rebalance need not heartbeat
        self.remove_member_and_update_group(group, member, now_ms, effects)

    def on_expire_pending_member(
        self, group_id: str, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group = self.shard.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return
        self.remove_pending_member_and_update_group(group, member_id, now_ms, effects)

    def remove_pending_member_and_update_group(
        self, group: ClassicGroup, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        group.pending_members.discard(member_id)
        self.shard.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
        if group.is_(PREPARING):
            self.check_join(group, now_ms, effects)

    def remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int, effects: Effects
    ) -> None:
        """Kafka: removeMemberAndUpdateGroup. A waiting JoinGroup is answered with
        UNKNOWN_MEMBER_ID so that a live client rejoins as a new member."""
        self.answer_join(
            group, member, JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID), effects
        )
        self.answer_sync(member, SyncGroupResult(Errors.UNKNOWN_MEMBER_ID), effects)
        group.remove(member.member_id)
        self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        if group.state in (STABLE, COMPLETING):
            self.maybe_prepare_rebalance(group, now_ms, effects)
        elif group.is_(PREPARING):
            self.check_join(group, now_ms, effects)

    # ======================================================================================
    # rebalances
    # ======================================================================================

    def maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, now_ms, effects)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        if group.is_(COMPLETING):
            self.reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS, effects)
        self.shard.cancel(TimerKey(TimerKind.SYNC, group.group_id))
        self._sync_generation.pop(group.group_id, None)
        if group.is_(EMPTY):
            delay = self.shard.config.group_initial_rebalance_delay_ms
            phase = _JoinPhase(True, delay, max(group.rebalance_timeout_ms() - delay, 0))
            self.shard.schedule(TimerKey(TimerKind.JOIN, group.group_id), now_ms + delay)
        else:
            phase = _JoinPhase(False)
            self.shard.schedule(
                TimerKey(TimerKind.JOIN, group.group_id), now_ms + group.rebalance_timeout_ms()
            )
        self._join_phases[group.group_id] = phase
        group.transition_to(PREPARING, now_ms)
        self.check_join(group, now_ms, effects)

    def check_join(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        """Kafka: rebalancePurgatory.checkAndComplete(GroupJoinKey): a DelayedJoin
        completes once every member has rejoined; an InitialDelayedJoin never early."""
        phase = self._join_phases.get(group.group_id)
        if phase is None or phase.initial or not group.is_(PREPARING):
            return
        if group.has_all_members_joined():
            self.shard.cancel(TimerKey(TimerKind.JOIN, group.group_id))
            self.on_complete_join(group, now_ms, effects)

    def on_join_deadline(self, group_id: str, now_ms: int, effects: Effects) -> None:
        group = self.shard.groups.get(group_id)
        phase = self._join_phases.get(group_id)
        if group is None or phase is None:
            return
        if phase.initial and group.new_member_added and phase.remaining_ms != 0:
            # members keep arriving: wait again, but never past rebalance.timeout.ms
            group.new_member_added = False
            delay = min(self.shard.config.group_initial_rebalance_delay_ms, phase.remaining_ms)
            self._join_phases[group_id] = _JoinPhase(
                True, delay, max(phase.remaining_ms - delay, 0)
            )
            self.shard.schedule(TimerKey(TimerKind.JOIN, group_id), now_ms + delay)
            return
        self.on_complete_join(group, now_ms, effects)

    def on_complete_join(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        """Kafka: onCompleteJoin. Dynamic members that did not rejoin are dropped;
        a new generation starts and every waiting JoinGroup is answered."""
        self._join_phases.pop(group.group_id, None)
        self.shard.cancel(TimerKey(TimerKind.JOIN, group.group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, member.member_id))
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that have not rejoined remain: wait for them, or for
            # their sessions to expire
            self._join_phases[group.group_id] = _JoinPhase(False)
            self.shard.schedule(
                TimerKey(TimerKind.JOIN, group.group_id), now_ms + group.rebalance_timeout_ms()
            )
            return
        group.new_member_added = False
        if not group.members:
            # the generation ends Empty: its record is written (nobody waits for it)
            # and applied as it is written
            group.pending_sync_members = set()
            record = self.empty_generation_record(group, now_ms)
            self.replay_group_metadata(group.group_id, record, now_ms)
            effects.append(self.group_append(group, record, now_ms, None))
            return
        group.init_next_generation(now_ms)
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
            self.answer_join(group, member, result, effects)
            self.schedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._sync_generation[group.group_id] = group.generation_id
        self.shard.schedule(
            TimerKey(TimerKind.SYNC, group.group_id), now_ms + group.rebalance_timeout_ms()
        )

    def on_expire_pending_sync(self, group_id: str, now_ms: int, effects: Effects) -> None:
        """Kafka: onExpirePendingSync. Members that never sent SyncGroup are removed."""
        group = self.shard.groups.get(group_id)
        generation = self._sync_generation.pop(group_id, None)
        if group is None or generation != group.generation_id:
            return
        if group.state in (COMPLETING, STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                member = group.get(member_id)
                self.answer_join(
                    group,
                    member,
                    JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID),
                    effects,
                )
                group.remove(member_id)
                self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group_id, member_id))
            self.prepare_rebalance(group, now_ms, effects)

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (COMPLETING, STABLE) and not group.pending_sync_members:
            self.shard.cancel(TimerKey(TimerKind.SYNC, group.group_id))
            self._sync_generation.pop(group.group_id, None)

    def reset_and_propagate_assignment_error(
        self, group: ClassicGroup, error: Errors, effects: Effects
    ) -> None:
        """A rebalance starts from CompletingRebalance, or the assignment's write
        failed: the members' assignments are forgotten (Kafka alike; the group's
        next record, at the next SyncGroup, sets them again) and every waiting
        SyncGroup gets `error`."""
        for member in group.members.values():
            member.assignment = b""
        for member in group.members.values():
            self.answer_sync(member, SyncGroupResult(error), effects)

    def propagate_assignment(self, group: ClassicGroup, now_ms: int, effects: Effects) -> None:
        """Every waiting SyncGroup gets its member's assignment, as the group's
        record (replayed) set it (Kafka: propagateAssignment)."""
        for member in group.members.values():
            result = SyncGroupResult(
                Errors.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
            if self.answer_sync(member, result, effects):
                self.schedule_heartbeat(group, member, now_ms)

    # ======================================================================================
    # writes to __consumer_offsets
    # ======================================================================================

    @staticmethod
    def group_record(group: ClassicGroup, assignment: dict[str, bytes]) -> GroupMetadataRecord:
        """The group as it is, with `assignment`: its GroupMetadata record (Kafka:
        GroupCoordinatorRecordHelpers.newGroupMetadataRecord)."""
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

    @staticmethod
    def empty_generation_record(group: ClassicGroup, now_ms: int) -> GroupMetadataRecord:
        """The record of a generation that ends with no member: the next generation,
        no protocol, no leader, Empty since `now_ms`."""
        return GroupMetadataRecord(
            group.protocol_type or "", group.generation_id + 1, None, None, now_ms
        )

    def group_append(
        self,
        group: ClassicGroup,
        record: GroupMetadataRecord,
        now_ms: int,
        waiting: tuple[AppendKind, Hashable, SyncAppend | StaticRejoinAppend] | None,
    ) -> AppendRecords:
        """The append of the group's record; `waiting` (kind, request, payload): what
        its commit answers. The record is the group's latest from now on."""
        group.latest_record = record
        value = rec.group_metadata_value(record)
        partition = self.shard.partition_for(group.group_id)
        append_id = None
        if waiting is not None:
            append_id = self.shard.runtime.add_append(waiting[0], partition, waiting[1], waiting[2])
        return AppendRecords(
            partition, ((rec.group_metadata_key(group.group_id), value),), now_ms, append_id
        )

    def complete_sync(
        self, payload: SyncAppend, error: Errors, now_ms: int, effects: Effects
    ) -> None:
        group = payload.group
        if (
            self.shard.is_live(group)
            and group.is_(COMPLETING)
            and group.generation_id == payload.record.generation
        ):
            if error != Errors.NONE:
                self.reset_and_propagate_assignment_error(group, store_group_error(error), effects)
                self.maybe_prepare_rebalance(group, now_ms, effects)
            else:  # the generation's record is written: the group is what it says
                self.replay_group_metadata(group.group_id, payload.record, now_ms)
                self.propagate_assignment(group, now_ms, effects)

    def is_latest_record(self, group: ClassicGroup, record: GroupMetadataRecord) -> bool:
        """No record of the group was written after this one (a later one carries
        the group as it is now, and is applied when it commits)."""
        return self.shard.is_live(group) and group.latest_record is record
