"""DelayedFetch: a fetch waiting until `min_bytes` are readable or `max_wait_ms` passes.

Kafka's class: kafka.server.DelayedFetch. Watched under every partition it
asks for; an append (or, for consumers, a high watermark move) calls
`check_and_complete` on that partition and the fetch tries again. It decides as
Kafka's `tryComplete` does, from where the fetch starts on disk and where the
asker may read to (the HW, the LSO under read_committed, the LEO for a follower),
without reading any records:

- an error on any partition (this broker stopped leading it, the offset is out
  of range) answers at once;
- a fetch offset past that end (a consumer ahead of a new leader's HW) answers
  at once, with nothing;
- a fetch offset on an older segment than that end (the consumer is catching up,
  or the segment just rolled) answers at once: a read stops at its segment's end,
  so waiting for more bytes there would only wait out max_wait_ms;
- otherwise each partition counts the bytes between its fetch offset and that
  end, at most its partition_max_bytes, and the fetch answers once they reach
  `min_bytes` (0 at once, even with nothing to send). It stops looking at the
  partitions once they do: every case answers at once, so the rest cannot
  change the outcome (Kafka looks at all of them and then decides).

`on_done()` runs exactly once, and reads what is there then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafkalab.errors import Errors, KafkaError
from kafkalab.replication.delayed_operation import DelayedOperation
from kafkalab.storage.log_segment import FetchDataInfo, LogOffsetMetadata
from kafkalab.storage.transaction_index import AbortedTxn
from kafkalab.storage.unified_log import FetchIsolation


@dataclass
class ReadResult:
    """One partition's part of a fetch (Kafka: LogReadResult)."""

    error: Errors
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    info: FetchDataInfo | None = None
    # read_committed only: aborted transactions overlapping what was read (else None)
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return 0 if self.info is None else self.info.size_in_bytes


@dataclass(frozen=True)
class FetchPartition:
    """What a fetch asks of one partition."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int


class FetchOffsets(Protocol):
    """What a DelayedFetch asks the leader (ReplicaManager has both); each raises
    the KafkaError a client should see when this broker cannot answer."""

    def offset_metadata(self, tp: tuple[str, int], offset: int) -> LogOffsetMetadata:
        """Where `offset` starts on disk (OFFSET_OUT_OF_RANGE outside the log)."""
        ...

    def fetch_offset_snapshot(
        self, tp: tuple[str, int], isolation: FetchIsolation
    ) -> LogOffsetMetadata:
        """Where a fetch with `isolation` may read to, and where that is on disk."""
        ...


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        max_wait_ms: int,
        min_bytes: int,
        isolation: FetchIsolation,
        partitions: list[FetchPartition],
        leader: FetchOffsets,
        on_done: Callable[[], None],
    ) -> None:
        super().__init__(max_wait_ms)
        self.min_bytes = min_bytes
        self.isolation = isolation
        self.partitions = partitions
        self.leader = leader
        self.on_done = on_done
        # where each fetch starts on disk, found once (Kafka: startOffsetMetadata)
        self._starts: dict[tuple[str, int], LogOffsetMetadata] = {}

    def _start(self, p: FetchPartition) -> LogOffsetMetadata:
        tp = (p.topic, p.partition)
        start = self._starts.get(tp)
        if start is None:
            start = self._starts[tp] = self.leader.offset_metadata(tp, p.fetch_offset)
        return start

    def try_complete(self) -> bool:
        accumulated = 0
        for p in self.partitions:
            try:
                end = self.leader.fetch_offset_snapshot((p.topic, p.partition), self.isolation)
                start = self._start(p)
            except KafkaError:
                return self.force_complete()  # errors are answered at once
            if start.message_offset > end.message_offset:
                return self.force_complete()  # ahead of what it may read
            if start.message_offset < end.message_offset:
                if start.segment_base_offset < end.segment_base_offset:
                    return self.force_complete()  # on an older segment
                available = end.relative_position_in_segment - start.relative_position_in_segment
                accumulated += min(available, p.max_bytes)
                if accumulated >= self.min_bytes:
                    # Enough already: the rest could only complete it too. A follower's
                    # fetch watches every partition it follows and an append to any one
                    # of them retries it; without this each retry looked at all of them.
                    return self.force_complete()
        if accumulated >= self.min_bytes:  # min_bytes 0: at once, even with nothing to send
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.on_done()
