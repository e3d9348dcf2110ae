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

Transactions v2 (KIP-890 part 2, `transaction_version=2` on a call: the client
spoke EndTxn v5+, or a leader added a partition for its Produce v12+):

    Ongoing ──EndTxn──> Prepare*, epoch + 1 ──markers (with epoch + 1)──> Complete*
    Empty / Complete* ──EndTxn(abort)──> PrepareAbort, epoch + 1, no partitions
    at epoch Short.MAX_VALUE - 1: Prepare* at Short.MAX_VALUE with a next producer
        id, and Complete* moves to that producer id with epoch 0

so every transaction ends with a new epoch: a request of the ended transaction
(a delayed Produce, a retried EndTxn) carries the old one and is fenced.

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

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kafkalab.coordinator.transaction.transaction_state import (
    IllegalTransactionTransition,
    TxnState,
)
from kafkalab.errors import Errors, KafkaError

S = TxnState
MAX_EPOCH = 32767  # Short.MAX_VALUE: from MAX_EPOCH - 1 on, the epoch is exhausted


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
    previous_producer_id: int = -1  # the producer id before this one (rotation, overflow)
    next_producer_id: int = -1  # v2, a Prepare* at the last epoch: the id Complete* takes
    client_transaction_version: int = 0  # the transaction version the client spoke

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

    def add_partitions(self, epoch: int, partitions, transaction_version: int = 1) -> None:
        """AddPartitionsToTxn (or, transactions v2, a leader adding the partition of a
        Produce v12+)."""
        self._fence(epoch, "AddPartitionsToTxn")
        s = self.current
        if s.state.is_prepared:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS, "the last transaction is ending")
        base = s.partitions if s.state == S.ONGOING else frozenset()
        changes: dict = {"partitions": base | frozenset(partitions)}
        if transaction_version >= 2:
            changes["client_transaction_version"] = transaction_version
        self.current = s.to(S.ONGOING, **changes)

    def end_txn(
        self,
        epoch: int,
        commit: bool,
        transaction_version: int = 1,
        next_producer_id: Callable[[], int] | None = None,
    ) -> None:
        """EndTxn: Prepare* is the commit point; then markers go to `pending_markers`.
        Transactions v2 (`transaction_version` 2) bump the epoch here (Kafka:
        prepareAbortOrCommit), and at the last epoch take `next_producer_id()` for
        Complete* to move to; an abort is also taken with no transaction open."""
        self._fence(epoch, "EndTxn")
        s = self.current
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        v2 = transaction_version >= 2
        if s.state == S.ONGOING or (v2 and not commit and s.state.expiration_allowed):
            changes: dict = {"pending_markers": s.partitions}
            if v2:
                changes.update(
                    producer_epoch=s.producer_epoch + 1,
                    client_transaction_version=transaction_version,
                    next_producer_id=-1,
                )
                if s.producer_epoch >= MAX_EPOCH - 1:
                    if next_producer_id is None:
                        raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, "no producer ids to hand out")
                    changes["next_producer_id"] = next_producer_id()
            self.current = s.to(target, **changes)
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
        if s.client_transaction_version >= 2 and s.next_producer_id >= 0:
            # the overflow of transactions v2: the next producer id, from epoch 0
            self.current = s.to(
                done,
                partitions=frozenset(),
                producer_id=s.next_producer_id,
                producer_epoch=0,
                previous_producer_id=s.producer_id,
                next_producer_id=-1,
            )
            return
        self.current = s.to(done, partitions=frozenset(), next_producer_id=-1)
