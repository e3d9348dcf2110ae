"""KIP-848 consumer groups: examples of each error and of the two-step handover, the
server assignors' properties, and a hypothesis state machine whose clients
heartbeat, revoke late, crash and leave, checking that no partition is ever held
by two members and that well-behaved members converge to the target."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator
from kafkalab.coordinator.group.consumer_group import MemberState
from kafkalab.coordinator.group.results import CommitOffset
from kafkalab.coordinator.group.server_assignors import (
    MemberSubscriptionSpec,
    RangeAssignor,
    UniformAssignor,
)
from kafkalab.errors import Errors

E = Errors


def coordinator(**config) -> GroupCoordinator:
    ids = itertools.count(1)
    c = GroupCoordinator(
        GroupConfig(**config), member_id_factory=lambda cl, i: f"{i or cl}-{next(ids)}"
    )
    c.update_topic_metadata({"t": 4, "u": 2})
    return c


def hb(c, member, epoch, now=0, **kw):
    if epoch == 0:
        kw.setdefault("subscribed_topic_names", ["t"])
        kw.setdefault("rebalance_timeout_ms", 30_000)
    return c.consumer_group_heartbeat("g", member, epoch, now_ms=now, **kw).response


def test_a_second_member_gets_its_partitions_only_after_the_first_revokes_them():
    c = coordinator()
    a = hb(c, "a", 0)
    assert (a.member_epoch, a.assignment) == (
        1,
        frozenset({("t", 0), ("t", 1), ("t", 2), ("t", 3)}),
    )
    b = hb(c, "b", 0)
    assert (b.member_epoch, b.assignment) == (2, frozenset())  # epoch 2, but 2 and 3 are a's
    a = hb(c, "a", 1, owned_partitions=[("t", p) for p in range(4)])
    assert (a.member_epoch, a.assignment) == (1, frozenset({("t", 0), ("t", 1)}))  # revoke 2, 3
    assert c.consumer_groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert hb(c, "b", 2, owned_partitions=[]).assignment == frozenset()  # still unreleased
    a = hb(c, "a", 1, owned_partitions=[("t", 0), ("t", 1)])  # revoked: a reaches epoch 2
    assert a.member_epoch == 2
    b = hb(c, "b", 2, owned_partitions=[])
    assert b.assignment == frozenset({("t", 2), ("t", 3)})
    assert c.consumer_group_describe("g").state == "Stable"


def test_errors():
    c = coordinator(group_consumer_max_size=2)
    assert hb(c, "x", 3).error == E.GROUP_ID_NOT_FOUND
    assert c.consumer_group_heartbeat("g", "a", 0, now_ms=0).response.error == E.INVALID_REQUEST
    assert hb(c, "a", 0, server_assignor="sticky").error == E.UNSUPPORTED_ASSIGNOR
    hb(c, "a", 0, instance_id="i")
    hb(c, "b", 0)
    assert hb(c, "c", 0).error == E.GROUP_MAX_SIZE_REACHED
    assert hb(c, "nobody", 1).error == E.UNKNOWN_MEMBER_ID
    assert hb(c, "a2", 0, instance_id="i").error == E.UNRELEASED_INSTANCE_ID
    assert hb(c, "a", 7, instance_id="i").error == E.FENCED_MEMBER_EPOCH  # from the future
    epoch = c.consumer_groups["g"].members["b"].member_epoch
    for topics in (["u"], ["t"]):  # two subscription changes: two new epochs
        epoch = hb(c, "b", epoch, subscribed_topic_names=topics, owned_partitions=[]).member_epoch
    assert epoch >= 3
    assert hb(c, "b", epoch - 2, owned_partitions=[]).error == E.FENCED_MEMBER_EPOCH  # too old
    assert hb(c, "", 3).error == E.INVALID_REQUEST


def test_the_previous_epoch_is_accepted_if_the_answer_was_lost():
    c = coordinator()
    hb(c, "a", 0)
    hb(c, "b", 0)
    hb(c, "a", 1, owned_partitions=[("t", p) for p in range(4)])
    a = hb(c, "a", 1, owned_partitions=[("t", 0), ("t", 1)])
    assert a.member_epoch == 2
    # the answer with epoch 2 was lost: a retries with epoch 1 and owns a subset
    assert hb(c, "a", 1, owned_partitions=[("t", 0), ("t", 1)]).error == E.NONE
    # but not if it claims more than its assignment
    assert hb(c, "a", 1, owned_partitions=[("t", 3)]).error == E.FENCED_MEMBER_EPOCH


def test_a_static_member_leaves_temporarily_and_its_successor_takes_over():
    c = coordinator()
    hb(c, "a", 0, instance_id="i")
    hb(c, "b", 0)
    g = c.consumer_groups["g"]
    epoch_before = g.group_epoch
    left = hb(c, "a", g.members["a"].member_epoch, instance_id="i", now=1)
    assert left.error == E.NONE
    assert hb(c, "a", -2, instance_id="i").member_epoch == -2
    kept = g.members["a"].assigned
    new = hb(c, "a-restarted", 0, instance_id="i", now=2)
    assert new.error == E.NONE and new.assignment == kept
    assert "a" not in g.members and g.group_epoch == epoch_before  # no rebalance


def test_session_timeout_and_revocation_timeout_fence():
    c = coordinator(group_consumer_session_timeout_ms=45_000)
    hb(c, "a", 0)
    hb(c, "b", 0)
    g = c.consumer_groups["g"]
    hb(c, "a", 1, owned_partitions=[("t", p) for p in range(4)], now=1000)  # must revoke 2, 3
    epoch = g.group_epoch
    c.tick(1000 + 29_999)
    assert "a" in g.members
    c.tick(1000 + 30_000)  # a never acknowledged within its rebalance timeout
    assert "a" not in g.members and g.group_epoch == epoch + 1
    b = hb(c, "b", g.members["b"].member_epoch, owned_partitions=[], now=31_000)
    assert b.assignment == frozenset(("t", p) for p in range(4))
    c.tick(31_000 + 45_000)
    assert g.members == {}
    assert c.consumer_group_describe("g").state == "Empty"


def test_leaving_bumps_the_group_epoch_and_frees_the_partitions():
    c = coordinator()
    hb(c, "a", 0)
    hb(c, "b", 0)
    g = c.consumer_groups["g"]
    assert hb(c, "b", -1).member_epoch == -1
    assert "b" not in g.members
    a = hb(c, "a", 1, owned_partitions=[("t", p) for p in range(4)])
    assert a.assignment == frozenset(("t", p) for p in range(4)) and a.member_epoch == g.group_epoch


def test_a_classic_group_is_not_a_consumer_group():
    c = coordinator()
    c.join_group(
        "g",
        "",
        protocol_type="consumer",
        protocols=[("range", b"")],
        session_timeout_ms=10_000,
        require_known_member_id=False,
        now_ms=0,
    )
    assert hb(c, "a", 0).error == E.GROUP_ID_NOT_FOUND


def test_new_partitions_bump_the_group_epoch():
    c = coordinator()
    hb(c, "a", 0)
    g = c.consumer_groups["g"]
    epoch = g.group_epoch
    effects = c.update_topic_metadata({"t": 6, "u": 2}, now_ms=5)
    assert g.group_epoch == epoch + 1
    # the new epoch is written, so a coordinator that loads the group knows it
    import struct

    from kafkalab.coordinator.group import consumer_group_records as cg

    (append,) = effects.appends()
    assert dict(append.records)[cg.encode_key(cg.GROUP_METADATA, "g")] == (
        struct.pack(">hi", 0, epoch + 1) + b"\x00"
    )
    a = hb(c, "a", 1, owned_partitions=[("t", p) for p in range(4)])
    assert a.assignment == frozenset(("t", p) for p in range(6))


# -- server assignors -------------------------------------------------------------------------


@st.composite
def specs(draw):
    counts = draw(st.dictionaries(st.sampled_from("abcd"), st.integers(0, 9), min_size=1))
    members = draw(
        st.lists(st.text("mnop", min_size=1, max_size=2), min_size=1, max_size=6, unique=True)
    )
    uniform = draw(st.booleans())
    topics = sorted(counts)
    return counts, {
        m: MemberSubscriptionSpec(
            frozenset(
                topics
                if uniform
                else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
            )
        )
        for m in members
    }


@settings(max_examples=150, deadline=None)
@given(specs(), st.sampled_from([UniformAssignor(), RangeAssignor()]))
def test_server_assignors_assign_each_partition_once(spec, assignor):
    counts, members = spec
    out = assignor.assign(members, counts, {})
    seen = [tp for parts in out.values() for tp in parts]
    assert len(seen) == len(set(seen))
    wanted = set().union(*(s.topics for s in members.values()))
    assert set(seen) == {(t, p) for t in wanted for p in range(counts[t])}
    assert all(tp[0] in members[m].topics for m, parts in out.items() for tp in parts)
    if isinstance(assignor, UniformAssignor) and len({s.topics for s in members.values()}) == 1:
        sizes = [len(p) for p in out.values()]
        assert max(sizes) - min(sizes) <= 1
    # sticky: the same input again, with this result as the current target, changes nothing
    assert assignor.assign(members, counts, out) == out


# -- the state machine ------------------------------------------------------------------------

MEMBERS = ("a", "b", "c")


class ConsumerGroupMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.c = coordinator()
        self.log = []
        self.now = 0
        self.epoch = {m: None for m in MEMBERS}  # None: not in the group
        self.owned = {m: frozenset() for m in MEMBERS}  # what each client consumes

    def record(self, effects):
        for append in effects.appends():
            self.log.extend((append.partition, k, v) for k, v in append.records)
        return effects

    def heartbeat(self, m, owned=None, topics=None):
        epoch = self.epoch[m]
        if epoch is None:
            e = self.c.consumer_group_heartbeat(
                "g",
                m,
                0,
                subscribed_topic_names=topics or ["t", "u"],
                rebalance_timeout_ms=30_000,
                now_ms=self.now,
            )
        else:
            e = self.c.consumer_group_heartbeat(
                "g",
                m,
                epoch,
                owned_partitions=owned,
                subscribed_topic_names=topics,
                now_ms=self.now,
            )
        r = self.record(e).response
        if r.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.epoch[m] = None
            self.owned[m] = frozenset()  # abandons everything
            return
        assert r.error == E.NONE, r
        self.epoch[m] = r.member_epoch
        if r.assignment is not None:
            # a well-behaved client: revokes what is gone, starts what is new
            self.owned[m] = r.assignment

    @rule(m=st.sampled_from(MEMBERS))
    def good_heartbeat(self, m):
        self.heartbeat(m, sorted(self.owned[m]))

    @rule(m=st.sampled_from(MEMBERS))
    def heartbeat_without_owned(self, m):
        """Owned partitions not sent: the coordinator must assume revocation is not done."""
        self.heartbeat(m, None)

    @rule(m=st.sampled_from(MEMBERS), topics=st.sampled_from([["t"], ["u"], ["t", "u"]]))
    def change_subscription(self, m, topics):
        if self.epoch[m] is not None:
            self.heartbeat(m, sorted(self.owned[m]), topics)

    @rule(m=st.sampled_from(MEMBERS))
    def leave(self, m):
        if self.epoch[m] is not None:
            self.record(self.c.consumer_group_heartbeat("g", m, -1, now_ms=self.now))
            self.epoch[m] = None
            self.owned[m] = frozenset()

    @rule(ms=st.integers(1, 40_000))
    def time_passes(self, ms):
        self.now += ms
        self.record(self.c.tick(self.now))

    @rule()
    def failover(self):
        """Another coordinator loads the partition from the records written so far:
        it must know exactly what the old one knew."""
        old = self.c.consumer_groups.get("g")
        p = self.c.partition_for("g")
        self.c.on_resign(p)
        self.c = coordinator()
        self.c.on_become_leader(p, epoch=1)
        self.c.complete_load(p, [(k, v) for q, k, v in self.log if q == p], self.now)
        new = self.c.consumer_groups.get("g")
        if old is None:
            assert new is None
            return
        assert (new.group_epoch, new.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
        assert new.members == old.members
        assert {m: t for m, t in new.target.items()} == {m: t for m, t in old.target.items()}

    @rule()
    def everyone_converges(self):
        """Members that keep heartbeating reach the target: Stable within a few rounds."""
        for _ in range(4):
            for m in MEMBERS:
                if self.epoch[m] is not None:
                    self.heartbeat(m, sorted(self.owned[m]))
        group = self.c.consumer_groups.get("g")
        if group is not None and group.members:
            assert group.state.value == "Stable", group
            assigned = [tp for mm in group.members.values() for tp in mm.assigned]
            wanted = group.subscribed_topics()
            assert sorted(assigned) == sorted(
                (t, p) for t in wanted for p in range(self.c.partitions_per_topic[t])
            )

    @invariant()
    def no_partition_is_held_twice(self):
        group = self.c.consumer_groups.get("g")
        if group is None:
            return
        held = [tp for m in group.members.values() for tp in m.assigned | m.pending_revocation]
        assert len(held) == len(set(held))
        # and what the (live) clients actually consume never overlaps either
        live = [tp for m in MEMBERS if m in group.members for tp in self.owned[m]]
        assert len(live) == len(set(live))

    @invariant()
    def epochs_are_ordered(self):
        group = self.c.consumer_groups.get("g")
        if group is None:
            return
        assert group.assignment_epoch <= group.group_epoch
        for m in group.members.values():
            assert m.member_epoch <= group.assignment_epoch


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_consumer_group_state_machine = ConsumerGroupMachine.TestCase


def test_members_commit_offsets_with_their_member_epoch():
    c = coordinator()
    a = hb(c, "a", 0)
    commit = c.complete_appends(
        c.commit_offsets(
            "g", {("t", 0): CommitOffset(42)}, generation_id=a.member_epoch, member_id="a", now_ms=1
        ),
        1,
    )
    assert commit.response.partitions == {("t", 0): E.NONE}
    assert c.fetch_offsets("g", [("t", 0)]).partitions[("t", 0)].offset == 42
    # OffsetFetch v9: a member fetches at its own epoch
    fetched = c.fetch_offsets("g", [("t", 0)], member_id="a", member_epoch=a.member_epoch)
    assert fetched.partitions[("t", 0)].offset == 42
    assert c.fetch_offsets("g", None, member_id="a", member_epoch=9).error == E.STALE_MEMBER_EPOCH
    assert c.fetch_offsets("g", None, member_id="zz", member_epoch=1).error == E.UNKNOWN_MEMBER_ID
    stale = c.commit_offsets(
        "g", {("t", 0): CommitOffset(43)}, generation_id=a.member_epoch + 1, member_id="a", now_ms=2
    )
    assert stale.response.partitions == {("t", 0): E.STALE_MEMBER_EPOCH}
    stranger = c.commit_offsets(
        "g", {("t", 0): CommitOffset(43)}, generation_id=1, member_id="zz", now_ms=2
    )
    assert stranger.response.partitions == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a classic member cannot join a live consumer group of the same id
    join = c.join_group(
        "g",
        "",
        protocol_type="consumer",
        protocols=[("range", b"")],
        session_timeout_ms=10_000,
        now_ms=3,
    )
    assert join.response.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert [(g.group_id, g.state) for g in c.list_groups().groups] == [("g", "Stable")]
    deleted = c.delete_groups(["g"], now_ms=4)
    assert deleted.response.groups == {"g": E.NON_EMPTY_GROUP}
    hb(c, "a", -1)
    deleted = c.complete_appends(c.delete_groups(["g"], now_ms=5), 5)
    assert deleted.response.groups == {"g": E.NONE}
    assert (
        "g" not in c.consumer_groups
        and c.fetch_offsets("g", [("t", 0)]).partitions[("t", 0)].offset == -1
    )


def test_consumer_group_records_byte_layout_and_reload():
    import struct
    import uuid

    from kafkalab.coordinator.group import consumer_group_records as cg

    tid = uuid.UUID(int=7)
    c = coordinator()
    c.update_topic_metadata({"t": 4, "u": 2}, {"t": tid, "u": uuid.UUID(int=8)})
    e = c.consumer_group_heartbeat(
        "g",
        "a",
        0,
        subscribed_topic_names=["t"],
        rebalance_timeout_ms=30_000,
        client_id="cl",
        now_ms=0,
    )
    records = dict((k, v) for a in e.appends() for k, v in a.records)
    key = cg.encode_key(cg.CURRENT_MEMBER_ASSIGNMENT, "g", "a")
    assert key == struct.pack(">h", 8) + b"\x00\x01g" + b"\x00\x01a"
    # version 0, flexible: epoch 1, previous -1 (... 0 before joining), state 0, one topic
    expected = (
        struct.pack(">hiib", 0, 1, 0, 0)
        + b"\x02"  # compact array of 1
        + tid.bytes
        + b"\x05"  # compact array of 4 partitions
        + struct.pack(">iiii", 0, 1, 2, 3)
        + b"\x00"  # the topic's tagged fields
        + b"\x01"  # empty pending-revocation array
        + b"\x00"  # the value's tagged fields
    )
    assert records[key] == expected
    assert records[cg.encode_key(cg.GROUP_METADATA, "g")] == struct.pack(">hi", 0, 1) + b"\x00"
    member = cg.decode_value(
        cg.MEMBER_METADATA, records[cg.encode_key(cg.MEMBER_METADATA, "g", "a")]
    )
    assert (
        member["client_id"],
        member["subscribed_topic_names"],
        member["rebalance_timeout_ms"],
    ) == (
        "cl",
        ["t"],
        30_000,
    )


# -- one replay path: handlers write records, the records change the group ---------------------


def test_a_heartbeat_changes_the_group_only_through_its_records():
    """What a heartbeat did to the group is exactly what replaying its records into
    the group as it was does: the handler itself never writes the group."""
    import copy

    c = coordinator()
    c.complete_appends(c.consumer_group_heartbeat("g", "a", 0, **JOIN, now_ms=0), 0)
    before = copy.deepcopy(c.consumer_groups["g"])
    e = c.consumer_group_heartbeat("g", "b", 0, **JOIN, now_ms=1)
    replayed = {"g": before}
    for append in e.appends():
        for k, v in append.records:
            c.consumer_manager.replay_consumer_group_record(replayed, k, v)
    after = c.consumer_groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.target, after.members) == (
        before.group_epoch,
        before.assignment_epoch,
        before.target,
        before.members,
    )
    assert "b" in after.members and after.group_epoch == 2


def test_a_failed_write_puts_the_group_back():
    c = coordinator()
    c.complete_appends(c.consumer_group_heartbeat("g", "a", 0, **JOIN, now_ms=0), 0)
    group = c.consumer_groups["g"]
    epochs = (group.group_epoch, group.assignment_epoch, dict(group.target))
    joined = c.consumer_group_heartbeat("g", "b", 0, **JOIN, now_ms=1)
    assert joined.response.error == E.NONE and "b" in c.consumer_groups["g"].members
    (append,) = joined.appends()
    c.append_completed(append.append_id, E.NOT_ENOUGH_REPLICAS, now_ms=1)
    group = c.consumer_groups["g"]
    assert "b" not in group.members
    assert (group.group_epoch, group.assignment_epoch, dict(group.target)) == epochs
    # b believes it joined; its next heartbeat finds it unknown, and it rejoins
    assert hb(c, "b", joined.response.member_epoch, now=2).error == E.UNKNOWN_MEMBER_ID


def test_a_failed_first_write_leaves_no_group():
    c = coordinator()
    (append,) = c.consumer_group_heartbeat("g", "a", 0, **JOIN, now_ms=0).appends()
    c.append_completed(append.append_id, E.NOT_LEADER_OR_FOLLOWER, now_ms=0)
    assert "g" not in c.consumer_groups
    assert c.consumer_group_describe("g").error == E.GROUP_ID_NOT_FOUND


def test_a_member_whose_leave_was_not_written_keeps_a_session():
    """The leave's write fails: the member is back, and its session (cancelled by
    the leave) is armed again, so it still expires if it is gone."""
    c = coordinator()
    c.complete_appends(c.consumer_group_heartbeat("g", "a", 0, **JOIN, now_ms=0), 0)
    (append,) = c.consumer_group_heartbeat("g", "a", -1, now_ms=1).appends()
    assert "a" not in c.consumer_groups["g"].members
    c.append_completed(append.append_id, E.NOT_ENOUGH_REPLICAS, now_ms=1)
    assert "a" in c.consumer_groups["g"].members
    session = c.config.group_consumer_session_timeout_ms
    c.complete_appends(c.tick(1 + session), 1 + session)
    assert "a" not in c.consumer_groups["g"].members


def test_a_failed_write_before_one_written_leaves_what_the_log_holds():
    """Two sessions expire in one tick: two writes in flight. The first is not
    written, the second is: the group is what loading the log gives (the first
    member still there, the second gone), not the group before either write."""
    c, log = coordinator(), []
    for member in ("a", "b"):
        c.complete_appends(c.consumer_group_heartbeat("g", member, 0, **JOIN, now_ms=0), 0, log)
    session = c.config.group_consumer_session_timeout_ms
    first, second = c.tick(session).appends()
    c.append_completed(first.append_id, E.NOT_ENOUGH_REPLICAS, now_ms=session)
    c.append_completed(second.append_id, E.NONE, now_ms=session)
    log.extend((second.partition, k, v) for k, v in second.records)
    fresh = coordinator()
    p = c.partition_for("g")
    fresh.on_resign(p)
    fresh.on_become_leader(p, epoch=1)
    fresh.complete_load(p, [(k, v) for q, k, v in log if q == p], session)
    live, loaded = c.consumer_groups["g"], fresh.consumer_groups["g"]
    assert len(live.members) == 1
    assert (live.group_epoch, live.assignment_epoch, live.target, live.members) == (
        loaded.group_epoch,
        loaded.assignment_epoch,
        loaded.target,
        loaded.members,
    )


JOIN = {"subscribed_topic_names": ["t"], "rebalance_timeout_ms": 30_000}
