"""DelayedFetch: a fetch waiting until `min_bytes` are readable or `max_wait_ms` passes.

Kafka's class: kafka.server.DelayedFetch. Watched under every partition it
asks for; an append (or, for consumers, a high watermark move) calls
`check_and_complete` on that partition and the fetch tries again. An error on
any partition (this broker stopped leading it, the offset is out of range)
answers at once, and so does a fetch with `min_bytes` 0 (as in Kafka: nothing
readable is already enough). `on_done()` runs exactly once, and reads what is
there then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkalab.errors import Errors
from kafkalab.replication.delayed_operation import DelayedOperation
from kafkalab.storage.log_segment import FetchDataInfo
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


#: ReplicaManager.read(topic, partition, offset, max_bytes, min_one_message, isolation)
ReadFn = Callable[[str, int, int, int, bool, FetchIsolation], ReadResult]


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        max_wait_ms: int,
        min_bytes: int,
        isolation: FetchIsolation,
        partitions: list[FetchPartition],
        read: ReadFn,
        on_done: Callable[[], None],
    ) -> None:
        super().__init__(max_wait_ms)
        self.min_bytes = min_bytes
        self.isolation = isolation
        self.partitions = partitions
        self.read = read
        self.on_done = on_done

    def try_complete(self) -> bool:
        available = 0
        for p in self.partitions:
            result = self.read(
                p.topic, p.partition, p.fetch_offset, p.max_bytes, True, self.isolation
            )
            if result.error != Errors.NONE:
                return self.force_complete()  # errors are answered at once
            available += result.size
        if available >= self.min_bytes:  # min_bytes 0: at once, even with nothing to send
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.on_done()
