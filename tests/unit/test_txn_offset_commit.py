"""TxnOffsetCommit in the sans-IO GroupCoordinator: offsets a transactional producer
commits stay pending, invisible to OffsetFetch, until complete_transaction (the
COMMIT marker) makes them committed or the ABORT drops them; loading a partition
honours the markers in the log; a hypothesis state machine checks all of it against
a model of committed and pending offsets."""

from __future__ import annotations

import hypothesis.strategies as st
from group_harness import Harness
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator
from kafkalab.coordinator.group.coordinator_records import partition_for
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    Effects,
    Respond,
    TxnMarker,
)
from kafkalab.errors import Errors as E

TP = ("t", 0)


class Driver:
    """A coordinator and a list standing in for its __consumer_offsets partitions, in
    complete_load's format: (key, value) plain, (key, value, producer id) in a
    transactional batch, TxnMarker for a COMMIT/ABORT control batch."""

    def __init__(self, coordinator: GroupCoordinator | None = None) -> None:
        self.c = coordinator or GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0))
        self.log: list[tuple[int, object]] = []  # (partition, loaded record)
        self.now = 0
        self.held: list[AppendRecords] = []  # written, not yet acknowledged

    def write(self, effects: Effects, *, ack: bool = True) -> Effects:
        out = Effects(effects.request)
        out.extend(effects)
        for e in list(out):
            if isinstance(e, AppendRecords):
                for key, value in e.records:
                    item = (key, value) if e.producer_id < 0 else (key, value, e.producer_id)
                    self.log.append((e.partition, item))
                if e.append_id is not None:
                    if ack:
                        out.extend(self.c.append_completed(e.append_id, E.NONE, self.now))
                    else:
                        self.held.append(e)
        return out

    def commit(self, group, offsets, **kw) -> Effects:
        offsets = {tp: CommitOffset(o) for tp, o in offsets.items()}
        return self.write(self.c.commit_offsets(group, offsets, now_ms=self.now, **kw))

    def txn_commit(self, group, pid, offsets, *, ack=True, epoch=0, **kw) -> Effects:
        offsets = {tp: CommitOffset(o) for tp, o in offsets.items()}
        effects = self.c.commit_transactional_offsets(
            group, pid, epoch, offsets, transactional_id=f"txn-{pid}", now_ms=self.now, **kw
        )
        return self.write(effects, ack=ack)

    def end_txn(self, group, pid, committed) -> Effects:
        p = self.c.partition_for(group)
        self.log.append((p, TxnMarker(pid, committed)))
        return self.c.complete_transaction(p, pid, committed, now_ms=self.now, request="end")

    def fetched(self, group, tps=(TP,), stable=False) -> dict:
        result = self.c.fetch_offsets(group, list(tps), require_stable=stable)
        return {tp: (p.offset, p.error) for tp, p in result.partitions.items()}

    def reload(self, group) -> GroupCoordinator:
        p = self.c.partition_for(group)
        fresh = GroupCoordinator(self.c.config, partitions=[])
        fresh.on_become_leader(p, epoch=1)
        fresh.complete_load(p, [item for q, item in self.log if q == p], now_ms=self.now)
        return fresh


def test_transactional_offsets_are_invisible_until_the_commit_marker():
    d = Driver()
    out = d.txn_commit("g", 7, {TP: 42})
    assert out.response.partitions == {TP: E.NONE}
    (append,) = out.appends()
    assert (append.producer_id, append.producer_epoch, append.is_transactional) == (7, 0, True)
    assert d.fetched("g") == {TP: (-1, E.NONE)}
    assert d.fetched("g", stable=True) == {TP: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert {
        pid: {tp: om.offset for tp, om in by_tp.items()}
        for pid, by_tp in d.c.pending_transactional_offsets("g").items()
    } == {7: {TP: 42}}
    end = d.end_txn("g", 7, committed=True)
    assert end.response is None and end.responses()[0].request == "end"
    assert d.fetched("g", stable=True) == {TP: (42, E.NONE)}
    assert d.c.pending_transactional_offsets("g") == {}


def test_an_aborted_transaction_leaves_the_committed_offset_alone():
    d = Driver()
    d.commit("g", {TP: 5})
    d.txn_commit("g", 7, {TP: 42})
    d.end_txn("g", 7, committed=False)
    assert d.fetched("g", stable=True) == {TP: (5, E.NONE)}


def test_a_plain_commit_written_after_the_transactions_record_wins():
    d = Driver()
    d.txn_commit("g", 7, {TP: 42})
    d.commit("g", {TP: 50})
    d.end_txn("g", 7, committed=True)
    assert d.fetched("g") == {TP: (50, E.NONE)}
    assert d.reload("g").fetch_offsets("g", [TP]).partitions[TP].offset == 50


def test_markers_end_only_their_producers_offsets():
    d = Driver()
    d.txn_commit("g", 7, {TP: 42})
    d.txn_commit("g", 8, {("t", 1): 9})
    d.end_txn("g", 8, committed=True)
    assert d.fetched("g", [TP, ("t", 1)], stable=True) == {
        TP: (-1, E.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (9, E.NONE),
    }


def test_loading_honours_markers_and_keeps_open_transactions_pending():
    d = Driver()
    d.commit("g", {TP: 1})
    d.txn_commit("g", 7, {TP: 10})
    d.end_txn("g", 7, committed=True)
    d.txn_commit("g", 8, {("t", 1): 20})
    d.end_txn("g", 8, committed=False)
    d.txn_commit("g", 9, {("t", 2): 30})  # still open when the coordinator moves
    fresh = d.reload("g")
    offsets = fresh.fetch_offsets("g", [TP, ("t", 1), ("t", 2)], require_stable=True).partitions
    assert {tp: (p.offset, p.error) for tp, p in offsets.items()} == {
        TP: (10, E.NONE),
        ("t", 1): (-1, E.NONE),
        ("t", 2): (-1, E.UNSTABLE_OFFSET_COMMIT),
    }
    fresh.complete_transaction(d.c.partition_for("g"), 9, True, now_ms=0)
    assert fresh.fetch_offsets("g", [("t", 2)]).partitions[("t", 2)].offset == 30


def test_a_failed_write_drops_the_pending_offsets():
    d = Driver()
    out = d.txn_commit("g", 7, {TP: 42}, ack=False)
    assert out.response is None  # waits for the write
    (append,) = d.held
    failed = d.c.append_completed(append.append_id, E.NOT_ENOUGH_REPLICAS, 0)
    assert failed.responses()[0].result.partitions == {TP: E.COORDINATOR_NOT_AVAILABLE}
    assert d.fetched("g", stable=True) == {TP: (-1, E.NONE)}


def test_member_and_generation_are_checked_from_v3():
    h = Harness()
    m1, _ = h.stable_group("g", 2)
    gen = h.c.groups["g"].generation_id

    def txn(**kw):
        return h.run(
            h.c.commit_transactional_offsets("g", 7, 0, {TP: CommitOffset(3)}, now_ms=h.now, **kw)
        ).response.partitions[TP]

    assert txn(member_id="nobody", generation_id=gen) == E.UNKNOWN_MEMBER_ID
    assert txn(member_id=m1, generation_id=gen + 1) == E.ILLEGAL_GENERATION
    assert txn(member_id=m1, generation_id=gen) == E.NONE
    assert txn() == E.NONE  # v0-v2: no member, no generation
    assert txn(member_id=m1, group_instance_id="i") == E.NONE  # an unknown instance
    empty = h.c.commit_transactional_offsets("", 7, 0, {TP: CommitOffset(3)}, now_ms=h.now)
    assert empty.response.partitions[TP] == E.INVALID_GROUP_ID  # Kafka: isValidGroupId
    p = partition_for("g", 50)
    h.c.on_resign(p)
    assert txn() == E.NOT_COORDINATOR
    h.c.on_become_leader(p, epoch=5)
    assert txn() == E.COORDINATOR_LOAD_IN_PROGRESS


def test_a_group_with_only_pending_offsets_is_not_dropped_as_empty():
    d = Driver()
    d.txn_commit("g", 7, {TP: 42})
    d.c.expire_offsets(10**12)
    assert "g" in d.c.groups
    d.end_txn("g", 7, committed=True)
    assert d.fetched("g") == {TP: (42, E.NONE)}


# -- the coordinator against a model -------------------------------------------------------

PIDS = st.sampled_from([1, 2, 3])
TPS = st.sampled_from([("t", 0), ("t", 1)])
GROUPS = st.sampled_from(["g", "h"])


class TxnOffsetsMachine(RuleBasedStateMachine):
    """Plain and transactional commits, markers, and acknowledgements in any order,
    against a model: committed offsets by (group, partition) with the log position
    that wrote them, and pending ones by (producer, group, partition). A fresh
    coordinator loading the log must answer as the live one does."""

    def __init__(self) -> None:
        super().__init__()
        self.d = Driver()
        self.position = 0
        self.committed: dict[tuple, tuple[int, int]] = {}  # (g, tp) -> (offset, position)
        self.pending: dict[tuple, tuple[int, int]] = {}  # (pid, g, tp) -> (offset, position)
        self.in_flight: dict[tuple, int] = {}  # (g, tp) -> plain commits not acknowledged
        self.waiting: list[tuple[AppendRecords, tuple, int, int]] = []

    def _next(self) -> int:
        self.position += 1
        return self.position

    @rule(group=GROUPS, tp=TPS, offset=st.integers(0, 100), ack=st.booleans())
    def plain_commit(self, group, tp, offset, ack):
        out = self.d.commit(group, {tp: offset}) if ack else None
        pos = self._next()
        if ack:
            assert out.response.partitions == {tp: E.NONE}
            self._apply_plain(group, tp, offset, pos)
        else:
            effects = self.d.c.commit_offsets(
                group, {tp: CommitOffset(offset)}, now_ms=0, request=("r", pos)
            )
            self.d.write(effects, ack=False)
            self.waiting.append((self.d.held.pop(), (group, tp), offset, pos))
            self.in_flight[(group, tp)] = self.in_flight.get((group, tp), 0) + 1

    def _apply_plain(self, group, tp, offset, pos):
        if pos > self.committed.get((group, tp), (None, 0))[1]:
            self.committed[(group, tp)] = (offset, pos)

    @precondition(lambda self: self.waiting)
    @rule(i=st.integers(0, 10))
    def acknowledge(self, i):
        append, (group, tp), offset, pos = self.waiting.pop(i % len(self.waiting))
        out = self.d.c.append_completed(append.append_id, E.NONE, 0)
        assert out.responses()[0].result.partitions == {tp: E.NONE}
        self.in_flight[(group, tp)] -= 1
        self._apply_plain(group, tp, offset, pos)

    @rule(pid=PIDS, group=GROUPS, tp=TPS, offset=st.integers(0, 100))
    def txn_commit(self, pid, group, tp, offset):
        out = self.d.txn_commit(group, pid, {tp: offset})
        assert out.response.partitions == {tp: E.NONE}
        self.pending[(pid, group, tp)] = (offset, self._next())

    @rule(pid=PIDS, committed=st.booleans())
    def end_txn(self, pid, committed):
        # the transaction coordinator writes one marker per partition of the groups
        for p in sorted({self.d.c.partition_for(g) for g in ("g", "h")}):
            self.d.log.append((p, TxnMarker(pid, committed)))
            out = self.d.c.complete_transaction(p, pid, committed, now_ms=0, request="end")
            assert out.responses() == [Respond("end", None)]
        for key in [k for k in self.pending if k[0] == pid]:
            offset, pos = self.pending.pop(key)
            if committed:
                self._apply_plain(key[1], key[2], offset, pos)

    def _expected(self, group, tp, stable):
        unstable = self.in_flight.get((group, tp), 0) > 0 or any(
            k[1:] == (group, tp) for k in self.pending
        )
        if stable and unstable:
            return (-1, E.UNSTABLE_OFFSET_COMMIT)
        return (self.committed.get((group, tp), (-1, 0))[0], E.NONE)

    @invariant()
    def fetch_answers_as_the_model(self):
        for group in ("g", "h"):
            for stable in (False, True):
                got = self.d.fetched(group, [("t", 0), ("t", 1)], stable=stable)
                for tp in (("t", 0), ("t", 1)):
                    assert got[tp] == self._expected(group, tp, stable), (group, tp, stable)

    @precondition(lambda self: not self.waiting)
    @invariant()
    def a_fresh_coordinator_loads_the_same_state(self):
        for group in ("g", "h"):
            fresh = self.d.reload(group)
            for stable in (False, True):
                got = fresh.fetch_offsets(group, [("t", 0), ("t", 1)], require_stable=stable)
                for tp, p in got.partitions.items():
                    assert (p.offset, p.error) == self._expected(group, tp, stable)


TestTxnOffsetsMachine = TxnOffsetsMachine.TestCase
TestTxnOffsetsMachine.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
