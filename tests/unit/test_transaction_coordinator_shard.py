"""The TransactionCoordinatorShard's one replay path: handlers never change the
state a record carries, and for random request sequences (writes failing, markers
arriving in pieces, transactions timing out, ids expiring) the state after live
handling equals the state a new coordinator loads from the records written."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from txn_harness import TxnHarness

from kafkalab.coordinator.transaction import TransactionConfig, TransactionCoordinator
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.transaction_coordinator_shard import (
    TransactionCoordinatorShard,
    TransactionRecord,
)
from kafkalab.errors import Errors

IDS = ["a", "b", "c"]
PARTS = [("t", 0), ("t", 1), ("u", 0)]


def hard_state(c: TransactionCoordinator) -> dict[str, tlog.TransactionLogValue]:
    """What the log holds per id, as the coordinator sees it (without the ids whose
    first record is still on its way: they exist only once it is written)."""
    new = {a.payload.meta.transactional_id for a in c.runtime.appends.values() if a.payload.new_id}
    return {tid: m.record() for tid, m in c.transactions.items() if tid not in new}


def loaded(h: TxnHarness) -> TransactionCoordinator:
    c = TransactionCoordinator(h.config, partitions=())
    for p in range(h.config.transaction_state_log_num_partitions):
        c.on_become_leader(p, 1)
        c.complete_load(p, list(h.logs.get(p, [])), h.now)
    return c


class LiveEqualsLoaded(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = TxnHarness(
            TransactionConfig(
                transaction_state_log_num_partitions=2,
                transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
                transactional_id_expiration_ms=20_000,
                transaction_remove_expired_transaction_cleanup_interval_ms=5000,
            )
        )

    def _ids(self, tid):
        meta = self.h.coordinator.transactions.get(tid)
        return (-1, -1) if meta is None else (meta.state.producer_id, meta.state.producer_epoch)

    def _handle(self, name, *args, **kw):
        """A request: its handler may ask for writes, but the hard state is unchanged
        until they are committed."""
        before = hard_state(self.h.coordinator)
        self.h.call_pending(name, *args, **kw)
        after = hard_state(self.h.coordinator)
        assert after == before, f"{name} changed the state before its record was committed"

    @rule(tid=st.sampled_from(IDS), timeout=st.sampled_from([3000, 60_000]), kip360=st.booleans())
    def init(self, tid, timeout, kip360):
        pid, epoch = self._ids(tid) if kip360 else (-1, -1)
        self._handle("init_producer_id", tid, timeout, producer_id=pid, producer_epoch=epoch)

    @rule(tid=st.sampled_from(IDS), parts=st.sets(st.sampled_from(PARTS), min_size=1))
    def add(self, tid, parts):
        self._handle("add_partitions_to_txn", tid, *self._ids(tid), parts)

    @rule(tid=st.sampled_from(IDS))
    def add_offsets(self, tid):
        self._handle("add_offsets_to_txn", tid, *self._ids(tid), "group")

    @rule(tid=st.sampled_from(IDS), commit=st.booleans())
    def end(self, tid, commit):
        self._handle("end_txn", tid, *self._ids(tid), commit)

    @rule(ok=st.booleans())
    def writes_complete(self, ok):
        self.h.complete_appends(Errors.NONE if ok else Errors.NOT_ENOUGH_REPLICAS)

    @precondition(lambda self: self.h.markers)
    @rule(one=st.booleans())
    def markers_arrive(self, one):
        m = self.h.markers.pop(0)
        written = sorted(m.partitions)[:1] if one else m.partitions
        before = hard_state(self.h.coordinator)
        self.h.run(
            self.h.coordinator.markers_written(
                m.transactional_id, m.producer_id, m.producer_epoch, written, self.h.now
            )
        )
        assert hard_state(self.h.coordinator) == before  # marker progress is not logged
        if one:
            self.h.markers.append(m)

    @rule(ms=st.sampled_from([100, 2000, 4000, 25_000]))
    def time_passes(self, ms):
        self.h.now += ms
        before = hard_state(self.h.coordinator)
        self.h.run(self.h.coordinator.tick(self.h.now))
        assert hard_state(self.h.coordinator) == before

    @invariant()
    def live_equals_loaded(self):
        live, reloaded = self.h.coordinator, loaded(self.h)
        assert hard_state(live) == hard_state(reloaded)
        for tid, meta in reloaded.transactions.items():
            # a prepared transaction loaded has every marker to write; live, those left
            assert live.transactions[tid].state.pending_markers <= meta.state.pending_markers


LiveEqualsLoaded.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestLiveEqualsLoaded = LiveEqualsLoaded.TestCase


def test_replay_is_the_only_way_a_record_reaches_the_state():
    """A shard fed the records another shard's handlers produced, through replay,
    holds the same ids with the same states."""
    config = TransactionConfig(transaction_state_log_num_partitions=1)
    live = TransactionCoordinatorShard(config, producer_ids=lambda: 7)
    copy = TransactionCoordinatorShard(config)
    written = []
    for step in (
        lambda: live.init_producer_id("x", 60_000, -1, -1, 10),
        lambda: live.add_partitions_to_txn("x", 7, 0, [("t", 0)], 20),
        lambda: live.end_txn("x", 7, 0, True, 30),
    ):
        result = step()
        (record,) = result.records
        assert live.transactions.get("x") is None or live.transactions["x"].state.state != (
            record.value.state
        ), "a handler applied its own record"
        written.append(TransactionRecord.read(record.key_bytes(), record.value_bytes()))
        live.replay(record)
        copy.replay(written[-1])
    assert {t: m.record() for t, m in live.transactions.items()} == {
        t: m.record() for t, m in copy.transactions.items()
    }
    assert copy.transactions["x"].state.pending_markers == {("t", 0)}  # PrepareCommit
    copy.replay(TransactionRecord("x", None))
    assert copy.transactions == {}
