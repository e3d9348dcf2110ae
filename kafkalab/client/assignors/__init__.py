"""Client-side partition assignors for the classic group protocol.

abstract             ConsumerPartitionAssignor (the interface), RebalanceProtocol
range                RangeAssignor ("range")
round_robin          RoundRobinAssignor ("roundrobin")
sticky               StickyAssignor ("sticky"), AbstractStickyAssignor
cooperative_sticky   CooperativeStickyAssignor ("cooperative-sticky", KIP-429)

`assignor_for(name)` builds one from its wire name, as the Java consumer does
from `partition.assignment.strategy`.
"""

from kafkalab.client.assignors.abstract import ConsumerPartitionAssignor, RebalanceProtocol
from kafkalab.client.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafkalab.client.assignors.range import RangeAssignor
from kafkalab.client.assignors.round_robin import RoundRobinAssignor
from kafkalab.client.assignors.sticky import AbstractStickyAssignor, StickyAssignor

ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    a.name: a
    for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def assignor_for(name: str) -> ConsumerPartitionAssignor:
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(
            f"unknown partition.assignment.strategy {name!r}; known: {', '.join(ASSIGNORS)}"
        ) from None


__all__ = [
    "ASSIGNORS",
    "AbstractStickyAssignor",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assignor_for",
]
