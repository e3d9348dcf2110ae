"""Transaction verification (KIP-890 part 1), both halves without a broker:

- the coordinator's verify-only answer (AddPartitionsToTxn v4+ with verify_only):
  NONE only for a partition of the producer's ongoing transaction, from the state
  alone, nothing written;
- the partition's VerificationGuard: a verification started before the transaction
  ended (its marker came in between) no longer lets the write in.
"""

from __future__ import annotations

import pytest
from txn_harness import TxnHarness

from kafkalab.coordinator.transaction.results import AddPartitionsToTxnResult
from kafkalab.errors import Errors
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.storage import UnifiedLog
from kafkalab.storage.producer_state_manager import InvalidTxnStateError, VerificationGuard
from kafkalab.storage.unified_log import AppendOrigin

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


def begun(h: TxnHarness, tid: str = "app") -> tuple[int, int]:
    init = h.call("init_producer_id", tid, 60_000)
    add = h.call("add_partitions_to_txn", tid, init.producer_id, init.producer_epoch, [T0, T1])
    assert add == AddPartitionsToTxnResult({T0: Errors.NONE, T1: Errors.NONE})
    return init.producer_id, init.producer_epoch


def verify(h: TxnHarness, tid: str, pid: int, epoch: int, partitions) -> dict:
    """The verify-only answer; it must write nothing (no append asked for, the
    __transaction_state records unchanged)."""
    logs_before = {p: list(rs) for p, rs in h.logs.items()}
    answer = h.coordinator.verify_partitions_in_txn(tid, pid, epoch, partitions)
    assert h.appends == [] and h.logs == logs_before, "verification wrote something"
    return answer.errors


def test_a_partition_of_the_ongoing_transaction_is_verified():
    h = TxnHarness()
    pid, epoch = begun(h)
    assert verify(h, "app", pid, epoch, [T0, T1]) == {T0: Errors.NONE, T1: Errors.NONE}


def test_a_partition_not_added_is_not_in_the_transaction():
    h = TxnHarness()
    pid, epoch = begun(h)
    assert verify(h, "app", pid, epoch, [T0, T2]) == {
        T0: Errors.NONE,
        T2: Errors.INVALID_TXN_STATE,
    }


def test_a_transition_being_written_is_not_waited_for():
    """As in Kafka, the committed state answers (the leader's guard is the final
    check): a partition being added is not in yet, one added before is."""
    h = TxnHarness()
    pid, epoch = begun(h)
    request, _ = h.call_pending("add_partitions_to_txn", "app", pid, epoch, [T2])
    assert h.appends, "the AddPartitionsToTxn write is on its way"
    answer = h.coordinator.verify_partitions_in_txn("app", pid, epoch, [T0, T2]).errors
    assert answer == {T0: Errors.NONE, T2: Errors.INVALID_TXN_STATE}
    h.complete_appends()
    assert h.answers.pop(request) == AddPartitionsToTxnResult({T2: Errors.NONE})
    assert verify(h, "app", pid, epoch, [T2]) == {T2: Errors.NONE}


def test_another_epoch_or_producer_is_refused():
    h = TxnHarness()
    pid, epoch = begun(h)
    assert verify(h, "app", pid, epoch - 1, [T0]) == {T0: Errors.PRODUCER_FENCED}
    assert verify(h, "app", pid + 1, epoch, [T0]) == {T0: Errors.INVALID_PRODUCER_ID_MAPPING}
    assert verify(h, "nobody", pid, epoch, [T0]) == {T0: Errors.INVALID_PRODUCER_ID_MAPPING}


def test_no_ongoing_transaction_verifies_nothing():
    h = TxnHarness()
    init = h.call("init_producer_id", "app", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert verify(h, "app", pid, epoch, [T0]) == {T0: Errors.INVALID_TXN_STATE}  # Empty
    pid, epoch = begun(h)  # InitProducerId again (a new epoch), then the partitions
    h.call("end_txn", "app", pid, epoch, False)
    # PrepareAbort: markers on their way, the transaction is ending
    assert verify(h, "app", pid, epoch, [T0]) == {T0: Errors.CONCURRENT_TRANSACTIONS}
    h.write_markers()
    assert h.state("app").state == "CompleteAbort"
    # the late write after the abort: its partition is in no transaction now
    assert verify(h, "app", pid, epoch, [T0, T1]) == {
        T0: Errors.INVALID_TXN_STATE,
        T1: Errors.INVALID_TXN_STATE,
    }


def test_a_partition_the_coordinator_does_not_own_is_not_answered_from_state():
    h = TxnHarness()
    pid, epoch = begun(h)
    h.run(h.coordinator.on_resign(h.coordinator.partition_for("app")))
    assert verify(h, "app", pid, epoch, [T0]) == {T0: Errors.NOT_COORDINATOR}


# -- the guard, next to the log -----------------------------------------------------------------


def txn_batch(pid: int, seq: int, epoch: int = 0) -> bytes:
    return build_batch(
        [SimpleRecord(b"v%d" % seq)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def abort(pid: int, epoch: int) -> bytes:
    return build_end_txn_marker_batch(pid, epoch, ControlRecordType.ABORT, 0)


@pytest.fixture
def log(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    yield log
    log.close()


def test_a_verified_write_opens_the_transaction_and_the_next_needs_no_verification(log):
    guard = log.maybe_start_transaction_verification(7, 0)
    assert guard is not VerificationGuard.SENTINEL
    # a second request of the same producer before the answer shares the verification
    assert log.maybe_start_transaction_verification(7, 0) is guard
    log.append_as_leader(txn_batch(7, 0), verification_guard=guard)
    assert log.producer_state.verification_guard(7) is None, "the verification is spent"
    assert log.maybe_start_transaction_verification(7, 0) is VerificationGuard.SENTINEL
    log.append_as_leader(txn_batch(7, 1), verification_guard=VerificationGuard.SENTINEL)
    assert log.log_end_offset == 2


def test_a_write_without_a_verification_is_refused_when_verification_is_on(log):
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(7, 0), verification_guard=VerificationGuard.SENTINEL)
    with pytest.raises(InvalidTxnStateError):  # another partition's or an old guard
        log.append_as_leader(txn_batch(7, 0), verification_guard=VerificationGuard())
    assert log.log_end_offset == 0
    # verification off (no guard at all): the same write goes in, as before KIP-890
    log.append_as_leader(txn_batch(7, 0))
    assert log.log_end_offset == 1


@pytest.mark.parametrize("marker_epoch", [0, 1], ids=["abort", "abort-with-epoch-bump"])
def test_a_transaction_ended_during_the_verification_refuses_the_write(log, marker_epoch):
    """The leader started verifying (guard), the coordinator said yes, and before the
    append the transaction was aborted (its marker, possibly with a bumped epoch
    after a timeout, reached this partition): the guard is stale, nothing is written."""
    log.append_as_leader(txn_batch(7, 0), verification_guard=None)  # an earlier transaction
    log.append_as_leader(abort(7, 0), origin=AppendOrigin.COORDINATOR)
    guard = log.maybe_start_transaction_verification(7, 0)
    log.append_as_leader(abort(7, marker_epoch), origin=AppendOrigin.COORDINATOR)
    end = log.log_end_offset
    # the write as the producer would send it in that epoch (a new epoch starts at 0)
    late = txn_batch(7, 1, 0) if marker_epoch == 0 else txn_batch(7, 0, marker_epoch)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(late, verification_guard=guard)
    assert log.log_end_offset == end
    assert log.producer_state.ongoing_txns == {}, "a transaction was opened"
