"""Nemeses: Jepsen's network partition topologies on a LocalCluster (a kafkalab
fault tool, after jepsen-io/jepsen `jepsen.nemesis` and `jepsen.nemesis.combined`,
whose partition specs the Kafka workload `jepsen/tests/kafka.clj` uses).

A partition is a *grudge* (Jepsen's word): the set of (receiver, deaf-to) pairs,
each meaning "receiver hears nothing from deaf-to" (kafkalab.server.link_faults:
a cut at the receiving end, refused or dropped). Jepsen's topologies, over hosts:

    one              one host cut off from all others, both ways
    minority-third   a third of the hosts (at least one) cut off from the rest
    majority         a minority and a majority, cut off from each other
    majorities-ring  each host hears a majority (itself included), and no two
                     hosts hear the same majority: one-way cuts, in a ring
    primaries        each given leader cut off alone (the leaders of partitions)

A *host* is Jepsen's node: kafkalab runs a broker and (with controllers=3) a
controller on the same id space, so host i is broker i and controller
CONTROLLER_ID_BASE + i (`hosts`): partitioning hosts cuts every process of one
from every process of the other, replication, Raft and broker<->controller
traffic alike. With one controller process (the default) the controller is on no
host: it hears every broker, as Jepsen's control node does.

    partition = majorities_ring(sorted(hosts(cluster)), random.Random(7))
    nemesis = Nemesis("majorities-ring", expand(partition, hosts(cluster)), CutMode.DROP)
    nemesis.apply(cluster)      # writes each receiver's link-faults.json
    nemesis.heal(cluster)       # its links back (Jepsen's :stop)

`nemesis_for(cluster, Topology.MAJORITIES_RING, rng, mode)` does both steps, and
is what a soak calls (apply/heal) for a random partition of a given topology.
`ClientsCut` (a broker deaf to clients) and `ClockStep` (a node's clock stepped)
have the same apply/heal/describe. Each heals only what it did, so faults that
overlap (a partition while another is still on) heal one by one.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalab.kinds import Kind
from kafkalab.server.link_faults import CutMode, connect_clients, cut, uncut

#: A grudge: (receiver, deaf-to) pairs. The receiver hears nothing from deaf-to.
Pairs = frozenset[tuple[int, int]]


class Topology(Kind):
    """Jepsen's partition specs (jepsen.nemesis.combined)."""

    ONE = "one"
    MINORITY_THIRD = "minority-third"
    MAJORITY = "majority"
    MAJORITIES_RING = "majorities-ring"
    PRIMARIES = "primaries"


def majority(n: int) -> int:
    """The smallest number of n that is more than half (Jepsen's util/majority)."""
    return n // 2 + 1


def complete_grudge(components: Iterable[Iterable[int]]) -> Pairs:
    """Every node deaf to every node outside its component (both ways, so symmetric)."""
    groups = [frozenset(c) for c in components]
    return frozenset(
        (receiver, sender)
        for group in groups
        for receiver in group
        for other in groups
        if other is not group
        for sender in other
    )


def isolate_one(nodes: Iterable[int], node: int) -> Pairs:
    """`node` cut off from every other (Jepsen's split-one)."""
    rest = set(nodes) - {node}
    return complete_grudge([{node}, rest])


def split(nodes: Iterable[int], minority: Iterable[int]) -> Pairs:
    """`minority` and the rest cut off from each other."""
    minority = set(minority)
    return complete_grudge([minority, set(nodes) - minority])


def bisect(nodes: list[int], rng: random.Random) -> Pairs:
    """A random minority and majority cut off from each other (Jepsen's `:majority`,
    complete-grudge of bisect of shuffle; with an even number of nodes Jepsen's
    halves are equal, here the minority has one node fewer than half, so that a
    majority exists: 1 and 3 of 4)."""
    order = list(nodes)
    rng.shuffle(order)
    return split(order, order[: (len(order) - 1) // 2])


def minority_third(nodes: list[int], rng: random.Random) -> Pairs:
    """A random third of the nodes (at least one) cut off from the rest."""
    order = list(nodes)
    rng.shuffle(order)
    return split(order, order[: max(1, len(order) // 3)])


def isolate_primaries(nodes: Iterable[int], primaries: Iterable[int]) -> Pairs:
    """Each primary (a partition's leader) alone; the others together."""
    primaries = set(primaries)
    return complete_grudge([*({p} for p in primaries), set(nodes) - primaries])


def majorities_ring(nodes: list[int], rng: random.Random | None = None) -> Pairs:
    """Each node hears a majority (itself included), no two the same: the nodes in a
    (shuffled) ring, each window of majority(n) consecutive ones the majority its
    middle node hears; it is deaf to the others (Jepsen's majorities-ring)."""
    ring = list(nodes)
    if rng is not None:
        rng.shuffle(ring)
    n, m = len(ring), majority(len(ring))
    pairs = set()
    for i in range(n):
        window = [ring[(i + k) % n] for k in range(m)]
        owner = window[m // 2]
        pairs.update((owner, other) for other in ring if other not in window)
    return frozenset(pairs)


def heard_by(pairs: Pairs, nodes: Iterable[int]) -> dict[int, frozenset[int]]:
    """Whom each node hears (itself included) under `pairs`."""
    nodes = set(nodes)
    return {n: frozenset(m for m in nodes if (n, m) not in pairs) for n in nodes}


def hosts(cluster) -> dict[int, list[int]]:
    """Jepsen's nodes on a LocalCluster: host i is broker i and, with a quorum,
    controller CONTROLLER_ID_BASE + i (a host may have only one of them)."""
    from kafkalab.cluster.local_cluster import CONTROLLER_ID_BASE

    out: dict[int, list[int]] = {b: [b] for b in sorted(cluster.brokers)}
    for c in sorted(cluster.controllers):
        out.setdefault(c - CONTROLLER_ID_BASE, []).append(c)
    return out


def expand(pairs: Pairs, host_processes: dict[int, list[int]]) -> Pairs:
    """A grudge over hosts as one over their processes (broker and controller ids)."""
    return frozenset(
        (r, s)
        for receiver, sender in pairs
        for r in host_processes[receiver]
        for s in host_processes[sender]
    )


def leaders(cluster, partitions: Iterable[tuple[str, int]]) -> set[int]:
    """The running brokers that lead these partitions, in their newest epochs (from
    the brokers' replica-state reports)."""
    wanted = set(partitions)
    best: dict[tuple[str, int], tuple[int, int]] = {}
    for row in cluster.describe().to_dict("records"):
        tp = (row["topic"], row["partition"])
        if tp in wanted and row["role"] == "leader" and row["status"] == "running":
            best[tp] = max(best.get(tp, (-1, -1)), (row["leader epoch"], row["broker"]))
    return {broker for _, broker in best.values()}


@dataclass(frozen=True)
class Nemesis:
    """A partition to apply to a cluster and heal: `pairs` over process ids."""

    name: str
    pairs: Pairs
    mode: CutMode = CutMode.REFUSE

    def apply(self, cluster) -> None:
        by_receiver: dict[int, set[int]] = {}
        for receiver, sender in self.pairs:
            by_receiver.setdefault(receiver, set()).add(sender)
        for receiver, senders in sorted(by_receiver.items()):
            cut(cluster.node_dir(receiver), senders, self.mode)

    def heal(self, cluster) -> None:
        """Undo this partition's cuts only: another fault's cuts, applied meanwhile,
        stay (overlapping faults heal one by one; `cluster.heal_links()` heals all)."""
        by_receiver: dict[int, set[int]] = {}
        for receiver, sender in self.pairs:
            by_receiver.setdefault(receiver, set()).add(sender)
        for receiver, senders in sorted(by_receiver.items()):
            uncut(cluster.node_dir(receiver), senders)

    def describe(self) -> str:
        deaf: dict[int, list[int]] = {}
        for receiver, sender in sorted(self.pairs):
            deaf.setdefault(receiver, []).append(sender)
        cuts = "; ".join(f"{r} deaf to {s}" for r, s in deaf.items())
        return f"{self.name} ({self.mode}): {cuts or 'nothing cut'}"


@dataclass(frozen=True)
class ClientsCut:
    """A broker deaf to its clients (all, or those whose client.id starts with
    `client_id_prefix`): a partition between client processes and a broker."""

    broker: int
    mode: CutMode = CutMode.REFUSE
    client_id_prefix: str | None = None

    def apply(self, cluster) -> None:
        cluster.isolate_clients(self.broker, self.mode, self.client_id_prefix)

    def heal(self, cluster) -> None:
        connect_clients(cluster.node_dir(self.broker))

    def describe(self) -> str:
        which = f"clients {self.client_id_prefix}*" if self.client_id_prefix else "clients"
        return f"broker {self.broker} deaf to {which} ({self.mode})"


@dataclass(frozen=True)
class ClockStep:
    """A node's wall clock stepped by `seconds` (kafkalab.server.clock); healed by
    the real clock again."""

    node: int
    seconds: float

    def apply(self, cluster) -> None:
        cluster.clock_step(self.node, self.seconds)

    def heal(self, cluster) -> None:
        cluster.clock_reset(self.node)

    def describe(self) -> str:
        return f"{self.node}'s clock stepped {self.seconds:+g} s"


def nemesis_for(
    cluster,
    topology: Topology | str,
    rng: random.Random,
    mode: CutMode | str = CutMode.REFUSE,
    partitions: Iterable[tuple[str, int]] = (),
) -> Nemesis:
    """A random partition of `topology` over the cluster's hosts (`primaries`: of
    the leaders of `partitions`), as a Nemesis over its processes."""
    topology = Topology.parse(topology, "partition topology")
    mode = CutMode.parse(mode, "cut mode")
    by_host = hosts(cluster)
    nodes = sorted(by_host)
    if topology == Topology.ONE:
        pairs = isolate_one(nodes, rng.choice(nodes))
    elif topology == Topology.MINORITY_THIRD:
        pairs = minority_third(nodes, rng)
    elif topology == Topology.MAJORITY:
        pairs = bisect(nodes, rng)
    elif topology == Topology.MAJORITIES_RING:
        pairs = majorities_ring(nodes, rng)
    else:
        pairs = isolate_primaries(nodes, leaders(cluster, partitions))
    return Nemesis(str(topology), expand(pairs, by_host), mode)


__all__ = [
    "ClientsCut",
    "ClockStep",
    "Nemesis",
    "Pairs",
    "Topology",
    "bisect",
    "complete_grudge",
    "expand",
    "heard_by",
    "hosts",
    "isolate_one",
    "isolate_primaries",
    "leaders",
    "majorities_ring",
    "majority",
    "minority_third",
    "nemesis_for",
    "split",
]
