"""The sans-IO TransactionCoordinator: acknowledged only once written, fencing,
markers, failover, timeouts and expiry, and the __transaction_state records."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from txn_harness import TxnHarness

from kafkalab.coordinator.transaction import (
    InitEpochRule,
    TransactionConfig,
    TransactionCoordinator,
)
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.results import (
    AddPartitionsToTxnResult,
    InitProducerIdResult,
    TxnResult,
)
from kafkalab.errors import Errors

T0, T1 = ("t", 0), ("t", 1)


def begun(h: TxnHarness, tid="app-1", partitions=(T0, T1)):
    init = h.call("init_producer_id", tid, 60_000)
    assert init.error == Errors.NONE
    add = h.call("add_partitions_to_txn", tid, init.producer_id, init.producer_epoch, partitions)
    assert add == AddPartitionsToTxnResult(dict.fromkeys(partitions, Errors.NONE))
    return init.producer_id, init.producer_epoch


def test_a_committed_transaction_goes_through_the_log_and_the_markers():
    h = TxnHarness()
    pid, epoch = begun(h)
    assert epoch == 0 and h.state("app-1").state == "Ongoing"
    req, effects = h.call_pending("end_txn", "app-1", pid, epoch, True)
    assert effects.response is None, "EndTxn answered before PrepareCommit was written"
    assert len(h.appends) == 1
    h.complete_appends()
    assert h.answers.pop(req) == TxnResult(Errors.NONE)
    (m,) = h.markers
    assert (m.producer_id, m.producer_epoch, m.committed, m.partitions) == (
        pid,
        0,
        True,
        frozenset({T0, T1}),
    )
    assert h.state("app-1").state == "PrepareCommit"
    h.write_markers()
    assert h.state("app-1").state == "CompleteCommit"
    states = [tlog.read_value(v).state for _, v in h.logs[h.coordinator.partition_for("app-1")]]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    # a retry of the finished EndTxn is fine; abort after commit is not
    assert h.call("end_txn", "app-1", pid, epoch, True) == TxnResult(Errors.NONE)
    assert h.call("end_txn", "app-1", pid, epoch, False) == TxnResult(Errors.INVALID_TXN_STATE)


def test_markers_written_one_partition_at_a_time():
    h = TxnHarness()
    pid, epoch = begun(h)
    h.call("end_txn", "app-1", pid, epoch, False)
    (m,) = h.markers
    h.markers.clear()
    h.run(h.coordinator.markers_written("app-1", pid, epoch, [T0], h.now))
    assert h.state("app-1").pending_markers == {T1} and not h.appends
    (d,) = h.coordinator.describe_transactions(["app-1"])
    assert (d.state, d.partitions) == ("PrepareAbort", {T1})  # those still without a marker
    assert h.coordinator.markers_pending("app-1", pid, epoch) == {T1}
    h.run(h.coordinator.markers_written("app-1", pid, epoch, [T1], h.now))
    h.complete_appends()
    assert h.state("app-1").state == "CompleteAbort"
    assert h.coordinator.markers_pending("app-1", pid, epoch) == frozenset()


def test_a_failed_write_changes_nothing_and_says_why():
    h = TxnHarness()
    init = h.call("init_producer_id", "app-1", 60_000)
    req, _ = h.call_pending(
        "add_partitions_to_txn", "app-1", init.producer_id, init.producer_epoch, [T0]
    )
    again, _ = h.call_pending(
        "add_partitions_to_txn", "app-1", init.producer_id, init.producer_epoch, [T1]
    )
    assert h.answers.pop(again).errors == {T1: Errors.CONCURRENT_TRANSACTIONS}
    h.complete_appends(Errors.NOT_ENOUGH_REPLICAS)
    assert h.answers.pop(req).errors == {T0: Errors.COORDINATOR_NOT_AVAILABLE}
    assert h.state("app-1").state == "Empty"


def test_a_new_id_whose_first_write_fails_does_not_exist():
    h = TxnHarness()
    req, _ = h.call_pending("init_producer_id", "app-1", 60_000)
    h.complete_appends(Errors.NOT_LEADER_OR_FOLLOWER)
    assert h.answers.pop(req) == InitProducerIdResult(Errors.NOT_COORDINATOR)
    assert "app-1" not in h.coordinator.transactions


def test_a_second_instance_fences_the_first_and_aborts_its_transaction():
    h = TxnHarness()
    pid, epoch = begun(h)
    busy = h.call("init_producer_id", "app-1", 60_000)
    assert busy == InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
    (m,) = h.markers
    assert (m.committed, m.producer_epoch) == (False, 1)  # the abort carries the new epoch
    assert h.call("end_txn", "app-1", pid, epoch, True) == TxnResult(Errors.PRODUCER_FENCED)
    h.write_markers()
    again = h.call("init_producer_id", "app-1", 60_000)
    assert (again.error, again.producer_id, again.producer_epoch) == (Errors.NONE, pid, 2)
    fenced = h.call("add_partitions_to_txn", "app-1", pid, 1, [T0])
    assert fenced.errors == {T0: Errors.PRODUCER_FENCED}
    assert h.call("add_partitions_to_txn", "app-1", pid + 1, 2, [T0]).errors == {
        T0: Errors.INVALID_PRODUCER_ID_MAPPING
    }


def test_the_broken_coordinator_does_not_bump_the_epoch():
    h = TxnHarness(
        TransactionConfig(
            transaction_state_log_num_partitions=3, init_epoch_rule=InitEpochRule.NO_BUMP
        )
    )
    pid, epoch = begun(h)
    h.call("init_producer_id", "app-1", 60_000)
    h.write_markers()
    again = h.call("init_producer_id", "app-1", 60_000)
    assert (again.producer_id, again.producer_epoch) == (pid, epoch)
    # the zombie is not fenced: its AddPartitionsToTxn is accepted
    zombie = h.call("add_partitions_to_txn", "app-1", pid, epoch, [T0])
    assert zombie.errors == {T0: Errors.NONE}


def test_init_epoch_rule_from_properties():
    assert TransactionConfig.from_properties({}).bump_epoch_on_init
    c = TransactionConfig.from_properties(
        {"kafkalab.transaction.init.epoch.rule": "no-bump", "transaction.max.timeout.ms": "5000"}
    )
    assert not c.bump_epoch_on_init and c.transaction_max_timeout_ms == 5000
    with pytest.raises(ValueError, match="bump"):
        TransactionConfig.from_properties({"kafkalab.transaction.init.epoch.rule": "sometimes"})


def test_transaction_timeout_is_capped_and_enforced():
    h = TxnHarness(
        TransactionConfig(
            transaction_state_log_num_partitions=3,
            transaction_max_timeout_ms=10_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
        )
    )
    assert h.call("init_producer_id", "app-1", 10_001) == InitProducerIdResult(
        Errors.INVALID_TRANSACTION_TIMEOUT
    )
    init = h.call("init_producer_id", "app-1", 5000)
    pid, epoch = init.producer_id, init.producer_epoch
    h.call("add_partitions_to_txn", "app-1", pid, epoch, [T0])
    h.advance(4000)
    assert h.state("app-1").state == "Ongoing"
    h.advance(2000)
    s = h.state("app-1")
    assert (s.state, s.producer_epoch) == ("PrepareAbort", epoch + 1)
    assert h.markers[0].committed is False
    assert h.call("end_txn", "app-1", pid, epoch, True) == TxnResult(Errors.PRODUCER_FENCED)
    h.write_markers()
    assert h.state("app-1").state == "CompleteAbort"


def test_idle_transactional_ids_expire_with_a_tombstone():
    h = TxnHarness(
        TransactionConfig(
            transaction_state_log_num_partitions=3,
            transactional_id_expiration_ms=60_000,
            transaction_remove_expired_transaction_cleanup_interval_ms=10_000,
        )
    )
    h.call("init_producer_id", "app-1", 5000)
    h.advance(50_000)
    assert "app-1" in h.coordinator.transactions
    h.advance(20_000)
    assert "app-1" not in h.coordinator.transactions
    assert h.logs[h.coordinator.partition_for("app-1")][-1][1] is None
    h.failover()
    assert "app-1" not in h.coordinator.transactions


def test_failover_completes_prepared_transactions():
    h = TxnHarness()
    pid, epoch = begun(h)
    h.call("end_txn", "app-1", pid, epoch, True)
    h.failover(epoch=7)  # the markers were never sent
    (m,) = h.markers
    assert (m.committed, m.partitions, m.coordinator_epoch) == (True, {T0, T1}, 7)
    h.write_markers()
    assert h.state("app-1").state == "CompleteCommit"


def test_failover_keeps_ongoing_and_loses_unacknowledged():
    h = TxnHarness()
    pid, epoch = begun(h, partitions=(T0,))
    req, _ = h.call_pending("add_partitions_to_txn", "app-1", pid, epoch, [T1])
    h.failover()
    assert req not in h.answers  # it was never acknowledged...
    assert h.state("app-1").partitions == {T0}  # ... and is not there


def test_ownership_and_loading():
    h = TxnHarness()
    c = TransactionCoordinator(h.config, partitions=())
    p = c.partition_for("app-1")
    effects = c.init_producer_id("app-1", 1000, now_ms=0, request="a")
    assert effects.response == InitProducerIdResult(Errors.NOT_COORDINATOR)
    c.on_become_leader(p, 3)
    effects = c.init_producer_id("app-1", 1000, now_ms=0, request="b")
    assert effects.response == InitProducerIdResult(Errors.COORDINATOR_LOAD_IN_PROGRESS)
    c.complete_load(p, [], 0)
    effects = c.init_producer_id("app-1", 1000, now_ms=0, request="c")
    (append,) = effects.appends()
    c.on_resign(p, 4)  # resigned while the write was on its way
    assert c.append_completed(append.append_id, Errors.NONE, 0) == []
    assert c.describe_transactions(["app-1"])[0].error == Errors.NOT_COORDINATOR


def test_resign_answers_waiting_requests():
    h = TxnHarness()
    c = h.coordinator
    effects = c.init_producer_id("app-1", 1000, now_ms=0, request="x")
    assert effects.response is None
    out = c.on_resign(c.partition_for("app-1"), 1)
    assert out.responses()[0].result == InitProducerIdResult(Errors.NOT_COORDINATOR)


def test_add_offsets_adds_the_groups_offsets_partition():
    from kafkalab.coordinator.group.coordinator_records import partition_for

    h = TxnHarness()
    init = h.call("init_producer_id", "app-1", 60_000)
    r = h.call("add_offsets_to_txn", "app-1", init.producer_id, init.producer_epoch, "my-group")
    assert r == TxnResult(Errors.NONE)
    assert h.state("app-1").partitions == {("__consumer_offsets", partition_for("my-group", 50))}


def test_describe_and_list():
    h = TxnHarness()
    pid, _ = begun(h, "a")
    h.call("init_producer_id", "b", 60_000)
    (a,) = h.coordinator.describe_transactions(["a"])
    assert (a.error, a.state, a.producer_id, a.partitions) == (
        Errors.NONE,
        "Ongoing",
        pid,
        {T0, T1},
    )
    assert (
        h.coordinator.describe_transactions(["zzz"])[0].error == Errors.TRANSACTIONAL_ID_NOT_FOUND
    )
    listed = h.coordinator.list_transactions(["Ongoing", "Bogus"])
    assert [t.transactional_id for t in listed.transactions] == ["a"]
    assert listed.unknown_state_filters == ("Bogus",)
    assert len(h.coordinator.list_transactions().transactions) == 2
    assert [
        t.transactional_id for t in h.coordinator.list_transactions((), [pid]).transactions
    ] == ["a"]


def test_kip360_init_with_the_current_producer_id_and_epoch():
    h = TxnHarness()
    init = h.call("init_producer_id", "app-1", 60_000)
    bumped = h.call(
        "init_producer_id",
        "app-1",
        60_000,
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
    )
    assert (bumped.producer_id, bumped.producer_epoch) == (init.producer_id, 1)
    stale = h.call(
        "init_producer_id", "app-1", 60_000, producer_id=init.producer_id, producer_epoch=0
    )
    assert stale.error == Errors.PRODUCER_FENCED


def test_epoch_exhaustion_hands_out_a_new_producer_id():
    h = TxnHarness()
    init = h.call("init_producer_id", "app-1", 60_000)
    meta = h.coordinator.transactions["app-1"]
    from dataclasses import replace

    meta.state = replace(meta.state, producer_epoch=32766)
    again = h.call("init_producer_id", "app-1", 60_000)
    assert again.producer_id != init.producer_id and again.producer_epoch == 0


# -- the records ---------------------------------------------------------------------------


def test_record_bytes_as_kafka_writes_them():
    key = tlog.transaction_log_key("tx")
    assert key == b"\x00\x00" + b"\x00\x02tx"
    v = tlog.TransactionLogValue(5, 2, 60000, "Ongoing", frozenset({("t", 0)}), 10, 5)
    assert tlog.transaction_log_value(v) == (
        b"\x00\x00"  # value version 0
        + (5).to_bytes(8, "big")
        + (2).to_bytes(2, "big")
        + (60000).to_bytes(4, "big")
        + b"\x01"  # Ongoing
        + (1).to_bytes(4, "big")  # one topic
        + b"\x00\x01t"
        + (1).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (10).to_bytes(8, "big")
        + (5).to_bytes(8, "big")
    )
    empty = tlog.TransactionLogValue(5, 2, 60000, "Empty", frozenset(), 10, -1)
    assert tlog.transaction_log_value(empty)[17:21] == b"\xff\xff\xff\xff"  # null partitions


partitions = st.frozensets(
    st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 2**31 - 1)), max_size=6
)


@given(
    st.text(max_size=20),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(0, 2**31 - 1),
    st.sampled_from(sorted(tlog.STATE_IDS)),
    partitions,
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.sampled_from([0, 1]),
)
def test_records_round_trip(tid, pid, epoch, timeout, state, parts, updated, started, version):
    if state == "Empty":
        parts = frozenset()
    v = tlog.TransactionLogValue(pid, epoch, timeout, state, parts, updated, started)
    assert tlog.read_key(tlog.transaction_log_key(tid)) == tid
    assert tlog.read_value(tlog.transaction_log_value(v, version)) == v
    line = tlog.describe_record(tlog.transaction_log_key(tid), tlog.transaction_log_value(v))
    assert f"state={state}" in line
