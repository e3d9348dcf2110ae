"""Server-side assignors of the new consumer protocol (KIP-848): "uniform" and "range".

Kafka's classes: org.apache.kafka.coordinator.group.assignor.UniformAssignor
(OptimizedUniformAssignmentBuilder, GeneralUniformAssignmentBuilder) and
RangeAssignor. In KIP-848 the *coordinator* computes the target assignment
whenever the group epoch moves past the assignment epoch; members only say
which topics they want (and which assignor they prefer).

    uniform   balanced across members (loads differ by at most one when all
              members subscribe to the same topics) and sticky to the current
              target: each member keeps what it had up to its quota (the first
              members, sorted by id, that had more than the minimum keep one extra)
              and the rest is dealt to members under quota in member-id order.
              With different subscriptions: keep, give each free partition (those
              with fewest possible owners first) to the least loaded eligible
              member, then move partitions while a move narrows a gap of two.
    range     per topic, the subscribed members sorted by member id get
              contiguous ranges, the first P mod N one partition more, so that
              members reading several co-partitioned topics get the same
              partition numbers of each (what joins on keys need). Kafka's range
              assignor is also sticky when membership is unchanged; these ranges
              are deterministic, so an unchanged group gets the same ranges again.

Assignments are keyed by topic name here; Kafka's records key them by topic id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class MemberSubscriptionSpec:
    topics: frozenset[str]
    rack_id: str | None = None


class ServerAssignor:
    name = ""

    def assign(
        self,
        members: Mapping[str, MemberSubscriptionSpec],
        partitions_per_topic: Mapping[str, int],
        current: Mapping[str, frozenset[TopicPartition]],
    ) -> dict[str, frozenset[TopicPartition]]:
        raise NotImplementedError


def _partitions(partitions_per_topic: Mapping[str, int], topics) -> list[TopicPartition]:
    return [
        (t, p)
        for t in sorted(topics)
        if t in partitions_per_topic
        for p in range(partitions_per_topic[t])
    ]


class UniformAssignor(ServerAssignor):
    name = "uniform"

    def assign(self, members, partitions_per_topic, current):
        order = sorted(members)
        if not order:
            return {}
        # what each member may keep: existing partitions of topics it reads, once
        taken: set[TopicPartition] = set()
        keep: dict[str, list[TopicPartition]] = {}
        for m in order:
            valid = sorted(
                tp
                for tp in current.get(m, ())
                if tp[0] in members[m].topics and tp[1] < partitions_per_topic.get(tp[0], 0)
            )
            keep[m] = [tp for tp in valid if tp not in taken]
            taken.update(keep[m])
        if len({members[m].topics for m in order}) == 1:
            every = _partitions(partitions_per_topic, members[order[0]].topics)
            return self._same_subscriptions(order, every, keep)
        return self._different_subscriptions(members, partitions_per_topic, order, keep)

    @staticmethod
    def _same_subscriptions(
        order: list[str], every: list[TopicPartition], keep: dict[str, list[TopicPartition]]
    ) -> dict[str, frozenset[TopicPartition]]:
        """Every member reads the same topics (Kafka: OptimizedUniformAssignmentBuilder):
        quotas differ by at most one, each member keeps what it had up to its quota."""
        out: dict[str, list[TopicPartition]] = {}
        min_q, extra = divmod(len(every), len(order))
        over = 0
        for m in order:
            quota = min_q
            if extra and over < extra and len(keep[m]) > min_q:
                quota, over = min_q + 1, over + 1
            out[m] = keep[m][:quota]
        assigned = {tp for parts in out.values() for tp in parts}
        free = [tp for tp in every if tp not in assigned]
        for tp in free:
            # members under the minimum first, then those allowed one more
            under = [m for m in order if len(out[m]) < min_q]
            if under:
                m = under[0]
            else:
                m = next(m for m in order if len(out[m]) == min_q and over < extra)
                over += 1
            out[m].append(tp)
        return {m: frozenset(parts) for m, parts in out.items()}

    @staticmethod
    def _different_subscriptions(
        members: Mapping[str, MemberSubscriptionSpec],
        partitions_per_topic: Mapping[str, int],
        order: list[str],
        keep: dict[str, list[TopicPartition]],
    ) -> dict[str, frozenset[TopicPartition]]:
        """Members read different topics (Kafka: GeneralUniformAssignmentBuilder): keep,
        deal the free partitions to the least loaded eligible member, then even out."""
        out: dict[str, list[TopicPartition]] = {}
        wanted = set().union(*(members[m].topics for m in order))
        every = _partitions(partitions_per_topic, wanted)
        eligible = {tp: [m for m in order if tp[0] in members[m].topics] for tp in every}
        owner = {}
        for m in order:
            out[m] = list(keep[m])
            owner.update({tp: m for tp in keep[m]})
        for tp in sorted(
            (tp for tp in every if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)
        ):
            m = min(eligible[tp], key=lambda m: (len(out[m]), m))
            out[m].append(tp)
            owner[tp] = m
        moved = True
        while moved:
            moved = False
            for tp in every:
                src = owner[tp]
                dst = min(eligible[tp], key=lambda m: (len(out[m]), m))
                if len(out[src]) - len(out[dst]) > 1:
                    out[src].remove(tp)
                    out[dst].append(tp)
                    owner[tp] = dst
                    moved = True
        return {m: frozenset(parts) for m, parts in out.items()}


class RangeAssignor(ServerAssignor):
    name = "range"

    def assign(self, members, partitions_per_topic, current):
        out: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for topic in sorted(partitions_per_topic):
            subscribed = sorted(m for m in members if topic in members[m].topics)
            if not subscribed:
                continue
            per, extra = divmod(partitions_per_topic[topic], len(subscribed))
            start = 0
            for i, m in enumerate(subscribed):
                n = per + (1 if i < extra else 0)
                out[m].update((topic, p) for p in range(start, start + n))
                start += n
        return {m: frozenset(parts) for m, parts in out.items()}


SERVER_ASSIGNORS: dict[str, ServerAssignor] = {
    a.name: a for a in (UniformAssignor(), RangeAssignor())
}
