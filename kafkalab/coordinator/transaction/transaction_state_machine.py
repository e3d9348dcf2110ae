"""The transaction coordinator's state for one transactional.id (sans-IO).

Kafka's classes: kafka.coordinator.transaction.TransactionMetadata and the
state handling of TransactionCoordinator. No log and no network here: the
caller persists each returned state to __transaction_state and sends the
markers; a coordinator failover is a new object built from the last persisted
state (`TransactionStateMachine.load`).

    Empty ──AddPartitionsToTxn──> Ongoing ──EndTxn(commit)──> PrepareCommit ──markers──> CompleteCommit
                                          ──EndTxn(abort) / timeout / InitProducerId──> PrepareAbort ──> CompleteAbort
    Complete* ──AddPartitionsToTxn──> Ongoing (the next transaction)
    Empty / Complete* ──InitProducerId──> Empty, with the next epoch (Kafka's prepareIncrementProducerEpoch)

Every move of the state goes through `TransactionState.to`, which checks it
against Kafka's table of allowed transitions (transaction_state.py,
VALID_PREVIOUS_STATES); the states are the TxnState enum.

Invariants kept here:
- the producer epoch only grows; InitProducerId bumps it (and so fences every
  older instance of this transactional.id), and so does a timeout abort;
- requests carrying an older epoch are refused with PRODUCER_FENCED;
- while markers are being written (Prepare*), nothing but marker progress and
  retries of the same EndTxn is accepted (CONCURRENT_TRANSACTIONS).

`bump_epoch_on_init=False` is a deliberately broken coordinator, for the spec's
zombie-commit counterexample (specs/transactions); never use it otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafkalab.coordinator.transaction.transaction_state import (
    IllegalTransactionTransition,
    TxnState,
)
from kafkalab.errors import Errors, KafkaError

S = TxnState


@dataclass(frozen=True)
class TransactionState:
    """What __transaction_state holds for a transactional.id (Kafka's
    TxnTransitMetadata, less the timeout and timestamps), and which partitions
    still wait for their marker (not written: known again from `partitions`
    after a failover)."""

    producer_id: int
    producer_epoch: int = -1
    state: TxnState = S.EMPTY
    partitions: frozenset = frozenset()
    pending_markers: frozenset = frozenset()  # partitions still without this txn's marker

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", TxnState(self.state))  # "Ongoing" is Ongoing

    def to(self, target: TxnState, **changes) -> TransactionState:
        """This state moved to `target` (with `changes`), if VALID_PREVIOUS_STATES
        allows it; IllegalTransactionTransition (a coordinator bug) if not."""
        if not self.state.can_transition_to(target):
            raise IllegalTransactionTransition(f"{self.state} -> {target}")
        return replace(self, state=target, **changes)


@dataclass
class TransactionStateMachine:
    producer_id: int
    bump_epoch_on_init: bool = True
    current: TransactionState = field(init=False)

    def __post_init__(self) -> None:
        self.current = TransactionState(self.producer_id)

    @classmethod
    def load(cls, saved: TransactionState, bump_epoch_on_init: bool = True):
        """A new coordinator (failover) from the persisted state."""
        machine = cls(saved.producer_id, bump_epoch_on_init)
        machine.current = saved
        return machine

    def _fence(self, epoch: int, what: str) -> None:
        if epoch < self.current.producer_epoch:
            raise KafkaError(
                Errors.PRODUCER_FENCED,
                f"{what} with epoch {epoch}: a newer producer (epoch "
                f"{self.current.producer_epoch}) owns this transactional.id",
            )

    def init_producer_id(self) -> tuple[int, int]:
        """InitProducerId: (producer id, epoch) for a (re)starting producer. A
        transaction in progress is aborted first, and the caller must retry."""
        s = self.current
        if s.state == S.ONGOING:
            epoch = s.producer_epoch + 1 if self.bump_epoch_on_init else s.producer_epoch
            self.current = s.to(S.PREPARE_ABORT, producer_epoch=epoch, pending_markers=s.partitions)
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, "aborting the open transaction")
        if s.state.is_prepared:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, "markers are being written")
        epoch = (
            s.producer_epoch + 1
            if self.bump_epoch_on_init or s.producer_epoch < 0
            else s.producer_epoch
        )
        # Kafka's prepareIncrementProducerEpoch: the new epoch starts from Empty.
        self.current = s.to(S.EMPTY, producer_epoch=epoch, partitions=frozenset())
        return s.producer_id, epoch

    def add_partitions(self, epoch: int, partitions) -> None:
        """AddPartitionsToTxn."""
        self._fence(epoch, "AddPartitionsToTxn")
        s = self.current
        if s.state.is_prepared:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, "the last transaction is ending")
        base = s.partitions if s.state == S.ONGOING else frozenset()
        self.current = s.to(S.ONGOING, partitions=base | frozenset(partitions))

    def end_txn(self, epoch: int, commit: bool) -> None:
        """EndTxn: Prepare* is the commit point; then markers go to `pending_markers`."""
        self._fence(epoch, "EndTxn")
        s = self.current
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if s.state == S.ONGOING:
            self.current = s.to(target, pending_markers=s.partitions)
            return
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if s.state in (target, done):
            return  # a retry of the same EndTxn
        raise KafkaError(
            Errors.INVALID_TXN_STATE, f"EndTxn({'commit' if commit else 'abort'}) in {s.state}"
        )

    def timeout_abort(self) -> None:
        """transaction.timeout.ms passed: abort, bumping the epoch to fence the producer."""
        s = self.current
        if s.state != S.ONGOING:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"nothing to time out in {s.state}")
        self.current = s.to(
            S.PREPARE_ABORT, producer_epoch=s.producer_epoch + 1, pending_markers=s.partitions
        )

    @property
    def marker(self) -> str:
        """The control record to write: COMMIT or ABORT."""
        return {S.PREPARE_COMMIT: "COMMIT", S.PREPARE_ABORT: "ABORT"}[self.current.state]

    def marker_written(self, partition) -> None:
        """WriteTxnMarkers answered for `partition`."""
        s = self.current
        if partition not in s.pending_markers:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"no marker pending for {partition}")
        self.current = replace(s, pending_markers=s.pending_markers - {partition})

    def complete(self) -> None:
        """Every marker is written: Complete*; the next transaction may begin."""
        s = self.current
        if not s.state.is_prepared or s.pending_markers:
            raise KafkaError(Errors.INVALID_TXN_STATE, f"cannot complete in {s.state}")
        done = S.COMPLETE_COMMIT if s.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.current = s.to(done, partitions=frozenset())
