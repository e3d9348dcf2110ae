"""StickyAssignor ("sticky"): balanced, and moving as few partitions as it can.

Kafka's classes: org.apache.kafka.clients.consumer.StickyAssignor and
internals.AbstractStickyAssignor (KIP-54). Two goals, in this order:

1. balance: member loads differ by at most one where subscriptions allow it;
2. stickiness: a member keeps the partitions it had, as far as 1. allows.

What each member had comes from its subscription: the eager "sticky" assignor
puts its last assignment and generation in the subscription's user data
(StickyAssignorUserData v1: [topic, [partition]], generation int32), since an
eager member revokes everything before it rejoins; "cooperative-sticky" uses
the subscription's owned_partitions and generation_id (KIP-429). Claims from
members of an older generation than the newest seen are ignored (they may be
stale), as are partitions claimed by two members of the same generation.

When every member subscribes to the same topics, Kafka's *constrained*
algorithm is used, step for step:

    minQuota = P div C, maxQuota = ceil(P / C); P mod C members may reach maxQuota
    1. each member keeps its claimed partitions: all of them if fewer than
       minQuota (it stays unfilled), maxQuota of them while fewer than P mod C
       members have been given more than minQuota, else minQuota; the rest are revoked
    2. the unassigned partitions, in topic/partition order, are dealt round robin
       to the unfilled members (sorted), then one each to members at minQuota
       until P mod C members hold maxQuota

Otherwise (different subscriptions) a general algorithm in the same spirit
(Kafka's generalAssign is a longer search): keep valid claims, give each
unassigned partition (fewest possible owners first) to the eligible member with
the fewest, then move partitions from the most to the least loaded eligible
member while that narrows the gap by more than one.

`partitions_transferring_ownership` records, after `assign`, which partitions
move from one claimed owner to another member: the cooperative assignor holds
those back for a second rebalance.
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
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import INT32, STRING, ArrayOf, ProtocolError, Reader, Writer

DEFAULT_GENERATION = -1

STICKY_ASSIGNOR_USER_DATA_V1 = Message(
    -1,
    "StickyAssignorUserData",
    [
        F("previous_assignment", [F("topic", STRING), F("partitions", ArrayOf(INT32))]),
        F("generation", INT32),
    ],
)


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int) -> bytes:
    """StickyAssignorUserData v1, as the Java StickyAssignor writes it (no version prefix)."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    obj = {
        "previous_assignment": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        "generation": generation,
    }
    return STICKY_ASSIGNOR_USER_DATA_V1.encode(obj, 0, Writer()).getvalue()


STICKY_ASSIGNOR_USER_DATA_V0 = Message(
    -1,
    "StickyAssignorUserDataV0",
    [F("previous_assignment", [F("topic", STRING), F("partitions", ArrayOf(INT32))])],
)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """(partitions, generation). Tried as Java does, V1 then V0 (which has no
    generation: None); then with a 2-byte version prefix, the form kafka-python
    writes. Raises ProtocolError if nothing fits."""
    if not data:
        return [], None
    attempts = [(0, STICKY_ASSIGNOR_USER_DATA_V1), (0, STICKY_ASSIGNOR_USER_DATA_V0)]
    attempts += [(2, STICKY_ASSIGNOR_USER_DATA_V1), (2, STICKY_ASSIGNOR_USER_DATA_V0)]
    for skip, schema in attempts:
        r = Reader(data, skip)
        try:
            d = schema.decode(r, 0)
        except ProtocolError:
            continue
        if r.remaining() == 0:
            parts = [(e["topic"], p) for e in d["previous_assignment"] for p in e["partitions"]]
            return parts, d.get("generation") if schema is STICKY_ASSIGNOR_USER_DATA_V1 else None
    raise ProtocolError("sticky assignor user data in no known layout")


class AbstractStickyAssignor(ConsumerPartitionAssignor):
    def __init__(self) -> None:
        self.partitions_transferring_ownership: dict[TopicPartition, str] = {}

    def member_data(self, subscription: Subscription) -> tuple[list[TopicPartition], int | None]:
        """What this member claims to own, and from which generation (None: unknown)."""
        raise NotImplementedError

    # -- claims ------------------------------------------------------------------------------

    def _valid_claims(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        order: list[str],
    ) -> dict[str, list[TopicPartition]]:
        """Each member's claimed partitions that still count: from the highest
        generation, of existing partitions of topics it still reads, claimed once."""
        data = {m: self.member_data(subscriptions[m]) for m in order}
        generations = [g for _, g in data.values() if g is not None]
        newest = max(generations, default=DEFAULT_GENERATION)
        claims: dict[str, list[TopicPartition]] = {}
        for m in order:
            parts, generation = data[m]
            current = generation == newest if generation is not None else not generations
            topics = set(subscriptions[m].topics)
            claims[m] = sorted(
                {
                    (t, p)
                    for t, p in parts
                    if current and t in topics and 0 <= p < partitions_per_topic.get(t, 0)
                }
            )
        owners: dict[TopicPartition, int] = {}
        for parts in claims.values():
            for tp in parts:
                owners[tp] = owners.get(tp, 0) + 1
        self._doubly_claimed = {tp for tp, n in owners.items() if n > 1}
        return {
            m: [tp for tp in parts if tp not in self._doubly_claimed] for m, parts in claims.items()
        }

    # -- assignment --------------------------------------------------------------------------

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, list[TopicPartition]]:
        order = sorted(subscriptions)  # Kafka iterates a HashMap; we pick a fixed order
        claims = self._valid_claims(partitions_per_topic, subscriptions, order)
        topic_sets = {frozenset(s.topics) for s in subscriptions.values()}
        if len(topic_sets) <= 1:
            out = self._constrained_assign(partitions_per_topic, subscriptions, claims, order)
        else:
            out = self._general_assign(
                partitions_per_topic, subscriptions, claims, group_instance_ids
            )
        claimed_by = {tp: m for m, parts in claims.items() for tp in parts}
        self.partitions_transferring_ownership = {
            tp: m
            for m, parts in out.items()
            for tp in parts
            if (tp in claimed_by and claimed_by[tp] != m) or tp in self._doubly_claimed
        }
        return out

    def _constrained_assign(self, partitions_per_topic, subscriptions, claims, order):
        topics = set(next(iter(subscriptions.values())).topics) if subscriptions else set()
        every = all_partitions_sorted(partitions_per_topic, topics)
        out: dict[str, list[TopicPartition]] = {m: [] for m in order}
        if not order:
            return out
        n = len(order)
        min_quota, over = divmod(len(every), n)
        max_quota = min_quota + (1 if over else 0)
        expected_over = over  # members that end with maxQuota (0 when min == max)
        current_over = 0
        assigned: set[TopicPartition] = set()
        unfilled_under: list[str] = []
        unfilled_at_min: list[str] = []
        for m in order:
            owned = claims[m]
            if len(owned) < min_quota:
                out[m].extend(owned)
                unfilled_under.append(m)
            elif len(owned) >= max_quota and current_over < expected_over:
                current_over += 1
                if current_over == expected_over:
                    unfilled_at_min.clear()
                out[m].extend(owned[:max_quota])
            else:
                out[m].extend(owned[:min_quota])
                if current_over < expected_over:
                    unfilled_at_min.append(m)
            assigned.update(out[m])
        unassigned = [tp for tp in every if tp not in assigned]
        unfilled_under.sort()
        unfilled_at_min.sort()
        it = 0  # Kafka walks an iterator over the unfilled members, starting over at the end
        for tp in unassigned:
            from_under = False
            if it < len(unfilled_under):
                member, from_under = unfilled_under[it], True
                it += 1
            elif unfilled_under:
                member, from_under, it = unfilled_under[0], True, 1
            elif unfilled_at_min:
                member = unfilled_at_min.pop(0)
            else:
                raise AssertionError("no member left to take a partition: an assignor bug")
            out[member].append(tp)
            size = len(out[member])
            if size == min_quota and from_under:
                it -= 1
                unfilled_under.pop(it)
                unfilled_at_min.append(member)
            elif size == max_quota:
                current_over += 1
        return out

    def _general_assign(self, partitions_per_topic, subscriptions, claims, group_instance_ids):
        order = sorted_members(subscriptions, group_instance_ids)
        out: dict[str, list[TopicPartition]] = {m: list(claims[m]) for m in order}
        owner = {tp: m for m, parts in out.items() for tp in parts}
        wanted = {t for s in subscriptions.values() for t in s.topics}
        every = all_partitions_sorted(partitions_per_topic, wanted)
        eligible = {tp: [m for m in order if tp[0] in subscriptions[m].topics] for tp in every}
        unassigned = sorted(
            (tp for tp in every if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)
        )
        for tp in unassigned:
            m = min(eligible[tp], key=lambda m: (len(out[m]), order.index(m)))
            out[m].append(tp)
            owner[tp] = m
        # balance: move a partition from a heavier to a lighter eligible member while
        # that makes the two differ by less (each move strictly lowers sum of squares)
        moved = True
        while moved:
            moved = False
            for tp in every:
                src = owner[tp]
                dst = min(eligible[tp], key=lambda m: (len(out[m]), order.index(m)))
                if len(out[src]) - len(out[dst]) > 1:
                    out[src].remove(tp)
                    out[dst].append(tp)
                    owner[tp] = dst
                    moved = True
        return {m: sorted(parts) for m, parts in out.items()}


class StickyAssignor(AbstractStickyAssignor):
    """The eager sticky assignor: remembers its last assignment in the user data."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self.member_assignment: list[TopicPartition] | None = None
        self.generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: list[TopicPartition], generation: int) -> None:
        self.member_assignment = list(assignment)
        self.generation = generation

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self.member_assignment is None:
            return None
        return encode_sticky_user_data(self.member_assignment, self.generation)

    def member_data(self, subscription: Subscription) -> tuple[list[TopicPartition], int | None]:
        if not subscription.user_data:
            return [], None
        try:
            return decode_sticky_user_data(subscription.user_data)
        except Exception:
            return [], None
