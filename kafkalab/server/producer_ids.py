"""ProducerIdManager: hands out producer ids that are never reused, even after a restart.

Kafka's class: kafka.coordinator.transaction.ProducerIdManager (ids come in
blocks of 1000 from the controller). Here the broker reserves blocks in a small
file in its first log dir, written atomically before any id of the block is
given out, so a crash can skip ids but never repeat one.
"""

from __future__ import annotations

from pathlib import Path

from kafkalab.storage.checkpoint_file import CheckpointFile

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"


class ProducerIdManager:
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
