"""The transaction coordinator's state machine (sans-IO): Kafka's transitions,
epoch bumps that fence older producers, and the errors a client sees."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalab.coordinator.transaction import TransactionStateMachine
from kafkalab.errors import Errors, KafkaError


def committed(machine, epoch, partitions=("t-0", "t-1")):
    machine.add_partitions(epoch, partitions)
    machine.end_txn(epoch, commit=True)
    for p in partitions:
        machine.marker_written(p)
    machine.complete()


def test_a_transaction_goes_through_every_state():
    m = TransactionStateMachine(7)
    assert m.init_producer_id() == (7, 0)
    m.add_partitions(0, ["t-0"])
    assert m.current.state == "Ongoing"
    m.add_partitions(0, ["t-1"])
    assert m.current.partitions == {"t-0", "t-1"}
    m.end_txn(0, commit=True)
    assert (m.current.state, m.marker, m.current.pending_markers) == (
        "PrepareCommit",
        "COMMIT",
        {"t-0", "t-1"},
    )
    m.end_txn(0, commit=True)  # a retry of the same EndTxn is fine
    with pytest.raises(KafkaError) as busy:
        m.add_partitions(0, ["t-2"])
    assert busy.value.code == Errors.CONCURRENT_TRANSACTIONS
    m.marker_written("t-0")
    with pytest.raises(KafkaError):
        m.complete()  # t-1 has no marker yet
    m.marker_written("t-1")
    m.complete()
    assert (m.current.state, m.current.partitions) == ("CompleteCommit", frozenset())


def test_init_producer_id_aborts_an_open_transaction_and_fences_its_owner():
    m = TransactionStateMachine(7)
    m.init_producer_id()
    m.add_partitions(0, ["t-0"])
    with pytest.raises(KafkaError) as retry:
        m.init_producer_id()  # a new instance starts while the old one is mid-transaction
    assert retry.value.code == Errors.CONCURRENT_TRANSACTIONS
    assert (m.current.state, m.current.producer_epoch, m.marker) == ("PrepareAbort", 1, "ABORT")
    m.marker_written("t-0")
    m.complete()
    assert m.init_producer_id() == (7, 2)
    for call in (lambda: m.add_partitions(0, ["t-0"]), lambda: m.end_txn(1, commit=True)):
        with pytest.raises(KafkaError) as fenced:
            call()
        assert fenced.value.code == Errors.PRODUCER_FENCED


def test_a_timed_out_transaction_is_aborted_with_a_new_epoch():
    m = TransactionStateMachine(7)
    m.init_producer_id()
    m.add_partitions(0, ["t-0"])
    m.timeout_abort()
    assert (m.current.state, m.current.producer_epoch) == ("PrepareAbort", 1)
    with pytest.raises(KafkaError) as fenced:
        m.end_txn(0, commit=True)
    assert fenced.value.code == Errors.PRODUCER_FENCED


def test_a_failover_coordinator_resumes_from_the_persisted_state():
    m = TransactionStateMachine(7)
    m.init_producer_id()
    m.add_partitions(0, ["t-0", "t-1"])
    m.end_txn(0, commit=False)
    m.marker_written("t-0")
    new = TransactionStateMachine.load(m.current)
    assert new.marker == "ABORT" and new.current.pending_markers == {"t-1"}
    new.marker_written("t-1")
    new.complete()
    assert new.current.state == "CompleteAbort"


def test_end_txn_in_the_wrong_state_is_refused():
    m = TransactionStateMachine(7)
    m.init_producer_id()
    with pytest.raises(KafkaError) as wrong:
        m.end_txn(0, commit=True)
    assert wrong.value.code == Errors.INVALID_TXN_STATE


def test_the_broken_coordinator_lets_a_zombie_commit():
    """bump_epoch_on_init=False (the spec's broken variant): the replaced
    instance still holds the current epoch and commits."""
    m = TransactionStateMachine(7, bump_epoch_on_init=False)
    _, zombie_epoch = m.init_producer_id()
    _, new_epoch = m.init_producer_id()
    assert zombie_epoch == new_epoch
    committed(m, zombie_epoch)  # no PRODUCER_FENCED anywhere
    assert m.current.state == "CompleteCommit"


@given(
    st.lists(st.sampled_from(["init", "add", "commit", "abort", "timeout", "markers"]), max_size=30)
)
def test_the_epoch_never_goes_back_and_old_epochs_stay_fenced(ops):
    m = TransactionStateMachine(7)
    epoch, seen = -1, -1
    for op in ops:
        try:
            if op == "init":
                epoch = m.init_producer_id()[1]
            elif op == "add":
                m.add_partitions(epoch, ["t-0"])
            elif op in ("commit", "abort"):
                m.end_txn(epoch, commit=op == "commit")
            elif op == "timeout":
                m.timeout_abort()
            else:
                for p in list(m.current.pending_markers):
                    m.marker_written(p)
                m.complete()
        except KafkaError:
            pass
        assert m.current.producer_epoch >= seen
        seen = m.current.producer_epoch
        if seen > 0:
            with pytest.raises(KafkaError) as fenced:
                m.add_partitions(seen - 1, ["t-9"])
            assert fenced.value.code == Errors.PRODUCER_FENCED


@pytest.mark.parametrize("commit", [True, False])
def test_init_producer_id_after_a_completed_transaction_starts_empty_with_the_next_epoch(commit):
    # Kafka's prepareIncrementProducerEpoch: Complete* --InitProducerId--> Empty.
    m = TransactionStateMachine(7)
    m.init_producer_id()
    m.add_partitions(0, ["t-0"])
    m.end_txn(0, commit=commit)
    m.marker_written("t-0")
    m.complete()
    assert m.current.state == ("CompleteCommit" if commit else "CompleteAbort")
    assert m.init_producer_id() == (7, 1)
    assert (m.current.state, m.current.producer_epoch, m.current.partitions) == (
        "Empty",
        1,
        frozenset(),
    )


def test_the_broken_coordinator_keeps_the_epoch_but_still_starts_empty():
    m = TransactionStateMachine(7, bump_epoch_on_init=False)
    m.init_producer_id()
    m.add_partitions(0, ["t-0"])
    m.end_txn(0, commit=True)
    m.marker_written("t-0")
    m.complete()
    assert m.init_producer_id() == (7, 0)
    assert m.current.state == "Empty"
