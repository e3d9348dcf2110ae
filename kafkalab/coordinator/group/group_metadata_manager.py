"""GroupMetadataManager: the groups as a whole, both kinds.

Kafka's class: org.apache.kafka.coordinator.group.GroupMetadataManager (which in
Kafka also holds what kafkalab keeps in ClassicGroupManager and
ConsumerGroupManager): DescribeGroups, ListGroups, DeleteGroups.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from kafkalab.coordinator.group.group_runtime import (
    DEAD,
    EMPTY,
    STABLE,
)
from kafkalab.coordinator.group.results import (
    DeleteGroupsResult,
    DescribedGroup,
    DescribedMember,
    Effects,
    ListedGroup,
    ListGroupsResult,
    Respond,
)
from kafkalab.errors import Errors
from kafkalab.protocol.consumer_protocol import PROTOCOL_TYPE

if TYPE_CHECKING:
    from kafkalab.coordinator.group.group_coordinator import GroupCoordinator


class GroupMetadataManager:
    """Describes, lists and deletes the groups of a GroupCoordinator."""

    def __init__(self, shard: GroupCoordinator) -> None:
        self.shard = shard

    # ======================================================================================
    # groups as a whole
    # ======================================================================================

    def delete_groups(
        self, group_ids: list[str], *, now_ms: int, request: Hashable | None = None
    ) -> Effects:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise); their offsets
        and the group record are tombstoned."""
        effects = self.shard.begin_call(now_ms, request)
        errors: dict[str, Errors] = {}
        doomed = []
        for group_id in group_ids:
            error = self.shard.group_status(group_id, "delete_groups")
            if error is not None:
                errors[group_id] = error
                continue
            consumer = self.shard.consumer_manager.delete_consumer_group(group_id, now_ms, effects)
            if consumer is not None and (
                consumer != Errors.NONE or group_id not in self.shard.groups
            ):
                errors[group_id] = consumer
                continue
            group = self.shard.groups.get(group_id)
            if group is None or group.is_(DEAD):
                errors[group_id] = Errors.GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                group.transition_to(DEAD, now_ms)
                doomed.append(group)
                errors[group_id] = Errors.NONE
            else:
                errors[group_id] = Errors.NON_EMPTY_GROUP
        if doomed:
            self.shard.offset_manager.cleanup_group_metadata(
                doomed,
                self.shard.offset_manager.remove_all_offsets,
                now_ms,
                effects,
            )
        effects.append(Respond(effects.request, DeleteGroupsResult(errors)))
        return self.shard.end_call(effects, now_ms)

    def describe_group(self, group_id: str) -> DescribedGroup:
        """DescribeGroups for one group; changes nothing."""
        error = self.shard.group_status(group_id, "describe_groups")
        if error is not None:
            return DescribedGroup(error, group_id, "")
        group = self.shard.groups.get(group_id)
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
        if not self.shard.partitions.active:
            return ListGroupsResult(Errors.COORDINATOR_NOT_AVAILABLE)
        wanted = {s.lower() for s in states} if states else None
        groups = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", str(g.state))
            for g in self.shard.groups.values()
            if not g.is_(DEAD)
            and self.shard.partition_for(g.group_id) in self.shard.partitions.owned
            and (wanted is None or str(g.state).lower() in wanted)
        )
        groups = tuple(g for g in groups if g.group_id not in self.shard.consumer_groups) + tuple(
            ListedGroup(g.group_id, PROTOCOL_TYPE, str(g.state))
            for g in self.shard.consumer_groups.values()
            if self.shard.partition_for(g.group_id) in self.shard.partitions.owned
            and (wanted is None or str(g.state).lower() in wanted)
        )
        error = (
            Errors.COORDINATOR_LOAD_IN_PROGRESS if self.shard.partitions.loading else Errors.NONE
        )
        return ListGroupsResult(error, groups)
