"""DelayedProduce: an acks=all produce waiting until the ISR has its records.

Kafka's class: kafka.server.DelayedProduce. Watched under each partition it
wrote to; completed by high watermark moves and ISR changes (ReplicaManager
calls `check_and_complete` on them), or by `request.timeout.ms`
(REQUEST_TIMED_OUT). Whether a partition is done is Partition's answer
(`check_enough_replicas_reach_offset`), not this class's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalab.errors import Errors
from kafkalab.replication.delayed_operation import DelayedOperation
from kafkalab.replication.partition import Partition

TopicPartition = tuple[str, int]


@dataclass
class AppendResult:
    """What a produce to one partition got (Kafka: ProducePartitionStatus)."""

    error: Errors
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    required_offset: int = -1  # acks=all is satisfied once the HW reaches this
    # records refused inside a batch: (index in the batch, why) (Produce v8+ record_errors)
    record_errors: list[tuple[int, str]] = field(default_factory=list)


class DelayedProduce(DelayedOperation):
    """Waits for every pending partition; `on_done(results)` runs exactly once."""

    def __init__(
        self,
        timeout_ms: int,
        partitions: Callable[[TopicPartition], Partition | None],
        pending: dict[TopicPartition, AppendResult],
        on_done: Callable[[dict[TopicPartition, AppendResult]], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.partitions = partitions
        self.pending = pending
        self.on_done = on_done
        self.settled: set[TopicPartition] = set()

    def try_complete(self) -> bool:
        for tp, result in self.pending.items():
            if tp in self.settled:
                continue
            part = self.partitions(tp)
            if part is None:
                done, error = True, Errors.NOT_LEADER_OR_FOLLOWER
            else:
                done, error = part.check_enough_replicas_reach_offset(result.required_offset)
            if done:
                result.error = error
                self.settled.add(tp)
        if len(self.settled) < len(self.pending):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        # Completed with partitions unsettled: it expired, or the broker is stopping
        # (the purgatory's shutdown). Never answer those as written safely.
        for tp, result in self.pending.items():
            if tp not in self.settled:
                result.error = Errors.REQUEST_TIMED_OUT
        self.on_done(self.pending)
