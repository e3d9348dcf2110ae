"""TxnState: Kafka's transaction states, their ids on disk and the transitions
between them as data (VALID_PREVIOUS_STATES), and the state machine held to them."""

import pytest

from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.transaction_state import (
    VALID_PREVIOUS_STATES,
    IllegalTransactionTransition,
    TxnState,
)
from kafkalab.coordinator.transaction.transaction_state_machine import (
    TransactionState,
    TransactionStateMachine,
)
from kafkalab.viz.transactions import TRANSITIONS

S = TxnState


def test_ids_and_names_are_kafkas():
    # TransactionState.java: EMPTY((byte) 0, "Empty", true) ... PREPARE_EPOCH_FENCE(7, ...)
    assert [(s.id, str(s), s.expiration_allowed) for s in TxnState] == [
        (0, "Empty", True),
        (1, "Ongoing", False),
        (2, "PrepareCommit", False),
        (3, "PrepareAbort", False),
        (4, "CompleteCommit", True),
        (5, "CompleteAbort", True),
        (6, "Dead", False),
        (7, "PrepareEpochFence", False),
    ]
    assert all(TxnState.from_id(s.id) is s for s in TxnState)
    with pytest.raises(ValueError, match="unknown transaction state id 8"):
        TxnState.from_id(8)
    assert tlog.STATE_IDS["Ongoing"] == 1 and tlog.STATE_NAMES[3] is S.PREPARE_ABORT


def test_the_transition_table_is_kafkas():
    ended = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: ended,
        S.ONGOING: ended | {S.ONGOING},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: ended | {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: ended,
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }


def test_every_edge_the_pictures_draw_is_allowed_by_the_table():
    assert all(src.can_transition_to(dst) for src, dst in TRANSITIONS)
    # ... and the ones kafkalab does not make are Kafka's v2 and epoch-fence edges
    allowed = {(src, dst) for dst, srcs in VALID_PREVIOUS_STATES.items() for src in srcs}
    assert allowed - set(TRANSITIONS) == {
        (S.ONGOING, S.PREPARE_EPOCH_FENCE),
        (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
        (S.EMPTY, S.PREPARE_ABORT),
        (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
        (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    }


def test_a_move_outside_the_table_is_a_coordinator_bug():
    done = TransactionState(7, 0, "CompleteCommit")
    assert done.state is S.COMPLETE_COMMIT  # a state's name is the state
    with pytest.raises(IllegalTransactionTransition, match="CompleteCommit -> PrepareCommit"):
        done.to(S.PREPARE_COMMIT)
    assert done.to(S.ONGOING, partitions=frozenset({("t", 0)})).state is S.ONGOING
    # the machine's own refusals stay Kafka errors; only an impossible move is a bug
    m = TransactionStateMachine.load(done)
    with pytest.raises(IllegalTransactionTransition):
        m.current = m.current.to(S.COMPLETE_ABORT)
