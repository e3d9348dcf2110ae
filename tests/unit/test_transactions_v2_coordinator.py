"""Transactions v2 (KIP-890 part 2) in the transaction coordinator: every EndTxn
v5 bumps the epoch and answers the next one, the old epoch is fenced, the epoch
overflows to a new producer id, and the records (TransactionLogValue v1 with its
tagged fields) load back to the same state; version 1 is unchanged beside it.

Kafka's rules: TransactionCoordinator.endTransaction (TV_2) and
TransactionMetadata.prepareAbortOrCommit / prepareComplete."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from test_transaction_coordinator_shard import hard_state, loaded
from txn_harness import TxnHarness

from kafkalab.coordinator.transaction import TransactionConfig
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.transaction_state import VALID_PREVIOUS_STATES, TxnState
from kafkalab.coordinator.transaction.transaction_state_machine import (
    MAX_EPOCH,
    TransactionStateMachine,
)
from kafkalab.errors import Errors, KafkaError
from kafkalab.viz.transactions import DEAD, TRANSITIONS_V2

TID = "orders"
T0, T1 = ("t", 0), ("t", 1)


def started(h: TxnHarness, tid: str = TID) -> tuple[int, int]:
    r = h.call("init_producer_id", tid, 60_000)
    assert r.error == Errors.NONE
    return r.producer_id, r.producer_epoch


def one_transaction(h: TxnHarness, pid: int, epoch: int, commit: bool = True, v: int = 2):
    """A leader adds a partition (v2) or the client does (v1), then EndTxn; markers."""
    added = h.call("add_partitions_to_txn", TID, pid, epoch, [T0], transaction_version=v)
    assert added.errors == {T0: Errors.NONE}
    ended = h.call("end_txn", TID, pid, epoch, commit, transaction_version=v)
    h.write_markers()
    return ended


def test_every_v2_end_txn_bumps_the_epoch_and_answers_it():
    h = TxnHarness()
    pid, epoch = started(h)
    for n in range(5):
        ended = one_transaction(h, pid, epoch + n, commit=n % 2 == 0)
        assert ended.error == Errors.NONE
        assert (ended.producer_id, ended.producer_epoch) == (pid, epoch + n + 1)
        state = h.state(TID)
        assert state.state == (TxnState.COMPLETE_COMMIT if n % 2 == 0 else TxnState.COMPLETE_ABORT)
        assert (state.producer_id, state.producer_epoch) == (pid, epoch + n + 1)
        assert state.client_transaction_version == 2


def test_the_markers_carry_the_bumped_epoch():
    h = TxnHarness()
    pid, epoch = started(h)
    h.call("add_partitions_to_txn", TID, pid, epoch, [T0, T1], transaction_version=2)
    h.call("end_txn", TID, pid, epoch, True, transaction_version=2)
    (marker,) = h.markers
    assert (marker.producer_id, marker.producer_epoch) == (pid, epoch + 1)
    assert marker.partitions == {T0, T1}


def test_v1_end_txn_keeps_the_epoch():
    h = TxnHarness()
    pid, epoch = started(h)
    ended = one_transaction(h, pid, epoch, v=1)
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (Errors.NONE, -1, -1)
    assert h.state(TID).producer_epoch == epoch
    assert h.state(TID).client_transaction_version == 0
    # and version 1's records stay the version 0 bytes
    (key, value) = h.logs[h.coordinator.partition_for(TID)][-1]
    assert value[:2] == b"\x00\x00"


def test_the_old_epoch_is_fenced_and_a_retry_is_answered():
    h = TxnHarness()
    pid, epoch = started(h)
    one_transaction(h, pid, epoch)
    # the retry of the EndTxn that bumped the epoch: answered again, nothing written
    written = len(h.logs[h.coordinator.partition_for(TID)])
    retry = h.call("end_txn", TID, pid, epoch, True, transaction_version=2)
    assert (retry.error, retry.producer_epoch) == (Errors.NONE, epoch + 1)
    assert len(h.logs[h.coordinator.partition_for(TID)]) == written
    # the old epoch cannot open the next transaction, nor abort as if it were current
    add = h.call("add_partitions_to_txn", TID, pid, epoch, [T1], transaction_version=2)
    assert add.errors == {T1: Errors.PRODUCER_FENCED}
    wrong = h.call("end_txn", TID, pid, epoch, False, transaction_version=2)
    assert wrong.error == Errors.INVALID_TXN_STATE  # a commit's retry cannot abort it
    assert h.call("end_txn", TID, pid, epoch - 1, True, transaction_version=2).error == (
        Errors.PRODUCER_FENCED
    )


def test_an_abort_with_no_transaction_open_bumps_the_epoch():
    """v2 lets a client abort when it is not sure a transaction is open (Empty or
    Complete* -> PrepareAbort, with no partitions, straight to CompleteAbort)."""
    assert TxnState.EMPTY in VALID_PREVIOUS_STATES[TxnState.PREPARE_ABORT]
    h = TxnHarness()
    pid, epoch = started(h)
    aborted = h.call("end_txn", TID, pid, epoch, False, transaction_version=2)
    assert (aborted.error, aborted.producer_epoch) == (Errors.NONE, epoch + 1)
    assert not h.markers
    assert h.state(TID).state == TxnState.COMPLETE_ABORT
    assert h.call("end_txn", TID, pid, epoch + 1, True, transaction_version=2).error == (
        Errors.INVALID_TXN_STATE
    )


def test_init_producer_id_after_a_v2_transaction_goes_to_empty_with_the_next_epoch():
    h = TxnHarness()
    pid, epoch = started(h)
    one_transaction(h, pid, epoch)
    again = h.call("init_producer_id", TID, 60_000)
    assert (again.producer_id, again.producer_epoch) == (pid, epoch + 2)
    assert h.state(TID).state == TxnState.EMPTY


def test_the_epoch_overflows_to_a_new_producer_id():
    h = TxnHarness()
    pid, _ = started(h)
    meta = h.coordinator.transactions[TID]
    last = MAX_EPOCH - 1  # the last epoch a client may use
    meta.state = replace(meta.state, producer_epoch=last)
    h.call("add_partitions_to_txn", TID, pid, last, [T0], transaction_version=2)
    ended = h.call("end_txn", TID, pid, last, True, transaction_version=2)
    assert ended.error == Errors.NONE
    new_pid, new_epoch = ended.producer_id, ended.producer_epoch
    assert new_pid != pid and new_epoch == 0
    prepared = tlog.read_value(h.logs[h.coordinator.partition_for(TID)][-1][1])
    assert (prepared.state, prepared.producer_id, prepared.producer_epoch) == (
        TxnState.PREPARE_COMMIT,
        pid,
        MAX_EPOCH,
    )
    assert prepared.next_producer_id == new_pid
    (marker,) = h.markers
    assert (marker.producer_id, marker.producer_epoch) == (pid, MAX_EPOCH)
    h.write_markers()
    done = tlog.read_value(h.logs[h.coordinator.partition_for(TID)][-1][1])
    assert (done.state, done.producer_id, done.producer_epoch) == (
        TxnState.COMPLETE_COMMIT,
        new_pid,
        0,
    )
    assert (done.previous_producer_id, done.next_producer_id) == (pid, -1)
    # the client's retry with the id and epoch it had is answered with the new ones
    retry = h.call("end_txn", TID, pid, last, True, transaction_version=2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (Errors.NONE, new_pid, 0)
    # and the new producer id runs the next transaction
    assert one_transaction(h, new_pid, 0).producer_epoch == 1


def test_v2_records_load_back_and_v1_records_keep_loading():
    h = TxnHarness()
    pid, epoch = started(h)
    one_transaction(h, pid, epoch, v=1)
    one_transaction(h, pid, epoch, v=2)
    before = hard_state(h.coordinator)
    h.failover()
    assert hard_state(h.coordinator) == before
    assert h.state(TID).client_transaction_version == 2


@pytest.mark.parametrize(
    "value",
    [
        tlog.TransactionLogValue(5, 3, 60_000, "PrepareCommit", frozenset({T0}), 10, 5, -1, 9, 2),
        tlog.TransactionLogValue(9, 0, 60_000, "CompleteCommit", frozenset(), 10, 5, 5, -1, 2),
        tlog.TransactionLogValue(5, 3, 60_000, "Ongoing", frozenset({T0}), 10, 5),
    ],
)
def test_transaction_log_value_v1_tagged_fields_round_trip(value):
    raw = tlog.transaction_log_value(value)
    tagged = (value.previous_producer_id, value.next_producer_id) != (-1, -1)
    assert raw[:2] == (b"\x00\x01" if tagged or value.client_transaction_version else b"\x00\x00")
    assert tlog.read_value(raw) == value
    # version 1 without tagged fields reads as the defaults
    plain = replace(
        value, previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0
    )
    assert tlog.read_value(tlog.transaction_log_value(plain, version=1)) == plain


_VALUES = st.builds(
    tlog.TransactionLogValue,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, MAX_EPOCH),
    transaction_timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([s for s in TxnState if s not in (TxnState.EMPTY, TxnState.DEAD)]),
    partitions=st.frozensets(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 5))),
    last_update_timestamp_ms=st.integers(-1, 2**62),
    start_timestamp_ms=st.integers(-1, 2**62),
    previous_producer_id=st.integers(-1, 2**63 - 1),
    next_producer_id=st.integers(-1, 2**63 - 1),
    client_transaction_version=st.integers(0, 2),
)


@given(value=_VALUES)
def test_every_transaction_log_value_reads_back(value):
    assert tlog.read_value(tlog.transaction_log_value(value)) == value


class EpochsOnlyGrow(RuleBasedStateMachine):
    """Random request sequences of one producer (its EndTxn v5 retried, older epochs
    replayed, transactions timing out, the coordinator failing over): the epoch per
    producer id only grows, each successful new EndTxn v5 answers exactly the next
    epoch, a request of an epoch older than the last answered one changes nothing,
    and the live state equals the state loaded from the records."""

    def __init__(self) -> None:
        super().__init__()
        self.h = TxnHarness(
            TransactionConfig(
                transaction_state_log_num_partitions=1,
                transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
            )
        )
        self.seen: dict[int, int] = {}  # producer id -> highest epoch in the state
        self.client: tuple[int, int] | None = None  # what the producer believes it has

    def _state(self):
        meta = self.h.coordinator.transactions.get(TID)
        return None if meta is None else meta.state

    @rule()
    def init(self):
        r = self.h.call("init_producer_id", TID, 3000)
        if r is not None and r.error == Errors.NONE:
            self.client = (r.producer_id, r.producer_epoch)

    @rule(parts=st.sets(st.sampled_from([T0, T1]), min_size=1), v=st.sampled_from([1, 2]))
    def add(self, parts, v):
        if self.client is not None:
            self.h.call("add_partitions_to_txn", TID, *self.client, parts, transaction_version=v)

    @rule(commit=st.booleans(), stale=st.booleans())
    def end_v2(self, commit, stale):
        if self.client is None:
            return
        pid, epoch = self.client
        if stale:
            epoch -= 1  # a delayed EndTxn of an earlier transaction
        before = self._state()
        r = self.h.call("end_txn", TID, pid, epoch, commit, transaction_version=2)
        if stale and before is not None:
            # an EndTxn of an older epoch is a retry at most: it writes nothing
            assert self._state() == before
        if r is None or r.error != Errors.NONE:
            return
        if stale or before.state not in (TxnState.ONGOING, TxnState.EMPTY, *_COMPLETE):
            return
        if before.state in _COMPLETE and before.producer_epoch != epoch:
            return  # a retry: answered with what it had
        # a new EndTxn: the next epoch (or, at the last one, a new producer id)
        if epoch >= MAX_EPOCH - 1:
            assert r.producer_epoch == 0 and r.producer_id != pid
        else:
            assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)
        if not stale:
            self.client = (r.producer_id, r.producer_epoch)

    @rule()
    def markers(self):
        self.h.write_markers()

    @rule()
    def time_passes(self):
        self.h.advance(4000)

    @rule()
    def failover(self):
        self.h.failover()

    @invariant()
    def epoch_only_grows(self):
        s = self._state()
        if s is None:
            return
        assert s.producer_epoch >= self.seen.get(s.producer_id, -1)
        self.seen[s.producer_id] = s.producer_epoch

    @invariant()
    def live_equals_loaded(self):
        assert hard_state(self.h.coordinator) == hard_state(loaded(self.h))


_COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
EpochsOnlyGrow.TestCase.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)
TestEpochsOnlyGrow = EpochsOnlyGrow.TestCase


def _explore_v2() -> set[tuple[str, str]]:
    """Every (state, next state) the state machine writes when every add and EndTxn
    is of version 2 (as test_viz_transactions explores version 1)."""
    edges: set[tuple[str, str]] = set()
    seen: set = set()
    todo = [TransactionStateMachine(7).current]
    while todo:
        s = todo.pop()
        if s in seen or s.producer_epoch > 4:
            continue
        seen.add(s)
        ops = [
            ("init", lambda m: m.init_producer_id()),
            ("add", lambda m, e=s.producer_epoch: m.add_partitions(e, [T0], 2)),
            ("add", lambda m, e=s.producer_epoch: m.add_partitions(e, [T1], 2)),
            ("end", lambda m, e=s.producer_epoch: m.end_txn(e, True, 2)),
            ("end", lambda m, e=s.producer_epoch: m.end_txn(e, False, 2)),
            ("timeout", lambda m: m.timeout_abort()),
            ("complete", lambda m: [m.marker_written(tp) for tp in m.current.pending_markers]),
        ]
        for kind, op in ops:
            m = TransactionStateMachine.load(s)
            try:
                op(m)
                if kind == "complete":
                    m.complete()
            except KafkaError:
                pass
            after = m.current
            if after == s:
                continue
            if after.state != s.state or kind in ("init", "add"):
                edges.add((s.state, after.state))
            todo.append(after)
    return edges


def test_version_2_transitions_are_exactly_what_the_state_machine_makes():
    assert _explore_v2() == {edge for edge in TRANSITIONS_V2 if DEAD not in edge}
    for before, after in TRANSITIONS_V2:
        assert before in VALID_PREVIOUS_STATES[after], (before, after)


@pytest.mark.parametrize(("level", "written"), [(2, 2), (1, 0)])
def test_a_timeout_abort_carries_the_clusters_transaction_version(level, written):
    """An abort no client asked for is written with the cluster's version (Kafka:
    transactionVersionLevel), with one epoch more, which fences the producer."""
    h = TxnHarness(
        TransactionConfig(
            transaction_state_log_num_partitions=1,
            transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
            transaction_version=level,
        )
    )
    r = h.call("init_producer_id", TID, 3000)
    h.call("add_partitions_to_txn", TID, r.producer_id, r.producer_epoch, [T0])
    h.advance(5000)
    aborted = [
        v
        for v in (tlog.read_value(value) for _, value in h.logs[0])
        if v.state == TxnState.PREPARE_ABORT
    ]
    assert [(v.producer_epoch, v.client_transaction_version) for v in aborted] == [
        (r.producer_epoch + 1, written)
    ]


# -- the partition side: the marker with the bumped epoch ---------------------------------------


def test_the_v2_marker_keeps_the_next_transactions_verification_and_fences_the_old(tmp_path):
    """Transactions v2: transaction N (epoch 0) is open in the partition; the leader
    starts adding the partition for transaction N+1 (epoch 1, the epoch EndTxn v5
    answered); N's marker arrives with the bumped epoch 1 meanwhile. The add's guard
    stays valid (the marker ended N, not N+1), and a delayed write of N (epoch 0)
    is fenced by the producer state (KAFKA-17754)."""
    from kafkalab.records import SimpleRecord, build_batch
    from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
    from kafkalab.storage import UnifiedLog
    from kafkalab.storage.producer_state_manager import InvalidProducerEpochError
    from kafkalab.storage.unified_log import AppendOrigin

    def batch(seq: int, epoch: int) -> bytes:
        records = [SimpleRecord(b"e%d-s%d" % (epoch, seq))]
        return build_batch(
            records, producer_id=7, producer_epoch=epoch, base_sequence=seq, is_transactional=True
        )

    log = UnifiedLog(tmp_path / "t-0")
    try:
        first = log.maybe_start_transaction_verification(7, 0)
        log.append_as_leader(batch(0, 0), verification_guard=first)
        guard = log.maybe_start_transaction_verification(7, 1)  # N+1's add under way
        marker = build_end_txn_marker_batch(7, 1, ControlRecordType.COMMIT, 0)
        log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
        end = log.log_end_offset
        with pytest.raises(InvalidProducerEpochError):
            log.append_as_leader(batch(1, 0), verification_guard=None)  # N's delayed write
        assert log.log_end_offset == end
        log.append_as_leader(batch(0, 1), verification_guard=guard)  # N+1's first write
        assert log.log_end_offset == end + 1
        assert set(log.producer_state.ongoing_txns) == {end}
    finally:
        log.close()
