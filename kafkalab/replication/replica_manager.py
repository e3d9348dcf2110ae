"""ReplicaManager: the partitions a broker hosts, and appending to and reading from them.

Kafka's class: kafka.server.ReplicaManager. It holds a Partition (leader or
follower state machine) for every partition the broker has, and is told who
leads what by the broker's metadata (a controller's metadata log, or a
standalone broker leading everything itself): `make_leader`, `make_follower`,
`remove_partition`. It does not know which of the two it runs under.

- Appends (`append_records`) go to the leader's Partition; an acks=all produce
  then waits in the delayed-produce purgatory (DelayedProduce).
- Reads (`read`) go as far as the asker's FetchIsolation allows: followers to
  the log end offset, consumers below the high watermark, read_committed
  consumers below the last stable offset (LSO), with the aborted transactions
  overlapping what they read (from the segments' `.txnindex`).
- After every append, HW move and ISR change, the delayed operations watching
  that partition are checked, so a long-polling consumer or an acks=all
  producer is answered by the event itself, not by a timer.
- ISR changes the leaders want (a follower caught up, or fell behind for
  `replica.lag.time.max.ms`: the isr-expiration task) go to the
  AlterPartitionManager given as `alter_partition`.
- DeleteRecords (`delete_records`) moves a leader's log start offset, then waits
  in the delayed-delete-records purgatory (DelayedDeleteRecords) until every
  follower on a live broker (`broker_alive`) reports it moved too.
- Leadership listeners (`add_leadership_listener`) hear every election and
  resignation: the group and transaction coordinators load and unload their
  state topics' partitions there, as Kafka's do (onElection / onResignation).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from kafkalab.errors import Errors, KafkaError
from kafkalab.replication.delayed_delete_records import DeleteRecordsResult
from kafkalab.replication.delayed_fetch import ReadResult
from kafkalab.replication.delayed_operation import DelayedOperationPurgatory
from kafkalab.replication.delayed_produce import AppendResult
from kafkalab.replication.partition import IsrChange, Partition, Role, TruncationRule
from kafkalab.storage.errors import OffsetOutOfRangeError, RecordValidationError
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.log_segment import LogOffsetMetadata
from kafkalab.storage.producer_state_manager import ProducerStateEntry, VerificationGuard
from kafkalab.storage.unified_log import AppendOrigin, FetchIsolation

TopicPartition = tuple[str, int]


class LeadershipListener(Protocol):
    """Told when this broker starts or stops leading a partition (Kafka: the
    coordinators' onElection / onResignation, called from the metadata publisher)."""

    def on_election(self, tp: TopicPartition, leader_epoch: int) -> None: ...

    def on_resignation(self, tp: TopicPartition, leader_epoch: int) -> None: ...


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        schedule: Callable[[float, Callable[[], None]], Any],
        broker_id: int = 1,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        truncation_rule: TruncationRule | str = TruncationRule.FENCED_LEADER_EPOCH,
        replica_lag_time_max_ms: int = 30_000,
        partition_exists: Callable[[TopicPartition], bool] = lambda tp: False,
        alter_partition: Callable[[IsrChange], None] | None = None,
    ) -> None:
        """`partition_exists(tp)`: does the cluster's metadata know this partition?
        (a partition this broker does not host answers NOT_LEADER_OR_FOLLOWER if
        it exists elsewhere, UNKNOWN_TOPIC_OR_PARTITION if not). `alter_partition`
        takes the leaders' ISR proposals to the controller."""
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.clock = clock
        self._schedule = schedule
        self.delayed_fetch = DelayedOperationPurgatory("Fetch", schedule)
        self.delayed_produce = DelayedOperationPurgatory("Produce", schedule)
        self.delayed_delete_records = DelayedOperationPurgatory("DeleteRecords", schedule)
        #: is this broker registered and unfenced? (a follower on a dead broker does not
        #: hold DeleteRecords back; the broker sets it from its MetadataCache)
        self.broker_alive: Callable[[int], bool] = lambda broker_id: True
        self.partitions: dict[TopicPartition, Partition] = {}
        self.truncation_rule = TruncationRule(truncation_rule)  # kafkalab.follower.truncation.rule
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partition_exists = partition_exists
        self.alter_partition = alter_partition
        self._listeners: list[LeadershipListener] = []
        self._isr_expiration: Any = None
        #: partitions whose state (role, epochs, ISR, LEO, HW, ...) may have changed
        #: since `take_changed()` last ran: the broker's replica-state report
        #: rewrites only those, so idle partitions cost it nothing
        self._changed: set[TopicPartition] = set()

    def note_changed(self, tp: TopicPartition) -> None:
        """Something outside the ReplicaManager changed `tp` (a follower's append or
        truncation, a refused ISR change)."""
        self._changed.add(tp)

    def take_changed(self) -> set[TopicPartition]:
        """The partitions changed since the last call (and forget them)."""
        changed, self._changed = self._changed, set()
        return changed

    # -- leadership (what the metadata says) --------------------------------------------------

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)

    def _partition(self, tp: TopicPartition, configs: dict[str, str] | None) -> Partition:
        part = self.partitions.get(tp)
        if part is None:
            log_ = self.log_manager.get_or_create_log(tp[0], tp[1], configs or None)
            part = Partition(
                tp[0],
                tp[1],
                self.broker_id,
                log_,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                truncation_rule=self.truncation_rule,
                isr_eligible=lambda broker_id: self.broker_alive(broker_id),
            )
            self.partitions[tp] = part
        return part

    def make_leader(
        self,
        tp: TopicPartition,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int,
        configs: dict[str, str] | None = None,
    ) -> Partition:
        """Lead `tp` with the given ISR (Kafka: makeLeaders). The log is created if
        this broker does not have it yet."""
        part = self._partition(tp, configs)
        part.make_leader(leader_epoch, isr, replicas, partition_epoch, self.clock())
        self._hw_moved(tp)
        for listener in self._listeners:
            listener.on_election(tp, leader_epoch)
        return part

    def make_follower(
        self,
        tp: TopicPartition,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int,
        configs: dict[str, str] | None = None,
    ) -> Partition:
        """Follow `leader` for `tp` (Kafka: makeFollowers); the replica fetcher then
        truncates (Partition.truncation) and fetches."""
        part = self._partition(tp, configs)
        was_leader = part.role == Role.LEADER
        part.make_follower(leader, leader_epoch, isr, replicas, partition_epoch)
        self._hw_moved(tp)  # parked requests answer NOT_LEADER_OR_FOLLOWER now
        if was_leader:
            for listener in self._listeners:
                listener.on_resignation(tp, leader_epoch)
        return part

    def update_assignment(
        self, tp: TopicPartition, replicas: list[int], isr: list[int], partition_epoch: int
    ) -> None:
        """The replicas of `tp` changed in the same leader epoch (a reassignment started
        or was cancelled): see Partition.update_assignment."""
        self.partitions[tp].update_assignment(replicas, isr, partition_epoch, self.clock())
        self._hw_moved(tp)

    def remove_partition(self, tp: TopicPartition) -> None:
        """The topic was deleted, or this broker is no longer a replica (a reassignment
        moved it away): drop the partition and its log."""
        part = self.partitions.pop(tp, None)
        self.log_manager.delete_log(*tp)
        self._hw_moved(tp)
        if part is not None and part.role == Role.LEADER:
            for listener in self._listeners:
                listener.on_resignation(tp, part.leader_epoch)

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def hosted_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker hosts it (as leader or follower); else a
        KafkaError with the code a client should see (Kafka: getPartitionOrException)."""
        part = self.partitions.get(tp)
        if part is None:
            raise KafkaError(
                self._not_hosted(tp), f"broker {self.broker_id} has no {tp[0]}-{tp[1]}"
            )
        return part

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it; else NOT_LEADER_OR_FOLLOWER (or
        UNKNOWN_TOPIC_OR_PARTITION) as a KafkaError."""
        part = self.hosted_partition(tp)
        part.require_leader()
        return part

    def _not_hosted(self, tp: TopicPartition) -> Errors:
        """A partition this broker does not host: another broker may (Kafka:
        getPartitionOrError)."""
        if self.partition_exists(tp):
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.UNKNOWN_TOPIC_OR_PARTITION

    # -- appends and reads -------------------------------------------------------------------

    def append_records(
        self,
        topic: str,
        partition: int,
        records: Any,
        required_acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append to a partition this broker leads (Kafka: appendRecords). `origin`:
        CLIENT for Produce; COORDINATOR for what the group and transaction
        coordinators write (their records, and transaction markers).
        `verification_guard`: None with transaction verification off, else what
        `maybe_start_transaction_verification` gave before the coordinator was asked."""
        tp = (topic, partition)
        if records is None or len(records) == 0:
            return AppendResult(Errors.CORRUPT_MESSAGE, message="a produce request with no records")
        try:
            part = self.leader_partition(tp)
            info = part.append_records_to_leader(
                bytearray(records),
                required_acks,
                part.log.config.min_insync_replicas,
                origin,
                verification_guard,
            )
        except KafkaError as e:
            record_errors = e.record_errors if isinstance(e, RecordValidationError) else []
            return AppendResult(e.code, message=e.message, record_errors=record_errors)
        self._changed.add(tp)
        self.delayed_fetch.check_and_complete(tp)
        return AppendResult(
            Errors.NONE,
            info.first_offset,
            info.log_append_time,
            part.log.log_start_offset,
            required_offset=info.last_offset + 1,
        )

    def maybe_start_transaction_verification(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int
    ) -> VerificationGuard:
        """Before a transactional Produce to a partition this broker leads: the guard
        its append must bring back (SENTINEL: the producer's transaction is ongoing
        here already, nothing to ask). Raises KafkaError when not the leader."""
        part = self.leader_partition((topic, partition))
        return part.log.maybe_start_transaction_verification(producer_id, producer_epoch)

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        min_one_message: bool,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
    ) -> ReadResult:
        """Read from a partition this broker leads, up to what `isolation` allows
        (Kafka: readFromLog)."""
        try:
            part = self.leader_partition((topic, partition))
        except KafkaError as e:
            part = self.partitions.get((topic, partition))
            if part is None:
                return ReadResult(e.code)
            return ReadResult(e.code, part.log.high_watermark, part.log.log_start_offset)
        log = part.log
        last_stable = log.last_stable_offset
        max_offset = last_stable if isolation == FetchIsolation.TXN_COMMITTED else None
        try:
            info = log.read(
                offset,
                max_bytes,
                max_offset=log.last_fetchable_offset(isolation)
                if max_offset is None
                else max_offset,
                min_one_message=min_one_message,
            )
        except KafkaError as e:
            return ReadResult(e.code, log.high_watermark, log.log_start_offset, last_stable)
        aborted = None
        if max_offset is not None:
            # Every aborted transaction overlapping the batches this fetch returns,
            # bounded by the bytes read as Kafka bounds it. Nothing read, nothing to tell.
            aborted = []
            if info.records is not None and info.size_in_bytes:
                upper = log.fetch_upper_bound_offset(info)
                aborted = log.collect_aborted_transactions(offset, upper)
        return ReadResult(
            Errors.NONE, log.high_watermark, log.log_start_offset, last_stable, info, aborted
        )

    def offset_metadata(self, tp: TopicPartition, offset: int) -> LogOffsetMetadata:
        """Where `offset` starts on disk in `tp`, which this broker leads (a
        DelayedFetch's start: Kafka keeps the one its first read found).
        OFFSET_OUT_OF_RANGE outside [log start offset, LEO]."""
        log = self.leader_partition(tp).log
        if not log.log_start_offset <= offset <= log.log_end_offset:
            raise OffsetOutOfRangeError(offset, log.log_start_offset, log.log_end_offset)
        return log.offset_metadata(offset)

    def fetch_offset_snapshot(
        self, tp: TopicPartition, isolation: FetchIsolation
    ) -> LogOffsetMetadata:
        """Where a fetch with `isolation` may read to in `tp`, and where that is on
        disk: the HW, the LSO (read_committed) or the LEO (a follower). Kafka:
        Partition.fetchOffsetSnapshot; leader only, as `read`."""
        log = self.leader_partition(tp).log
        return log.offset_metadata(log.last_fetchable_offset(isolation))

    def active_producer_state(self, tp: TopicPartition) -> list[ProducerStateEntry]:
        """The producers the leader of `tp` knows, oldest id first (Kafka:
        activeProducerState, for DescribeProducers). Leader only."""
        part = self.leader_partition(tp)
        producers = part.log.producer_state.producers
        return [producers[pid] for pid in sorted(producers)]

    # -- the leader's view of its followers ---------------------------------------------------

    def update_follower_fetch_state(
        self, tp: TopicPartition, broker_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> IsrChange | None:
        """A follower fetched: the HW may move, which may answer waiting produces and
        fetches; a new log start offset may answer a waiting DeleteRecords; an ISR
        expansion the leader wants goes to the controller."""
        part = self.partitions[tp]
        replica = part.remote.get(broker_id)
        if (
            replica is not None
            and fetch_offset == replica.log_end_offset == part.log.log_end_offset
            and log_start_offset in (-1, replica.log_start_offset)
            and broker_id in part.maximal_isr
            and part.role == Role.LEADER
        ):
            # Nothing moved: an in-sync follower still at the leader's LEO (every idle
            # partition of a fetch session, each fetch). Only the time it was caught
            # up; its LEO did not change, so neither can the HW (Kafka moves the HW
            # only when the follower's LEO moved), and it needs no ISR change.
            now = self.clock()
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now)
            replica.last_fetch_leader_log_end_offset = fetch_offset
            replica.last_fetch_time_ms = now
            return None
        hw = part.log.high_watermark
        leo = replica.log_end_offset if replica is not None else None
        start = replica.log_start_offset if replica is not None else None
        change = part.update_follower_fetch_state(
            broker_id, fetch_offset, self.clock(), log_start_offset
        )
        if replica is not None and replica.log_start_offset != start:
            self.delayed_delete_records.check_and_complete(tp)
        if part.log.high_watermark != hw:
            self._hw_moved(tp)
        elif change is not None or leo != fetch_offset:
            self._changed.add(tp)  # the follower's LEO, or a proposal
        if change is not None and self.alter_partition is not None:
            self.alter_partition(change)
        return change

    # -- DeleteRecords ------------------------------------------------------------------------

    def delete_records_on_leader(self, tp: TopicPartition, offset: int) -> DeleteRecordsResult:
        """Move the log start offset of `tp`, which this broker leads, to `offset` (-1:
        the HW) (Kafka: deleteRecordsOnLocalLog). The result's `required_offset` is
        what the low watermark must reach before the request is answered; segments
        wholly below the new start go at the LogManager's next retention pass, and
        the log-start-offset checkpoint follows at its next checkpoint."""
        try:
            part = self.leader_partition(tp)
            target = part.delete_records_on_leader(offset)
        except KafkaError as e:
            return DeleteRecordsResult(e.code)
        self._changed.add(tp)
        self.delayed_fetch.check_and_complete(tp)
        return DeleteRecordsResult(Errors.NONE, target, required_offset=target)

    def low_watermark(self, tp: TopicPartition) -> int:
        """The smallest log start offset over the live replicas of `tp` (leader only)."""
        return self.leader_partition(tp).low_watermark(self.broker_alive)

    def maybe_shrink_isr(self) -> list[IsrChange]:
        """Kafka's isr-expiration task: on every partition this broker leads, propose
        dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = self.clock()
        changes = []
        for part in self.partitions.values():
            if part.role == Role.LEADER:
                change = part.maybe_shrink_isr(now)
                if change is not None:
                    self._changed.add((part.topic, part.partition))
                    changes.append(change)
                    if self.alter_partition is not None:
                        self.alter_partition(change)
        return changes

    def start_isr_expiration(self) -> None:
        """Run `maybe_shrink_isr` every replica.lag.time.max.ms / 2 on the owner's
        timer (Kafka: ReplicaManager.startup schedules "isr-expiration")."""

        def tick() -> None:
            self.maybe_shrink_isr()
            self._isr_expiration = self._schedule(self.replica_lag_time_max_ms / 2000, tick)

        self._isr_expiration = self._schedule(self.replica_lag_time_max_ms / 2000, tick)

    def apply_isr_change(self, tp: TopicPartition, isr: list[int], partition_epoch: int) -> bool:
        """The controller committed an ISR for `tp` (AlterPartition answered, or the
        metadata log says so). False when it was older than the ISR applied."""
        applied = self.partitions[tp].apply_isr_change(isr, partition_epoch)
        self._hw_moved(tp)
        return applied

    def _hw_moved(self, tp: TopicPartition) -> None:
        self._changed.add(tp)
        self.delayed_produce.check_and_complete(tp)
        self.delayed_fetch.check_and_complete(tp)
        self.delayed_delete_records.check_and_complete(tp)

    def shutdown(self) -> None:
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
        self.delayed_produce.shutdown()
        self.delayed_fetch.shutdown()
        self.delayed_delete_records.shutdown()
        self.log_manager.shutdown()
