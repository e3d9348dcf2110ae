"""RangeAssignor ("range"): each topic on its own, cut into contiguous ranges.

Kafka's class: org.apache.kafka.clients.consumer.RangeAssignor (the Java
consumer's default before 3.0, still first in its default list). For each topic
the subscribed members are sorted (static members by instance id, then member
id); with P partitions and C members, the first P mod C members get
P div C + 1 partitions and the rest P div C, in partition order:

    topic t, 7 partitions, members a b c:   a: 0 1 2   b: 3 4   c: 5 6

Because every topic starts again from the first member, with many topics of a
few partitions the first members carry more (the reason for roundrobin and
sticky). Rack-aware assignment (KIP-881) is not done here.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkalab.client.assignors.abstract import (
    ConsumerPartitionAssignor,
    TopicPartition,
    sorted_members,
)
from kafkalab.protocol.consumer_protocol import Subscription


class RangeAssignor(ConsumerPartitionAssignor):
    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in sorted(partitions_per_topic):
            members = sorted_members(
                [m for m, s in subscriptions.items() if topic in s.topics], group_instance_ids
            )
            if not members:
                continue
            n = partitions_per_topic[topic]
            per, extra = divmod(n, len(members))
            for i, member in enumerate(members):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[member].extend((topic, p) for p in range(start, start + length))
        return out
