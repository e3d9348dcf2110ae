"""Live state equals loaded state: the group coordinator driven by random requests
(classic joins, syncs, heartbeats and leaves, offset commits, transactional offset
commits and their markers, offset and group deletions, KIP-848 heartbeats (joins,
assignments, revocations acknowledged or not, leaves, static members leaving for a
while and coming back under a new id, topics growing), failed writes, time) while a list stands in for __consumer_offsets; after every step a
fresh coordinator loads that list, and what it knows must be what the live one
knows of the same groups:

- every classic group not in the middle of a rebalance (Stable or Empty): its
  generation, protocol, leader, members (ids, instance ids, clients, timeouts,
  the selected protocol's metadata, assignments) and, when Empty, its timestamp;
- every group's committed offsets and the offsets its open transactions hold;
- every KIP-848 group: epochs, target assignment, members as they are.

A group in PreparingRebalance or CompletingRebalance is left out: its new
generation is not written yet (Kafka keeps it in memory too).
"""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator, GroupState
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    Effects,
    JoinGroupResult,
    Respond,
    TxnMarker,
)
from kafkalab.errors import Errors
from kafkalab.protocol.consumer_protocol import Subscription, encode_subscription

GROUPS = ("a", "b")
CLIENTS = (0, 1, 2)
INSTANCE = {0: None, 1: None, 2: "static-2"}
PRODUCERS = (7, 8)
TPS = (("t", 0), ("t", 1), ("u", 0))
SUB = {
    "t": encode_subscription(Subscription(("t",))),
    "u": encode_subscription(Subscription(("u",))),
}
CONSUMER_MEMBERS = ("m1", "m2")
TOPICS = {"t": 2, "u": 1}


def loaded_view(c: GroupCoordinator) -> dict:
    """What a coordinator knows that the log carries, per group."""
    classic = {}
    for gid, g in c.groups.items():
        if g.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            continue
        if g.state is GroupState.DEAD:
            continue
        members = {
            m.member_id: (
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(g.protocol_name) if g.protocol_name else b"",
                m.assignment,
            )
            for m in g.members.values()
        }
        written = g.generation_id > 0 or g.offsets or g.pending_transactional_offset_commits
        if not written:
            continue  # a group only in memory (a member id handed out, nothing written)
        classic[gid] = (
            str(g.state),
            g.generation_id,
            g.protocol_type,
            g.protocol_name if g.members else None,
            g.leader_id,
            members,
            g.state_timestamp_ms if g.state is GroupState.EMPTY and g.generation_id else None,
        )
    offsets = {gid: dict(g.offsets) for gid, g in c.groups.items() if g.offsets}
    pending = {
        gid: {
            pid: {tp: om for tp, (om, _) in by_tp.items()}
            for pid, by_tp in g.pending_transactional_offset_commits.items()
            if by_tp
        }
        for gid, g in c.groups.items()
        if any(g.pending_transactional_offset_commits.values())
    }
    consumer = {
        gid: (g.group_epoch, g.assignment_epoch, dict(g.target), dict(g.members))
        for gid, g in c.consumer_groups.items()
    }
    return {"classic": classic, "offsets": offsets, "pending": pending, "consumer": consumer}


class ReplayMachine(RuleBasedStateMachine):
    @initialize(delay=st.sampled_from([0, 3000]))
    def start(self, delay):
        self.config = GroupConfig(
            group_initial_rebalance_delay_ms=delay, offsets_retention_minutes=1
        )
        ids = itertools.count(1)
        self.member_id_factory = lambda cl, i: f"{i or cl}-{next(ids)}"
        self.c = GroupCoordinator(self.config, member_id_factory=self.member_id_factory)
        self.topics = dict(TOPICS)
        self.c.update_topic_metadata(self.topics)
        self.static: tuple[str, int] | None = None  # the static member's id and epoch
        self.static_ids = itertools.count(1)
        self.now = 0
        self.log: list[tuple[int, bytes, bytes | None, int] | tuple[int, TxnMarker]] = []
        self.member_ids: dict[tuple[str, int], str] = {}
        self.epochs: dict[str, int] = {}
        self.fail_next = False
        self.held: list[int] = []  # appends written to the log, not yet acknowledged
        self.requests = itertools.count(1)

    # -- plumbing ----------------------------------------------------------------------------

    def apply(self, effects: Effects) -> Effects:
        """Write every append to the log (or fail it, once, when asked) and report it."""
        out = Effects(effects.request)
        out.extend(effects)
        i = 0
        while i < len(out):
            e = out[i]
            i += 1
            if isinstance(e, AppendRecords):
                error = Errors.NONE
                if self.fail_next and e.append_id is not None:
                    error, self.fail_next = Errors.NOT_ENOUGH_REPLICAS, False
                if error == Errors.NONE:
                    self.log.extend((e.partition, k, v, e.producer_id) for k, v in e.records)
                if e.append_id is not None:
                    out.extend(self.c.append_completed(e.append_id, error, self.now))
            elif isinstance(e, Respond) and isinstance(e.result, JoinGroupResult):
                self.learn(e.request, e.result)
        return out

    def learn(self, request, result: JoinGroupResult) -> None:
        if not isinstance(request, tuple) or request[0] != "join":
            return
        _, gid, client = request
        if result.error in (Errors.NONE, Errors.MEMBER_ID_REQUIRED):
            self.member_ids[(gid, client)] = result.member_id
        elif result.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            self.member_ids.pop((gid, client), None)

    def member(self, gid: str, client: int) -> str:
        return self.member_ids.get((gid, client), "")

    def generation(self, gid: str) -> int:
        group = self.c.groups.get(gid)
        return -1 if group is None else group.generation_id

    # -- classic groups ------------------------------------------------------------------------

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS), topic=st.sampled_from("tu"))
    def join(self, gid, client, topic):
        self.apply(
            self.c.join_group(
                gid,
                self.member(gid, client),
                protocol_type="consumer",
                protocols=[("range", SUB[topic])],
                session_timeout_ms=10_000,
                rebalance_timeout_ms=15_000,
                group_instance_id=INSTANCE[client],
                client_id=f"client-{client}",
                now_ms=self.now,
                request=("join", gid, client),
            )
        )

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def sync(self, gid, client):
        group = self.c.groups.get(gid)
        member_id = self.member(gid, client)
        assignments = None
        if group is not None and group.leader_id == member_id:
            assignments = {m: m.encode() for m in group.members}
        self.apply(
            self.c.sync_group(
                gid,
                self.generation(gid),
                member_id,
                assignments=assignments,
                group_instance_id=INSTANCE[client],
                now_ms=self.now,
                request=("sync", gid, client, next(self.requests)),
            )
        )

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def heartbeat(self, gid, client):
        self.apply(
            self.c.heartbeat(
                gid,
                self.generation(gid),
                self.member(gid, client),
                group_instance_id=INSTANCE[client],
                now_ms=self.now,
            )
        )

    @rule(gid=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def leave(self, gid, client):
        self.apply(
            self.c.leave_group(gid, [(self.member(gid, client), INSTANCE[client])], now_ms=self.now)
        )

    # -- offsets -----------------------------------------------------------------------------

    @rule(
        gid=st.sampled_from(GROUPS),
        client=st.sampled_from((None, *CLIENTS)),
        tp=st.sampled_from(TPS),
        offset=st.integers(0, 100),
    )
    def commit(self, gid, client, tp, offset):
        member_id = "" if client is None else self.member(gid, client)
        self.apply(
            self.c.commit_offsets(
                gid,
                {tp: CommitOffset(offset)},
                generation_id=-1 if client is None else self.generation(gid),
                member_id=member_id,
                now_ms=self.now,
            )
        )

    @rule(
        gid=st.sampled_from(GROUPS),
        pid=st.sampled_from(PRODUCERS),
        tp=st.sampled_from(TPS),
        offset=st.integers(0, 100),
    )
    def txn_commit(self, gid, pid, tp, offset):
        self.apply(
            self.c.commit_transactional_offsets(
                gid, pid, 0, {tp: CommitOffset(offset)}, now_ms=self.now
            )
        )

    @rule(gid=st.sampled_from(GROUPS), pid=st.sampled_from(PRODUCERS), committed=st.booleans())
    def end_transaction(self, gid, pid, committed):
        """The transaction's marker is written into the group's partition, then the
        coordinator hears of it (the broker's order)."""
        partition = self.c.partition_for(gid)
        self.log.append((partition, TxnMarker(pid, committed)))
        self.apply(self.c.complete_transaction(partition, pid, committed, now_ms=self.now))

    @rule(gid=st.sampled_from(GROUPS), tp=st.sampled_from(TPS))
    def delete_offsets(self, gid, tp):
        self.apply(self.c.delete_offsets(gid, [tp], now_ms=self.now))

    @rule(gid=st.sampled_from(GROUPS + ("cg",)))
    def delete_group(self, gid):
        self.apply(self.c.delete_groups([gid], now_ms=self.now))

    # -- KIP-848 -------------------------------------------------------------------------------

    @rule(
        m=st.sampled_from(CONSUMER_MEMBERS),
        topics=st.sampled_from([None, ["t"], ["t", "u"]]),
        leave=st.booleans(),
    )
    def consumer_heartbeat(self, m, topics, leave):
        epoch = self.epochs.get(m)
        if epoch is None:
            result = self.apply(
                self.c.consumer_group_heartbeat(
                    "cg",
                    m,
                    0,
                    subscribed_topic_names=topics or ["t"],
                    rebalance_timeout_ms=20_000,
                    now_ms=self.now,
                )
            ).response
        else:
            member = self.c.consumer_groups.get("cg")
            member = None if member is None else member.members.get(m)
            owned = sorted(member.assigned) if member is not None else []
            result = self.apply(
                self.c.consumer_group_heartbeat(
                    "cg",
                    m,
                    -1 if leave else epoch,
                    subscribed_topic_names=topics,
                    owned_partitions=owned,
                    now_ms=self.now,
                )
            ).response
        if result.error == Errors.NONE and result.member_epoch >= 0:
            self.epochs[m] = result.member_epoch
        else:
            self.epochs.pop(m, None)

    @rule(m=st.sampled_from(CONSUMER_MEMBERS))
    def consumer_heartbeat_still_owning(self, m):
        """A member that keeps reporting the partitions it was asked to revoke (its
        revocation deadline, rebalance.timeout.ms, fences it)."""
        epoch = self.epochs.get(m)
        group = self.c.consumer_groups.get("cg")
        member = None if group is None else group.members.get(m)
        if epoch is None or member is None:
            return
        owned = sorted(member.assigned | member.pending_revocation)
        result = self.apply(
            self.c.consumer_group_heartbeat("cg", m, epoch, owned_partitions=owned, now_ms=self.now)
        ).response
        if result.error == Errors.NONE:
            self.epochs[m] = result.member_epoch
        else:
            self.epochs.pop(m, None)

    @rule(action=st.sampled_from(["heartbeat", "leave_for_a_while", "come_back"]))
    def static_consumer(self, action):
        """A static member (group.instance.id): it leaves for a while with epoch -2,
        keeping its partitions, and comes back under a new member id."""
        if self.static is None or action == "come_back":
            result = self.apply(
                self.c.consumer_group_heartbeat(
                    "cg",
                    f"s{next(self.static_ids)}",
                    0,
                    instance_id="static-s",
                    subscribed_topic_names=["t", "u"],
                    rebalance_timeout_ms=20_000,
                    now_ms=self.now,
                )
            ).response
            if result.error == Errors.NONE:  # else its predecessor is still there
                self.static = (result.member_id, result.member_epoch)
            return
        member_id, epoch = self.static
        if action == "leave_for_a_while":
            epoch = -2
        result = self.apply(
            self.c.consumer_group_heartbeat(
                "cg", member_id, epoch, instance_id="static-s", now_ms=self.now
            )
        ).response
        stays = result.error == Errors.NONE and epoch != -2
        self.static = (member_id, result.member_epoch) if stays else None

    @rule(u=st.integers(1, 3))
    def topics_change(self, u):
        """A topic grows (or is created again smaller): groups reading it get a new
        group epoch, written."""
        self.topics = {"t": 2, "u": u}
        self.apply(self.c.update_topic_metadata(self.topics, now_ms=self.now))

    @rule(
        gid=st.sampled_from(GROUPS),
        tp=st.sampled_from(TPS),
        offset=st.integers(0, 100),
        pid=st.sampled_from((None, *PRODUCERS)),
    )
    def commit_acknowledged_later(self, gid, tp, offset, pid):
        """A commit whose records are in the log, waiting for the ISR's acknowledgement
        while other requests go on."""
        if pid is None:
            effects = self.c.commit_offsets(gid, {tp: CommitOffset(offset)}, now_ms=self.now)
        else:
            effects = self.c.commit_transactional_offsets(
                gid, pid, 0, {tp: CommitOffset(offset)}, now_ms=self.now
            )
        for e in effects.appends():
            self.log.extend((e.partition, k, v, e.producer_id) for k, v in e.records)
            if e.append_id is not None:
                self.held.append(e.append_id)

    @rule()
    def acknowledge(self):
        held, self.held = self.held, []
        for append_id in held:
            self.apply(self.c.append_completed(append_id, Errors.NONE, self.now))

    # -- the log and time ----------------------------------------------------------------------

    @rule()
    def next_write_fails(self):
        self.fail_next = True

    @rule(ms=st.one_of(st.integers(1, 3000), st.integers(3000, 70_000)))
    def time_passes(self, ms):
        self.now += ms
        self.apply(self.c.tick(self.now))

    @rule()
    def failover(self):
        """The coordinator's broker stops; a new one loads the log and carries on."""
        fresh, appends = self.load()
        self.c.shutdown()
        self.c = fresh
        self.held = []  # the old coordinator's; the new one loaded their records
        for e in appends:  # what loading wrote (tombstones of offsets expired by then)
            assert e.append_id is None
            self.log.extend((e.partition, k, v, e.producer_id) for k, v in e.records)

    def load(self) -> tuple[GroupCoordinator, list[AppendRecords]]:
        """A new coordinator loaded from the log, and the appends its loading asks for."""
        fresh = GroupCoordinator(
            self.config, partitions=[], member_id_factory=self.member_id_factory
        )
        fresh.update_topic_metadata(self.topics)
        appends: list[AppendRecords] = []
        for partition in sorted({entry[0] for entry in self.log}):
            fresh.on_become_leader(partition, epoch=1)
            records = [
                entry[1]
                if len(entry) == 2
                else ((entry[1], entry[2]) if entry[3] < 0 else (entry[1], entry[2], entry[3]))
                for entry in self.log
                if entry[0] == partition
            ]
            appends += fresh.complete_load(partition, records, self.now).appends()
        return fresh, appends

    @invariant()
    def loading_the_log_gives_the_live_state(self):
        if self.held:
            return  # written but not acknowledged: not yet the live state (Kafka alike)
        fresh, _ = self.load()
        live, loaded = loaded_view(self.c), loaded_view(fresh)
        rebalancing = {
            gid
            for gid, g in self.c.groups.items()
            if g.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
        }
        for gid in rebalancing:
            loaded["classic"].pop(gid, None)  # the live group's next generation is unwritten
        assert loaded == live


TestLiveStateEqualsLoadedState = ReplayMachine.TestCase
TestLiveStateEqualsLoadedState.settings = settings(
    max_examples=int(os.environ.get("GROUP_REPLAY_EXAMPLES", 300)),  # more: a longer hunt
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# -- the two drifts this property found, pinned ------------------------------------------------


def _reloaded(c: GroupCoordinator, log: list[tuple[int, bytes, bytes | None, int]]):
    fresh = GroupCoordinator(c.config, partitions=[])
    p = c.partition_for("a")
    fresh.on_become_leader(p, epoch=1)
    records = [(k, v) if pid < 0 else (k, v, pid) for q, k, v, pid in log if q == p]
    fresh.complete_load(p, records, 0)
    return fresh


def _write_all(c: GroupCoordinator, effects: Effects, log: list, error=Errors.NONE) -> Effects:
    out = Effects(effects.request)
    out.extend(effects)
    for e in list(out):
        if isinstance(e, AppendRecords):
            if error == Errors.NONE:
                log.extend((e.partition, k, v, e.producer_id) for k, v in e.records)
            if e.append_id is not None:
                out.extend(c.append_completed(e.append_id, error, 0))
    return out


def test_deleting_a_group_tombstones_what_its_open_transactions_hold():
    c, log = GroupCoordinator(), []
    _write_all(
        c, c.commit_transactional_offsets("a", 7, 0, {("t", 0): CommitOffset(5)}, now_ms=0), log
    )
    deleted = _write_all(c, c.delete_groups(["a"], now_ms=0), log)
    assert deleted.response.groups == {"a": Errors.NONE}
    assert "a" not in c.groups
    reloaded = _reloaded(c, log)
    assert "a" not in reloaded.groups  # the old code wrote no tombstone: the offset came back
    assert reloaded.pending_transactional_offsets("a") == {}


def test_a_failed_transactional_commit_leaves_the_written_one_pending():
    c, log = GroupCoordinator(), []
    _write_all(
        c, c.commit_transactional_offsets("a", 7, 0, {("t", 0): CommitOffset(5)}, now_ms=0), log
    )
    failed = _write_all(
        c,
        c.commit_transactional_offsets("a", 7, 0, {("t", 0): CommitOffset(9)}, now_ms=0),
        log,
        Errors.NOT_ENOUGH_REPLICAS,
    )
    assert failed.response.partitions == {("t", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    # the old code dropped the first one too, though its record is in the log
    assert c.pending_transactional_offsets("a")[7][("t", 0)].offset == 5
    assert _reloaded(c, log).pending_transactional_offsets("a") == c.pending_transactional_offsets(
        "a"
    )


def test_a_group_whose_commit_is_being_written_is_not_removed_by_expiry():
    """Offsets deleted while a commit to the same Empty group is in flight: the group
    stays (Kafka: hasOffsets counts pending commits), so the commit, once written,
    is in the group a reload also finds."""
    c, log = GroupCoordinator(), []
    _write_all(c, c.commit_offsets("a", {("t", 0): CommitOffset(1)}, now_ms=0), log)
    in_flight = c.commit_offsets("a", {("t", 1): CommitOffset(2)}, now_ms=0)
    _write_all(c, c.delete_offsets("a", [("t", 0)], now_ms=0), log)
    assert "a" in c.groups  # the old code removed it here
    _write_all(c, in_flight, log)
    assert c.fetch_offsets("a", [("t", 1)]).partitions[("t", 1)].offset == 2
    assert _reloaded(c, log).groups["a"].offsets == c.groups["a"].offsets


@pytest.mark.parametrize("committed", [True, False])
def test_a_marker_written_before_the_commit_is_acknowledged_ends_it(committed):
    """TxnOffsetCommit written, the transaction ended (a marker after it in the log)
    before the ISR acknowledged the commit: once acknowledged the offset is what the
    log says, committed or dropped, and never left pending for ever."""
    c, log = GroupCoordinator(), []
    held = c.commit_transactional_offsets("a", 7, 0, {("t", 0): CommitOffset(5)}, now_ms=0)
    (append,) = held.appends()
    log.extend((append.partition, k, v, 7) for k, v in append.records)
    c.complete_transaction(c.partition_for("a"), 7, committed, now_ms=0)
    log_with_marker = [*log]
    c.append_completed(append.append_id, Errors.NONE, 0)
    assert c.pending_transactional_offsets("a") == {}
    expected = 5 if committed else -1
    assert c.fetch_offsets("a", [("t", 0)]).partitions[("t", 0)].offset == expected
    fresh = GroupCoordinator(partitions=[])
    p = c.partition_for("a")
    fresh.on_become_leader(p, epoch=1)
    records = [(k, v, pid) for _, k, v, pid in log_with_marker] + [TxnMarker(7, committed)]
    fresh.complete_load(p, records, 0)
    assert fresh.fetch_offsets("a", [("t", 0)]).partitions[("t", 0)].offset == expected
