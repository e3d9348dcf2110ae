"""The classic group coordinator, example by example: the happy path, every error
a client can get and when Kafka gives it, static membership, the initial
rebalance delay, session expiry, writes and their failures, loading from the log."""

import pytest
from group_harness import SUB, Harness

from kafkalab.coordinator.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalGroupTransition,
)
from kafkalab.coordinator.group.coordinator_records import partition_for, read_key
from kafkalab.coordinator.group.group_coordinator import TimerKey, TimerKind
from kafkalab.coordinator.group.results import AppendRecords, CommitOffset
from kafkalab.errors import Errors
from kafkalab.protocol.consumer_protocol import Subscription, encode_subscription

E = Errors


def answer(effects, request):
    """The result the effects give to `request` (exactly one)."""
    (result,) = [r.result for r in effects.responses() if r.request == request]
    return result


def test_two_members_join_sync_and_become_stable():
    h = Harness()
    m1, e = h.join_new("g")
    r = e.response
    assert (r.error, r.generation_id, r.leader_id, r.protocol_name) == (E.NONE, 1, m1, "range")
    assert [m.member_id for m in r.members] == [m1]  # the leader sees everyone
    m2, e = h.join_new("g")
    assert e.response is None  # parked until m1 rejoins
    assert h.c.groups["g"].state is GroupState.PREPARING_REBALANCE
    e = h.join("g", m1)
    answers = {resp.result.member_id: resp.result for resp in e.responses()}
    assert {a.generation_id for a in answers.values()} == {2}
    assert len(answers[m1].members) == 2 and answers[m2].members == ()
    follower = h.sync("g", 2, m2)
    assert follower.response is None  # waits for the leader's assignment
    e = h.sync("g", 2, m1, {m1: b"A", m2: b"B"})
    got = {resp.request: resp.result.assignment for resp in e.responses()}
    assert set(got.values()) == {b"A", b"B"} and len(got) == 2
    assert h.c.groups["g"].state is GroupState.STABLE
    assert h.heartbeat("g", 2, m1) == E.NONE


def test_member_id_required_only_for_new_dynamic_members_from_v4():
    h = Harness()
    r = h.join("g").response
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("c-")
    assert h.c.groups["g"].pending_members == {r.member_id}
    old = h.join("g2", require_known=False).response  # JoinGroup v0-v3
    assert old.error == E.NONE and old.generation_id == 1
    static = h.join("g3", instance="i-1").response  # static members never need it
    assert static.error == E.NONE and static.member_id.startswith("i-1-")


def test_a_pending_member_that_never_rejoins_expires_after_its_session_timeout():
    h = Harness()
    pending = h.join("g", session=6000).response.member_id
    h.tick(5999)
    assert pending in h.c.groups["g"].pending_members
    h.tick(6000)
    assert h.c.groups["g"].pending_members == set()


@pytest.mark.parametrize("session", [5999, 1_800_001])
def test_invalid_session_timeout_outside_min_and_max(session):
    h = Harness()
    assert (
        h.join("g", session=session, require_known=False).response.error
        == E.INVALID_SESSION_TIMEOUT
    )


def test_group_min_and_max_session_timeout_are_configurable():
    h = Harness(group_min_session_timeout_ms=100, group_max_session_timeout_ms=200)
    assert h.join("g", session=150, require_known=False).response.error == E.NONE
    assert h.join("g", session=201, require_known=False).response.error == E.INVALID_SESSION_TIMEOUT


def test_invalid_group_id():
    h = Harness()
    assert h.join("", require_known=False).response.error == E.INVALID_GROUP_ID
    assert h.heartbeat("", 1, "m") == E.INVALID_GROUP_ID
    # the empty group id is allowed for offsets, describe and delete (Kafka keeps that)
    assert h.c.fetch_offsets("").error == E.NONE
    assert h.c.describe_group("").error == E.NONE


def test_unknown_member_id():
    h = Harness()
    assert h.join("nope", "someone").response.error == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", 1, "someone") == E.UNKNOWN_MEMBER_ID
    assert h.sync("nope", 1, "someone").response.error == E.UNKNOWN_MEMBER_ID
    (m1,) = h.stable_group("g", 1)
    assert h.join("g", "stranger").response.error == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", 1, "stranger") == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", 1, "stranger").response.error == E.UNKNOWN_MEMBER_ID
    r = h.commit("g", {("t", 0): 5}, 1, "stranger").response
    assert r.partitions == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a commit without a member id to a non-empty group
    assert h.commit("g", {("t", 0): 5}).response.partitions == {("t", 0): E.UNKNOWN_MEMBER_ID}
    leave = h.run(h.c.leave_group("g", [("stranger", None)], now_ms=h.now)).response
    assert leave.error == E.NONE and leave.members[0].error == E.UNKNOWN_MEMBER_ID


def test_generation_minus_one_commits_to_an_empty_group_whatever_the_member_id():
    """Kafka's ClassicGroup.validateOffsetCommit: generation -1 is an admin client or a
    consumer without group management (librdkafka's KIP-848 consumer commits so, with
    a member id it made itself); it may commit while the group is Empty, not after."""
    h = Harness()
    r = h.commit("solo", {("t", 0): 5}, -1, "made-up-by-the-client").response
    assert r.partitions == {("t", 0): E.NONE}
    assert h.c.fetch_offsets("solo", [("t", 0)]).partitions[("t", 0)].offset == 5
    h.stable_group("g", 1)
    r = h.commit("g", {("t", 0): 5}, -1, "made-up-by-the-client").response
    assert r.partitions == {("t", 0): E.UNKNOWN_MEMBER_ID}  # not while it has members


def test_illegal_generation():
    h = Harness()
    (m1,) = h.stable_group("g", 1)
    assert h.heartbeat("g", 0, m1) == E.ILLEGAL_GENERATION
    assert h.sync("g", 7, m1).response.error == E.ILLEGAL_GENERATION
    r = h.commit("g", {("t", 0): 5}, 2, m1).response
    assert r.partitions == {("t", 0): E.ILLEGAL_GENERATION}
    # a generation for a group this coordinator does not know
    assert h.commit("other", {("t", 0): 1}, 3, "m").response.partitions == {
        ("t", 0): E.ILLEGAL_GENERATION
    }


def test_rebalance_in_progress():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.join_new("g")  # a third member: PreparingRebalance
    assert h.c.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", 2, m1) == E.REBALANCE_IN_PROGRESS
    assert h.sync("g", 2, m1).response.error == E.REBALANCE_IN_PROGRESS
    # commits are still accepted while preparing (members learn from the heartbeat)
    assert h.commit("g", {("t", 0): 9}, 2, m1).response.partitions == {("t", 0): E.NONE}
    for m in (m1, m2):
        h.join("g", m)
    g = h.c.groups["g"]
    assert g.state is GroupState.COMPLETING_REBALANCE
    # committing before the new assignment arrived
    assert h.commit("g", {("t", 0): 9}, g.generation_id, m2).response.partitions == {
        ("t", 0): E.REBALANCE_IN_PROGRESS
    }
    parked = h.sync("g", g.generation_id, m2, request="parked-sync")
    assert parked.response is None
    # a member changes its subscription: the waiting SyncGroup is told to rejoin
    new_meta = encode_subscription(Subscription(("t", "u")))
    e = h.join("g", m2, protocols=[("range", new_meta)])
    assert answer(e, "parked-sync").error == E.REBALANCE_IN_PROGRESS


def test_inconsistent_group_protocol():
    h = Harness()
    (m1,) = h.stable_group("g", 1)
    r = h.join("g", protocols=[("roundrobin", SUB)], require_known=False).response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.join("g", protocol_type="connect", require_known=False).response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("new", protocols=[], require_known=False).response.error == (
        E.INCONSISTENT_GROUP_PROTOCOL
    )
    e = h.c.sync_group("g", 1, m1, protocol_name="sticky", now_ms=0)
    assert e.response.error == E.INCONSISTENT_GROUP_PROTOCOL
    e = h.c.sync_group("g", 1, m1, protocol_type="connect", now_ms=0)
    assert e.response.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_the_protocol_every_member_supports_wins_by_vote():
    h = Harness()
    both = [("sticky", SUB), ("range", SUB)]
    a = h.join("g", require_known=False, protocols=both).response.member_id
    h.join("g", require_known=False, protocols=[("range", SUB), ("sticky", SUB)])
    h.join("g", a, protocols=both)
    g = h.c.groups["g"]
    assert g.candidate_protocols() == {"range", "sticky"}
    # one vote each: the tie goes to the first name, deterministically
    assert g.protocol_name == "range"


def test_group_max_size_reached():
    h = Harness(group_max_size=2)
    h.stable_group("g", 2)
    r = h.join("g", require_known=False).response
    assert (r.error, r.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
    assert h.c.groups["g"].size() == 2


def test_group_id_not_found_and_non_empty_group():
    h = Harness()
    e = h.run(h.c.delete_groups(["nope"], now_ms=0))
    assert e.response.groups == {"nope": E.GROUP_ID_NOT_FOUND}
    e = h.run(h.c.delete_offsets("nope", [("t", 0)], now_ms=0))
    assert e.response.error == E.GROUP_ID_NOT_FOUND
    h.stable_group("g", 1)
    e = h.run(h.c.delete_groups(["g"], now_ms=0))
    assert e.response.groups == {"g": E.NON_EMPTY_GROUP}


def test_delete_an_empty_group_writes_tombstones():
    h = Harness()
    (m1,) = h.stable_group("g", 1)
    h.commit("g", {("t", 0): 3, ("t", 1): 4}, 1, m1)
    h.run(h.c.leave_group("g", [(m1, None)], now_ms=0))
    assert h.c.groups["g"].state is GroupState.EMPTY
    e = h.run(h.c.delete_groups(["g"], now_ms=0))
    assert e.response.groups == {"g": E.NONE}
    (append,) = e.appends()
    assert append.partition == partition_for("g", 50)
    assert all(v is None for _, v in append.records)
    assert {type(read_key(k)).__name__ for k, _ in append.records} == {"OffsetKey", "GroupKey"}
    assert "g" not in h.c.groups
    assert h.c.describe_group("g").state == "Dead"


def test_offset_delete_refuses_topics_the_group_reads():
    h = Harness()
    (m1,) = h.stable_group("g", 1)  # subscribed to "t"
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, 1, m1)
    e = h.run(h.c.delete_offsets("g", [("t", 0), ("old", 0)], now_ms=0))
    assert e.response.partitions == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): E.NONE}
    assert h.c.fetch_offsets("g").partitions.keys() == {("t", 0)}


def test_offset_metadata_too_large():
    h = Harness(offset_metadata_max_bytes=4)
    e = h.commit(
        "g",
        {("t", 0): CommitOffset(1, metadata="toolong"), ("t", 1): CommitOffset(2, metadata="ok")},
    )
    assert e.response.partitions == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    assert h.c.fetch_offsets("g", [("t", 0)]).partitions[("t", 0)].offset == -1


def test_coordinator_load_in_progress_then_not_coordinator():
    h = Harness(partitions=[])
    p = partition_for("g", 50)
    assert h.join("g").response.error == E.NOT_COORDINATOR
    h.c.on_become_leader(p, epoch=3)
    assert h.join("g").response.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.fetch_offsets("g").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.c.list_groups().error == E.COORDINATOR_LOAD_IN_PROGRESS
    h.c.complete_load(p, [], now_ms=0)
    assert h.join("g").response.error == E.MEMBER_ID_REQUIRED
    assert h.c.list_groups().error == E.NONE


def test_resigning_answers_parked_joins_with_not_coordinator():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.join("g", m1, request="parked")
    e = h.c.on_resign(partition_for("g", 50), epoch=1)
    assert answer(e, "parked").error == E.NOT_COORDINATOR
    assert h.heartbeat("g", 2, m2) == E.NOT_COORDINATOR
    assert "g" not in h.c.groups


def test_coordinator_not_available_after_shutdown():
    h = Harness()
    h.c.shutdown()
    assert h.join("g").response.error == E.COORDINATOR_NOT_AVAILABLE
    assert h.c.list_groups().error == E.COORDINATOR_NOT_AVAILABLE


def test_static_member_restart_keeps_its_place_without_a_rebalance():
    h = Harness()
    a = h.join("g", instance="a").response.member_id
    b_join = h.join("g", instance="b")  # parked: a must rejoin
    assert b_join.response is None
    h.join("g", a, instance="a")
    g = h.c.groups["g"]
    b = g.current_static_member_id("b")
    assert g.generation_id == 2
    h.sync("g", 2, b, instance="b")
    h.sync("g", 2, a, {a: b"A", b: b"B"}, instance="a")
    assert g.state is GroupState.STABLE
    # b restarts: same instance id, no member id
    r = h.join("g", instance="b").response
    assert (r.error, r.generation_id) == (E.NONE, 2)
    assert r.member_id != b and r.leader_id == a  # the old leader id: b must not lead
    assert g.state is GroupState.STABLE and g.generation_id == 2
    assert g.get(r.member_id).assignment == b"B"
    # the old b is fenced everywhere
    assert h.heartbeat("g", 2, b, instance="b") == E.FENCED_INSTANCE_ID
    assert h.sync("g", 2, b, instance="b").response.error == E.FENCED_INSTANCE_ID
    assert h.join("g", b, instance="b").response.error == E.FENCED_INSTANCE_ID
    c = h.commit("g", {("t", 0): 1}, 2, b, instance="b").response
    assert c.partitions == {("t", 0): E.FENCED_INSTANCE_ID}
    leave = h.run(h.c.leave_group("g", [(b, "b")], now_ms=0)).response
    assert leave.members[0].error == E.FENCED_INSTANCE_ID
    # the admin removes a static member by instance id alone
    leave = h.run(h.c.leave_group("g", [("", "b")], now_ms=0)).response
    assert leave.members[0].error == E.NONE
    assert g.current_static_member_id("b") is None and g.state is GroupState.PREPARING_REBALANCE


def test_a_parked_join_of_a_replaced_static_member_is_fenced():
    h = Harness()
    a = h.join("g", instance="a").response.member_id
    h.join("g", instance="b")
    h.join("g", a, instance="a")
    g = h.c.groups["g"]
    b = g.current_static_member_id("b")
    h.join("g", a, instance="a", protocols=[("range", b"changed")], request="a-old")
    e = h.join("g", instance="a")  # a restarts while its join waits
    assert answer(e, "a-old").error == E.FENCED_INSTANCE_ID
    assert b in g.members


def test_initial_rebalance_delay_waits_and_extends_while_members_arrive():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.join("g", require_known=False, rebalance=10_000, request="a").response
    assert a is None and h.c.next_deadline_ms() == 3000
    h.now = 2000
    h.join("g", require_known=False, rebalance=10_000, request="b")
    assert h.tick(2999).responses() == []
    e = h.tick(3000)  # a member arrived during the delay: wait again
    assert e.responses() == [] and h.c.next_deadline_ms() == 6000
    e = h.tick(6000)
    assert {r.request for r in e.responses()} == {"a", "b"}
    assert h.c.groups["g"].generation_id == 1


def test_a_silent_member_is_removed_after_its_session_timeout():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.now = 9_000
    assert h.heartbeat("g", 2, m1) == E.NONE
    h.tick(10_000)  # m2's last sign of life was at 0
    g = h.c.groups["g"]
    assert m2 not in g.members and g.state is GroupState.PREPARING_REBALANCE
    h.now = 10_500
    e = h.join("g", m1)
    assert e.response.generation_id == 3 and [m.member_id for m in e.response.members] == [m1]


def test_members_waiting_in_a_rebalance_need_no_heartbeat():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.join("g", m1)  # PreparingRebalance; m1 waits, m2 keeps heartbeating
    for t in range(3000, 30_000, 3000):
        h.now = t
        h.heartbeat("g", 2, m2)
    assert m1 in h.c.groups["g"].members


def test_a_member_that_never_rejoins_is_dropped_at_the_rebalance_timeout():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.now = 1000
    h.join("g", m1, rebalance=20_000)
    for t in range(4000, 31_000, 3000):
        h.now = t
        h.heartbeat("g", 2, m2)  # alive, but not rejoining
    # the join phase lasts the longest rebalance timeout of any member (m2's 30 s)
    assert h.tick(30_999).responses() == []
    e = h.tick(31_000)
    assert e.responses()[0].result.generation_id == 3
    assert list(h.c.groups["g"].members) == [m1]


def test_a_member_that_never_syncs_is_removed():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.join("g", m1)
    h.join("g", m2)
    h.sync("g", 3, m1, {m1: b"x", m2: b"y"})
    g = h.c.groups["g"]
    assert g.state is GroupState.STABLE and g.pending_sync_members == {m2}
    for t in range(5000, 30_001, 5000):
        h.now = t
        h.heartbeat("g", 3, m1)
        h.heartbeat("g", 3, m2)
    assert m2 not in g.members  # never asked for its assignment within the rebalance timeout


def test_a_failed_group_write_fails_the_sync():
    h = Harness()
    m1, _ = h.join_new("g")
    e = h.c.sync_group("g", 1, m1, assignments={m1: b"a"}, now_ms=0, request="s")
    (append,) = e.appends()
    out = h.c.append_completed(append.append_id, E.NOT_LEADER_OR_FOLLOWER, now_ms=0)
    assert out.responses()[0].result.error == E.NOT_COORDINATOR
    assert h.c.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_a_failed_offset_write_is_not_readable():
    h = Harness()
    e = h.c.commit_offsets("g", {("t", 0): CommitOffset(5)}, now_ms=0, request="c")
    (append,) = e.appends()
    assert h.c.groups["g"].pending_offset_commits == {("t", 0): 1}
    out = h.c.append_completed(append.append_id, E.NOT_ENOUGH_REPLICAS, now_ms=0)
    assert out.responses()[0].result.partitions == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert h.c.fetch_offsets("g", [("t", 0)]).partitions[("t", 0)].offset == -1
    assert h.c.groups["g"].pending_offset_commits == {}


def test_the_log_is_the_state_a_new_coordinator_loads_it():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    h.commit("g", {("t", 0): 10, ("t", 1): 20}, 2, m1)
    h.commit("g", {("t", 0): 11}, 2, m2)
    h.commit("solo", {("x", 0): 7})  # a group that only stores offsets
    p = partition_for("g", 50)
    other = Harness(partitions=[])
    other.c.on_become_leader(p, epoch=1)
    other.c.on_become_leader(partition_for("solo", 50), epoch=1)
    for part in {p, partition_for("solo", 50)}:
        other.c.complete_load(part, [(k, v) for q, k, v in h.log if q == part], now_ms=100)
    g = other.c.groups["g"]
    assert (g.state, g.generation_id, g.leader_id, list(g.members)) == (
        GroupState.STABLE,
        2,
        h.c.groups["g"].leader_id,
        [m1, m2],
    )
    assert g.get(m2).assignment == m2.encode()
    offsets = other.c.fetch_offsets("g").partitions
    assert {tp: o.offset for tp, o in offsets.items()} == {("t", 0): 11, ("t", 1): 20}
    assert other.c.fetch_offsets("solo").partitions[("x", 0)].offset == 7
    # loaded members must heartbeat within their session from the load
    other.now = 100
    assert other.heartbeat("g", 2, m1) == E.NONE
    other.tick(10_100)
    assert m2 not in g.members


def test_offsets_of_an_empty_group_expire_after_retention():
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    (m1,) = h.stable_group("g", 1)
    h.commit("g", {("t", 0): 1}, 1, m1)
    h.now = 1000
    h.run(h.c.leave_group("g", [(m1, None)], now_ms=h.now))  # Empty since t=1000
    h.tick(60_000)
    assert h.c.fetch_offsets("g").partitions[("t", 0)].offset == 1  # not yet
    e = h.tick(61_000)
    tombstones = [r for a in e.appends() for r in a.records]
    assert tombstones and all(v is None for _, v in tombstones)
    assert "g" not in h.c.groups


def test_transitions_outside_the_state_machine_are_refused():
    g = ClassicGroup("g")
    with pytest.raises(IllegalGroupTransition):
        g.transition_to(GroupState.STABLE, 0)
    for target, sources in VALID_PREVIOUS_STATES.items():
        for source in GroupState:
            g = ClassicGroup("g", source)
            if source in sources:
                g.transition_to(target, 1)
                assert g.state is target
            else:
                with pytest.raises(IllegalGroupTransition):
                    g.transition_to(target, 1)


def test_describe_and_list():
    h = Harness()
    m1, m2 = h.stable_group("g", 2)
    d = h.c.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: m.member_assignment for m in d.members} == {
        m1: m1.encode(),
        m2: m2.encode(),
    }
    h.join_new("g")
    d = h.c.describe_group("g")
    assert d.state == "PreparingRebalance" and d.protocol_data == ""
    assert all(m.member_metadata == b"" for m in d.members)
    h.commit("offsets-only", {("t", 0): 1})
    listed = {g.group_id: g.state for g in h.c.list_groups().groups}
    assert listed == {"g": "PreparingRebalance", "offsets-only": "Empty"}
    assert [g.group_id for g in h.c.list_groups(["empty"]).groups] == ["offsets-only"]


def test_every_append_targets_the_groups_partition():
    h = Harness()
    (m1,) = h.stable_group("group-42", 1)
    e = h.c.commit_offsets(
        "group-42", {("t", 0): CommitOffset(1)}, generation_id=1, member_id=m1, now_ms=0
    )
    assert all(
        isinstance(a, AppendRecords) and a.partition == partition_for("group-42", 50)
        for a in e.appends()
    )


def test_becoming_leader_again_reloads_from_the_log_only():
    h = Harness()
    (m1,) = h.stable_group("g", 1)
    written = list(h.log)
    h.join_new("g")  # in memory only: a new member, a rebalance
    p = partition_for("g", 50)
    h.c.on_become_leader(p, epoch=5)
    assert "g" not in h.c.groups
    h.c.complete_load(p, [(k, v) for q, k, v in written if q == p], now_ms=0)
    g = h.c.groups["g"]
    assert (g.state, list(g.members)) == (GroupState.STABLE, [m1])
    # a stale election (older epoch) changes nothing
    h.c.on_become_leader(p, epoch=4)
    assert p in h.c.partitions.owned and "g" in h.c.groups


def test_a_load_finishing_after_the_resignation_serves_nothing():
    """The late-load rule: a partition resigned (or re-elected) while its records
    were read must not come back with them; the old code re-claimed it and served
    the groups it had read."""
    h = Harness()
    (member,) = h.stable_group("g", 1)
    written = list(h.log)
    p = partition_for("g", 50)
    fresh = Harness(partitions=[])
    fresh.c.on_become_leader(p, epoch=1)
    fresh.c.on_resign(p, epoch=1)
    fresh.c.complete_load(p, [(k, v) for q, k, v in written if q == p], now_ms=0)
    assert p not in fresh.c.partitions.owned and "g" not in fresh.c.groups
    assert fresh.join("g").response.error == E.NOT_COORDINATOR
    # and no session timer runs for a group not served
    assert not fresh.c.runtime.is_scheduled(TimerKey(TimerKind.HEARTBEAT, "g", member))


def test_a_group_remembers_the_path_it_took():
    h = Harness()
    (m1,) = h.stable_group("g", 1)
    path = [(a.value, b.value) for _, a, b in h.c.groups["g"].transitions]
    assert path == [
        ("Empty", "PreparingRebalance"),
        ("PreparingRebalance", "CompletingRebalance"),
        ("CompletingRebalance", "Stable"),
    ]
    assert all((a in VALID_PREVIOUS_STATES[b]) for _, a, b in h.c.groups["g"].transitions)
