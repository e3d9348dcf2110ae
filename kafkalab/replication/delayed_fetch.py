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

An event on one partition looks at that partition again only
(`try_complete_on`), counting the others as the last full look found them: a
follower's fetch watches every partition of its session.

`on_done()` runs exactly once, and reads what is there then.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

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


class FetchPartition(NamedTuple):
    """What a fetch asks of one partition (a tuple: a follower's fetch makes one for
    every partition of its session, each time)."""

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
        at_end: set[tuple[str, int]] | None = None,
    ) -> None:
        """`at_end`: partitions the fetch's own read just found with nothing to read
        (fetch offset at the end it may read to, no error). The first look counts
        them as 0 bytes without asking the log: nothing ran in between. For a
        follower's session of a thousand idle partitions that look was most of
        the cost of parking its fetch (issue 28)."""
        super().__init__(max_wait_ms)
        self.min_bytes = min_bytes
        self.isolation = isolation
        self.partitions = partitions
        self.leader = leader
        self.on_done = on_done
        # where each fetch starts on disk, found once (Kafka: startOffsetMetadata)
        self._starts: dict[tuple[str, int], LogOffsetMetadata] = {}
        self._by_tp = {(p.topic, p.partition): p for p in partitions}
        # the bytes each partition may read, as last looked at, and their sum
        self._bytes: dict[tuple[str, int], int] | None = None
        self._total = 0
        self._at_end = at_end or set()

    def _start(self, p: FetchPartition) -> LogOffsetMetadata:
        tp = (p.topic, p.partition)
        start = self._starts.get(tp)
        if start is None:
            start = self._starts[tp] = self.leader.offset_metadata(tp, p.fetch_offset)
        return start

    def _available(self, p: FetchPartition) -> int | None:
        """The bytes `p` may read now, at most its max_bytes; None when the fetch must
        answer at once (an error, ahead of what it may read, on an older segment)."""
        tp = (p.topic, p.partition)
        try:
            end = self.leader.fetch_offset_snapshot(tp, self.isolation)
            if p.fetch_offset == end.message_offset:
                return 0  # nothing yet: where it starts on disk is not needed
            start = self._start(p)
        except KafkaError:
            return None  # errors are answered at once
        if start.message_offset > end.message_offset:
            return None  # ahead of what it may read
        if start.message_offset < end.message_offset:
            if start.segment_base_offset < end.segment_base_offset:
                return None  # on an older segment
            available = end.relative_position_in_segment - start.relative_position_in_segment
            return min(available, p.max_bytes)
        return 0

    def try_complete(self) -> bool:
        self._bytes = {}
        self._total = 0
        at_end = self._at_end
        for p in self.partitions:
            if at_end and (p.topic, p.partition) in at_end:
                self._bytes[(p.topic, p.partition)] = 0
                continue
            available = self._available(p)
            if available is None:
                return self.force_complete()
            self._bytes[(p.topic, p.partition)] = available
            self._total += available
            if self._total >= self.min_bytes:
                # Enough already: the rest could only complete it too.
                return self.force_complete()
        if self._total >= self.min_bytes:  # min_bytes 0: at once, even with nothing to send
            return self.force_complete()
        return False

    def try_complete_on(self, key: Hashable) -> bool:
        """An event on partition `key` only: look at that one again, and count the
        others as the last full look found them. A follower's fetch watches every
        partition it follows and an append to any one wakes it; looking at all of
        them on each wake-up made each produce of an acks=all load O(partitions)
        (issue 28). Kafka's tryComplete looks at every partition each time; here
        a change on another partition is seen when an event on it comes (every
        append and HW move sends one), or at the expiry."""
        p = self._by_tp.get(key) if isinstance(key, tuple) else None
        if p is None or self._bytes is None:
            return self.try_complete()
        self._at_end.discard(key)  # something happened there since the read
        available = self._available(p)
        if available is None:
            return self.force_complete()
        self._total += available - self._bytes.get(key, 0)
        self._bytes[key] = available
        if self._total >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.on_done()
