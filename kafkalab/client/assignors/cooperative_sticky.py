"""CooperativeStickyAssignor ("cooperative-sticky"): sticky, in two small steps (KIP-429).

Kafka's class: org.apache.kafka.clients.consumer.CooperativeStickyAssignor.
With the eager protocol every member revokes all its partitions before each
rebalance: nobody consumes until the new assignment arrives (stop the world).
Cooperatively, members keep consuming what they own and send it in their
subscription (owned_partitions, generation_id); the leader computes the sticky
assignment and then *holds back* every partition that moves from one member to
another (`partitions_transferring_ownership`):

    rebalance 1   a owns 0 1 2 3; b joins. Sticky target: a {0 1}, b {2 3}.
                  a is assigned {0 1}: it revokes 2 3 (and only those). b gets {} now,
                  because 2 and 3 are still a's.
                  a revoked something, so it rejoins at once.
    rebalance 2   a owns {0 1}; nobody claims 2 3: b is assigned {2 3}.

So a partition is never assigned to a member while another member may still be
consuming it. The subscription's user data carries the generation as one int32
(for consumers whose subscriptions predate generation_id, v0/v1); since v2 the
subscription's own generation_id is used.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kafkalab.client.assignors.abstract import RebalanceProtocol, TopicPartition
from kafkalab.client.assignors.sticky import DEFAULT_GENERATION, AbstractStickyAssignor
from kafkalab.protocol.consumer_protocol import Subscription

_GENERATION = struct.Struct(">i")  # CooperativeStickyAssignorUserData v0: generation int32


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        super().__init__()
        self.generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: list[TopicPartition], generation: int) -> None:
        self.generation = generation

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return _GENERATION.pack(self.generation)

    def member_data(self, subscription: Subscription) -> tuple[list[TopicPartition], int | None]:
        if subscription.generation_id >= 0:
            return list(subscription.owned_partitions), subscription.generation_id
        generation: int | None = None
        if subscription.user_data is not None:
            try:
                generation = _GENERATION.unpack_from(subscription.user_data)[0]
            except struct.error:
                generation = DEFAULT_GENERATION
        return list(subscription.owned_partitions), generation

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        out = super().assign(partitions_per_topic, subscriptions, group_instance_ids)
        for tp, member in self.partitions_transferring_ownership.items():
            out[member].remove(tp)  # revoked first; assigned in the next rebalance
        return out
