"""Assignors: every partition assigned exactly once among its subscribers, balance
(within one for roundrobin and sticky on uniform subscriptions), stickiness as
good as the quotas allow, cooperative-sticky never handing out a partition another
member still owns, and determinism. Plus Kafka's documented examples."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.client.assignors import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from kafkalab.client.assignors.sticky import encode_sticky_user_data
from kafkalab.protocol.consumer_protocol import Subscription

FAST = settings(max_examples=150, deadline=None)

topic_counts = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1, max_size=4
)
member_ids = st.lists(st.text("mnopq", min_size=1, max_size=3), min_size=1, max_size=7, unique=True)


@st.composite
def groups(draw, uniform=None):
    counts = draw(topic_counts)
    members = draw(member_ids)
    topics = sorted(counts)
    if uniform is None:
        uniform = draw(st.booleans())
    if uniform:
        subs = {m: Subscription(tuple(topics)) for m in members}
    else:
        subs = {
            m: Subscription(tuple(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))))
            for m in members
        }
    return counts, subs


def check_exactly_once(counts, subs, out):
    assert set(out) == set(subs)
    seen = [tp for parts in out.values() for tp in parts]
    assert len(seen) == len(set(seen)), "a partition assigned twice"
    wanted = {t for s in subs.values() for t in s.topics}
    assert set(seen) == {(t, p) for t in wanted for p in range(counts[t])}
    for m, parts in out.items():
        assert all(t in subs[m].topics for t, _ in parts), "assigned a topic it does not read"


def loads(out):
    return [len(parts) for parts in out.values()]


@FAST
@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_every_partition_exactly_once_among_subscribers(group, name):
    counts, subs = group
    out = assignor_for(name).assign(counts, subs)
    if name == "cooperative-sticky":
        assert all(not s.owned_partitions for s in subs.values())  # nothing held back
    check_exactly_once(counts, subs, out)


@FAST
@given(groups(uniform=True), st.sampled_from(["roundrobin", "sticky", "cooperative-sticky"]))
def test_balanced_within_one_on_uniform_subscriptions(group, name):
    counts, subs = group
    out = assignor_for(name).assign(counts, subs)
    assert max(loads(out)) - min(loads(out)) <= 1


@FAST
@given(groups())
def test_range_balances_each_topic_within_one(group):
    counts, subs = group
    out = RangeAssignor().assign(counts, subs)
    for topic in counts:
        per = [sum(1 for t, _ in out[m] if t == topic) for m in subs if topic in subs[m].topics]
        if per:
            assert max(per) - min(per) <= 1


@FAST
@given(groups(uniform=False))
def test_sticky_general_case_cannot_be_improved_by_one_move(group):
    counts, subs = group
    out = StickyAssignor().assign(counts, subs)
    for parts in out.values():
        for t, _ in parts:
            for dst in subs:
                if t in subs[dst].topics:
                    assert len(parts) - len(out[dst]) <= 1


@FAST
@given(groups(), st.sampled_from(sorted(ASSIGNORS)), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_order_of_members(group, name, rnd):
    counts, subs = group
    shuffled = list(subs.items())
    rnd.shuffle(shuffled)
    assert assignor_for(name).assign(counts, subs) == assignor_for(name).assign(
        counts, dict(shuffled)
    )


@st.composite
def membership_changes(draw):
    counts = draw(topic_counts)
    first = draw(member_ids)
    later = draw(member_ids)
    return counts, first, later


@FAST
@given(membership_changes())
def test_sticky_keeps_as_many_partitions_as_the_quotas_allow(change):
    counts, first, later = change
    topics = tuple(sorted(counts))
    before = StickyAssignor().assign(counts, {m: Subscription(topics) for m in first})
    subs = {
        m: Subscription(topics, encode_sticky_user_data(before[m], 1) if m in before else None)
        for m in later
    }
    after = StickyAssignor().assign(counts, subs)
    check_exactly_once(counts, subs, after)
    total = sum(counts.values())
    min_q, extra = divmod(total, len(later))
    owned = [len(before.get(m, [])) for m in later]
    best = sum(min(o, min_q) for o in owned) + (
        min(sum(1 for o in owned if o > min_q), extra) if extra else 0
    )
    kept = sum(len(set(before.get(m, [])) & set(after[m])) for m in later)
    assert kept == best


@FAST
@given(groups(uniform=True))
def test_sticky_changes_nothing_when_nothing_changed(group):
    counts, subs = group
    first = StickyAssignor().assign(counts, subs)
    again = {
        m: Subscription(s.topics, encode_sticky_user_data(first[m], 3)) for m, s in subs.items()
    }
    assert StickyAssignor().assign(counts, again) == {m: sorted(p) for m, p in first.items()}


@FAST
@given(membership_changes())
def test_cooperative_revokes_first_and_assigns_in_a_second_rebalance(change):
    counts, first, later = change
    topics = tuple(sorted(counts))
    owned = CooperativeStickyAssignor().assign(counts, {m: Subscription(topics) for m in first})

    def subs_from(owner_map, generation):
        return {
            m: Subscription(topics, None, tuple(owner_map.get(m, [])), generation) for m in later
        }

    # rebalance 1: members still own what they had
    subs = subs_from(owned, 1)
    round1 = CooperativeStickyAssignor().assign(counts, subs)
    for m, parts in round1.items():
        for tp in parts:
            others = [o for o in later if o != m and tp in owned.get(o, [])]
            assert not others, f"{tp} given to {m} while {others} still own it"
    # each member revokes what it lost; those that lost something rejoin
    still_owned = {m: [tp for tp in owned.get(m, []) if tp in round1[m]] for m in later}
    # rebalance 2: nothing moves any more, everything is assigned, balanced
    round2 = CooperativeStickyAssignor().assign(counts, subs_from(still_owned, 2))
    check_exactly_once(counts, subs_from(still_owned, 2), round2)
    assert max(loads(round2)) - min(loads(round2)) <= 1
    for m in later:
        assert set(still_owned[m]) <= set(round2[m])


def test_kafkas_examples():
    # RangeAssignor javadoc: t0, t1 with 3 partitions each, C0 and C1
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    assert RangeAssignor().assign({"t0": 3, "t1": 3}, subs) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C1": [("t0", 2), ("t1", 2)],
    }
    # RoundRobinAssignor javadoc, same topics
    assert RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs) == {
        "C0": [("t0", 0), ("t0", 2), ("t1", 1)],
        "C1": [("t0", 1), ("t1", 0), ("t1", 2)],
    }
    # RoundRobinAssignor javadoc, unequal subscriptions: t0 (1), t1 (2), t2 (3)
    subs = {
        "C0": Subscription(("t0",)),
        "C1": Subscription(("t0", "t1")),
        "C2": Subscription(("t0", "t1", "t2")),
    }
    assert RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0)],
        "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_static_members_sort_first_by_instance_id():
    subs = {"a": Subscription(("t",)), "b": Subscription(("t",))}
    out = RangeAssignor().assign({"t": 3}, subs, {"a": None, "b": "instance-0"})
    assert out == {"b": [("t", 0), ("t", 1)], "a": [("t", 2)]}
