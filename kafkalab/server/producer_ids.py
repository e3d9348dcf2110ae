"""ProducerIdManager: hands out producer ids that are never reused, even after a restart.

Kafka's classes: kafka.coordinator.transaction.ProducerIdManager and its two
kinds. Both have `generate()`, what the transaction coordinator and
InitProducerId call:

- RPCProducerIdManager, a broker in a cluster: ids come in blocks of 1000 from
  the controller (AllocateProducerIds, KIP-730), which writes each block to the
  metadata log (ProducerIdsRecord) before it answers. No broker, not one whose
  data directory was wiped and not one whose controller restarted, is ever
  given a block twice. The next block is asked for when 90% of the current one
  is used; if ids run out before it comes, `generate()` raises
  COORDINATOR_LOAD_IN_PROGRESS, which a client retries (Kafka does the same).
- ProducerIdManager, a broker on its own (no controller to ask): it reserves
  blocks in a small file in its first log dir, written atomically before any id
  of the block is given out, so a crash can skip ids but never repeat one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from kafkalab.errors import Errors, KafkaError
from kafkalab.storage.checkpoint_file import CheckpointFile

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
#: Kafka's RPCProducerIdManager.PidPrefetchThreshold: ask for the next block when
#: this much of the current one is used.
PREFETCH_THRESHOLD = 0.90
RETRY_BACKOFF_S = 0.1


class ProducerIdManager:
    """A standalone broker's ids, from blocks reserved in a file of its log dir."""

    def __init__(self, log_dir: str | Path) -> None:
        self._file: CheckpointFile[int] = CheckpointFile(
            Path(log_dir) / FILE_NAME, 1, str, lambda f: int(f[0])
        )
        saved = self._file.read()
        self._next = saved[0] if saved else 0
        self._block_end = self._next

    def generate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self._file.write([self._block_end])  # reserve before handing out
        producer_id = self._next
        self._next += 1
        return producer_id


#: AllocateProducerIds to the controller: (broker id, broker epoch) -> (first id, count).
Allocate = Callable[[int, int], Awaitable[tuple[int, int]]]


class RPCProducerIdManager:
    """A broker's ids in a cluster, in blocks from the controller (AllocateProducerIds)."""

    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], allocate: Allocate) -> None:
        """`broker_epoch`: our registration's epoch now (-1 until we registered)."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.allocate = allocate
        self._next = 0
        self._block_end = 0  # the current block: [_next, _block_end)
        self._block_size = 0
        self._waiting: tuple[int, int] | None = None  # the next block, come but not begun
        self._asking: asyncio.Task | None = None

    def start(self) -> None:
        """Ask for the first block now, so the first InitProducerId need not wait."""
        self._ask()

    def stop(self) -> None:
        if self._asking is not None:
            self._asking.cancel()

    def generate(self) -> int:
        if self._next >= self._block_end:
            if self._waiting is None:
                self._ask()
                raise KafkaError(
                    Errors.COORDINATOR_LOAD_IN_PROGRESS,
                    "no producer id block from the controller yet: try again",
                )
            start, size = self._waiting
            self._waiting = None
            self._next, self._block_end, self._block_size = start, start + size, size
        producer_id = self._next
        self._next += 1
        used = self._block_size - (self._block_end - self._next)
        if self._waiting is None and used >= PREFETCH_THRESHOLD * self._block_size:
            self._ask()
        return producer_id

    def _ask(self) -> None:
        if self._asking is None or self._asking.done():
            self._asking = asyncio.get_running_loop().create_task(self._fetch_block())

    async def _fetch_block(self) -> None:
        """Ask until the controller gives a block (we may not be registered yet, or
        the controller may be away)."""
        while True:
            epoch = self.broker_epoch()
            if epoch >= 0:
                try:
                    start, size = await self.allocate(self.broker_id, epoch)
                    self._waiting = (start, size)
                    log.info("producer ids %d to %d from the controller", start, start + size - 1)
                    return
                except KafkaError as e:
                    log.info("AllocateProducerIds failed (%s); asking again", e)
            await asyncio.sleep(RETRY_BACKOFF_S)
