"""ClassicGroupRebalance: how a classic group rebalances, and its record.

Kafka's pieces (3.x kafka.coordinator.group.GroupCoordinator): prepareRebalance,
onCompleteJoin, onExpirePendingSync, removeMemberAndUpdateGroup, and the
DelayedJoin, InitialDelayedJoin, DelayedSync and DelayedHeartbeat purgatories,
which here are deadlines (TimerKind.JOIN, SYNC, HEARTBEAT, PENDING_MEMBER) on the
shared runtime core. Also the group's GroupMetadata record: built for a write,
replayed at load (Kafka: GroupMetadataManager.storeGroup, replay).

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
        self,
        group_id: str,
        r: GroupMetadataRecord | None,
        previous: ClassicGroup | None,
        now_ms: int,
    ) -> ClassicGroup:
        """Apply one group record (Kafka: GroupMetadataManager.replay of a
        GroupMetadataKey): the group as the record has it, keeping the offsets
        `previous` holds; a tombstone leaves an Empty holder of those offsets."""
        group = self.group_from_record(group_id, r, now_ms)
        if previous is not None:
            group.offsets = previous.offsets
            group.offset_append_seq = previous.offset_append_seq
            group.offset_tombstone_seq = previous.offset_tombstone_seq
            group.pending_transactional_offset_commits = (
                previous.pending_transactional_offset_commits
            )
        return group

    def group_from_record(
        self, group_id: str, r: GroupMetadataRecord | None, now_ms: int
    ) -> ClassicGroup:
        if r is None:  # offsets only: a group that uses Kafka just to store offsets
            return ClassicGroup(group_id, EMPTY, now_ms)
        group = ClassicGroup(
            group_id,
            STABLE if r.members else EMPTY,
            r.current_state_timestamp,
            protocol_type=r.protocol_type or None,
            protocol_name=r.protocol,
            generation_id=r.generation,
            leader_id=r.leader if r.members else None,
        )
        for m in r.members:
            member = ClassicGroupMember(
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
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

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
        group.init_next_generation(now_ms)
        if group.is_(EMPTY):
            effects.append(self.group_append(group, {}, now_ms, None))
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
        for member in group.members.values():
            member.assignment = b""
        for member in group.members.values():
            self.answer_sync(member, SyncGroupResult(error), effects)

    def set_and_propagate_assignment(
        self, group: ClassicGroup, assignment: dict[str, bytes], now_ms: int, effects: Effects
    ) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        for member in group.members.values():
            result = SyncGroupResult(
                Errors.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
            if self.answer_sync(member, result, effects):
                self.schedule_heartbeat(group, member, now_ms)

    # ======================================================================================
    # writes to __consumer_offsets
    # ======================================================================================

    def group_record(
        self, group: ClassicGroup, assignment: dict[str, bytes], now_ms: int
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

    def group_append(
        self,
        group: ClassicGroup,
        assignment: dict[str, bytes],
        now_ms: int,
        waiting: tuple[AppendKind, Hashable, SyncAppend | StaticRejoinAppend] | None,
    ) -> AppendRecords:
        """The group record; `waiting` (kind, request, payload): what its commit answers."""
        value = rec.group_metadata_value(self.group_record(group, assignment, now_ms))
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
            and group.generation_id == payload.generation
        ):
            if error != Errors.NONE:
                self.reset_and_propagate_assignment_error(group, store_group_error(error), effects)
                self.maybe_prepare_rebalance(group, now_ms, effects)
            else:
                self.set_and_propagate_assignment(group, payload.assignment, now_ms, effects)
                group.transition_to(STABLE, now_ms)
