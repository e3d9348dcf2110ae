"""DelayedDeleteRecords: a DeleteRecords waiting until every live replica moved its start.

Kafka's class: kafka.server.DelayedDeleteRecords. The leader moves its log start
offset at once; the request is answered when, for every partition, the low
watermark (the smallest log start offset over the leader and its followers on
live brokers, as their fetches report it: `Partition.low_watermark`) has reached
the offset asked for, or after the request's timeout_ms with REQUEST_TIMED_OUT
for the partitions not there yet. Watched under each partition; a follower's
fetch that reports a new log start offset, and every leadership change
(NOT_LEADER_OR_FOLLOWER), check it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkalab.errors import Errors, KafkaError
from kafkalab.replication.delayed_operation import DelayedOperation
from kafkalab.replication.partition import Partition

TopicPartition = tuple[str, int]


@dataclass
class DeleteRecordsResult:
    """One partition's answer (Kafka: DeleteRecordsPartitionResult)."""

    error: Errors
    low_watermark: int = -1
    required_offset: int = -1  # done once the low watermark reaches this


class DelayedDeleteRecords(DelayedOperation):
    """Waits for every pending partition; `on_done(results)` runs exactly once."""

    def __init__(
        self,
        timeout_ms: int,
        partitions: Callable[[TopicPartition], Partition | None],
        alive: Callable[[int], bool],
        pending: dict[TopicPartition, DeleteRecordsResult],
        on_done: Callable[[dict[TopicPartition, DeleteRecordsResult]], None],
    ) -> None:
        super().__init__(timeout_ms)
        self.partitions = partitions
        self.alive = alive
        self.pending = pending
        self.on_done = on_done
        self.settled: set[TopicPartition] = set()

    def try_complete(self) -> bool:
        for tp, result in self.pending.items():
            if tp in self.settled:
                continue
            part = self.partitions(tp)
            try:
                if part is None:
                    raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER)
                low = part.low_watermark(self.alive)
            except KafkaError as e:
                result.error, result.low_watermark = e.code, -1
                self.settled.add(tp)
                continue
            if low >= result.required_offset:
                result.error, result.low_watermark = Errors.NONE, low
                self.settled.add(tp)
        if len(self.settled) < len(self.pending):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        # Unsettled partitions at completion: it expired (or the broker is stopping).
        for tp, result in self.pending.items():
            if tp not in self.settled:
                result.error = Errors.REQUEST_TIMED_OUT
        self.on_done(self.pending)
