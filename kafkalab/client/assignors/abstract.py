"""The assignor interface: how a group's leader splits partitions among members.

Kafka's classes: org.apache.kafka.clients.consumer.ConsumerPartitionAssignor
and internals.AbstractPartitionAssignor. In the classic protocol the
*consumers* assign partitions, not the broker: every member lists the assignors
it supports in JoinGroup (one protocol per assignor, in order of preference,
its metadata a ConsumerProtocol subscription); the coordinator picks the one
all support; the leader runs it and sends the result in SyncGroup.

An assignor here has:

    name                     what goes on the wire ("range", "roundrobin", "sticky",
                             "cooperative-sticky")
    supported_protocols      EAGER: every member gives up all partitions before a
                             rebalance; COOPERATIVE (KIP-429): members keep what they
                             own and give up only what moves, in two rebalances
    subscription_user_data   bytes it wants in each member's subscription (or None)
    assign(partitions_per_topic, subscriptions, group_instance_ids)
                             {member id: [(topic, partition), ...]} — deterministic
    on_assignment(assignment, generation)
                             the member's own result arrived (sticky assignors remember it)

Members are ordered as Kafka's MemberInfo orders them: static members first, by
group.instance.id, then dynamic ones by member id.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kafkalab.protocol.consumer_protocol import Subscription

TopicPartition = tuple[str, int]


class RebalanceProtocol(enum.Enum):
    EAGER = 0
    COOPERATIVE = 1


def member_order(member_id: str, group_instance_id: str | None) -> tuple:
    """Kafka's MemberInfo.compareTo: static members (by instance id) before dynamic
    ones (by member id)."""
    if group_instance_id is not None:
        return (0, group_instance_id, member_id)
    return (1, member_id, "")


def sorted_members(
    members: list[str] | set[str] | Mapping[str, object],
    group_instance_ids: Mapping[str, str | None] | None,
) -> list[str]:
    ids = group_instance_ids or {}
    return sorted(members, key=lambda m: member_order(m, ids.get(m)))


def all_partitions_sorted(
    partitions_per_topic: Mapping[str, int], topics: set[str] | None = None
) -> list[TopicPartition]:
    """Every partition of the (subscribed) topics, by topic name then partition."""
    return [
        (topic, p)
        for topic in sorted(partitions_per_topic)
        if topics is None or topic in topics
        for p in range(partitions_per_topic[topic])
    ]


class ConsumerPartitionAssignor:
    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return None

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError

    def on_assignment(self, assignment: list[TopicPartition], generation: int) -> None:
        """Called on each member with its own assignment after SyncGroup."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
