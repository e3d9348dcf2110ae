"""RoundRobinAssignor ("roundrobin"): all partitions dealt out like cards.

Kafka's class: org.apache.kafka.clients.consumer.RoundRobinAssignor. Members are
sorted (static members by instance id, then member id) and put in a circle; all
partitions of all subscribed topics, sorted by topic and partition, are dealt
one at a time, each to the next member in the circle that subscribes to its
topic. With equal subscriptions, member loads differ by at most one.

    topics t0 (3 partitions), t1 (2), members a b:   a: t0-0 t0-2 t1-1   b: t0-1 t1-0
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalab.client.assignors.abstract import (
    ConsumerPartitionAssignor,
    TopicPartition,
    all_partitions_sorted,
    sorted_members,
)
from kafkalab.protocol.consumer_protocol import Subscription


class RoundRobinAssignor(ConsumerPartitionAssignor):
    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        circle = sorted_members(subscriptions, group_instance_ids)
        if not circle:
            return out
        wanted = {t for s in subscriptions.values() for t in s.topics}
        i = 0
        for topic, partition in all_partitions_sorted(partitions_per_topic, wanted):
            for _ in range(len(circle)):  # the next member that reads this topic
                member = circle[i % len(circle)]
                i += 1
                if topic in subscriptions[member].topics:
                    out[member].append((topic, partition))
                    break
        return out
