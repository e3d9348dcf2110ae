"""ProducerIdManager: hands out producer ids that are never reused, even after a restart.

Kafka's class: kafka.coordinator.transaction.ProducerIdManager (ids come in
blocks of 1000 from the controller, AllocateProducerIds, KIP-730). Here the
broker reserves blocks in a small file in its first log dir, written atomically
before any id of the block is given out, so a crash can skip ids but never
repeat one. In a cluster every broker hands out ids, so each takes its own
residue class: id = n * ID_STRIDE + node.id (node ids below ID_STRIDE), which
makes ids unique across brokers without asking the controller.
"""

from __future__ import annotations

from pathlib import Path

from kafkalab.storage.checkpoint_file import CheckpointFile

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block"
ID_STRIDE = 1024


class ProducerIdManager:
    def __init__(self, log_dir: str | Path, node_id: int | None = None) -> None:
        """`node_id`: set in a cluster, so brokers never hand out the same id."""
        if node_id is not None and not 0 <= node_id < ID_STRIDE:
            raise ValueError(f"node.id {node_id} must be below {ID_STRIDE} in a cluster")
        self._node_id = node_id
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
        if self._node_id is not None:
            return producer_id * ID_STRIDE + self._node_id
        return producer_id
