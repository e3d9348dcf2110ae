"""ReplicaManager: the partitions a broker hosts, and appending to and reading from them.

Kafka's class: kafka.server.ReplicaManager. It holds a Partition (leader or
follower state machine) for every partition the broker has. This is still the
single-broker form: the broker leads every partition with an ISR of one, so
after an append the high watermark moves to the log end offset at once. The
replicated form (followers, replica fetchers, acks=all waiting) builds on it.

After every append the delayed fetches watching that partition are checked,
so a long-polling consumer is answered by the append itself, not by a timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalab.protocol.errors import Errors, KafkaError
from kafkalab.records.record_batch import CorruptRecordError
from kafkalab.replication.delayed_operation import DelayedOperation, DelayedOperationPurgatory
from kafkalab.replication.partition import Partition
from kafkalab.storage.errors import StorageError
from kafkalab.storage.log_config import InvalidConfigError
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.log_segment import FetchDataInfo
from kafkalab.storage.unified_log import UnifiedLog

TopicPartition = tuple[str, int]

#: A single broker leads every partition in epoch 0 (Metadata says so, appends stamp it).
LEADER_EPOCH = 0


def error_of(exc: Exception) -> Errors:
    """The Kafka error code for an exception from the storage layer."""
    code = getattr(exc, "error_code", None)
    if isinstance(exc, CorruptRecordError):
        return Errors.CORRUPT_MESSAGE
    if isinstance(exc, InvalidConfigError):
        return Errors.INVALID_CONFIG
    if code is not None and code in Errors._value2member_map_:
        return Errors(code)
    return Errors.UNKNOWN_SERVER_ERROR


@dataclass
class AppendResult:
    error: Errors
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    required_offset: int = -1  # acks=all is satisfied once the HW reaches this


class DelayedProduce(DelayedOperation):
    """An acks=all produce waiting until every ISR member has its records
    (Kafka: DelayedProduce). Completed by HW moves and ISR changes, or by
    `request.timeout.ms` (REQUEST_TIMED_OUT). If the HW reaches the records
    but the ISR shrank below min.insync.replicas meanwhile, the answer is
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: written, but not as safely as asked."""

    def __init__(
        self,
        timeout_ms: int,
        replica_manager: ReplicaManager,
        pending: dict[TopicPartition, AppendResult],
        on_done: Callable[[dict[TopicPartition, AppendResult]], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.replica_manager = replica_manager
        self.pending = pending
        self.on_done = on_done
        self.settled: set[TopicPartition] = set()

    def try_complete(self) -> bool:
        for tp, result in self.pending.items():
            if tp in self.settled:
                continue
            part = self.replica_manager.partitions.get(tp)
            if part is None or part.role != "leader":
                result.error = Errors.NOT_LEADER_OR_FOLLOWER
                self.settled.add(tp)
            elif part.log.high_watermark >= result.required_offset:
                if len(part.isr) < part.log.config.min_insync_replicas:
                    result.error = Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self.settled.add(tp)
        if len(self.settled) < len(self.pending):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for tp, result in self.pending.items():
            if tp not in self.settled:
                result.error = Errors.REQUEST_TIMED_OUT

    def on_complete(self) -> None:
        self.on_done(self.pending)


@dataclass
class ReadResult:
    error: Errors
    high_watermark: int = -1
    log_start_offset: int = -1
    info: FetchDataInfo | None = None

    @property
    def size(self) -> int:
        return 0 if self.info is None else self.info.size_in_bytes


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        schedule: Callable[[float, Callable[[], None]], Any],
        broker_id: int = 1,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        cluster_mode: bool = False,
        truncation_rule: str = "fenced-leader-epoch",
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.clock = clock
        self.delayed_fetch = DelayedOperationPurgatory("Fetch", schedule)
        self.delayed_produce = DelayedOperationPurgatory("Produce", schedule)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.cluster_mode = cluster_mode  # roles come from the controller's metadata
        self.truncation_rule = truncation_rule  # kafkalab.follower.truncation.rule
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        if not cluster_mode:
            for tp, partition_log in log_manager.all_logs().items():
                self._lead(tp, partition_log)

    def _lead(self, tp: TopicPartition, partition_log: UnifiedLog) -> Partition:
        """This broker leads with an ISR of one: itself (Kafka: Partition.makeLeader).
        The high watermark becomes the log end offset at once."""
        partition = Partition(tp[0], tp[1], self.broker_id, partition_log)
        partition.make_leader(LEADER_EPOCH, [self.broker_id], [self.broker_id], 0, self.clock())
        self.partitions[tp] = partition
        return partition

    # -- topics ------------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """topic -> number of partitions, from the logs this broker holds."""
        counts: dict[str, int] = {}
        for topic, partition in self.log_manager.all_logs():
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return counts

    def create_topic(
        self, topic: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        """Create the logs of a new topic. Raises ValueError (bad name) or
        InvalidConfigError (bad config)."""
        config = self.log_manager.default_config
        if configs:
            config.with_overrides(configs)  # validate before creating anything
        for p in range(partitions):
            self._lead((topic, p), self.log_manager.get_or_create_log(topic, p, configs or None))

    def delete_topic(self, topic: str) -> bool:
        found = False
        for t, p in list(self.log_manager.all_logs()):
            if t == topic:
                self.partitions.pop((t, p), None)
                found = self.log_manager.delete_log(t, p) or found
        return found

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self.log_manager.get_log(topic, partition)

    # -- appends and reads -------------------------------------------------------------------

    def append_records(
        self, topic: str, partition: int, records: Any, required_acks: int = 1
    ) -> AppendResult:
        part = self.partitions.get((topic, partition))
        if part is None:
            return AppendResult(self._missing())
        if records is None or len(records) == 0:
            return AppendResult(Errors.CORRUPT_MESSAGE, message="a produce request with no records")
        try:
            info = part.append_records_to_leader(
                bytearray(records), required_acks, part.log.config.min_insync_replicas
            )
        except KafkaError as e:
            return AppendResult(e.code, message=str(e))
        except (StorageError, CorruptRecordError) as e:
            return AppendResult(error_of(e), message=str(e))
        self.delayed_fetch.check_and_complete((topic, partition))
        return AppendResult(
            Errors.NONE,
            info.first_offset,
            info.log_append_time,
            part.log.log_start_offset,
            required_offset=info.last_offset + 1,
        )

    # -- leadership and followers (the replicated path) ---------------------------------------

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
        """Lead `tp` with the given ISR (what the controller decided)."""
        part = self._partition(tp, configs)
        part.make_leader(leader_epoch, isr, replicas, partition_epoch, self.clock())
        self._hw_moved(tp)
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
        """Follow `leader` for `tp`; the caller truncates, then fetches."""
        part = self._partition(tp, configs)
        part.make_follower(leader, leader_epoch, isr, replicas, partition_epoch)
        self._hw_moved(tp)  # parked requests answer NOT_LEADER_OR_FOLLOWER now
        return part

    def remove_partition(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self.log_manager.delete_log(*tp)

    def update_follower_fetch_state(
        self, tp: TopicPartition, broker_id: int, fetch_offset: int
    ) -> Any:
        """A follower fetched: the HW may move, which may answer waiting produces and
        fetches. Returns the ISR change the leader wants (or None)."""
        part = self.partitions[tp]
        hw = part.log.high_watermark
        change = part.update_follower_fetch_state(broker_id, fetch_offset, self.clock())
        if part.log.high_watermark != hw:
            self._hw_moved(tp)
        return change

    def maybe_shrink_isr(self) -> list[Any]:
        """Kafka's isr-expiration task: on every partition this broker leads, propose
        dropping followers that have not caught up for replica.lag.time.max.ms."""
        now = self.clock()
        changes = []
        for part in self.partitions.values():
            if part.role == "leader":
                change = part.maybe_shrink_isr(now)
                if change is not None:
                    changes.append(change)
        return changes

    def apply_isr_change(self, tp: TopicPartition, isr: list[int], partition_epoch: int) -> None:
        part = self.partitions[tp]
        part.apply_isr_change(isr, partition_epoch)
        self._hw_moved(tp)

    def _hw_moved(self, tp: TopicPartition) -> None:
        self.delayed_produce.check_and_complete(tp)
        self.delayed_fetch.check_and_complete(tp)

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        min_one_message: bool,
        for_replica: bool = False,
    ) -> ReadResult:
        """Consumers read below the HW; followers (for_replica) up to the LEO."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return ReadResult(self._missing())
        log = part.log
        if part.role != "leader":
            return ReadResult(
                Errors.NOT_LEADER_OR_FOLLOWER, log.high_watermark, log.log_start_offset
            )
        try:
            info = log.read(
                offset,
                max_bytes,
                max_offset=None if for_replica else log.high_watermark,
                min_one_message=min_one_message,
            )
        except StorageError as e:
            return ReadResult(error_of(e), log.high_watermark, log.log_start_offset)
        return ReadResult(Errors.NONE, log.high_watermark, log.log_start_offset, info)

    def _missing(self) -> Errors:
        """A partition this broker does not host: in a cluster another broker may."""
        return (
            Errors.NOT_LEADER_OR_FOLLOWER
            if self.cluster_mode
            else Errors.UNKNOWN_TOPIC_OR_PARTITION
        )

    def shutdown(self) -> None:
        self.delayed_produce.shutdown()
        self.delayed_fetch.shutdown()
        self.log_manager.shutdown()
