"""ConsumerGroupManager: KIP-848 consumer groups, heartbeat by heartbeat.

Kafka's class: the consumer-group half of
org.apache.kafka.coordinator.group.GroupMetadataManager (consumerGroupHeartbeat,
the records of a group's epochs, target and current assignments, session and
revocation timeouts, ConsumerGroupDescribe).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalab.coordinator.group import consumer_group_records as cgrec
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
from kafkalab.coordinator.group.group_runtime import (
    EMPTY,
    TimerKey,
    TimerKind,
    TopicPartition,
)
from kafkalab.coordinator.group.results import (
    AppendRecords,
    Effects,
    Respond,
)
from kafkalab.coordinator.group.server_assignors import SERVER_ASSIGNORS
from kafkalab.errors import Errors

if TYPE_CHECKING:
    from kafkalab.coordinator.group.group_coordinator import GroupCoordinator


@dataclass(frozen=True)
class ConsumerGroupHeartbeat:
    """A ConsumerGroupHeartbeat request's fields (None: not sent, unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    server_assignor: str | None
    owned_partitions: list[TopicPartition] | None
    client_id: str
    client_host: str


class ConsumerGroupManager:
    """The KIP-848 consumer groups of a GroupCoordinator."""

    def __init__(self, shard: GroupCoordinator) -> None:
        self.shard = shard
        # (group, member) -> the epoch a revocation deadline was armed at
        self.revocation_epochs: dict[tuple[str, str], int] = {}

    def replay_consumer_group_record(
        self, groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None
    ) -> None:
        """Apply one KIP-848 record (Kafka: GroupMetadataManager.replay)."""
        k = cgrec.decode_key(key)
        names = {self._topic_id(t): t for t in self.shard.partitions_per_topic}
        names.update({tid: name for name, tid in self.shard.topic_ids.items()})
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

    def unload_consumer_groups(self, partition: int | None) -> None:
        for group_id in [
            g
            for g in self.shard.consumer_groups
            if partition in (None, self.shard.partition_for(g))
        ]:
            group = self.shard.consumer_groups.pop(group_id)
            group.dead = True
            for member_id in group.members:
                self._cancel_cg_deadlines(group_id, member_id)

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
        self.shard.partitions_per_topic = dict(partitions_per_topic)
        self.shard.topic_ids.update(topic_ids or {})
        for group in self.shard.consumer_groups.values():
            wanted = group.subscribed_topics()
            now = {t: n for t, n in self.shard.partitions_per_topic.items() if t in wanted}
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
        request sends only what changed). The answer is always immediate; the records
        of what changed in the group come before it."""
        effects = self.shard.begin_call(now_ms, request)
        hb = ConsumerGroupHeartbeat(
            group_id,
            member_id,
            member_epoch,
            instance_id,
            rack_id,
            rebalance_timeout_ms,
            subscribed_topic_names,
            server_assignor,
            owned_partitions,
            client_id,
            client_host,
        )
        result = self._validate_heartbeat(hb)
        if result is None:
            group = self._heartbeat_group(hb)
            if isinstance(group, ConsumerGroupHeartbeatResult):
                result = group
            else:
                before = self._cg_snapshot(group)
                result = self._heartbeat_member(group, hb, now_ms)
                self._cg_append(group, before, now_ms, effects)
        effects.append(Respond(effects.request, result))
        return self.shard.end_call(effects, now_ms)

    @staticmethod
    def _refuse(
        hb: ConsumerGroupHeartbeat, error: Errors, message: str | None = None
    ) -> ConsumerGroupHeartbeatResult:
        return ConsumerGroupHeartbeatResult(error, member_id=hb.member_id, error_message=message)

    def _validate_heartbeat(
        self, hb: ConsumerGroupHeartbeat
    ) -> ConsumerGroupHeartbeatResult | None:
        """The checks that need no group (Kafka: throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
        error = self.shard.group_status(hb.group_id, "consumer_group_heartbeat")
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
        assignors = self.shard.config.group_consumer_assignors
        if hb.server_assignor is not None and hb.server_assignor not in assignors:
            return self._refuse(
                hb,
                Errors.UNSUPPORTED_ASSIGNOR,
                f"assignor {hb.server_assignor!r} is not one of {', '.join(assignors)}",
            )
        return None

    def _heartbeat_group(
        self, hb: ConsumerGroupHeartbeat
    ) -> ConsumerGroup | ConsumerGroupHeartbeatResult:
        """The consumer group the heartbeat is for, created by a member joining it."""
        classic = self.shard.groups.get(hb.group_id)
        if classic is not None and not classic.is_(EMPTY):
            return self._refuse(
                hb,
                Errors.GROUP_ID_NOT_FOUND,
                f"group {hb.group_id} is a classic group, not a consumer group",
            )
        group = self.shard.consumer_groups.get(hb.group_id)
        if group is None:
            if hb.member_epoch != 0:
                return self._refuse(
                    hb, Errors.GROUP_ID_NOT_FOUND, f"consumer group {hb.group_id} does not exist"
                )
            group = self.shard.consumer_groups[hb.group_id] = ConsumerGroup(
                hb.group_id, preferred_assignor=self.shard.config.group_consumer_assignors[0]
            )
        return group

    def _heartbeat_member(
        self, group: ConsumerGroup, hb: ConsumerGroupHeartbeat, now_ms: int
    ) -> ConsumerGroupHeartbeatResult:
        """Leave, or: find the member, update it and the group epoch, compute the
        target if the group epoch moved past it, and reconcile the member toward it."""
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
                self.shard.partitions_per_topic,
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
            heartbeat_interval_ms=self.shard.config.group_consumer_heartbeat_interval_ms,
            assignment=member.assigned if send else None,
        )

    def _leave(
        self, group: ConsumerGroup, hb: ConsumerGroupHeartbeat
    ) -> ConsumerGroupHeartbeatResult:
        member = group.members.get(hb.member_id)
        if member is None:
            return self._refuse(hb, Errors.UNKNOWN_MEMBER_ID)
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            member.update_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH)  # keeps its partitions
        else:
            self._remove_consumer_group_member(group, hb.member_id)
        return ConsumerGroupHeartbeatResult(
            Errors.NONE, member_id=hb.member_id, member_epoch=hb.member_epoch
        )

    def _joining_member(
        self, group: ConsumerGroup, hb: ConsumerGroupHeartbeat
    ) -> tuple[ConsumerGroupMember, bool] | ConsumerGroupHeartbeatResult:
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
            if len(group.members) >= self.shard.config.group_consumer_max_size:
                return self._refuse(hb, Errors.GROUP_MAX_SIZE_REACHED)
            member_id = hb.member_id or self.shard.member_id_factory(hb.client_id, hb.instance_id)
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
        self, group: ConsumerGroup, previous: ConsumerGroupMember, hb: ConsumerGroupHeartbeat
    ) -> ConsumerGroupMember:
        """A restarted static member takes over its predecessor's place, partitions
        and epoch, without a new group epoch (no rebalance)."""
        old_id = previous.member_id
        old_target = group.target.get(old_id, previous.assigned)
        group.remove_member(old_id)
        self._cancel_cg_deadlines(group.group_id, old_id)
        new_id = hb.member_id or self.shard.member_id_factory(hb.client_id, hb.instance_id)
        previous.member_id = new_id
        previous.member_epoch = previous.previous_member_epoch
        group.members[new_id] = previous
        group.target[new_id] = old_target
        return previous

    def _member(
        self, group: ConsumerGroup, hb: ConsumerGroupHeartbeat
    ) -> tuple[ConsumerGroupMember, bool] | ConsumerGroupHeartbeatResult:
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
    def _update_member(member: ConsumerGroupMember, hb: ConsumerGroupHeartbeat) -> bool:
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
        owned: list[TopicPartition] | None,
        now_ms: int,
    ) -> None:
        """Move the member toward its target (ConsumerGroup.reconcile), renew its
        session, and arm or disarm its revocation deadline."""
        was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, owned)
        group_id, member_id = group.group_id, member.member_id
        self.shard.schedule(
            TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id),
            now_ms + self.shard.config.group_consumer_session_timeout_ms,
        )
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_revoking:
            self.schedule_revocation(group_id, member, now_ms)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.shard.cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
            self.revocation_epochs.pop((group_id, member_id), None)

    def _consumer_group_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for; ties and no preference: the first configured."""
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor is not None:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        order = self.shard.config.group_consumer_assignors
        if not votes:
            return order[0]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def schedule_revocation(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """The member must revoke within its rebalance timeout, at this epoch."""
        self.revocation_epochs[(group_id, member.member_id)] = member.member_epoch
        self.shard.schedule(
            TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member.member_id),
            now_ms + member.rebalance_timeout_ms,
        )

    def _cancel_cg_deadlines(self, group_id: str, member_id: str) -> None:
        self.shard.cancel(TimerKey(TimerKind.CONSUMER_SESSION, group_id, member_id))
        self.shard.cancel(TimerKey(TimerKind.CONSUMER_REVOCATION, group_id, member_id))
        self.revocation_epochs.pop((group_id, member_id), None)

    def _remove_consumer_group_member(self, group: ConsumerGroup, member_id: str) -> None:
        if group.remove_member(member_id) is not None:
            self._cancel_cg_deadlines(group.group_id, member_id)
            group.bump_group_epoch()

    def fence_consumer_group_member(
        self, group_id: str, member_id: str, epoch: int | None, now_ms: int, effects: Effects
    ) -> None:
        """Session expired, or (epoch given) the member did not revoke in time."""
        group = self.shard.consumer_groups.get(group_id)
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
        if topic not in self.shard.topic_ids:
            self.shard.topic_ids[topic] = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalab-topic:{topic}")
        return self.shard.topic_ids[topic]

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
            effects.append(AppendRecords(self.shard.partition_for(g), tuple(out), now_ms, None))

    def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe for one group."""
        error = self.shard.group_status(group_id, "consumer_group_describe")
        if error is not None:
            return DescribedConsumerGroup(error, group_id)
        group = self.shard.consumer_groups.get(group_id)
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
