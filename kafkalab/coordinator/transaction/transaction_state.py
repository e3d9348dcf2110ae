"""TxnState: the states of a transactional id, with the transitions between them as data.

Kafka's class: org.apache.kafka.coordinator.transaction.TransactionState (its
`id`, written to __transaction_state as `transaction_status`, its name, which
DescribeTransactions and ListTransactions answer, `validPreviousStates` and
`isExpirationAllowed`). kafkalab's `TransactionState` is older and names the
state machine's snapshot of one id (transaction_state_machine.py), so the enum
is called TxnState here, after Kafka's field `txnState`.

    state              id  expiration allowed  entered from (VALID_PREVIOUS_STATES)
    Empty              0   yes                 Empty, CompleteCommit, CompleteAbort
    Ongoing            1   no                  Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      2   no                  Ongoing
    PrepareAbort       3   no                  Ongoing, PrepareEpochFence, Empty*, Complete*
    CompleteCommit     4   yes                 PrepareCommit
    CompleteAbort      5   yes                 PrepareAbort
    Dead               6   no                  Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  7   no                  Ongoing

(* transactions v2 only: an EndTxn(abort) when the client is not sure a
transaction is open.) The table is Kafka's, for both transaction versions (v2's
epoch bump per EndTxn is in TransactionStateMachine.end_txn, not in the table);
kafkalab's coordinator makes a subset of it (kafkalab.viz.transactions.TRANSITIONS
lists the edges of version 1, each with its cause, and TRANSITIONS_V2 the ones
version 2 adds): it never writes PrepareEpochFence
(its fencing InitProducerId goes straight to PrepareAbort with the new epoch), and
Dead is a tombstone, not a record.

A TxnState is a `str` whose value is Kafka's name, so records, answers and
pictures spell states as Kafka does, and `state == "Ongoing"` holds.
"""

from __future__ import annotations

from enum import StrEnum


class TxnState(StrEnum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def id(self) -> int:
        """The byte __transaction_state writes for this state (Kafka's TransactionState.id)."""
        return _IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        """The state a __transaction_state record's `transaction_status` names; a
        ValueError for an id Kafka does not define."""
        for state, known in _IDS.items():
            if known == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @property
    def expiration_allowed(self) -> bool:
        """May an id idle in this state be forgotten (transactional.id.expiration.ms)?"""
        return self in EXPIRATION_ALLOWED

    @property
    def is_prepared(self) -> bool:
        """PrepareCommit / PrepareAbort: decided, its markers are being written."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    def can_transition_to(self, target: TxnState) -> bool:
        return self in VALID_PREVIOUS_STATES[target]


_IDS: dict[TxnState, int] = {state: i for i, state in enumerate(TxnState)}

_ENDED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

#: target -> the states it may be entered from (Kafka: TransactionState.validPreviousStates)
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: _ENDED,
    TxnState.ONGOING: _ENDED | {TxnState.ONGOING},
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: _ENDED | {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: _ENDED,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

#: the states in which no transaction is open (Kafka: isExpirationAllowed)
EXPIRATION_ALLOWED: frozenset[TxnState] = _ENDED


class IllegalTransactionTransition(RuntimeError):
    """A coordinator bug: a transition VALID_PREVIOUS_STATES does not allow."""
