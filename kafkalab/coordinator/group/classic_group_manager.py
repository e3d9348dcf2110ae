"""ClassicGroupManager: the classic group protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and its rebalances.

Kafka's classes: kafka.coordinator.group.GroupCoordinator in 3.x (with DelayedJoin,
InitialDelayedJoin, DelayedSync, DelayedHeartbeat), the classicGroup* half of
org.apache.kafka.coordinator.group.GroupMetadataManager in 4.x.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import TYPE_CHECKING

from kafkalab.coordinator.group.classic_group import ClassicGroup
from kafkalab.coordinator.group.classic_group_member import ClassicGroupMember
from kafkalab.coordinator.group.classic_group_rebalance import (
    ClassicGroupRebalance,
    store_group_error,
)
from kafkalab.coordinator.group.classic_group_requests import (
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    SyncGroupRequestData,
)
from kafkalab.coordinator.group.group_config import NEW_MEMBER_JOIN_TIMEOUT_MS
from kafkalab.coordinator.group.group_runtime import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    UNKNOWN_MEMBER_ID,
    AppendKind,
    GroupPendingAppend,
    StaticRejoinAppend,
    SyncAppend,
    TimerKey,
    TimerKind,
)
from kafkalab.coordinator.group.results import (
    Effects,
    HeartbeatResult,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    Respond,
    SyncGroupResult,
)
from kafkalab.errors import Errors

if TYPE_CHECKING:
    from kafkalab.coordinator.group.group_coordinator import GroupCoordinator


class ClassicGroupManager:
    """The classic groups of a GroupCoordinator."""

    def __init__(
        self, shard: GroupCoordinator, member_id_factory: Callable[[str, str | None], str]
    ) -> None:
        self.shard = shard
        self.member_id_factory = member_id_factory
        self.rebalance = ClassicGroupRebalance(shard)

    # ======================================================================================
    # JoinGroup
    # ======================================================================================

    def join_group(
        self, data: JoinGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """JoinGroup. `require_known_member_id` is true for JoinGroup v4+ (a new
        dynamic member first gets MEMBER_ID_REQUIRED and its id, then rejoins with
        it); the rebalance timeout defaults to the session timeout, as for v0."""
        effects = self.shard.begin_call(now_ms, request)
        request = effects.request
        join = replace(
            data,
            rebalance_timeout_ms=data.effective_rebalance_timeout_ms,
            protocols=tuple((name, bytes(meta)) for name, meta in data.protocols),
        )
        group_id, member_id = join.group_id, join.member_id
        group = self.shard.groups.get(group_id)
        error = self._join_error(join)
        if error is None and group is None and member_id != UNKNOWN_MEMBER_ID:
            error = Errors.UNKNOWN_MEMBER_ID
        if error is not None:
            effects.append(Respond(request, JoinGroupResult(error, member_id)))
            return self.shard.end_call(effects, now_ms)
        if group is None:
            group = self.shard.groups[group_id] = ClassicGroup(group_id, EMPTY, now_ms)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                group.remove(member_id)
                self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group_id, member_id))
            effects.append(
                Respond(request, JoinGroupResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
            )
        elif member_id == UNKNOWN_MEMBER_ID:
            self._new_member_join(group, join, request, now_ms, effects)
        else:
            self._current_member_join(group, join, request, now_ms, effects)
        if group.is_(PREPARING):
            self.rebalance.check_join(group, now_ms, effects)
        return self.shard.end_call(effects, now_ms)

    def _join_error(self, join: JoinGroupRequestData) -> Errors | None:
        """The checks before any group is looked at: the group is ours and loaded,
        the session timeout within the broker's bounds, the id not a KIP-848 group's."""
        error = self.shard.group_status(join.group_id, "join_group")
        if error is not None:
            return error
        if not (
            self.shard.config.group_min_session_timeout_ms
            <= join.session_timeout_ms
            <= self.shard.config.group_max_session_timeout_ms
        ):
            return Errors.INVALID_SESSION_TIMEOUT
        consumer = self.shard.consumer_groups.get(join.group_id)
        if consumer is not None and consumer.members:
            return Errors.INCONSISTENT_GROUP_PROTOCOL  # a KIP-848 group has this id
        return None

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka: acceptJoiningMember (group.max.size)."""
        max_size = self.shard.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join() < max_size
            )
        return group.has(member_id) or group.size() < max_size

    def _new_member_join(
        self,
        group: ClassicGroup,
        join: JoinGroupRequestData,
        request: Hashable,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """A member without an id: a static one restarting, or a new one."""
        instance_id = join.group_instance_id
        if group.is_(DEAD):
            effects.append(
                Respond(
                    request, JoinGroupResult(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
                )
            )
            return
        if not group.supports_protocols(join.protocol_type, join.protocols):
            effects.append(
                Respond(
                    request, JoinGroupResult(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
                )
            )
            return
        new_id = self.member_id_factory(join.client_id, instance_id)
        if instance_id is not None:
            old_id = group.current_static_member_id(instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(
                    group, join, request, old_id, new_id, now_ms, effects
                )
                return
        elif join.require_known_member_id:
            group.pending_members.add(new_id)
            self.shard.schedule(
                TimerKey(TimerKind.PENDING_MEMBER, group.group_id, new_id),
                now_ms + join.session_timeout_ms,
            )
            effects.append(Respond(request, JoinGroupResult(Errors.MEMBER_ID_REQUIRED, new_id)))
            return
        self._add_member_and_rebalance(group, join, request, new_id, now_ms, effects)

    def _current_member_join(
        self,
        group: ClassicGroup,
        join: JoinGroupRequestData,
        request: Hashable,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """A member with an id: one MEMBER_ID_REQUIRED gave it, or one rejoining."""
        member_id, instance_id = join.member_id, join.group_instance_id

        def answer(error: Errors) -> None:
            effects.append(Respond(request, JoinGroupResult(error, member_id)))

        if group.is_(DEAD):
            return answer(Errors.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(join.protocol_type, join.protocols):
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            self.shard.cancel(TimerKey(TimerKind.PENDING_MEMBER, group.group_id, member_id))
            self._add_member_and_rebalance(group, join, request, member_id, now_ms, effects)
            return None
        if instance_id is not None:
            current = group.current_static_member_id(instance_id)
            if current is not None and current != member_id:
                return answer(Errors.FENCED_INSTANCE_ID)
            if current is None:
                return answer(Errors.UNKNOWN_MEMBER_ID)
        if not group.has(member_id):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        self._rejoin(group, group.get(member_id), join, request, now_ms, effects)
        return None

    def _rejoin(
        self,
        group: ClassicGroup,
        member: ClassicGroupMember,
        join: JoinGroupRequestData,
        request: Hashable,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """A known member joins again: the current generation back when nothing
        changes (a retry, or a follower of a Stable group), else a rebalance with
        its new protocols and timeouts."""
        protocols = list(join.protocols)
        if group.is_(EMPTY):  # not expected for a known member; let it reset and rejoin
            effects.append(
                Respond(request, JoinGroupResult(Errors.UNKNOWN_MEMBER_ID, member.member_id))
            )
            return
        leader = group.is_leader(member.member_id)
        if group.is_(COMPLETING) and member.matches(protocols):
            # a retry of a join whose answer was lost: the same answer again
            everyone = tuple(
                JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
            members = everyone if leader else ()
        elif group.is_(STABLE) and not leader and member.matches(protocols):
            members = ()  # (the leader rejoining forces a rebalance: metadata changed)
        else:
            member.protocols = protocols
            member.rebalance_timeout_ms = join.effective_rebalance_timeout_ms
            member.session_timeout_ms = join.session_timeout_ms
            self.rebalance.await_join(member, request, effects)
            self.rebalance.maybe_prepare_rebalance(group, now_ms, effects)
            return
        result = JoinGroupResult(
            Errors.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )
        effects.append(Respond(request, result))

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        join: JoinGroupRequestData,
        request: Hashable,
        member_id: str,
        now_ms: int,
        effects: Effects,
    ) -> None:
        member = ClassicGroupMember(
            member_id,
            join.group_instance_id,
            join.client_id,
            join.client_host,
            join.effective_rebalance_timeout_ms,
            join.session_timeout_ms,
            join.protocol_type,
            list(join.protocols),
            join_request=request,
            is_new=True,
        )
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # a new member cannot heartbeat yet; drop it if its join never completes
        self.rebalance.schedule_heartbeat(group, member, now_ms, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance(group, now_ms, effects)

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        join: JoinGroupRequestData,
        request: Hashable,
        old_id: str,
        new_id: str,
        now_ms: int,
        effects: Effects,
    ) -> None:
        """A static member rejoins with an empty member id (it restarted): it takes
        its old place under a new id; the old id is fenced. A Stable group whose
        protocol would not change does not rebalance: the member gets the current
        generation back (KIP-345), after the new id is written to the log."""
        instance_id = join.group_instance_id
        assert instance_id is not None  # only a static member comes here
        current_leader = group.leader_id
        old = group.get(old_id)
        self.rebalance.answer_join(
            group, old, JoinGroupResult(Errors.FENCED_INSTANCE_ID, old_id), effects
        )
        self.rebalance.answer_sync(old, SyncGroupResult(Errors.FENCED_INSTANCE_ID), effects)
        saved = (list(old.protocols), old.rebalance_timeout_ms, old.session_timeout_ms)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, old_id))
        self.rebalance.schedule_heartbeat(group, member, now_ms)
        member.protocols = list(join.protocols)
        member.rebalance_timeout_ms = join.effective_rebalance_timeout_ms
        member.session_timeout_ms = join.session_timeout_ms
        member.join_request = request
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                record = self.rebalance.group_record(group, assignment)
                payload = StaticRejoinAppend(
                    group, record, instance_id, old_id, new_id, saved, current_leader
                )
                waiting = (AppendKind.STATIC_REJOIN, request, payload)
                effects.append(self.rebalance.group_append(group, record, now_ms, waiting))
            else:
                self.rebalance.maybe_prepare_rebalance(group, now_ms, effects)
        elif group.is_(COMPLETING):
            self.rebalance.prepare_rebalance(group, now_ms, effects)
        # PreparingRebalance: the member now simply waits with the others

    def complete_static_rejoin(
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
            self.shard.cancel(TimerKey(TimerKind.HEARTBEAT, group.group_id, new_id))
            self.rebalance.schedule_heartbeat(group, member, now_ms)
            result = JoinGroupResult(
                store_group_error(error),
                UNKNOWN_MEMBER_ID,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                current_leader or "",
            )
        else:
            if self.rebalance.is_latest_record(group, payload.record) and group.is_(STABLE):
                self.rebalance.replay_group_metadata(group.group_id, payload.record, now_ms)
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
        self, data: SyncGroupRequestData | HeartbeatRequestData, api: str
    ) -> tuple[ClassicGroup | None, Errors | None]:
        """The checks SyncGroup and Heartbeat share, in Kafka's order: the group is
        ours and loaded, exists and is alive, knows this member, and is in the
        generation the member names. (group, None) when all pass."""
        error = self.shard.group_status(data.group_id, api)
        if error is not None:
            return None, error
        group = self.shard.groups.get(data.group_id)
        if group is None:
            return None, Errors.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return None, Errors.COORDINATOR_NOT_AVAILABLE
        error = self.validate_current_member(group, data.member_id, data.group_instance_id)
        if error is not None:
            return None, error
        if data.generation_id != group.generation_id:
            return None, Errors.ILLEGAL_GENERATION
        return group, None

    @staticmethod
    def validate_current_member(
        group: ClassicGroup, member_id: str, instance_id: str | None
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
        self, data: SyncGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """SyncGroup. The leader passes every member's assignment; followers pass none
        and wait for the leader's to be written."""
        effects = self.shard.begin_call(now_ms, request)
        request = effects.request
        member_id = data.member_id

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, SyncGroupResult(error)))
            return self.shard.end_call(effects, now_ms)

        group, error = self._member_of_generation(data, "sync_group")
        if error is not None:
            return answer(error)
        if data.protocol_type is not None and data.protocol_type != group.protocol_type:
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if data.protocol_name is not None and data.protocol_name != group.protocol_name:
            return answer(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(EMPTY):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        if group.is_(PREPARING):
            return answer(Errors.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        if group.is_(COMPLETING):
            self.rebalance.await_sync(member, request, effects)
            self.rebalance.remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                given = {k: bytes(v) for k, v in data.assignments}
                assignment = {m: given.get(m, b"") for m in group.members}
                record = self.rebalance.group_record(group, assignment)
                payload = SyncAppend(group, record)
                waiting = (AppendKind.SYNC, request, payload)
                effects.append(self.rebalance.group_append(group, record, now_ms, waiting))
        else:  # Stable: the assignment is already known
            self.rebalance.remove_pending_sync_member(group, member_id)
            effects.append(
                Respond(
                    request,
                    SyncGroupResult(
                        Errors.NONE, group.protocol_type, group.protocol_name, member.assignment
                    ),
                )
            )
            self.rebalance.schedule_heartbeat(group, member, now_ms)
        return self.shard.end_call(effects, now_ms)

    def heartbeat(
        self, data: HeartbeatRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """Heartbeat: resets the member's session timer; REBALANCE_IN_PROGRESS tells
        it to rejoin."""
        effects = self.shard.begin_call(now_ms, request)

        def answer(error: Errors) -> Effects:
            effects.append(Respond(effects.request, HeartbeatResult(error)))
            return self.shard.end_call(effects, now_ms)

        group, error = self._member_of_generation(data, "heartbeat")
        if error is not None:
            return answer(error)
        if group.is_(EMPTY):
            return answer(Errors.UNKNOWN_MEMBER_ID)
        self.rebalance.schedule_heartbeat(group, group.get(data.member_id), now_ms)
        return answer(Errors.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else Errors.NONE)

    def leave_group(
        self, data: LeaveGroupRequestData, *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """LeaveGroup for (member_id, group_instance_id) pairs. An empty member id
        with an instance id removes that static member (the admin's way, KIP-345)."""
        effects = self.shard.begin_call(now_ms, request)

        def answer(error: Errors, per_member: tuple = ()) -> Effects:
            effects.append(Respond(effects.request, LeaveGroupResult(error, per_member)))
            return self.shard.end_call(effects, now_ms)

        group_id, members = data.group_id, data.members
        error = self.shard.group_status(group_id, "leave_group")
        if error is not None:
            return answer(error)
        group = self.shard.groups.get(group_id)
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
                    self.rebalance.remove_member_and_update_group(
                        group, group.get(current), now_ms, effects
                    )
                    error = Errors.NONE
            elif member_id in group.pending_members:
                self.rebalance.remove_pending_member_and_update_group(
                    group, member_id, now_ms, effects
                )
                error = Errors.NONE
            elif instance_id is not None and group.current_static_member_id(instance_id) not in (
                None,
                member_id,
            ):
                error = Errors.FENCED_INSTANCE_ID
            elif group.has(member_id):
                self.rebalance.remove_member_and_update_group(
                    group, group.get(member_id), now_ms, effects
                )
                error = Errors.NONE
            else:
                error = Errors.UNKNOWN_MEMBER_ID
            results.append(LeaveMemberResult(member_id, instance_id, error))
        return answer(Errors.NONE, tuple(results))
