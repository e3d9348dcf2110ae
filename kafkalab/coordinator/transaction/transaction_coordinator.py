"""TransactionCoordinator: every transactional id of the __transaction_state
partitions this broker leads, sans-IO.

Kafka's classes: kafka.coordinator.transaction.TransactionCoordinator
(handleInitProducerId, handleAddPartitionsToTransaction, handleEndTransaction,
abortTimedOutTransactions), TransactionStateManager (appendTransactionToLog,
loadTransactionsForTxnTopicPartition, removeExpiredTransactionalIds) and the
completion half of TransactionMarkerChannelManager. The rules of one id live in
TransactionStateMachine; this class runs many of them and persists each step.

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
committed (AppendRecords, acks=all, then `append_completed`); meanwhile the id
is busy and other requests for it get CONCURRENT_TRANSACTIONS. A failed write
changes nothing. After a failover the new coordinator loads the partition
(`complete_load`) and sends the markers of every Prepare* transaction again.

Timers (`next_deadline_ms` / `tick`): every
transaction.abort.timed.out.transaction.cleanup.interval.ms, open transactions
older than their timeout are aborted with a bumped epoch (fencing the producer);
every transaction.remove.expired.transaction.cleanup.interval.ms, ids idle for
transactional.id.expiration.ms are forgotten (a tombstone).

Producer ids come from `producer_ids()` (the broker passes its ProducerIdManager's
`generate`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkalab.coordinator.coordinator_partitions import CoordinatorPartitions
from kafkalab.coordinator.coordinator_timer import CoordinatorTimer
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.coordinator.group.results import AppendRecords, Effects, Respond
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.results import (
    AddPartitionsToTxnResult,
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    ListTransactionsResult,
    SendTxnMarkers,
    TxnResult,
)
from kafkalab.coordinator.transaction.transaction_config import TransactionConfig
from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.coordinator.transaction.transaction_state_machine import (
    TransactionState,
    TransactionStateMachine,
)
from kafkalab.errors import Errors, KafkaError

TopicPartition = tuple[str, int]
MAX_EPOCH = 32767  # Short.MAX_VALUE: at MAX_EPOCH - 1 a new producer id is handed out
COMPLETE_RETRY_MS = 100  # a failed Complete* write is tried again this much later
_AUTO_REQUESTS = itertools.count(1)


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


@dataclass
class TransactionMetadata:
    """One transactional id: its state-machine state and what the log record adds."""

    transactional_id: str
    state: TransactionState
    timeout_ms: int
    start_ms: int = -1
    last_update_ms: int = -1
    pending: int | None = None  # append id of the transition being written

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
        )


@dataclass
class _PendingAppend:
    meta: TransactionMetadata
    after: TransactionMetadata  # the metadata once the record is committed
    kind: str
    request: Hashable | None
    data: Any = None


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
        self.partitions = CoordinatorPartitions(range(n) if partitions is None else partitions)
        self.transactions: dict[str, TransactionMetadata] = {}
        counter = itertools.count(1000)
        self.producer_ids = producer_ids or (lambda: next(counter))
        self._appends: dict[int, _PendingAppend] = {}
        self._append_ids = itertools.count(1)
        self._timer = CoordinatorTimer()

    # ======================================================================================
    # time
    # ======================================================================================

    def next_deadline_ms(self) -> int | None:
        return self._timer.next_deadline_ms()

    def tick(self, now_ms: int) -> Effects:
        effects = Effects()
        self._fire_due(now_ms, effects)
        return effects

    def _schedule(self, key: tuple, at_ms: int) -> None:
        self._timer.schedule(key, at_ms)

    def _fire_due(self, now_ms: int, effects: Effects) -> None:
        if not self.partitions.active:
            return
        cfg = self.config
        for key, interval in (
            (("abort_timed_out",), cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            (("remove_expired",), cfg.transaction_remove_expired_transaction_cleanup_interval_ms),
        ):
            if key not in self._timer:
                self._schedule(key, now_ms + interval)
        while (due := self._timer.pop_due(now_ms)) is not None:
            _, key = due
            if key[0] == "abort_timed_out":
                self.abort_timed_out_transactions(now_ms, effects)
                self._schedule(
                    key, now_ms + cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
                )
            elif key[0] == "remove_expired":
                self.remove_expired_transactional_ids(now_ms, effects)
                self._schedule(
                    key, now_ms + cfg.transaction_remove_expired_transaction_cleanup_interval_ms
                )
            elif key[0] == "complete":
                meta = self.transactions.get(key[1])
                if meta is not None:
                    self._maybe_complete(meta, now_ms, effects)

    def _begin(self, now_ms: int, request: Hashable | None) -> Effects:
        effects = Effects(request if request is not None else ("request", next(_AUTO_REQUESTS)))
        self._fire_due(now_ms, effects)
        return effects

    # ======================================================================================
    # ownership of __transaction_state partitions
    # ======================================================================================

    def partition_for(self, transactional_id: str) -> int:
        return tlog.partition_for(
            transactional_id, self.config.transaction_state_log_num_partitions
        )

    def _status(self, transactional_id: str | None) -> Errors | None:
        if not transactional_id:
            return Errors.INVALID_REQUEST
        return self.partitions.status(self.partition_for(transactional_id))

    def on_become_leader(self, partition: int, epoch: int = 0) -> Effects:
        """This broker now leads __transaction_state-<partition>: load it (Kafka:
        onElection). Its ids answer COORDINATOR_LOAD_IN_PROGRESS until `complete_load`.
        The leader epoch is the coordinator epoch the markers carry."""
        effects = Effects()
        if self.partitions.begin_load(partition, epoch):
            self._unload_partition(partition, effects)
        return effects

    def complete_load(
        self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int
    ) -> Effects:
        """Replay the partition's records, oldest first (the latest per id wins, a
        tombstone forgets it), then finish what the old coordinator left: every
        Prepare* transaction gets its markers sent again (Kafka:
        loadTransactionsForTxnTopicPartition, then addTxnMarkersToSend)."""
        effects = Effects()
        if partition not in self.partitions.loading:
            return effects
        values: dict[str, tlog.TransactionLogValue] = {}
        for key, value in records:
            if key is None:
                continue
            tid = tlog.read_key(key)
            if value is None:
                values.pop(tid, None)
            else:
                values[tid] = tlog.read_value(value)
        self.partitions.finish_load(partition)
        for tid, v in sorted(values.items()):
            if self.partition_for(tid) != partition:
                continue
            prepared = v.state.is_prepared
            meta = TransactionMetadata(
                tid,
                TransactionState(
                    v.producer_id,
                    v.producer_epoch,
                    v.state,
                    frozenset(v.partitions),
                    frozenset(v.partitions) if prepared else frozenset(),
                ),
                v.transaction_timeout_ms,
                v.start_timestamp_ms,
                v.last_update_timestamp_ms,
            )
            self.transactions[tid] = meta
            if prepared:
                self._send_markers(meta, effects)
        self._fire_due(now_ms, effects)
        return effects

    def on_resign(self, partition: int, epoch: int | None = None) -> Effects:
        """No longer the leader: forget the partition's ids (NOT_COORDINATOR to any
        request still waiting for a write)."""
        effects = Effects()
        if self.partitions.resign(partition, epoch):
            self._unload_partition(partition, effects)
        return effects

    def _unload_partition(self, partition: int | None, effects: Effects) -> None:
        for tid in [t for t in self.transactions if partition in (None, self.partition_for(t))]:
            del self.transactions[tid]
        for append_id, pending in list(self._appends.items()):
            tid = pending.meta.transactional_id
            if partition in (None, self.partition_for(tid)):
                del self._appends[append_id]
                self._answer_error(pending, Errors.NOT_COORDINATOR, effects)

    def shutdown(self) -> Effects:
        effects = Effects()
        self._unload_partition(None, effects)
        self.partitions.close()
        self._timer.clear()
        return effects

    # ======================================================================================
    # writing transitions
    # ======================================================================================

    def _machine(self, meta: TransactionMetadata) -> TransactionStateMachine:
        return TransactionStateMachine.load(meta.state, self.config.bump_epoch_on_init)

    def _write(
        self,
        meta: TransactionMetadata,
        after: TransactionMetadata,
        kind: str,
        request: Hashable | None,
        now_ms: int,
        effects: Effects,
        data: Any = None,
    ) -> None:
        append_id = next(self._append_ids)
        self._appends[append_id] = _PendingAppend(meta, after, kind, request, data)
        meta.pending = append_id
        value = None if kind == "expire" else tlog.transaction_log_value(after.record())
        effects.append(
            AppendRecords(
                self.partition_for(meta.transactional_id),
                ((tlog.transaction_log_key(meta.transactional_id), value),),
                now_ms,
                append_id,
            )
        )

    def _after(
        self, meta: TransactionMetadata, state: TransactionState, now_ms: int, **kw
    ) -> TransactionMetadata:
        return TransactionMetadata(
            meta.transactional_id,
            state,
            kw.get("timeout_ms", meta.timeout_ms),
            kw.get("start_ms", meta.start_ms),
            now_ms,
        )

    def append_completed(
        self, append_id: int, error: Errors | int = Errors.NONE, now_ms: int = 0
    ) -> Effects:
        """The append of AppendRecords(append_id) is committed (NONE) or failed."""
        effects = self._begin(now_ms, None)
        pending = self._appends.pop(append_id, None)
        if pending is None:
            return effects
        error = Errors(error)
        meta = pending.meta
        tid = meta.transactional_id
        if self.transactions.get(tid) is not meta:
            self._answer_error(pending, Errors.NOT_COORDINATOR, effects)
            return effects
        meta.pending = None
        if error != Errors.NONE:
            if pending.kind == "complete":
                self._schedule(("complete", tid), now_ms + COMPLETE_RETRY_MS)
            elif pending.data == "new":
                del self.transactions[tid]  # never written: the id does not exist
            self._answer_error(pending, store_error(error), effects)
            return effects
        if pending.kind == "expire":
            del self.transactions[tid]
            return effects
        after = pending.after
        meta.state = after.state
        meta.timeout_ms, meta.start_ms, meta.last_update_ms = (
            after.timeout_ms,
            after.start_ms,
            after.last_update_ms,
        )
        kind, request = pending.kind, pending.request
        if kind == "init":
            s = meta.state
            effects.append(
                Respond(request, InitProducerIdResult(Errors.NONE, s.producer_id, s.producer_epoch))
            )
        elif kind == "fence":
            effects.append(Respond(request, InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)))
            self._send_markers(meta, effects)
        elif kind == "add":
            effects.append(
                Respond(request, AddPartitionsToTxnResult(dict.fromkeys(pending.data, Errors.NONE)))
            )
        elif kind == "add_offsets":
            effects.append(Respond(request, TxnResult(Errors.NONE)))
        elif kind == "end":
            effects.append(Respond(request, TxnResult(Errors.NONE)))
            self._send_markers(meta, effects)
        elif kind == "timeout":
            self._send_markers(meta, effects)
        return effects

    def _answer_error(self, pending: _PendingAppend, error: Errors, effects: Effects) -> None:
        if pending.request is None:
            return
        if pending.kind in ("init", "fence"):
            result: Any = InitProducerIdResult(error)
        elif pending.kind == "add":
            result = AddPartitionsToTxnResult(dict.fromkeys(pending.data, error))
        else:
            result = TxnResult(error)
        effects.append(Respond(pending.request, result))

    # ======================================================================================
    # markers
    # ======================================================================================

    def _send_markers(self, meta: TransactionMetadata, effects: Effects) -> None:
        s = meta.state
        if not s.pending_markers:
            self._maybe_complete(meta, meta.last_update_ms, effects)
            return
        effects.append(
            SendTxnMarkers(
                meta.transactional_id,
                s.producer_id,
                s.producer_epoch,
                self.partitions.epochs.get(self.partition_for(meta.transactional_id), 0),
                s.state == TxnState.PREPARE_COMMIT,
                frozenset(s.pending_markers),
            )
        )

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
        machine = self._machine(meta)
        for tp in set(partitions) & pending:
            machine.marker_written(tp)
        meta.state = machine.current
        self._maybe_complete(meta, now_ms, effects)
        return effects

    def _maybe_complete(self, meta: TransactionMetadata, now_ms: int, effects: Effects) -> None:
        s = meta.state
        if meta.pending is not None or not s.state.is_prepared:
            return
        if s.pending_markers:
            return
        machine = self._machine(meta)
        machine.complete()
        self._write(
            meta, self._after(meta, machine.current, now_ms), "complete", None, now_ms, effects
        )

    # ======================================================================================
    # InitProducerId
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
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, InitProducerIdResult(error)))
            return effects

        error = self._status(transactional_id)
        if error is not None:
            return answer(error)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return answer(Errors.INVALID_TRANSACTION_TIMEOUT)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            machine = TransactionStateMachine(self.producer_ids(), self.config.bump_epoch_on_init)
            machine.init_producer_id()
            meta = TransactionMetadata(transactional_id, machine.current, transaction_timeout_ms)
            self.transactions[transactional_id] = meta
            after = self._after(meta, machine.current, now_ms, timeout_ms=transaction_timeout_ms)
            self._write(meta, after, "init", request, now_ms, effects, "new")
            return effects
        if meta.pending is not None:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        s = meta.state
        if producer_id != -1:
            if producer_id != s.producer_id:
                return answer(Errors.INVALID_PRODUCER_EPOCH)
            if producer_epoch != s.producer_epoch:
                return answer(Errors.PRODUCER_FENCED)
        if s.state == TxnState.ONGOING:
            machine = self._machine(meta)
            try:
                machine.init_producer_id()  # moves to PrepareAbort and says so
            except KafkaError:
                pass
            after = self._after(meta, machine.current, now_ms)
            self._write(meta, after, "fence", request, now_ms, effects)
            return effects
        if s.state.is_prepared:
            return answer(Errors.CONCURRENT_TRANSACTIONS)
        if s.producer_epoch >= MAX_EPOCH - 1:
            machine = TransactionStateMachine(self.producer_ids(), self.config.bump_epoch_on_init)
        else:
            machine = self._machine(meta)
        machine.init_producer_id()
        after = self._after(
            meta, machine.current, now_ms, timeout_ms=transaction_timeout_ms, start_ms=-1
        )
        self._write(meta, after, "init", request, now_ms, effects)
        return effects

    # ======================================================================================
    # AddPartitionsToTxn, AddOffsetsToTxn
    # ======================================================================================

    def _validate(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[Errors | None, TransactionMetadata | None]:
        error = self._status(transactional_id)
        if error is not None:
            return error, None
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, None
        if meta.state.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED, None
        if meta.pending is not None:
            return Errors.CONCURRENT_TRANSACTIONS, None
        if meta.state.state.is_prepared:
            return Errors.CONCURRENT_TRANSACTIONS, None
        return None, meta

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        effects = self._begin(now_ms, request)
        request = effects.request
        wanted = frozenset(partitions)
        error, meta = self._validate(transactional_id, producer_id, producer_epoch)
        if error is not None:
            effects.append(Respond(request, AddPartitionsToTxnResult(dict.fromkeys(wanted, error))))
            return effects
        self._add(meta, wanted, "add", request, now_ms, effects, wanted)
        return effects

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
        request = effects.request
        error, meta = self._validate(transactional_id, producer_id, producer_epoch)
        if error is not None:
            effects.append(Respond(request, TxnResult(error)))
            return effects
        from kafkalab.coordinator.group.coordinator_records import partition_for

        tp = (OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_num_partitions))
        self._add(meta, frozenset([tp]), "add_offsets", request, now_ms, effects, None)
        return effects

    def _add(self, meta, wanted, kind, request, now_ms, effects, data) -> None:
        s = meta.state
        if s.state == TxnState.ONGOING and wanted <= s.partitions:
            # nothing new to write (Kafka answers at once too)
            result = (
                AddPartitionsToTxnResult(dict.fromkeys(wanted, Errors.NONE))
                if kind == "add"
                else TxnResult(Errors.NONE)
            )
            effects.append(Respond(request, result))
            return
        machine = self._machine(meta)
        machine.add_partitions(s.producer_epoch, wanted)
        start = meta.start_ms if s.state == TxnState.ONGOING else now_ms
        after = self._after(meta, machine.current, now_ms, start_ms=start)
        self._write(meta, after, kind, request, now_ms, effects, data)

    # ======================================================================================
    # EndTxn
    # ======================================================================================

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        effects = self._begin(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, TxnResult(error)))
            return effects

        error = self._status(transactional_id)
        if error is not None:
            return answer(error)
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
        machine = self._machine(meta)
        machine.end_txn(producer_epoch, committed)
        self._write(
            meta, self._after(meta, machine.current, now_ms), "end", request, now_ms, effects
        )
        return effects

    # ======================================================================================
    # timeouts and expiry
    # ======================================================================================

    def abort_timed_out_transactions(self, now_ms: int, effects: Effects | None = None) -> Effects:
        """Every Ongoing transaction older than its transaction.timeout.ms is aborted,
        with a bumped epoch so that its producer is fenced (Kafka:
        abortTimedOutTransactions). Runs by itself on its interval."""
        effects = Effects() if effects is None else effects
        for tid, meta in list(self.transactions.items()):
            s = meta.state
            if (
                s.state != TxnState.ONGOING
                or meta.pending is not None
                or self.partition_for(tid) not in self.partitions.owned
                or meta.start_ms + meta.timeout_ms > now_ms
            ):
                continue
            machine = self._machine(meta)
            machine.timeout_abort()
            self._write(
                meta, self._after(meta, machine.current, now_ms), "timeout", None, now_ms, effects
            )
        return effects

    def remove_expired_transactional_ids(
        self, now_ms: int, effects: Effects | None = None
    ) -> Effects:
        """Ids with no transaction (Empty / Complete*) for transactional.id.expiration.ms
        are forgotten: a tombstone, and the id is gone once it is written (Kafka:
        removeExpiredTransactionalIds)."""
        effects = Effects() if effects is None else effects
        expiry = self.config.transactional_id_expiration_ms
        for tid, meta in list(self.transactions.items()):
            if (
                meta.state.state.expiration_allowed
                and meta.pending is None
                and self.partition_for(tid) in self.partitions.owned
                and meta.last_update_ms + expiry <= now_ms
            ):
                self._write(meta, meta, "expire", None, now_ms, effects)
        return effects

    # ======================================================================================
    # DescribeTransactions, ListTransactions
    # ======================================================================================

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[DescribedTransaction]:
        out = []
        for tid in transactional_ids:
            error = self._status(tid)
            meta = self.transactions.get(tid)
            if error is None and meta is None:
                error = Errors.TRANSACTIONAL_ID_NOT_FOUND
            if error is not None:
                out.append(DescribedTransaction(error, tid))
                continue
            s = meta.state
            # while markers are written, only the partitions still without one (Kafka)
            prepared = s.state.is_prepared
            out.append(
                DescribedTransaction(
                    Errors.NONE,
                    tid,
                    s.state,
                    meta.timeout_ms,
                    meta.start_ms,
                    s.producer_id,
                    s.producer_epoch,
                    frozenset(s.pending_markers if prepared else s.partitions),
                )
            )
        return out

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
    ) -> ListTransactionsResult:
        states = set(state_filters)
        unknown = tuple(sorted(states - set(tlog.STATE_IDS)))
        pids = set(producer_id_filters)
        listed = tuple(
            ListedTransaction(tid, m.state.producer_id, m.state.state)
            for tid, m in sorted(self.transactions.items())
            if (not states or m.state.state in states) and (not pids or m.state.producer_id in pids)
        )
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.partitions.loading else Errors.NONE
        return ListTransactionsResult(error, unknown, listed)
