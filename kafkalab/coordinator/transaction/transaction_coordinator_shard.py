"""TransactionCoordinatorShard: the transactional ids of __transaction_state and
the rules of their requests, as a shard (sans-IO, no pending writes, no timers).

Kafka's classes: kafka.coordinator.transaction.TransactionCoordinator (the
handle* methods decide), TransactionStateManager (the cache of
TransactionMetadata, loadTransactionsForTxnTopicPartition) and the shape of
org.apache.kafka.coordinator.common.runtime.CoordinatorShard, which the group
coordinator follows: a request handler reads the state and returns a
TransactionResult, the record to write and the response to give once it is
committed; it changes nothing a record carries. One method, `replay(record)`,
applies a record: the TransactionCoordinator calls it when a handler's record
is committed, and for every record of a partition it loads, so the state after
live handling and after a reload cannot differ
(tests/unit/test_transaction_coordinator_shard.py checks it with hypothesis).

Hard state, what __transaction_state holds per id: producer id and epoch,
state, partitions, timeout, start and last update times. Soft state, in memory
only (Kafka's TransactionMetadata keeps the same apart): `pending`, the write
on its way for an id (other requests get CONCURRENT_TRANSACTIONS meanwhile, set
and cleared by the TransactionCoordinator around a write), and a prepared
transaction's `pending_markers` (its partitions when written or loaded, then
taken off one by one as markers are written). A new id is put in the cache
before its first record is written, as Kafka's handleInitProducerId does; it is
dropped if that write fails.

    handler                   writes                     kind
    init_producer_id          Empty, next epoch          INIT_PRODUCER_ID
                              PrepareAbort (open txn)    FENCE (answers CONCURRENT_TRANSACTIONS)
    add_partitions_to_txn     Ongoing                    ADD_PARTITIONS
    add_offsets_to_txn        Ongoing (+ the group's     ADD_OFFSETS
                              __consumer_offsets partition)
    end_txn                   PrepareCommit/PrepareAbort END_TXN
                              (v2: epoch + 1; an abort
                              also from Empty/Complete*)
    timed_out                 PrepareAbort, epoch + 1    TIMEOUT_ABORT
    complete                  CompleteCommit/Abort       COMPLETE
    expired                   a tombstone                EXPIRE
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.coordinator_records import partition_for as group_partition
from kafkalab.coordinator.runtime import CoordinatorResult
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.results import (
    AddPartitionsToTxnResult,
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    ListTransactionsResult,
    TxnResult,
)
from kafkalab.coordinator.transaction.transaction_config import TransactionConfig
from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.coordinator.transaction.transaction_state_machine import (
    MAX_EPOCH,
    TransactionState,
    TransactionStateMachine,
)
from kafkalab.errors import Errors, KafkaError

TopicPartition = tuple[str, int]
TxnResponse = InitProducerIdResult | AddPartitionsToTxnResult | TxnResult


class TxnAppendKind(enum.Enum):
    """What a __transaction_state write is for: what follows once it is committed
    (markers for a Prepare*), or once it failed (a Complete* is tried again)."""

    INIT_PRODUCER_ID = "init_producer_id"
    FENCE = "fence"  # InitProducerId aborting the open transaction first
    ADD_PARTITIONS = "add_partitions"
    ADD_OFFSETS = "add_offsets"
    END_TXN = "end_txn"
    TIMEOUT_ABORT = "timeout_abort"
    COMPLETE = "complete"
    EXPIRE = "expire"

    @property
    def sends_markers(self) -> bool:
        return self in (TxnAppendKind.FENCE, TxnAppendKind.END_TXN, TxnAppendKind.TIMEOUT_ABORT)


@dataclass(frozen=True)
class TransactionRecord:
    """One __transaction_state record, decoded: the id and its value (None: a tombstone)."""

    transactional_id: str
    value: tlog.TransactionLogValue | None

    def key_bytes(self) -> bytes:
        return tlog.transaction_log_key(self.transactional_id)

    def value_bytes(self) -> bytes | None:
        return None if self.value is None else tlog.transaction_log_value(self.value)

    @classmethod
    def read(cls, key: bytes, value: bytes | None) -> TransactionRecord:
        return cls(tlog.read_key(key), None if value is None else tlog.read_value(value))


@dataclass(frozen=True)
class TransactionResult(CoordinatorResult[TransactionRecord, TxnResponse]):
    """A handler's answer: with a record, `kind` says what it is for and `response`
    is given once it is committed; without one, `response` is given at once."""

    kind: TxnAppendKind | None = None


@dataclass
class TransactionMetadata:
    """One transactional id: its state-machine state and what the log record adds."""

    transactional_id: str
    state: TransactionState
    timeout_ms: int
    start_ms: int = -1
    last_update_ms: int = -1
    pending: int | None = None  # append id of the transition being written (soft state)

    def record(self) -> tlog.TransactionLogValue:
        s = self.state
        return tlog.TransactionLogValue(
            s.producer_id,
            s.producer_epoch,
            self.timeout_ms,
            s.state,
            frozenset() if s.state == TxnState.EMPTY else frozenset(s.partitions),
            self.last_update_ms,
            self.start_ms,
            s.previous_producer_id,
            s.next_producer_id,
            s.client_transaction_version,
        )


class TransactionCoordinatorShard:
    def __init__(
        self, config: TransactionConfig, producer_ids: Callable[[], int] | None = None
    ) -> None:
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}
        counter = itertools.count(1000)
        self.producer_ids = producer_ids or (lambda: next(counter))

    def partition_for(self, transactional_id: str) -> int:
        return tlog.partition_for(
            transactional_id, self.config.transaction_state_log_num_partitions
        )

    def _server_version(self) -> int:
        """The client transaction version a record of the coordinator's own carries:
        0 below version 2 (Kafka's TV_0/TV_1 write 0 or 1; kafkalab keeps 0, the
        default, so those records stay version 0 bytes), else the level."""
        version = self.config.transaction_version
        return version if version >= 2 else 0

    def _machine(self, state: TransactionState) -> TransactionStateMachine:
        return TransactionStateMachine.load(state, self.config.bump_epoch_on_init)

    def _write(
        self,
        kind: TxnAppendKind,
        meta: TransactionMetadata,
        state: TransactionState,
        now_ms: int,
        response: TxnResponse | None = None,
        *,
        timeout_ms: int | None = None,
        start_ms: int | None = None,
    ) -> TransactionResult:
        after = TransactionMetadata(
            meta.transactional_id,
            state,
            meta.timeout_ms if timeout_ms is None else timeout_ms,
            meta.start_ms if start_ms is None else start_ms,
            now_ms,
        )
        record = TransactionRecord(meta.transactional_id, after.record())
        return TransactionResult((record,), response, kind)

    # -- replay: the one path from a record to the state ------------------------------------

    def replay(self, record: TransactionRecord) -> None:
        """Apply a committed __transaction_state record: the id's state is the
        record's (its metadata object kept, so what waits on it stays valid); a
        tombstone forgets the id. A Prepare* id has every partition's marker to write."""
        tid, v = record.transactional_id, record.value
        if v is None:
            self.transactions.pop(tid, None)
            return
        partitions = frozenset(v.partitions)
        state = TransactionState(
            v.producer_id,
            v.producer_epoch,
            v.state,
            partitions,
            partitions if v.state.is_prepared else frozenset(),
            v.previous_producer_id,
            v.next_producer_id,
            v.client_transaction_version,
        )
        meta = self.transactions.get(tid)
        if meta is None:
            meta = self.transactions[tid] = TransactionMetadata(tid, state, 0)
        meta.state = state
        meta.timeout_ms = v.transaction_timeout_ms
        meta.start_ms = v.start_timestamp_ms
        meta.last_update_ms = v.last_update_timestamp_ms

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """__transaction_state holds no transactional records: nothing to end."""

    def on_loaded(self, partition: int, now_ms: int) -> None:
        """Nothing is armed per id: the TransactionCoordinator sends the markers of
        the partition's prepared transactions (`prepared(partition)`)."""

    def on_unloaded(self, partition: int) -> None:
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[tid]

    def ids_of(self, partition: int | None) -> list[str]:
        return [t for t in self.transactions if partition in (None, self.partition_for(t))]

    def prepared(self, partition: int) -> list[TransactionMetadata]:
        """The partition's transactions whose markers are still to be written, by id."""
        return [
            self.transactions[tid]
            for tid in sorted(self.ids_of(partition))
            if self.transactions[tid].state.state.is_prepared
        ]

    # -- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
    ) -> TransactionResult:
        """InitProducerId with a transactional id. `producer_id`/`producer_epoch`
        (v3+, KIP-360): the producer's current ones, -1 when it has none."""

        def answer(error: Errors) -> TransactionResult:
            return TransactionResult(response=InitProducerIdResult(error))

        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return answer(Errors.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            machine = TransactionStateMachine(self.producer_ids(), self.config.bump_epoch_on_init)
            machine.init_producer_id()
            meta = TransactionMetadata(transactional_id, machine.current, transaction_timeout_ms)
            return self._init_written(meta, machine, transaction_timeout_ms, now_ms)
        if meta.pending is not None:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        s = meta.state
        if producer_id != -1:
            if producer_id != s.producer_id:
                return answer(Errors.INVALID_PRODUCER_EPOCH)
            if producer_epoch != s.producer_epoch:
                return answer(Errors.PRODUCER_FENCED)
        if s.state == TxnState.ONGOING:
            machine = self._machine(s)
            try:
                machine.init_producer_id()  # moves to PrepareAbort and says so
            except KafkaError:
                pass
            machine.current = replace(
                machine.current, client_transaction_version=self._server_version()
            )
            busy = InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
            return self._write(TxnAppendKind.FENCE, meta, machine.current, now_ms, busy)
        if s.state.is_prepared:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        if s.producer_epoch >= MAX_EPOCH - 1:
            # Kafka's prepareProducerIdRotation: a new producer id, from epoch 0
            machine = TransactionStateMachine(self.producer_ids(), self.config.bump_epoch_on_init)
            machine.current = replace(
                machine.current,
                previous_producer_id=s.producer_id,
                client_transaction_version=s.client_transaction_version,
            )
        else:
            machine = self._machine(s)
        machine.init_producer_id()
        return self._init_written(meta, machine, transaction_timeout_ms, now_ms)

    def _init_written(self, meta, machine, timeout_ms: int, now_ms: int) -> TransactionResult:
        s = machine.current
        ok = InitProducerIdResult(Errors.NONE, s.producer_id, s.producer_epoch)
        return self._write(
            TxnAppendKind.INIT_PRODUCER_ID, meta, s, now_ms, ok, timeout_ms=timeout_ms, start_ms=-1
        )

    def new_metadata(self, record: TransactionRecord) -> TransactionMetadata | None:
        """A new id's first record is on its way: the id is put in the cache (soft
        state: its state is the one being written, not yet its times), so that other
        requests for it wait (Kafka: putTransactionStateIfNotExists). None if it exists."""
        tid, v = record.transactional_id, record.value
        if tid in self.transactions or v is None:
            return None
        state = TransactionState(v.producer_id, v.producer_epoch, v.state)
        meta = self.transactions[tid] = TransactionMetadata(tid, state, v.transaction_timeout_ms)
        return meta

    # -- AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------------

    def _validate(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[Errors | None, TransactionMetadata | None]:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, None
        if meta.state.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED, None
        if meta.pending is not None or meta.state.state.is_prepared:
            return Errors.CONCURRENT_TRANSACTIONS, None
        return None, meta

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        transaction_version: int = 1,
    ) -> TransactionResult:
        """AddPartitionsToTxn, from a client (v3 and below) or, transactions v2
        (`transaction_version` 2), from a partition leader adding the partitions of
        a Produce v12+ (Kafka: handleAddPartitionsToTransaction with TV_2)."""
        wanted = frozenset(partitions)
        error, meta = self._validate(transactional_id, producer_id, producer_epoch)
        ok = AddPartitionsToTxnResult(dict.fromkeys(wanted, Errors.NONE))
        if meta is None:
            return TransactionResult(
                response=AddPartitionsToTxnResult(dict.fromkeys(wanted, error))
            )
        return self._add(
            meta, wanted, TxnAppendKind.ADD_PARTITIONS, ok, now_ms, transaction_version
        )

    def verify_partitions_in_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> AddPartitionsToTxnResult:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1; Kafka:
        TransactionCoordinator.handleVerifyPartitionsInTransaction): a partition
        leader asks, before it appends this producer's first transactional batch,
        whether the partition is in the producer's ongoing transaction. Writes
        nothing. Per partition NONE if it is; INVALID_TXN_STATE if not (no
        transaction, a completed or aborted one, or one without this partition):
        the leader then refuses the write, so a late batch cannot open a
        transaction the coordinator does not know. (Kafka 4's coordinator says
        TRANSACTION_ABORTABLE there, which the leader turns into INVALID_TXN_STATE
        for every Produce version served here; Kafka 3.6 said INVALID_TXN_STATE.)"""
        wanted = frozenset(partitions)
        meta = self.transactions.get(transactional_id)
        error = None
        if meta is None or meta.state.producer_id != producer_id:
            error = Errors.INVALID_PRODUCER_ID_MAPPING
        elif meta.state.producer_epoch != producer_epoch:
            error = Errors.PRODUCER_FENCED
        elif meta.state.state.is_prepared:
            error = Errors.CONCURRENT_TRANSACTIONS  # ending: ask again (the client retries)
        if error is not None or meta is None:
            return AddPartitionsToTxnResult(dict.fromkeys(wanted, error))
        # A transition being written (meta.pending) is not waited for, as in Kafka: the
        # partitions are the committed state's, and the leader's guard is the final check.
        s = meta.state
        ongoing = s.partitions if s.state == TxnState.ONGOING else frozenset()
        return AddPartitionsToTxnResult(
            {tp: Errors.NONE if tp in ongoing else Errors.INVALID_TXN_STATE for tp in wanted}
        )

    def add_offsets_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
    ) -> TransactionResult:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the
        transaction (its TxnOffsetCommit goes to the group coordinator)."""
        error, meta = self._validate(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return TransactionResult(response=TxnResult(error))
        n = self.config.offsets_topic_num_partitions
        tp = (OFFSETS_TOPIC, group_partition(group_id, n))
        ok = TxnResult(Errors.NONE)
        return self._add(meta, frozenset([tp]), TxnAppendKind.ADD_OFFSETS, ok, now_ms)

    def _add(
        self, meta, wanted, kind, ok: TxnResponse, now_ms: int, transaction_version: int = 1
    ) -> TransactionResult:
        s = meta.state
        if s.state == TxnState.ONGOING and wanted <= s.partitions:
            # nothing new to write (Kafka answers at once too)
            return TransactionResult(response=ok)
        machine = self._machine(s)
        machine.add_partitions(s.producer_epoch, wanted, transaction_version)
        start = meta.start_ms if s.state == TxnState.ONGOING else now_ms
        return self._write(kind, meta, machine.current, now_ms, ok, start_ms=start)

    # -- EndTxn ------------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
        transaction_version: int = 1,
    ) -> TransactionResult:
        """EndTxn. `transaction_version` 2 (EndTxn v5+): `end_txn_v2`."""
        if transaction_version >= 2:
            return self.end_txn_v2(transactional_id, producer_id, producer_epoch, committed, now_ms)

        def answer(error: Errors) -> TransactionResult:
            return TransactionResult(response=TxnResult(error))

        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state.producer_id != producer_id:
            return answer(Errors.INVALID_PRODUCER_ID_MAPPING)
        s = meta.state
        if s.producer_epoch != producer_epoch:
            return answer(Errors.PRODUCER_FENCED)
        if meta.pending is not None:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        same_prepare = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        same_complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        if s.state == same_prepare:
            return answer(Errors.CONCURRENT_TRANSACTIONS)  # a retry; markers still going
        if s.state == same_complete:
            return answer(Errors.NONE)  # a retry of an EndTxn that is done
        if s.state != TxnState.ONGOING:
            return answer(Errors.INVALID_TXN_STATE)
        machine = self._machine(s)
        machine.end_txn(producer_epoch, committed)
        ok = TxnResult(Errors.NONE)
        return self._write(TxnAppendKind.END_TXN, meta, machine.current, now_ms, ok)

    def end_txn_v2(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> TransactionResult:
        """EndTxn of transactions v2 (Kafka: TransactionCoordinator.endTransaction
        with TV_2). Every EndTxn bumps the epoch, so the request's epoch says what
        it is: the current epoch is a new EndTxn, the epoch before it a retry of
        the one that bumped it (answered NONE, or CONCURRENT_TRANSACTIONS while
        its markers are written), anything else is fenced. The answer carries the
        producer id and epoch the next transaction uses: epoch + 1, or, when that
        reached Short.MAX_VALUE, a new producer id with epoch 0.

            state            Abort: retry / current      Commit: retry / current
            Ongoing          -      / PrepareAbort       -      / PrepareCommit
            Empty            fenced / PrepareAbort       fenced / INVALID_TXN_STATE
            CompleteAbort    NONE   / PrepareAbort       INVALID_TXN_STATE
            CompleteCommit   INVALID_TXN_STATE / Prep.A. NONE   / INVALID_TXN_STATE
        """

        def answer(error: Errors, pid: int = -1, epoch: int = -1) -> TransactionResult:
            return TransactionResult(response=TxnResult(error, pid, epoch))

        meta = self.transactions.get(transactional_id)
        if meta is None:
            return answer(Errors.INVALID_PRODUCER_ID_MAPPING)
        s = meta.state
        retry_on_overflow = (
            s.previous_producer_id == producer_id
            and producer_epoch == MAX_EPOCH - 1
            and s.producer_epoch == 0
        )
        retry_on_bump = s.producer_id == producer_id and s.producer_epoch == producer_epoch + 1
        if s.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = producer_epoch == s.producer_epoch
        elif s.state.is_prepared:
            valid = retry_on_bump
        else:
            valid = retry_on_bump or retry_on_overflow or producer_epoch == s.producer_epoch
        if s.producer_id != producer_id and not retry_on_overflow:
            return answer(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return answer(Errors.PRODUCER_FENCED)
        if meta.pending is not None:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        retry = retry_on_bump or retry_on_overflow
        prepare = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
        complete = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        if s.state.is_prepared:
            error = Errors.CONCURRENT_TRANSACTIONS if s.state == prepare else None
            return answer(error or Errors.INVALID_TXN_STATE)
        if s.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and retry:
            if s.state == complete:
                return answer(Errors.NONE, s.producer_id, s.producer_epoch)
            return answer(Errors.INVALID_TXN_STATE)
        if s.state != TxnState.ONGOING and committed:
            return answer(Errors.INVALID_TXN_STATE)  # nothing to commit
        machine = self._machine(s)
        machine.end_txn(producer_epoch, committed, 2, self.producer_ids)
        after = machine.current
        start = now_ms if s.state != TxnState.ONGOING else None  # Kafka: noPartitionAdded
        if after.next_producer_id >= 0:
            ok = TxnResult(Errors.NONE, after.next_producer_id, 0)
        else:
            ok = TxnResult(Errors.NONE, after.producer_id, after.producer_epoch)
        return self._write(TxnAppendKind.END_TXN, meta, after, now_ms, ok, start_ms=start)

    # -- markers, completion, timeouts, expiry ----------------------------------------------------

    def markers_pending(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> frozenset[TopicPartition]:
        """The partitions still waiting for this transaction's marker (empty once the
        coordinator no longer wants them: completed, unloaded, superseded)."""
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return frozenset()
        s = meta.state
        if (s.producer_id, s.producer_epoch) != (producer_id, producer_epoch):
            return frozenset()
        if not s.state.is_prepared:
            return frozenset()
        return frozenset(s.pending_markers)

    def marker_written(self, meta: TransactionMetadata, partitions: Iterable[TopicPartition]):
        """These partitions have their marker (soft state: not written to the log)."""
        machine = self._machine(meta.state)
        for tp in set(partitions) & meta.state.pending_markers:
            machine.marker_written(tp)
        meta.state = machine.current

    def complete(self, meta: TransactionMetadata, now_ms: int) -> TransactionResult | None:
        """Every marker is written and nothing else is on its way: Complete*."""
        s = meta.state
        if meta.pending is not None or not s.state.is_prepared or s.pending_markers:
            return None
        machine = self._machine(s)
        machine.complete()
        return self._write(TxnAppendKind.COMPLETE, meta, machine.current, now_ms)

    def _idle(self, owned: set[int]) -> Iterator[tuple[str, TransactionMetadata]]:
        for tid, meta in list(self.transactions.items()):
            if meta.pending is None and self.partition_for(tid) in owned:
                yield tid, meta

    def timed_out(self, now_ms: int, owned: set[int]) -> list[TransactionResult]:
        """Every Ongoing transaction older than its transaction.timeout.ms is aborted,
        with a bumped epoch so that its producer is fenced (Kafka:
        abortTimedOutTransactions)."""
        out = []
        for _, meta in self._idle(owned):
            if meta.state.state != TxnState.ONGOING or meta.start_ms + meta.timeout_ms > now_ms:
                continue
            machine = self._machine(meta.state)
            machine.timeout_abort()
            # not from a client: the cluster's version (Kafka: transactionVersionLevel)
            machine.current = replace(
                machine.current, client_transaction_version=self._server_version()
            )
            out.append(self._write(TxnAppendKind.TIMEOUT_ABORT, meta, machine.current, now_ms))
        return out

    def expired(self, now_ms: int, owned: set[int]) -> list[TransactionResult]:
        """Ids with no transaction (Empty / Complete*) for transactional.id.expiration.ms:
        a tombstone each (Kafka: removeExpiredTransactionalIds)."""
        expiry = self.config.transactional_id_expiration_ms
        return [
            TransactionResult((TransactionRecord(tid, None),), None, TxnAppendKind.EXPIRE)
            for tid, meta in self._idle(owned)
            if meta.state.state.expiration_allowed and meta.last_update_ms + expiry <= now_ms
        ]

    # -- DescribeTransactions, ListTransactions -----------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return DescribedTransaction(Errors.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        s = meta.state
        # while markers are written, only the partitions still without one (Kafka)
        return DescribedTransaction(
            Errors.NONE,
            transactional_id,
            s.state,
            meta.timeout_ms,
            meta.start_ms,
            s.producer_id,
            s.producer_epoch,
            frozenset(s.pending_markers if s.state.is_prepared else s.partitions),
        )

    def list_transactions(
        self, state_filters: Iterable[str], producer_id_filters: Iterable[int], error: Errors
    ) -> ListTransactionsResult:
        states = set(state_filters)
        unknown = tuple(sorted(states - set(TxnState)))
        pids = set(producer_id_filters)
        listed = tuple(
            ListedTransaction(tid, m.state.producer_id, m.state.state)
            for tid, m in sorted(self.transactions.items())
            if (not states or m.state.state in states) and (not pids or m.state.producer_id in pids)
        )
        return ListTransactionsResult(error, unknown, listed)
