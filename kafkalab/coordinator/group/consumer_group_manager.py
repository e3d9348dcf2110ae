"""ConsumerGroupManager: KIP-848 consumer groups, heartbeat by heartbeat.

Kafka's class: the consumer-group half of
org.apache.kafka.coordinator.group.GroupMetadataManager (consumerGroupHeartbeat,
the records of a group's epochs, target and current assignments, session and
revocation timeouts, ConsumerGroupDescribe, replay).

How a handler changes a group (heartbeat, session or revocation timeout, leave,
new topic metadata, deletion): it works out the group as it should be on a copy
of the served one, `consumer_group_records.records_between` gives the records
that turn the served group into the copy, and those records are replayed into
the served group at once by `replay_consumer_group_record`, the function the
load path uses; nothing else writes a group's epochs, members or assignments.
So a group after live handling and after loading its records cannot differ.
Kafka does the same: a write's records are replayed into the shard's timeline
structures when the write is appended, and reverted if the append fails. Here
a group with writes in flight keeps the group as the log had it before them and
their records (PendingWrites); if one fails, the group is rebuilt by replaying
the others' records onto that, which is what a load of the log will find
(`complete_write`). What the log does not carry stays in memory, as in Kafka:
session and revocation deadlines, the partition counts the target was computed
with, the assignor last used.

The answer to a heartbeat is given at once (Kafka answers once the records are
committed): a member whose write then fails finds its epoch gone at its next
heartbeat (FENCED_MEMBER_EPOCH) and rejoins.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalab.coordinator.group import consumer_group_records as cgrec
from kafkalab.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupHeartbeatRequestData,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupMember,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    MemberState,
    TopicMetadata,
    TopicPartition,
)
from kafkalab.coordinator.group.group_config import GroupConfig
from kafkalab.coordinator.group.group_runtime import (
    AppendKind,
    AppendPayload,
    ConsumerGroupAppend,
    TimerKey,
    TimerKind,
)
from kafkalab.coordinator.group.results import AppendRecords, Effects
from kafkalab.coordinator.group.server_assignors import SERVER_ASSIGNORS
from kafkalab.coordinator.runtime import CoordinatorRuntimeCore
from kafkalab.errors import Errors

HeartbeatData = ConsumerGroupHeartbeatRequestData
Found = tuple[ConsumerGroupMember, bool] | ConsumerGroupHeartbeatResult


@dataclass
class PendingWrites:
    """A group's writes not yet completed (soft state): the group as the log had it
    before the oldest (None: no group), and each write's records, oldest first."""

    base: ConsumerGroup | None
    records: dict[int, list[cgrec.Record]] = field(default_factory=dict)  # by append id
    acknowledged: set[int] = field(default_factory=set)


@dataclass
class ConsumerGroupContext:
    """What the KIP-848 manager works on, handed to it by its GroupCoordinator."""

    groups: dict[str, ConsumerGroup]  # the served KIP-848 groups, by id
    topics: TopicMetadata  # partition counts and topic ids
    runtime: CoordinatorRuntimeCore[AppendKind, AppendPayload, TimerKey]  # deadlines, appends
    config: GroupConfig
    member_id_factory: Callable[[str, str | None], str]  # (client id, instance id) -> id
    partition_for: Callable[[str], int]  # a group's __consumer_offsets partition
    group_status: Callable[[str, str], Errors | None]  # (group, api) -> refusal, None: serve
    classic_group_in_use: Callable[[str], bool]  # a non-Empty classic group has that id


class ConsumerGroupManager:
    """The KIP-848 consumer groups of a GroupCoordinator."""

    def __init__(self, context: ConsumerGroupContext) -> None:
        self.context = context
        self.groups = context.groups
        self.topics = context.topics
        self.runtime = context.runtime
        self.config = context.config
        # (group, member) -> the epoch a revocation deadline was armed at (soft state)
        self.revocation_epochs: dict[tuple[str, str], int] = {}
        # group -> its writes in flight, to rebuild it from if one fails
        self.pending_writes: dict[str, PendingWrites] = {}

    # ======================================================================================
    # replay: the one path from a record to a group
    # ======================================================================================

    def replay_consumer_group_record(
        self, groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None
    ) -> None:
        """Apply one KIP-848 record (Kafka: GroupMetadataManager.replay), written
        now or read at load."""
        k = cgrec.decode_key(key)
        if k.type == cgrec.GROUP_METADATA:
            if value is None:
                gone = groups.pop(k.group_id, None)
                if gone is not None:
                    gone.dead = True
                return
            group = groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
            group.group_epoch = cgrec.decode_value(k.type, value)["epoch"]
            return
        if k.type == cgrec.PARTITION_METADATA:
            return
        group = groups.get(k.group_id)
        if group is None:
            if value is None:
                return
            group = groups[k.group_id] = ConsumerGroup(k.group_id)
        if k.type == cgrec.TARGET_ASSIGNMENT_METADATA:
            if value is not None:
                group.assignment_epoch = cgrec.decode_value(k.type, value)["assignment_epoch"]
        elif k.type == cgrec.TARGET_ASSIGNMENT_MEMBER:
            self._replay_target(group, k.member_id or "", value)
        else:
            self._replay_member(group, k.type, k.member_id or "", value)

    def _replay_target(self, group: ConsumerGroup, member_id: str, value: bytes | None) -> None:
        if value is None:
            group.target.pop(member_id, None)
            return
        d = cgrec.decode_value(cgrec.TARGET_ASSIGNMENT_MEMBER, value)
        names = self.topics.topic_names()
        group.target[member_id] = cgrec.from_topic_partitions(d["topic_partitions"], names)

    def _replay_member(
        self, group: ConsumerGroup, record_type: int, member_id: str, value: bytes | None
    ) -> None:
        if value is None:
            if record_type == cgrec.MEMBER_METADATA:
                group.members.pop(member_id, None)
            return
        member = group.members.setdefault(member_id, ConsumerGroupMember(member_id))
        d = cgrec.decode_value(record_type, value)
        if record_type == cgrec.MEMBER_METADATA:
            member.instance_id, member.rack_id = d["instance_id"], d["rack_id"]
            member.client_id, member.client_host = d["client_id"], d["client_host"]
            member.subscribed_topic_names = frozenset(d["subscribed_topic_names"])
            member.rebalance_timeout_ms = d["rebalance_timeout_ms"]
            member.server_assignor = d["server_assignor"]
            return
        # CURRENT_MEMBER_ASSIGNMENT
        names = self.topics.topic_names()
        member.member_epoch = d["member_epoch"]
        member.previous_member_epoch = d["previous_member_epoch"]
        by_byte = {v: name for name, v in cgrec.STATE_BYTES.items()}
        member.state = MemberState(by_byte.get(d["state"], "stable"))
        member.assigned = cgrec.from_topic_partitions(d["assigned_partitions"], names)
        member.pending_revocation = cgrec.from_topic_partitions(
            d["partitions_pending_revocation"], names
        )

    # ======================================================================================
    # writing: records for what a handler changed, replayed at once
    # ======================================================================================

    def _draft(self, group_id: str) -> tuple[ConsumerGroup | None, ConsumerGroup]:
        """The served group (None: none yet) and a copy for a handler to change."""
        served = self.groups.get(group_id)
        if served is not None:
            return served, copy.deepcopy(served)
        return None, ConsumerGroup(
            group_id, preferred_assignor=self.config.group_consumer_assignors[0]
        )

    def _write_changes(
        self, served: ConsumerGroup | None, draft: ConsumerGroup, now_ms: int, effects: Effects
    ) -> None:
        """Write the records that make the served group `draft`, and replay them."""
        before = served if served is not None else ConsumerGroup(draft.group_id)
        records = cgrec.records_between(before, draft, self.topics.topic_id)
        self._write(draft.group_id, records, now_ms, effects)
        group = self.groups.get(draft.group_id)
        if group is not None:  # what no record carries
            group.preferred_assignor = draft.preferred_assignor
            group.subscription_metadata = dict(draft.subscription_metadata)

    def _write(
        self, group_id: str, records: list[cgrec.Record], now_ms: int, effects: Effects
    ) -> None:
        if not records:
            return
        pending = self.pending_writes.get(group_id)
        if pending is None:
            served = self.groups.get(group_id)
            pending = self.pending_writes[group_id] = PendingWrites(
                None if served is None else copy.deepcopy(served)
            )
        for key, value in records:
            self.replay_consumer_group_record(self.groups, key, value)
        partition = self.context.partition_for(group_id)
        append_id = self.runtime.add_append(
            AppendKind.CONSUMER_GROUP, partition, None, ConsumerGroupAppend(group_id)
        )
        pending.records[append_id] = records
        effects.append(AppendRecords(partition, tuple(records), now_ms, append_id))

    def _replayed(
        self, group_id: str, base: ConsumerGroup | None, writes: list[list[cgrec.Record]]
    ) -> ConsumerGroup | None:
        """`base` (copied) with the records of `writes` replayed onto it, in order."""
        groups = {} if base is None else {group_id: copy.deepcopy(base)}
        for records in writes:
            for key, value in records:
                self.replay_consumer_group_record(groups, key, value)
        return groups.get(group_id)

    def complete_write(
        self, append_id: int, write: ConsumerGroupAppend, error: Errors, now_ms: int
    ) -> None:
        """A write's append completed. Acknowledged writes at the front fold into the
        base. A failed one's records are not in the log: the group is rebuilt as the
        log has it (the base, then the other writes in flight), and its members'
        deadlines armed where the failed write had cancelled them."""
        pending = self.pending_writes.get(write.group_id)
        if pending is None or append_id not in pending.records:
            return  # the group was unloaded meanwhile
        failed = error != Errors.NONE
        if failed:
            del pending.records[append_id]
        else:
            pending.acknowledged.add(append_id)
        while pending.records and (oldest := next(iter(pending.records))) in pending.acknowledged:
            pending.base = self._replayed(write.group_id, pending.base, [pending.records[oldest]])
            del pending.records[oldest]
            pending.acknowledged.discard(oldest)
        if failed:
            self._rebuild(write.group_id, pending, now_ms)
        if not pending.records:
            del self.pending_writes[write.group_id]

    def _rebuild(self, group_id: str, pending: PendingWrites, now_ms: int) -> None:
        group = self._replayed(group_id, pending.base, list(pending.records.values()))
        served = self.groups.pop(group_id, None)
        if group is None:
            if served is not None:
                served.dead = True
            return
        if served is not None:  # what no record carries
            group.preferred_assignor = served.preferred_assignor
            group.subscription_metadata = served.subscription_metadata
        self.groups[group_id] = group
        self.arm_deadlines(group, now_ms, only_missing=True)

    # ======================================================================================
    # loading and unloading
    # ======================================================================================

    def on_loaded(self, partition: int, now_ms: int) -> None:
        """The partition's records are replayed: what the log does not carry."""
        for group in self.groups.values():
            if self.context.partition_for(group.group_id) != partition:
                continue
            wanted = group.subscribed_topics()
            group.subscription_metadata = {
                t: n for t, n in self.topics.partitions_per_topic.items() if t in wanted
            }
            self.arm_deadlines(group, now_ms)

    def arm_deadlines(self, group: ConsumerGroup, now_ms: int, only_missing: bool = False) -> None:
        """Every member's session, and the revocation deadline of those revoking."""
        for member in group.members.values():
            session = TimerKey(TimerKind.CONSUMER_SESSION, group.group_id, member.member_id)
            if not (only_missing and self.runtime.is_scheduled(session)):
                self.runtime.schedule(
                    session, now_ms + self.config.group_consumer_session_timeout_ms
                )
            revocation = TimerKey(TimerKind.CONSUMER_REVOCATION, group.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS and not (
                only_missing and self.runtime.is_scheduled(revocation)
            ):
                self.schedule_revocation(group.group_id, member, now_ms)

    def unload_consumer_groups(self, partition: int | None) -> None:
        for group_id in [
            g for g in self.groups if partition in (None, self.context.partition_for(g))
        ]:
            group = self.groups.pop(group_id)
            group.dead = True
            self.pending_writes.pop(group_id, None)
            for member_id in group.members:
                self._cancel_deadlines(group_id, member_id)
        if partition is None:
            self.revocation_epochs.clear()

    # ======================================================================================
    # topic metadata
    # ======================================================================================

    def update_topic_metadata(
        self,
        partitions_per_topic: dict[str, int],
        topic_ids: dict[str, uuid.UUID] | None,
        now_ms: int,
    ) -> Effects:
        """The cluster's topics, partition counts and topic ids (from the metadata
        image; KIP-848 records name partitions by topic id). A consumer group whose
        subscribed topics changed gets a new group epoch, so its target assignment is
        computed again at its next heartbeat; the effects write that epoch."""
        effects = Effects()
        self.topics.partitions_per_topic = dict(partitions_per_topic)
        self.topics.topic_ids.update(topic_ids or {})
        for group_id, group in list(self.groups.items()):
            wanted = group.subscribed_topics()
            now = {t: n for t, n in self.topics.partitions_per_topic.items() if t in wanted}
            if group.members and now != group.subscription_metadata:
                served, draft = self._draft(group_id)
                draft.bump_group_epoch()
                self._write_changes(served, draft, now_ms, effects)
        return effects

    # ======================================================================================
    # ConsumerGroupHeartbeat
    # ======================================================================================

    def consumer_group_heartbeat(
        self, hb: HeartbeatData, now_ms: int, effects: Effects
    ) -> ConsumerGroupHeartbeatResult:
        """ConsumerGroupHeartbeat (KIP-848). Fields left None were not sent (the
        request sends only what changed). The records of what changed in the group
        go into `effects`; the answer is returned."""
        refused = self._validate_heartbeat(hb)
        if refused is not None:
            return refused
        served, draft = self._draft(hb.group_id)
        refused = self._check_group(hb, served)
        if refused is not None:
            return refused
        result = self._heartbeat_member(draft, hb, now_ms)
        self._write_changes(served, draft, now_ms, effects)
        return result

    @staticmethod
    def _refuse(
        hb: HeartbeatData, error: Errors, message: str | None = None
    ) -> ConsumerGroupHeartbeatResult:
        return ConsumerGroupHeartbeatResult(error, member_id=hb.member_id, error_message=message)

    def _validate_heartbeat(self, hb: HeartbeatData) -> ConsumerGroupHeartbeatResult | None:
        """The checks that need no group (Kafka: throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
        error = self.context.group_status(hb.group_id, "consumer_group_heartbeat")
        if error is not None:
            return self._refuse(hb, error)
        if hb.member_epoch == 0 and (
            hb.subscribed_topic_names is None or hb.rebalance_timeout_ms == -1
        ):
            return self._refuse(
                hb,
                Errors.INVALID_REQUEST,
                "a joining member must send its subscription and rebalance timeout",
            )
        if hb.member_epoch != 0 and not hb.member_id:
            return self._refuse(hb, Errors.INVALID_REQUEST, "member id is required after joining")
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and hb.instance_id is None:
            return self._refuse(
                hb, Errors.INVALID_REQUEST, "epoch -2 (temporary leave) is for static members"
            )
        assignors = self.config.group_consumer_assignors
        if hb.server_assignor is not None and hb.server_assignor not in assignors:
            return self._refuse(
                hb,
                Errors.UNSUPPORTED_ASSIGNOR,
                f"assignor {hb.server_assignor!r} is not one of {', '.join(assignors)}",
            )
        return None

    def _check_group(
        self, hb: HeartbeatData, served: ConsumerGroup | None
    ) -> ConsumerGroupHeartbeatResult | None:
        """The group id is not a classic group's in use, and only a joining member
        creates a consumer group."""
        if self.context.classic_group_in_use(hb.group_id):
            return self._refuse(
                hb,
                Errors.GROUP_ID_NOT_FOUND,
                f"group {hb.group_id} is a classic group, not a consumer group",
            )
        if served is None and hb.member_epoch != 0:
            return self._refuse(
                hb, Errors.GROUP_ID_NOT_FOUND, f"consumer group {hb.group_id} does not exist"
            )
        return None

    def _heartbeat_member(
        self, group: ConsumerGroup, hb: HeartbeatData, now_ms: int
    ) -> ConsumerGroupHeartbeatResult:
        """Leave, or: find the member, update it and the group epoch, compute the
        target if the group epoch moved past it, and reconcile the member toward it.
        `group` is the handler's copy."""
        if hb.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, hb)
        found = self._joining_member(group, hb) if hb.member_epoch == 0 else self._member(group, hb)
        if isinstance(found, ConsumerGroupHeartbeatResult):
            return found
        member, changed = found
        seen = (member.member_epoch, member.state, member.assigned)
        if self._update_member(member, hb) or changed:
            group.bump_group_epoch()
        if group.group_epoch > group.assignment_epoch:
            group.compute_target(
                SERVER_ASSIGNORS[self._consumer_group_assignor(group)],
                self.topics.partitions_per_topic,
            )
        self._reconcile(group, member, hb.owned_partitions, now_ms)
        send = (
            hb.owned_partitions is not None
            or hb.member_epoch == 0
            or seen != (member.member_epoch, member.state, member.assigned)
        )
        return ConsumerGroupHeartbeatResult(
            Errors.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            assignment=member.assigned if send else None,
        )

    def _leave(self, group: ConsumerGroup, hb: HeartbeatData) -> ConsumerGroupHeartbeatResult:
        member = group.members.get(hb.member_id)
        if member is None:
            return self._refuse(hb, Errors.UNKNOWN_MEMBER_ID)
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member.update_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH)  # keeps its partitions
        else:
            self._remove_member(group, hb.member_id)
        return ConsumerGroupHeartbeatResult(
            Errors.NONE, member_id=hb.member_id, member_epoch=hb.member_epoch
        )

    def _joining_member(self, group: ConsumerGroup, hb: HeartbeatData) -> Found:
        """Epoch 0: a new member, a restarted static one taking its place back, or a
        dynamic member starting over. (member, whether the group epoch must move)."""
        member = group.members.get(hb.member_id) if hb.member_id else None
        if hb.instance_id is not None:
            previous = group.static_member(hb.instance_id)
            if previous is not None and previous.member_id != hb.member_id:
                if previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    return self._refuse(
                        hb,
                        Errors.UNRELEASED_INSTANCE_ID,
                        f"instance {hb.instance_id} is still used by member {previous.member_id}",
                    )
                member = self._replace_static_member(group, previous, hb)
        if member is None:
            if len(group.members) >= self.config.group_consumer_max_size:
                return self._refuse(hb, Errors.GROUP_MAX_SIZE_REACHED)
            member_id = hb.member_id or self.context.member_id_factory(hb.client_id, hb.instance_id)
            member = group.members[member_id] = ConsumerGroupMember(member_id)
            return member, True
        if member.member_epoch != 0 and member.instance_id is None:
            # a dynamic member rejoining from scratch: it lost everything
            member.assigned = frozenset()
            member.pending_revocation = frozenset()
            member.update_epoch(0)
            member.state = MemberState.STABLE
            return member, True
        return member, False

    def _replace_static_member(
        self, group: ConsumerGroup, previous: ConsumerGroupMember, hb: HeartbeatData
    ) -> ConsumerGroupMember:
        """A restarted static member takes over its predecessor's place, partitions
        and epoch, without a new group epoch (no rebalance)."""
        old_id = previous.member_id
        old_target = group.target.get(old_id, previous.assigned)
        group.remove_member(old_id)
        self._cancel_deadlines(group.group_id, old_id)
        new_id = hb.member_id or self.context.member_id_factory(hb.client_id, hb.instance_id)
        previous.member_id = new_id
        previous.member_epoch = previous.previous_member_epoch
        group.members[new_id] = previous
        group.target[new_id] = old_target
        return previous

    def _member(self, group: ConsumerGroup, hb: HeartbeatData) -> Found:
        """A member already in the group, at an epoch it may heartbeat with."""
        member = group.members.get(hb.member_id)
        if member is None:
            return self._refuse(
                hb,
                Errors.UNKNOWN_MEMBER_ID,
                f"member {hb.member_id} is not in group {hb.group_id}",
            )
        epoch = hb.member_epoch
        if epoch > member.member_epoch or (
            epoch < member.member_epoch
            and (
                epoch != member.previous_member_epoch
                or not set(hb.owned_partitions or ()) <= member.assigned
            )
        ):
            return self._refuse(
                hb,
                Errors.FENCED_MEMBER_EPOCH,
                f"epoch {epoch} but the coordinator has {member.member_epoch}: "
                "abandon all partitions and rejoin with epoch 0",
            )
        if hb.instance_id is not None and member.instance_id != hb.instance_id:
            return self._refuse(hb, Errors.FENCED_INSTANCE_ID)
        return member, False

    @staticmethod
    def _update_member(member: ConsumerGroupMember, hb: HeartbeatData) -> bool:
        """Take what the heartbeat sent; True when the subscription changed."""
        member.instance_id = hb.instance_id if hb.instance_id is not None else member.instance_id
        member.rack_id = hb.rack_id if hb.rack_id is not None else member.rack_id
        member.client_id = hb.client_id or member.client_id
        member.client_host = hb.client_host or member.client_host
        if hb.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.server_assignor is not None:
            member.server_assignor = hb.server_assignor
        topics = hb.subscribed_topic_names
        if topics is not None and frozenset(topics) != member.subscribed_topic_names:
            member.subscribed_topic_names = frozenset(topics)
            return True
        return False

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: tuple[TopicPartition, ...] | None,
        now_ms: int,
    ) -> None:
        """Move the member toward its target (ConsumerGroup.reconcile), renew its
        session, and arm or disarm its revocation deadline."""
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, owned)
        group_id, member_id = group.group_id, member.member_id
        self.runtime.schedule(
            TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id),
            now_ms + self.config.group_consumer_session_timeout_ms,
        )
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_revoking:
            self.schedule_revocation(group_id, member, now_ms)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.runtime.cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
            self.revocation_epochs.pop((group_id, member_id), None)

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

    # ======================================================================================
    # session and revocation deadlines
    # ======================================================================================

    def schedule_revocation(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """The member must revoke within its rebalance timeout, at this epoch."""
        self.revocation_epochs[(group_id, member.member_id)] = member.member_epoch
        self.runtime.schedule(
            TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member.member_id),
            now_ms + member.rebalance_timeout_ms,
        )

    def _cancel_deadlines(self, group_id: str, member_id: str) -> None:
        self.runtime.cancel(TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id))
        self.runtime.cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
        self.revocation_epochs.pop((group_id, member_id), None)

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        if group.remove_member(member_id) is not None:
            self._cancel_deadlines(group.group_id, member_id)
            group.bump_group_epoch()

    def on_revocation_deadline(
        self, group_id: str, member_id: str, now_ms: int, effects: Effects
    ) -> None:
        """The member's revocation deadline passed: fenced if it is still revoking
        at the epoch the deadline was armed at."""
        epoch = self.revocation_epochs.pop((group_id, member_id), None)
        if epoch is not None:
            self.fence_consumer_group_member(group_id, member_id, epoch, now_ms, effects)

    def fence_consumer_group_member(
        self, group_id: str, member_id: str, epoch: int | None, now_ms: int, effects: Effects
    ) -> None:
        """Session expired, or (epoch given) the member did not revoke in time."""
        served = self.groups.get(group_id)
        member = None if served is None else served.members.get(member_id)
        if member is None:
            return
        if epoch is not None and (
            member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            return
        served, draft = self._draft(group_id)
        self._remove_member(draft, member_id)
        self._write_changes(served, draft, now_ms, effects)

    # ======================================================================================
    # DeleteGroups and ConsumerGroupDescribe
    # ======================================================================================

    def delete_consumer_group(self, group_id: str, now_ms: int, effects: Effects) -> Errors | None:
        """DeleteGroups of a consumer group: NON_EMPTY_GROUP while it has members,
        else its tombstones are written and replayed (NONE). None: no consumer group
        has that id."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return Errors.NON_EMPTY_GROUP
        self._write(group_id, cgrec.group_tombstones(group_id), now_ms, effects)
        return Errors.NONE

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe for one group."""
        error = self.context.group_status(group_id, "consumer_group_describe")
        if error is not None:
            return DescribedConsumerGroup(error, group_id)
        group = self.groups.get(group_id)
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
