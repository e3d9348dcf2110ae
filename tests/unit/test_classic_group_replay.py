"""A classic group's record is applied by one function, live and at load:
`ClassicGroupRebalance.replay_group_metadata`. Every GroupMetadata record the
coordinator writes goes through it once its write is acknowledged (or, for a
generation that ends Empty, as it is written), a failed write never does, and
group records acknowledged out of order leave the group as its latest record
says (with every parked request answered)."""

import os

from group_harness import SUB, Harness
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule
from test_group_replay_properties import CLIENTS, GROUPS, ReplayMachine

from kafkalab.coordinator.group import GroupCoordinator, GroupState
from kafkalab.coordinator.group import coordinator_records as rec
from kafkalab.coordinator.group.results import AppendRecords, Effects, JoinGroupResult, Respond
from kafkalab.errors import Errors


def spy_on_replay(h: Harness) -> list:
    """Every record the live coordinator replays, in order."""
    rebalance = h.c.classic_manager.rebalance
    original = rebalance.replay_group_metadata
    seen = []

    def replay(group_id, record, now_ms):
        seen.append(record)
        return original(group_id, record, now_ms)

    rebalance.replay_group_metadata = replay
    return seen


def group_records(log) -> list:
    return [
        rec.read_group_value(v)
        for _, k, v in log
        if isinstance(rec.read_key(k), rec.GroupKey) and v is not None
    ]


def reload(h: Harness) -> GroupCoordinator:
    fresh = GroupCoordinator(h.c.config, partitions=[])
    p = h.c.partition_for("g")
    fresh.on_become_leader(p, epoch=1)
    fresh.complete_load(p, [(k, v) for q, k, v in h.log if q == p], h.now)
    return fresh


def hard_state(c: GroupCoordinator) -> tuple:
    g = c.groups["g"]
    members = {
        m.member_id: (
            m.group_instance_id,
            m.client_id,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(g.protocol_name),
            m.assignment,
        )
        for m in g.members.values()
    }
    return (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id, members)


def test_every_group_record_written_is_replayed_live():
    h = Harness()
    seen = spy_on_replay(h)
    a, b = h.stable_group("g", 2)  # a SyncGroup's record
    h.run(h.c.leave_group("g", [(a, None), (b, None)], now_ms=h.now))  # ends Empty
    written = group_records(h.log)
    assert [r.generation for r in written] == [2, 3]
    assert seen == written  # the same records, in the order they were written
    assert h.c.groups["g"].state is GroupState.EMPTY
    assert h.c.groups["g"].generation_id == 3 and not h.c.groups["g"].members


def test_a_static_restart_is_replayed_and_the_live_member_keeps_its_protocols():
    h = Harness()
    protocols = [("range", b"r"), ("roundrobin", b"rr")]
    a = h.join("g", instance="a", protocols=protocols).response.member_id
    h.sync("g", 1, a, {a: b"A"}, instance="a")
    seen = spy_on_replay(h)
    r = h.join("g", instance="a", protocols=protocols).response  # a restarts
    assert r.error == Errors.NONE and r.member_id != a
    assert seen == group_records(h.log)[-1:]
    member = h.c.groups["g"].get(r.member_id)
    assert member.protocols == protocols  # the record carries only "range"'s metadata
    assert member.assignment == b"A"
    assert hard_state(reload(h)) == hard_state(h.c)


def test_a_failed_write_of_the_assignment_is_not_replayed():
    h = Harness()
    a, _ = h.join_new("g")
    seen = spy_on_replay(h)
    effects = h.c.sync_group("g", 1, a, assignments={a: b"A"}, now_ms=0, request="s")
    failed = h.c.complete_appends(effects, 0, h.log, Errors.NOT_ENOUGH_REPLICAS)
    assert failed.response.error == Errors.COORDINATOR_NOT_AVAILABLE
    assert seen == [] and group_records(h.log) == []
    g = h.c.groups["g"]
    assert g.get(a).assignment == b"" and g.state is GroupState.PREPARING_REBALANCE


def test_two_static_restarts_acknowledged_out_of_order():
    """Both restarts are written before either is acknowledged; the second record
    carries both new ids. Acknowledging the first must not take the group back to
    it (the second restart's member would vanish, its JoinGroup never answered)."""
    h = Harness()
    a = h.join("g", instance="a").response.member_id
    h.join("g", instance="b")
    h.join("g", a, instance="a")
    g = h.c.groups["g"]
    b = g.current_static_member_id("b")
    h.sync("g", 2, b, instance="b")
    h.sync("g", 2, a, {a: b"A", b: b"B"}, instance="a")
    held = []
    for instance in ("a", "b"):
        effects = h.c.join_group(
            "g",
            "",
            protocol_type="consumer",
            protocols=[("range", SUB)],
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
            group_instance_id=instance,
            now_ms=h.now,
            request=f"restart-{instance}",
        )
        (append,) = effects.appends()
        h.log.extend((append.partition, k, v) for k, v in append.records)
        held.append(append.append_id)
    answers = Effects()
    for append_id in held:  # the first restart's write is acknowledged first
        answers.extend(h.c.append_completed(append_id, Errors.NONE, h.now))
    new = {r.request: r.result for r in answers.responses()}
    assert {k: v.error for k, v in new.items()} == {
        "restart-a": Errors.NONE,
        "restart-b": Errors.NONE,
    }
    assert set(g.members) == {new["restart-a"].member_id, new["restart-b"].member_id}
    assert g.state is GroupState.STABLE
    assert hard_state(reload(h)) == hard_state(h.c)


# -- the property, with a classic request's writes acknowledged late -----------------------


class HeldWritesMachine(ReplayMachine):
    """The live-equals-loaded machine of test_group_replay_properties, with one more
    kind of step: a classic request (a join, a static member's restart, a leader's
    SyncGroup) whose records are in the log while their acknowledgement waits, and
    the held acknowledgements later arriving in either order, other requests going
    on meanwhile."""

    hold_next = False

    def apply(self, effects: Effects) -> Effects:
        if not self.hold_next:
            return super().apply(effects)
        self.hold_next = False
        for e in effects:
            if isinstance(e, AppendRecords):
                self.log.extend((e.partition, k, v, e.producer_id) for k, v in e.records)
                if e.append_id is not None:
                    self.held.append(e.append_id)
            elif isinstance(e, Respond) and isinstance(e.result, JoinGroupResult):
                self.learn(e.request, e.result)
        return effects

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS), topic=st.sampled_from("tu"))
    def join_acknowledged_later(self, gid, client, topic):
        self.hold_next = True
        self.join(gid, client, topic)

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def sync_acknowledged_later(self, gid, client):
        self.hold_next = True
        self.sync(gid, client)

    @rule(gid=st.sampled_from(GROUPS), topic=st.sampled_from("tu"), hold=st.booleans())
    def a_whole_generation(self, gid, topic, hold):
        """Every client joins (twice: a new one first gets its member id) and syncs,
        the leader last, its write acknowledged at once or held: random single
        requests reach a Stable group only rarely, this step does so often."""
        for _ in range(2):
            for client in CLIENTS:
                self.join(gid, client, topic)
        group = self.c.groups.get(gid)
        leader = None if group is None else group.leader_id
        clients = sorted(CLIENTS, key=lambda client: self.member(gid, client) == leader)
        for client in clients:
            self.hold_next = hold and self.member(gid, client) == leader
            self.sync(gid, client)
        self.hold_next = False

    @rule(gid=st.sampled_from(GROUPS), topic=st.sampled_from("tu"), hold=st.booleans())
    def the_static_member_restarts(self, gid, topic, hold):
        """Client 2 (group.instance.id static-2) restarts: it joins with no member id,
        taking its old place under a new one; the write of its new id acknowledged at
        once or held."""
        self.member_ids.pop((gid, 2), None)
        self.hold_next = hold
        self.join(gid, 2, topic)
        self.hold_next = False

    @rule()
    def acknowledge_newest_first(self):
        held, self.held = self.held, []
        for append_id in reversed(held):
            self.apply(self.c.append_completed(append_id, Errors.NONE, self.now))


TestLiveStateEqualsLoadedStateWithLateAcknowledgements = HeldWritesMachine.TestCase
TestLiveStateEqualsLoadedStateWithLateAcknowledgements.settings = settings(
    max_examples=int(os.environ.get("GROUP_REPLAY_EXAMPLES", 300)),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
