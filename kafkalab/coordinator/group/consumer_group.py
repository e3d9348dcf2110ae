"""A consumer group of the new protocol (KIP-848), sans-IO: epochs, target, reconciliation.

Kafka's classes: org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup,
ConsumerGroupMember, CurrentAssignmentBuilder, and
GroupMetadataManager.consumerGroupHeartbeat (Kafka 3.7+, generally available in
4.0; a client asks for it with `group.protocol=consumer`, the Java consumer's
default still being `classic`).

No JoinGroup/SyncGroup and no client-side assignor: each member sends one
request, ConsumerGroupHeartbeat, every heartbeat interval; the coordinator keeps
three epochs and moves every member towards a *target assignment* on its own:

    group epoch        +1 whenever the membership or a subscription changes
    assignment epoch   the group epoch the target assignment was computed at; the
                       server assignor ("uniform" or "range") runs whenever the
                       group epoch is ahead of it
    member epoch       each member's own; it reaches the assignment epoch once the
                       member has given up everything the target takes from it

Reconciling one member (CurrentAssignmentBuilder):

    assigned' = assigned ∩ target           kept
    revoke    = assigned − target           the member must stop consuming these
    pending   = target − assigned − (partitions another member still holds)

    if revoke is non-empty and the member still reports owning some of it:
        state UNREVOKED_PARTITIONS, epoch unchanged, it is sent assigned' only,
        and must acknowledge (stop reporting `revoke`) within its rebalance timeout
    else:
        epoch := assignment epoch; assigned' ∪ pending is its assignment;
        state UNRELEASED_PARTITIONS while some target partition is still held by
        another member (it gets it on a later heartbeat), else STABLE

So a partition is never assigned to two members at once: the safety property
tests/unit/test_consumer_group.py checks. Group states: Empty (no members),
Assigning (group epoch > assignment epoch), Reconciling (some member is not yet
STABLE at the assignment epoch), Stable.

Epoch checks on each heartbeat (FENCED_MEMBER_EPOCH: the member must drop its
partitions and rejoin with epoch 0): an epoch greater than the member's, or
smaller unless it is the previous epoch with owned partitions within the current
assignment (the answer that bumped it was lost). Epoch -1 leaves; -2 is a static
member's temporary leave (it keeps its assignment until its session expires, and
a new instance with the same group.instance.id takes it over).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafkalab.coordinator.group.server_assignors import MemberSubscriptionSpec, ServerAssignor
from kafkalab.errors import Errors

TopicPartition = tuple[str, int]
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = frozenset()
    pending_revocation: frozenset[TopicPartition] = frozenset()

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def update_epoch(self, epoch: int) -> None:
        if epoch != self.member_epoch:
            self.previous_member_epoch = self.member_epoch
            self.member_epoch = epoch


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # the partition counts of subscribed topics the target was computed with
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    preferred_assignor: str = "uniform"
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def subscribed_topics(self) -> set[str]:
        return set().union(*(m.subscribed_topic_names for m in self.members.values()))

    def owner_of(self, tp: TopicPartition, other_than: str) -> str | None:
        """The member (other than `other_than`) that holds `tp`, assigned or still revoking."""
        for m in self.members.values():
            if m.member_id != other_than and (tp in m.assigned or tp in m.pending_revocation):
                return m.member_id
        return None

    def bump_group_epoch(self) -> None:
        self.group_epoch += 1

    def compute_target(
        self, assignor: ServerAssignor, partitions_per_topic: dict[str, int]
    ) -> None:
        """The server assignor's new target, at the current group epoch."""
        specs = {
            m.member_id: MemberSubscriptionSpec(frozenset(m.subscribed_topic_names), m.rack_id)
            for m in self.members.values()
        }
        wanted = self.subscribed_topics()
        counts = {t: n for t, n in partitions_per_topic.items() if t in wanted}
        self.target = assignor.assign(specs, counts, dict(self.target))
        self.subscription_metadata = counts
        self.assignment_epoch = self.group_epoch
        self.preferred_assignor = assignor.name

    def reconcile(
        self, member: ConsumerGroupMember, owned: Sequence[TopicPartition] | None
    ) -> None:
        """Move `member` towards the target (Kafka: CurrentAssignmentBuilder.build).
        `owned` is what the member reported owning in this heartbeat (None: not sent,
        which counts as still owning everything it was asked to revoke)."""
        target = self.target.get(member.member_id, frozenset())
        target = frozenset(tp for tp in target if tp[0] in member.subscribed_topic_names)

        def owns_any(partitions: frozenset[TopicPartition]) -> bool:
            return owned is None or any(tp in partitions for tp in owned)

        if member.state is MemberState.STABLE and member.member_epoch == self.assignment_epoch:
            return
        if member.state is MemberState.UNREVOKED_PARTITIONS and owns_any(member.pending_revocation):
            return  # still revoking
        kept = member.assigned & target
        revoke = member.assigned - kept
        wanted = target - kept
        free = frozenset(tp for tp in wanted if self.owner_of(tp, member.member_id) is None)
        unreleased = wanted - free
        if revoke and owns_any(revoke):
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.assigned = kept
            member.pending_revocation = revoke
            return
        member.update_epoch(self.assignment_epoch)
        member.assigned = kept | free
        member.pending_revocation = frozenset()
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        return member


@dataclass
class TopicMetadata:
    """The cluster's topics as the KIP-848 groups need them: partition counts for
    the server assignors, topic ids for the records (which name partitions by id)."""

    partitions_per_topic: dict[str, int] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id; one made up from its name if the metadata did not say."""
        if topic not in self.topic_ids:
            self.topic_ids[topic] = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalab-topic:{topic}")
        return self.topic_ids[topic]

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for every topic known or written under a made-up id."""
        names = {self.topic_id(t): t for t in self.partitions_per_topic}
        names.update({tid: name for name, tid in self.topic_ids.items()})
        return names


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequestData:
    """A ConsumerGroupHeartbeat request's data (Kafka's ConsumerGroupHeartbeatRequest
    fields, topic names instead of ids; None: not sent, unchanged since the last
    heartbeat), built once by the API module and passed through as it is.
    `owned_partitions` is the request's TopicPartitions: what the member owns now."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str | None = None
    owned_partitions: tuple[TopicPartition, ...] | None = None
    client_id: str = ""  # from the request header
    client_host: str = ""  # the connection's peer


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResult:
    error: Errors
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset[TopicPartition] | None = None  # None: unchanged, not sent
    error_message: str | None = None


@dataclass(frozen=True)
class DescribedConsumerGroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    member_epoch: int
    assignment: frozenset[TopicPartition]
    target_assignment: frozenset[TopicPartition]


@dataclass(frozen=True)
class DescribedConsumerGroup:
    error: Errors
    group_id: str
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()
