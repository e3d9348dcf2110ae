"""Jepsen's partition topologies (kafkalab.cluster.nemesis) as sets of (receiver,
deaf-to) pairs: their promises, for any number of nodes and any shuffle."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalab.cluster.local_cluster import CONTROLLER_ID_BASE
from kafkalab.cluster.nemesis import (
    ClientsCut,
    ClockStep,
    Nemesis,
    Topology,
    bisect,
    complete_grudge,
    expand,
    heard_by,
    hosts,
    isolate_one,
    isolate_primaries,
    majorities_ring,
    majority,
    minority_third,
    nemesis_for,
)
from kafkalab.errors import UnknownKindError
from kafkalab.server.clock import read_clock, reset_clock, step_clock
from kafkalab.server.link_faults import CutMode, isolate_clients, read_clients_cut, read_cuts

node_sets = st.lists(st.integers(1, 50), min_size=3, max_size=9, unique=True)
seeds = st.integers(0, 2**32 - 1)


def symmetric(pairs) -> bool:
    return all((b, a) in pairs for a, b in pairs)


def components(pairs, nodes) -> set[frozenset[int]]:
    return set(heard_by(pairs, nodes).values())


@given(node_sets, seeds)
def test_a_majorities_ring_gives_each_node_a_different_majority(nodes, seed):
    pairs = majorities_ring(nodes, random.Random(seed))
    heard = heard_by(pairs, nodes)
    assert all(len(h) == majority(len(nodes)) and n in h for n, h in heard.items())
    assert len(set(heard.values())) == len(nodes), "no two nodes hear the same majority"
    assert all(a != b and {a, b} <= set(nodes) for a, b in pairs)


def test_a_ring_of_three_is_one_way_cuts_around_the_ring():
    pairs = majorities_ring([1, 2, 3])
    assert len(pairs) == 3 and not any((b, a) in pairs for a, b in pairs)
    assert pairs == {(2, 3), (3, 1), (1, 2)}


@given(node_sets, seeds)
def test_a_majority_split_is_symmetric_with_a_minority_and_a_majority(nodes, seed):
    pairs = bisect(nodes, random.Random(seed))
    assert symmetric(pairs)
    sides = components(pairs, nodes)
    assert len(sides) == 2 and sum(map(len, sides)) == len(nodes)
    small, big = sorted(sides, key=len)
    assert len(big) >= majority(len(nodes)) > len(small) >= 1
    # every pair crosses the split, every crossing pair is there
    assert pairs == {(a, b) for a in nodes for b in nodes if (a in small) != (b in small)}


@given(node_sets, seeds)
def test_a_minority_third_cuts_a_third_off_symmetrically(nodes, seed):
    pairs = minority_third(nodes, random.Random(seed))
    assert symmetric(pairs)
    small, big = sorted(components(pairs, nodes), key=len)
    assert len(small) == max(1, len(nodes) // 3) and len(big) == len(nodes) - len(small)


@given(node_sets, st.data())
def test_one_node_isolated_hears_only_itself_and_the_rest_hear_each_other(nodes, data):
    node = data.draw(st.sampled_from(nodes))
    pairs = isolate_one(nodes, node)
    assert symmetric(pairs)
    heard = heard_by(pairs, nodes)
    assert heard[node] == {node}
    assert all(heard[n] == set(nodes) - {node} for n in nodes if n != node)


@given(node_sets, st.data())
def test_primaries_are_each_alone(nodes, data):
    primaries = data.draw(st.sets(st.sampled_from(nodes), min_size=1, max_size=len(nodes) - 1))
    pairs = isolate_primaries(nodes, primaries)
    assert symmetric(pairs)
    heard = heard_by(pairs, nodes)
    assert all(heard[p] == {p} for p in primaries)
    assert all(heard[n] == set(nodes) - primaries for n in nodes if n not in primaries)


def test_a_complete_grudge_of_one_component_cuts_nothing():
    assert complete_grudge([{1, 2, 3}]) == frozenset()


def test_hosts_put_broker_i_and_controller_i_together_and_expand_cuts_every_pair():
    cluster = SimpleNamespace(
        brokers={1: None, 2: None, 3: None},
        controllers={CONTROLLER_ID_BASE + i: None for i in (1, 2, 3)},
    )
    by_host = hosts(cluster)
    assert by_host == {h: [h, CONTROLLER_ID_BASE + h] for h in (1, 2, 3)}
    pairs = expand(isolate_one([1, 2, 3], 1), by_host)
    c = CONTROLLER_ID_BASE
    assert (c + 1, 2) in pairs and (2, c + 1) in pairs and (c + 2, c + 1) in pairs
    assert (1, c + 1) not in pairs and (2, c + 3) not in pairs  # same side
    assert len(pairs) == 2 * (2 * 4)  # host 1's two processes, both ways, with four
    one_controller = SimpleNamespace(brokers={1: None, 2: None}, controllers={})
    assert hosts(one_controller) == {1: [1], 2: [2]}


def stub_cluster(tmp_path):
    """What a Nemesis asks of a LocalCluster, over three directories."""
    dirs = {n: tmp_path / str(n) for n in (1, 2, 3)}
    for d in dirs.values():
        d.mkdir()
    return SimpleNamespace(
        brokers=dict.fromkeys(dirs),
        controllers={},
        node_dir=dirs.__getitem__,
        isolate_clients=lambda b, mode, prefix: isolate_clients(dirs[b], mode, prefix),
        clock_step=lambda n, s: step_clock(dirs[n], s * 1000),
        clock_reset=lambda n: reset_clock(dirs[n]),
    )


def cuts(cluster) -> set[tuple[int, int]]:
    return {(r, s) for r in cluster.brokers for s in read_cuts(cluster.node_dir(r))}


def test_a_nemesis_writes_each_receivers_cuts_and_heals_only_its_own(tmp_path):
    cluster = stub_cluster(tmp_path)
    nemesis = nemesis_for(cluster, "majorities-ring", random.Random(1), "drop")
    assert nemesis.name == Topology.MAJORITIES_RING and nemesis.mode == CutMode.DROP
    nemesis.apply(cluster)
    assert cuts(cluster) == nemesis.pairs
    assert all(
        m == CutMode.DROP for r in cluster.brokers for m in read_cuts(cluster.node_dir(r)).values()
    )
    assert "deaf to" in nemesis.describe()
    nemesis.heal(cluster)
    assert cuts(cluster) == set()
    # overlapping faults heal one by one
    one = Nemesis("one", isolate_one([1, 2, 3], 3))
    other = Nemesis("other", frozenset({(1, 2)}), CutMode.DROP)
    one.apply(cluster)
    other.apply(cluster)
    one.heal(cluster)
    assert cuts(cluster) == {(1, 2)}
    assert read_cuts(cluster.node_dir(1)) == {2: CutMode.DROP}
    other.heal(cluster)
    assert cuts(cluster) == set()
    assert Nemesis("x", frozenset()).describe() == "x (refuse): nothing cut"
    with pytest.raises(UnknownKindError, match="partition topology"):
        nemesis_for(cluster, "bridge", random.Random(1))


def test_a_clients_cut_and_a_clock_step_apply_and_heal_alone(tmp_path):
    cluster = stub_cluster(tmp_path)
    Nemesis("cut", frozenset({(2, 1)})).apply(cluster)
    clients = ClientsCut(2, CutMode.DROP, "p1-")
    clients.apply(cluster)
    assert read_clients_cut(cluster.node_dir(2)) == {"mode": "drop", "client_id_prefix": "p1-"}
    assert clients.describe() == "broker 2 deaf to clients p1-* (drop)"
    clients.heal(cluster)
    assert read_clients_cut(cluster.node_dir(2)) is None
    assert read_cuts(cluster.node_dir(2)) == {1: CutMode.REFUSE}  # the link cut stays
    step = ClockStep(3, -3600)
    step.apply(cluster)
    assert read_clock(cluster.node_dir(3))["offset_ms"] == -3_600_000
    assert step.describe() == "3's clock stepped -3600 s"
    step.heal(cluster)
    assert read_clock(cluster.node_dir(3))["offset_ms"] == 0
