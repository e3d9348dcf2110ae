"""TransactionCoordinator: every transactional id of the __transaction_state
partitions this broker leads, sans-IO.

Kafka's classes: kafka.coordinator.transaction.TransactionCoordinator
(handleInitProducerId, handleAddPartitionsToTransaction, handleEndTransaction,
abortTimedOutTransactions), TransactionStateManager (appendTransactionToLog,
loadTransactionsForTxnTopicPartition, removeExpiredTransactionalIds) and the
completion half of TransactionMarkerChannelManager. It is two things, as Kafka's
coordinators on the new runtime are:

    TransactionCoordinatorShard  (transaction_coordinator_shard.py) the ids and the
                                 rules: handlers return the record to write and the
                                 response; `replay` applies a committed record
    CoordinatorRuntimeCore       (kafkalab.coordinator.runtime, shared with the group
                                 coordinator) the partitions served and loaded, the
                                 writes on their way, the deadlines

and this class runs the one on the other and says what its caller must do, as
effects: Respond, AppendRecords (kafkalab.coordinator.group.results) and
SendTxnMarkers (results.py).

A transaction, as the coordinator sees it:

    InitProducerId      the producer id and a new epoch (fencing older instances);
                        an open transaction is aborted first (CONCURRENT_TRANSACTIONS:
                        the client asks again)
    AddPartitionsToTxn  Ongoing, with these partitions (AddOffsetsToTxn: the group's
                        __consumer_offsets partition)
    EndTxn              PrepareCommit / PrepareAbort: the commit point. The answer goes
                        out once that is written; then SendTxnMarkers, and when every
                        partition has its marker, CompleteCommit / CompleteAbort

A transition is acknowledged only after its __transaction_state record is
committed (AppendRecords, acks=all, then `append_completed`, which replays the
record into the shard); meanwhile the id is busy and other requests for it get
CONCURRENT_TRANSACTIONS. A failed write changes nothing. After a failover the
new coordinator loads the partition (`complete_load`: every record replayed, the
same `replay`) and sends the markers of every Prepare* transaction again.

Timers (`next_deadline_ms` / `tick`): every
transaction.abort.timed.out.transaction.cleanup.interval.ms, open transactions
older than their timeout are aborted with a bumped epoch (fencing the producer);
every transaction.remove.expired.transaction.cleanup.interval.ms, ids idle for
transactional.id.expiration.ms are forgotten (a tombstone).

Producer ids come from `producer_ids()` (the broker passes its ProducerIdManager's
`generate`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from kafkalab.coordinator.group.results import AppendRecords, Effects, Respond, TxnMarker
from kafkalab.coordinator.runtime import CoordinatorRuntimeCore, PendingAppend, request_handle
from kafkalab.coordinator.transaction.results import (
    AddPartitionsToTxnResult,
    DescribedTransaction,
    InitProducerIdResult,
    ListTransactionsResult,
    SendTxnMarkers,
    TxnResult,
)
from kafkalab.coordinator.transaction.transaction_config import TransactionConfig
from kafkalab.coordinator.transaction.transaction_coordinator_shard import (
    MAX_EPOCH,
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionRecord,
    TransactionResult,
    TxnAppendKind,
    TxnResponse,
)
from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.errors import Errors

__all__ = ["MAX_EPOCH", "TransactionCoordinator", "TransactionMetadata", "store_error"]

TopicPartition = tuple[str, int]
COMPLETE_RETRY_MS = 100  # a failed Complete* write is tried again this much later
#: a state topic's record as the broker loads it (kafkalab.server.coordinator_runtime):
#: plain (key, value) is all __transaction_state holds; a transactional record
#: (key, value, producer id) or a TxnMarker never occur here
LoadedRecord = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int] | TxnMarker
)


def store_error(error: Errors) -> Errors:
    """What a failed __transaction_state write becomes for the client (Kafka:
    TransactionStateManager.appendTransactionToLog)."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE):
        return Errors.UNKNOWN_SERVER_ERROR
    return error


def with_error(response: TxnResponse | None, error: Errors) -> TxnResponse | None:
    """The answer a request whose write failed gets: its own kind, with `error`."""
    if isinstance(response, InitProducerIdResult):
        return InitProducerIdResult(error)
    if isinstance(response, AddPartitionsToTxnResult):
        return AddPartitionsToTxnResult(dict.fromkeys(response.errors, error))
    return None if response is None else TxnResult(error)


@dataclass(frozen=True)
class TxnAppend:
    """What waits for a __transaction_state write: the id's metadata (the write is
    void if the id was unloaded or replaced meanwhile), the record, the response to
    give once it is committed, and whether the id is new (dropped if it fails)."""

    meta: TransactionMetadata
    record: TransactionRecord
    response: TxnResponse | None
    new_id: bool


class TxnTimerKind(enum.Enum):
    ABORT_TIMED_OUT = "abort_timed_out"  # ...cleanup.interval.ms: abort open txns past timeout
    REMOVE_EXPIRED = "remove_expired"  # ...cleanup.interval.ms: forget idle ids
    COMPLETE = "complete"  # a failed Complete* write, tried again


@dataclass(frozen=True)
class TxnTimerKey:
    kind: TxnTimerKind
    transactional_id: str = ""


TxnCore = CoordinatorRuntimeCore[TxnAppendKind, TxnAppend, TxnTimerKey]


class TransactionCoordinator:
    def __init__(
        self,
        config: TransactionConfig | None = None,
        *,
        partitions: Iterable[int] | None = None,
        producer_ids: Callable[[], int] | None = None,
    ) -> None:
        self.config = config or TransactionConfig()
        n = self.config.transaction_state_log_num_partitions
        # the partitions served, the writes on their way, the deadlines
        self.runtime: TxnCore = TxnCore(range(n) if partitions is None else partitions)
        self.shard = TransactionCoordinatorShard(self.config, producer_ids)

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        """Every transactional id served, by id (the shard's)."""
        return self.shard.transactions

    @property
    def partitions(self) -> TxnCore:
        """Which __transaction_state partitions are served (owned, loading, status)."""
        return self.runtime

    def partition_for(self, transactional_id: str) -> int:
        return self.shard.partition_for(transactional_id)

    def _status(self, transactional_id: str | None) -> Errors | None:
        if not transactional_id:
            return Errors.INVALID_REQUEST
        return self.runtime.status(self.partition_for(transactional_id))

    # ======================================================================================
    # time
    # ======================================================================================

    def next_deadline_ms(self) -> int | None:
        return self.runtime.next_deadline_ms()

    def tick(self, now_ms: int) -> Effects:
        effects = Effects()
        self._fire_due(now_ms, effects)
        return effects

    def _fire_due(self, now_ms: int, effects: Effects) -> None:
        if not self.runtime.active:
            return
        for kind, interval in self._periodic():
            self.runtime.schedule_if_absent(TxnTimerKey(kind), now_ms + interval)
        self.runtime.fire_due(now_ms, lambda key, _: self._fire(key, now_ms, effects))

    def _periodic(self) -> tuple[tuple[TxnTimerKind, int], ...]:
        cfg = self.config
        return (
            (
                TxnTimerKind.ABORT_TIMED_OUT,
                cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            ),
            (
                TxnTimerKind.REMOVE_EXPIRED,
                cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
            ),
        )

    def _fire(self, key: TxnTimerKey, now_ms: int, effects: Effects) -> None:
        if key.kind is TxnTimerKind.COMPLETE:
            meta = self.transactions.get(key.transactional_id)
            if meta is not None:
                self._maybe_complete(meta, now_ms, effects)
            return
        if key.kind is TxnTimerKind.ABORT_TIMED_OUT:
            self.abort_timed_out_transactions(now_ms, effects)
        else:
            self.remove_expired_transactional_ids(now_ms, effects)
        self.runtime.schedule(key, now_ms + dict(self._periodic())[key.kind])

    def _begin(self, now_ms: int, request: Hashable | None) -> Effects:
        effects = Effects(request_handle(request))
        self._fire_due(now_ms, effects)
        return effects

    # ======================================================================================
    # ownership of __transaction_state partitions
    # ======================================================================================

    def on_become_leader(self, partition: int, epoch: int = 0) -> Effects:
        """This broker now leads __transaction_state-<partition>: load it (Kafka:
        onElection). Its ids answer COORDINATOR_LOAD_IN_PROGRESS until `complete_load`.
        The leader epoch is the coordinator epoch the markers carry."""
        effects = Effects()
        if self.runtime.begin_load(partition, epoch):
            self._unload_partition(partition, effects)
        return effects

    def complete_load(
        self, partition: int, records: Iterable[LoadedRecord], now_ms: int
    ) -> Effects:
        """Replay the partition's records, oldest first, through the shard's `replay`
        (the latest per id wins, a tombstone forgets it), then finish what the old
        coordinator left: every Prepare* transaction gets its markers sent again
        (Kafka: loadTransactionsForTxnTopicPartition, then addTxnMarkersToSend). A
        load of a partition resigned meanwhile is thrown away."""
        effects = Effects()
        if not self.runtime.complete_load(partition):
            return effects
        for loaded in records:
            if isinstance(loaded, TxnMarker) or loaded[0] is None:
                continue  # only the coordinator writes here: no transactions, no keyless
            record = TransactionRecord.read(loaded[0], loaded[1])
            if self.partition_for(record.transactional_id) == partition:
                self.shard.replay(record)
        self.shard.on_loaded(partition, now_ms)
        for meta in self.shard.prepared(partition):
            self._send_markers(meta, effects)
        self._fire_due(now_ms, effects)
        return effects

    def on_resign(self, partition: int, epoch: int | None = None) -> Effects:
        """No longer the leader: forget the partition's ids (NOT_COORDINATOR to any
        request still waiting for a write)."""
        effects = Effects()
        if self.runtime.resign(partition, epoch):
            self._unload_partition(partition, effects)
        return effects

    def _unload_partition(self, partition: int | None, effects: Effects) -> None:
        for tid in self.shard.ids_of(partition):
            del self.transactions[tid]
        for pending in self.runtime.drop_appends(partition):
            self._answer_error(pending, Errors.NOT_COORDINATOR, effects)

    def shutdown(self) -> Effects:
        effects = Effects()
        self._unload_partition(None, effects)
        self.runtime.close()
        return effects

    # ======================================================================================
    # writing transitions
    # ======================================================================================

    def _run(
        self, result: TransactionResult, request: Hashable | None, now_ms: int, effects: Effects
    ) -> None:
        """Carry out a shard handler's result: answer now, or write its record and
        answer once it is committed (`append_completed`)."""
        if not result.records:
            if result.response is not None and request is not None:
                effects.append(Respond(request, result.response))
            return
        (record,) = result.records
        kind = result.kind
        assert kind is not None, "a record is always written for something"
        tid = record.transactional_id
        placeholder = self.shard.new_metadata(record)
        meta = placeholder or self.transactions[tid]
        partition = self.partition_for(tid)
        payload = TxnAppend(meta, record, result.response, placeholder is not None)
        meta.pending = self.runtime.add_append(kind, partition, request, payload)
        effects.append(
            AppendRecords(
                partition,
                ((record.key_bytes(), record.value_bytes()),),
                now_ms,
                meta.pending,
            )
        )

    def append_completed(
        self, append_id: int, error: Errors | int = Errors.NONE, now_ms: int = 0
    ) -> Effects:
        """The append of AppendRecords(append_id) is committed (NONE) or failed."""
        effects = self._begin(now_ms, None)
        pending = self.runtime.take_append(append_id)
        if pending is None:
            return effects
        error = Errors(error)
        append = pending.payload
        meta = append.meta
        tid = meta.transactional_id
        if self.transactions.get(tid) is not meta:
            self._answer_error(pending, Errors.NOT_COORDINATOR, effects)
            return effects
        meta.pending = None
        if error != Errors.NONE:
            if pending.kind is TxnAppendKind.COMPLETE:
                key = TxnTimerKey(TxnTimerKind.COMPLETE, tid)
                self.runtime.schedule(key, now_ms + COMPLETE_RETRY_MS)
            elif append.new_id:
                del self.transactions[tid]  # never written: the id does not exist
            self._answer_error(pending, store_error(error), effects)
            return effects
        self.shard.replay(append.record)
        if append.response is not None and pending.request is not None:
            effects.append(Respond(pending.request, append.response))
        if pending.kind.sends_markers:
            self._send_markers(meta, effects)
        return effects

    def _answer_error(
        self, pending: PendingAppend[TxnAppendKind, TxnAppend], error: Errors, effects: Effects
    ) -> None:
        response = with_error(pending.payload.response, error)
        if pending.request is not None and response is not None:
            effects.append(Respond(pending.request, response))

    # ======================================================================================
    # markers
    # ======================================================================================

    def _send_markers(self, meta: TransactionMetadata, effects: Effects) -> None:
        s = meta.state
        if not s.pending_markers:
            self._maybe_complete(meta, meta.last_update_ms, effects)
            return
        context = self.runtime.contexts.get(self.partition_for(meta.transactional_id))
        effects.append(
            SendTxnMarkers(
                meta.transactional_id,
                s.producer_id,
                s.producer_epoch,
                max(0, -1 if context is None else context.epoch),
                s.state == TxnState.PREPARE_COMMIT,
                frozenset(s.pending_markers),
            )
        )

    def markers_pending(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> frozenset[TopicPartition]:
        """The partitions still waiting for this transaction's marker (empty once the
        coordinator no longer wants them: completed, unloaded, superseded)."""
        return self.shard.markers_pending(transactional_id, producer_id, producer_epoch)

    def markers_written(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> Effects:
        """WriteTxnMarkers answered for these partitions (each has its marker, or no
        longer exists). When none is left, Complete* is written."""
        effects = self._begin(now_ms, None)
        pending = self.markers_pending(transactional_id, producer_id, producer_epoch)
        meta = self.transactions.get(transactional_id)
        if not pending or meta is None:
            return effects
        self.shard.marker_written(meta, partitions)
        self._maybe_complete(meta, now_ms, effects)
        return effects

    def _maybe_complete(self, meta: TransactionMetadata, now_ms: int, effects: Effects) -> None:
        result = self.shard.complete(meta, now_ms)
        if result is not None:
            self._run(result, None, now_ms, effects)

    # ======================================================================================
    # the requests
    # ======================================================================================

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """InitProducerId with a transactional id. `producer_id`/`producer_epoch`
        (v3+, KIP-360): the producer's current ones, -1 when it has none."""
        effects = self._begin(now_ms, request)
        error = self._status(transactional_id)
        if error is not None:
            effects.append(Respond(effects.request, InitProducerIdResult(error)))
            return effects
        result = self.shard.init_producer_id(
            transactional_id, transaction_timeout_ms, producer_id, producer_epoch, now_ms
        )
        self._run(result, effects.request, now_ms, effects)
        return effects

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
        request: Hashable | None = None,
        transaction_version: int = 1,
    ) -> Effects:
        """AddPartitionsToTxn; `transaction_version` 2: a partition leader adds the
        partitions of a Produce v12+ (KIP-890 part 2)."""
        effects = self._begin(now_ms, request)
        wanted = frozenset(partitions)
        error = self._status(transactional_id)
        if error is not None:
            result = AddPartitionsToTxnResult(dict.fromkeys(wanted, error))
            effects.append(Respond(effects.request, result))
            return effects
        handled = self.shard.add_partitions_to_txn(
            transactional_id, producer_id, producer_epoch, wanted, now_ms, transaction_version
        )
        self._run(handled, effects.request, now_ms, effects)
        return effects

    def verify_partitions_in_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> AddPartitionsToTxnResult:
        """AddPartitionsToTxn's verify-only form (a partition leader asks before a
        producer's first transactional write to it): answered at once from the
        state, nothing written (the shard's `verify_partitions_in_txn`)."""
        wanted = frozenset(partitions)
        error = self._status(transactional_id)
        if error is not None:
            return AddPartitionsToTxnResult(dict.fromkeys(wanted, error))
        return self.shard.verify_partitions_in_txn(
            transactional_id, producer_id, producer_epoch, wanted
        )

    def add_offsets_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the
        transaction (its TxnOffsetCommit goes to the group coordinator)."""
        effects = self._begin(now_ms, request)
        error = self._status(transactional_id)
        if error is not None:
            effects.append(Respond(effects.request, TxnResult(error)))
            return effects
        result = self.shard.add_offsets_to_txn(
            transactional_id, producer_id, producer_epoch, group_id, now_ms
        )
        self._run(result, effects.request, now_ms, effects)
        return effects

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        now_ms: int,
        request: Hashable | None = None,
        transaction_version: int = 1,
    ) -> Effects:
        """EndTxn; `transaction_version` 2 (EndTxn v5+) bumps the epoch and answers
        the producer id and epoch of the next transaction."""
        effects = self._begin(now_ms, request)
        error = self._status(transactional_id)
        if error is not None:
            effects.append(Respond(effects.request, TxnResult(error)))
            return effects
        result = self.shard.end_txn(
            transactional_id, producer_id, producer_epoch, committed, now_ms, transaction_version
        )
        self._run(result, effects.request, now_ms, effects)
        return effects

    # ======================================================================================
    # timeouts and expiry
    # ======================================================================================

    def abort_timed_out_transactions(self, now_ms: int, effects: Effects | None = None) -> Effects:
        """Every Ongoing transaction older than its transaction.timeout.ms is aborted,
        with a bumped epoch so that its producer is fenced (Kafka:
        abortTimedOutTransactions). Runs by itself on its interval."""
        effects = Effects() if effects is None else effects
        for result in self.shard.timed_out(now_ms, self.runtime.owned):
            self._run(result, None, now_ms, effects)
        return effects

    def remove_expired_transactional_ids(
        self, now_ms: int, effects: Effects | None = None
    ) -> Effects:
        """Ids with no transaction (Empty / Complete*) for transactional.id.expiration.ms
        are forgotten: a tombstone, and the id is gone once it is written (Kafka:
        removeExpiredTransactionalIds)."""
        effects = Effects() if effects is None else effects
        for result in self.shard.expired(now_ms, self.runtime.owned):
            self._run(result, None, now_ms, effects)
        return effects

    # ======================================================================================
    # DescribeTransactions, ListTransactions
    # ======================================================================================

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[DescribedTransaction]:
        out = []
        for tid in transactional_ids:
            error = self._status(tid)
            out.append(
                self.shard.describe(tid) if error is None else DescribedTransaction(error, tid)
            )
        return out

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
    ) -> ListTransactionsResult:
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading else Errors.NONE
        return self.shard.list_transactions(state_filters, producer_id_filters, error)
