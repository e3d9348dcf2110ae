"""The checks of lab 05's exercises: a right answer passes, wrong answers and the
placeholder are "not yet" with a reason, each worked out from live objects built
here as the notebooks build them (small)."""

from __future__ import annotations

import pytest

from kafkalab.coordinator.group.results import AppendRecords
from kafkalab.coordinator.transaction import TransactionConfig, TransactionCoordinator
from kafkalab.labs.checks import transactions as checks
from kafkalab.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_end_txn_marker_batch,
)
from kafkalab.specs.replay import random_trace
from kafkalab.specs.runner import SPECS_DIR
from kafkalab.specs.tla.module import load_module
from kafkalab.storage import UnifiedLog
from kafkalab.storage.unified_log import AppendOrigin

PID = 1000


def _not_yet(v, *words: str) -> None:
    assert not v and str(v).startswith("not yet:"), v
    for w in words:
        assert w in str(v), v


def _send(log, values, seq, epoch=0, pid=PID, txn=False):
    batch = build_batch(
        [SimpleRecord(v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    info = log.append_as_leader(batch)
    log.update_high_watermark(log.log_end_offset)
    return info


def _marker(log, kind, epoch=0, pid=PID, replicate=True):
    batch = build_end_txn_marker_batch(pid, epoch, kind, 0)
    info = log.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
    if replicate:
        log.update_high_watermark(log.log_end_offset)
    return info


@pytest.fixture
def idem_log(tmp_path):
    """Part 1's log: sequences 0..5 of producer 1000 in three batches."""
    log = UnifiedLog(tmp_path / "orders-0")
    _send(log, [b"a", b"b"], 0)
    _send(log, [b"c"], 2)
    _send(log, [b"d", b"e", b"f"], 3)
    yield log
    log.close()


def test_retry_offsets(idem_log):
    assert checks.retry_offsets((3, 5), idem_log, PID, 3, 5)
    assert checks.retry_offsets([3, 5], idem_log, PID, 3, 5)
    _not_yet(checks.retry_offsets((6, 8), idem_log, PID, 3, 5), "not appended")
    _not_yet(checks.retry_offsets(..., idem_log, PID, 3, 5), "replace the ...")
    assert checks.retry_offsets((2, 2), idem_log, PID, 2, 2)  # worked out, not fixed


CANDIDATES = {"8..9": (8, 9), "6..7": (6, 7), "2..2": (2, 2), "4..5": (4, 5)}
RIGHT = {"8..9": "out of order", "6..7": "appended", "2..2": "duplicate", "4..5": "out of order"}


def test_batch_kinds(idem_log):
    assert checks.batch_kinds(RIGHT, idem_log, PID, 0, CANDIDATES)
    wrong = {**RIGHT, "4..5": "duplicate"}
    _not_yet(checks.batch_kinds(wrong, idem_log, PID, 0, CANDIDATES), "4..5", "whole")
    _not_yet(checks.batch_kinds({**RIGHT, "8..9": "gap"}, idem_log, PID, 0, CANDIDATES), "one of")
    _not_yet(checks.batch_kinds({"8..9": "appended"}, idem_log, PID, 0, CANDIDATES), "each batch")
    placeholder = dict.fromkeys(CANDIDATES, ...)
    _not_yet(checks.batch_kinds(placeholder, idem_log, PID, 0, CANDIDATES), "replace the ...")
    # after 6..7 is written, 6..7 is a duplicate and 8..9 comes next
    _send(idem_log, [b"g", b"h"], 6)
    later = {**RIGHT, "8..9": "appended", "6..7": "duplicate"}
    assert checks.batch_kinds(later, idem_log, PID, 0, CANDIDATES)


def test_fenced_epochs(idem_log):
    _send(idem_log, [b"new-1"], 0, epoch=1)
    assert checks.fenced_epochs({0}, idem_log, PID, (0, 1, 2))
    _not_yet(checks.fenced_epochs({0, 2}, idem_log, PID, (0, 1, 2)), "older epochs")
    _not_yet(checks.fenced_epochs(set(), idem_log, PID, (0, 1, 2)))
    _not_yet(checks.fenced_epochs(..., idem_log, PID, (0, 1, 2)), "replace the ...")
    _send(idem_log, [b"new-2"], 0, epoch=2)
    assert checks.fenced_epochs({0, 1}, idem_log, PID, (0, 1, 2))


def test_copies_after_restart(idem_log):
    assert checks.copies_after_restart(2, idem_log, 1001, b"d")
    _not_yet(checks.copies_after_restart(1, idem_log, 1001, b"d"), "new producer id")
    _not_yet(checks.copies_after_restart(..., idem_log, 1001, b"d"), "replace the ...")
    _send(idem_log, [b"d", b"e", b"f"], 0, pid=1001)
    # the same batch again from 1001 is now a retry: still two copies
    assert checks.copies_after_restart(2, idem_log, 1001, b"d")


@pytest.fixture
def txn_logs(tmp_path):
    """Part 2's partitions: plain records, a transaction over both, a marker in
    orders-0 written but not replicated."""
    orders = UnifiedLog(tmp_path / "orders-0")
    payments = UnifiedLog(tmp_path / "payments-0")
    _send(orders, [b"order-1", b"order-2"], -1, epoch=-1, pid=-1)
    _send(orders, [b"order-3", b"order-4", b"order-5"], 0, txn=True)
    _send(payments, [b"pay-3", b"pay-4", b"pay-5"], 0, txn=True)
    _send(orders, [b"order-6", b"order-7"], -1, epoch=-1, pid=-1)
    yield orders, payments
    orders.close()
    payments.close()


def test_read_committed_values(txn_logs):
    orders, payments = txn_logs
    candidates = {f"order-{n}" for n in range(1, 8)}
    assert checks.read_committed_values({"order-1", "order-2"}, [orders], candidates)
    _not_yet(checks.read_committed_values(candidates, [orders], candidates), "aborted")
    _not_yet(checks.read_committed_values(..., [orders], candidates), "replace the ...")
    _marker(orders, ControlRecordType.COMMIT)
    assert checks.read_committed_values(candidates, [orders], candidates)
    # an aborted transaction: its records dropped, another producer's in the middle kept
    _send(orders, [b"order-8"], 3, txn=True)
    _send(payments, [b"pay-8"], 3, txn=True)
    _send(orders, [b"order-10"], -1, epoch=-1, pid=-1)
    _marker(orders, ControlRecordType.ABORT)
    _marker(payments, ControlRecordType.ABORT)
    second = {"order-8", "order-10", "pay-8"}
    assert checks.read_committed_values({"order-10"}, [orders, payments], second)
    _not_yet(checks.read_committed_values(set(), [orders, payments], second))


def test_last_stable_offsets(txn_logs):
    orders, payments = txn_logs
    logs = {"orders-0": orders, "payments-0": payments}
    assert checks.last_stable_offsets({"orders-0": 2, "payments-0": 0}, logs)
    _marker(orders, ControlRecordType.COMMIT, replicate=False)  # above the HW: still unstable
    assert checks.last_stable_offsets({"orders-0": 2, "payments-0": 0}, logs)
    wrong = checks.last_stable_offsets({"orders-0": 7, "payments-0": 0}, logs)
    _not_yet(wrong, "orders-0", "high watermark")
    _not_yet(checks.last_stable_offsets({"orders-0": 2}, logs), "dict")
    _not_yet(checks.last_stable_offsets({"orders-0": ..., "payments-0": ...}, logs), "replace")
    orders.update_high_watermark(orders.log_end_offset)
    assert checks.last_stable_offsets({"orders-0": 8, "payments-0": 0}, logs)
    # a plain record not yet replicated: no transaction is unstable, the HW bounds the LSO
    orders.append_as_leader(build_batch([SimpleRecord(b"order-9")]))
    assert checks.last_stable_offsets({"orders-0": 8, "payments-0": 0}, logs)
    _not_yet(checks.last_stable_offsets({"orders-0": 9, "payments-0": 0}, logs), "orders-0")


def _carry(coordinator, effects, log):
    queue = list(effects)
    while queue:
        e = queue.pop(0)
        if isinstance(e, AppendRecords):
            queue += coordinator.append_completed(e.append_id, now_ms=0)


def test_zombie_errors(tmp_path):
    coordinator = TransactionCoordinator(TransactionConfig())
    _carry(coordinator, coordinator.init_producer_id("shop-tx", 60_000, now_ms=0), None)
    (d,) = coordinator.describe_transactions(["shop-tx"])
    pid = d.producer_id
    _carry(coordinator, coordinator.init_producer_id("shop-tx", 60_000, now_ms=1), None)
    log = UnifiedLog(tmp_path / "orders-0")
    _send(log, [b"x"], 0, epoch=0, pid=pid, txn=True)
    fenced = {"EndTxn": "PRODUCER_FENCED", "Produce": "NONE"}  # the leader knows only epoch 0
    assert checks.zombie_errors(fenced, coordinator, "shop-tx", log, pid, zombie_epoch=0)
    _marker(log, ControlRecordType.ABORT, epoch=1, pid=pid)
    both = {"EndTxn": "PRODUCER_FENCED", "Produce": "INVALID_PRODUCER_EPOCH"}
    assert checks.zombie_errors(both, coordinator, "shop-tx", log, pid, zombie_epoch=0)
    _not_yet(checks.zombie_errors(fenced, coordinator, "shop-tx", log, pid, 0), "newest")
    current = {"EndTxn": "NONE", "Produce": "NONE"}
    assert checks.zombie_errors(current, coordinator, "shop-tx", log, pid, zombie_epoch=1)
    placeholder = {"EndTxn": ..., "Produce": ...}
    _not_yet(checks.zombie_errors(placeholder, coordinator, "shop-tx", log, pid, 0), "replace")
    log.close()


def test_marker_offsets(txn_logs):
    orders, _ = txn_logs
    _marker(orders, ControlRecordType.COMMIT)
    _send(orders, [b"b0"], 3, txn=True)
    _marker(orders, ControlRecordType.ABORT)
    assert checks.marker_offsets({7: "COMMIT", 9: "ABORT"}, orders.dir)
    _not_yet(checks.marker_offsets({7: "COMMIT", 8: "ABORT"}, orders.dir), "offset of its own")
    _not_yet(checks.marker_offsets({7: "ABORT", 9: "COMMIT"}, orders.dir))
    _not_yet(checks.marker_offsets(..., orders.dir), "replace the ...")


def test_epoch_after_timeout():
    records = [
        {"offset": 0, "state": "Empty", "producer epoch": 0},
        {"offset": 1, "state": "Ongoing", "producer epoch": 0},
        {"offset": 2, "state": "PrepareAbort", "producer epoch": 1},
        {"offset": 3, "state": "CompleteAbort", "producer epoch": 1},
    ]
    assert checks.epoch_after_timeout(1, records)
    _not_yet(checks.epoch_after_timeout(0, records), "fences")
    _not_yet(checks.epoch_after_timeout(..., records), "replace the ...")
    assert checks.epoch_after_timeout(0, records[:2])


@pytest.fixture(scope="module")
def walk():
    spec = load_module(str(SPECS_DIR / "transactions" / "KafkaTransactions.tla"))
    trace = random_trace(SPECS_DIR / "transactions" / "MC_transactions.tla", 30, 101)
    return spec, [{v: s[v] for v in spec.variables} for s in trace.states]


def test_spec_lso_and_visible(walk):
    spec, states = walk
    # step 14: data (txn 1), commit, data (txn 2, open); step 18: txn 2 aborted
    assert checks.spec_lso_and_visible((2, {0}), spec, states[14], "t0")
    assert checks.spec_lso_and_visible((4, [0]), spec, states[18], "t0")
    _not_yet(checks.spec_lso_and_visible((3, {0}), spec, states[14], "t0"), "no marker")
    _not_yet(checks.spec_lso_and_visible((4, {0, 2}), spec, states[18], "t0"))
    _not_yet(checks.spec_lso_and_visible((..., ...), spec, states[14], "t0"), "replace")
    _not_yet(checks.spec_lso_and_visible(..., spec, states[14], "t0"), "replace")
    _not_yet(checks.spec_lso_and_visible(2, spec, states[14], "t0"), "(lso, visible)")


def test_delayed_end_txn_reads():
    from kafkalab.cluster.delayed_end_txn import DelayedEndTxnRun

    run = DelayedEndTxnRun(1)
    run.history.final_log("t", 0, [], isolation="read_committed")
    run.history.final_log("t", 1, [(0, b"b2")], isolation="read_committed")
    assert checks.delayed_end_txn_reads({"b2"}, run, "t")
    _not_yet(checks.delayed_end_txn_reads({"b1", "b2"}, run, "t"), "which transaction was Ongoing")
    assert not checks.delayed_end_txn_reads(..., run, "t")


def test_version_2_epochs():
    from kafkalab.specs.replay import kafka_17754_trace
    from kafkalab.specs.trace import load_trace

    trace = load_trace(kafka_17754_trace(2))
    assert checks.version_2_epochs({"T2": 1, "held": 0}, trace)
    _not_yet(checks.version_2_epochs({"T2": 0, "held": 0}, trace), "under version 2")
    assert not checks.version_2_epochs(..., trace)
