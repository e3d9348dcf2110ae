"""ProducerStateManager: what a partition remembers about idempotent producers.

Kafka's class: org.apache.kafka.storage.internals.log.ProducerStateManager. For
each producer id the partition keeps its epoch and the metadata of its last
five batches (first and last sequence, last offset). With that the leader:

- answers a retried batch (same producer, epoch and sequences as one of the
  last five) with the offsets it got the first time, and writes nothing;
- refuses a batch whose first sequence is not last sequence + 1
  (OUT_OF_ORDER_SEQUENCE_NUMBER), so nothing is lost or reordered silently;
- refuses a batch from an older epoch (INVALID_PRODUCER_EPOCH): a zombie
  producer that was replaced by a newer instance is fenced.

The state is rebuilt from the log when a partition opens, starting from the
latest snapshot file (`<offset>.snapshot`, Kafka's format: version, CRC-32C and
one entry per producer with its last batch) and replaying batch headers after
it. Snapshots are taken when a segment rolls and when the log closes.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.errors import Errors
from kafkalab.records.crc import crc32c
from kafkalab.records.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from kafkalab.storage.errors import StorageError

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1

_SNAP_HEADER = struct.Struct(">hI")  # version, crc
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta,
#                                            timestamp, coordinator epoch, current txn first offset


class OutOfOrderSequenceError(StorageError):
    """Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45). A batch was lost or reordered
    between an idempotent producer and the leader."""

    code = Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """Kafka: INVALID_PRODUCER_EPOCH (47). The producer was fenced by a newer epoch."""

    code = Errors.INVALID_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state covers batches below this offset

    # -- checking and updating (the leader's append path) ------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch before it gets offsets. Returns the metadata of
        the original batch when this one is a retry (a duplicate), else None.
        Raises InvalidProducerEpochError or OutOfOrderSequenceError."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH:
            return None  # unknown producer (or its state expired): any sequence starts it
        epoch = header.producer_epoch
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {epoch} is older than the current "
                f"epoch {entry.producer_epoch}: a newer instance has fenced it"
            )
        if epoch > entry.producer_epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} starts epoch {epoch} at sequence "
                    f"{header.base_sequence}; a new epoch must start at 0"
                )
            return None
        duplicate = entry.find_duplicate(header.base_sequence, header.last_sequence)
        if duplicate is not None:
            return duplicate
        if not in_sequence(entry.last_seq, header.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence} but the "
                f"next expected is {(entry.last_seq + 1) % (INT32_MAX + 1)}; batches were lost "
                "or reordered in flight"
            )
        return None

    def update(self, header: BatchHeader) -> None:
        """Record a batch now in the log (with its final offsets)."""
        if header.producer_id < 0:
            return
        entry = self.producers.setdefault(
            header.producer_id, ProducerStateEntry(header.producer_id)
        )
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        if not header.is_control_batch and header.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    header.last_offset,
                    header.last_offset_delta,
                    header.max_timestamp,
                )
            )
        self.map_end_offset = max(self.map_end_offset, header.next_offset)

    # -- snapshots ---------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return sorted(int(p.stem) for p in self.dir.glob("*" + SNAPSHOT_SUFFIX) if p.stem.isdigit())

    def take_snapshot(self) -> Path:
        """Write `<map_end_offset>.snapshot` (Kafka's format), atomically."""
        entries = bytearray()
        count = 0
        for entry in self.producers.values():
            if not entry.batches and entry.producer_epoch == NO_PRODUCER_EPOCH:
                continue
            last = entry.batches[-1] if entry.batches else BatchMetadata(-1, -1, -1, 0, -1)
            entries += _SNAP_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                last.last_seq,
                last.last_offset,
                last.offset_delta,
                last.timestamp,
                -1,
                -1,
            )
            count += 1
        body = struct.pack(">i", count) + bytes(entries)
        data = _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + body
        path = snapshot_file(self.dir, self.map_end_offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def load_snapshot(self, max_offset: int) -> int:
        """Load the latest valid snapshot at or below `max_offset`; corrupt ones are
        deleted. Returns the offset to replay the log from (0 without a snapshot)."""
        for offset in reversed(self.snapshot_offsets()):
            path = snapshot_file(self.dir, offset)
            if offset > max_offset:
                path.unlink()  # past the log end (the log was truncated): useless
                continue
            try:
                self._read_snapshot(path.read_bytes())
            except ValueError:
                path.unlink()
                continue
            self.map_end_offset = offset
            return offset
        self.producers.clear()
        self.map_end_offset = 0
        return 0

    def _read_snapshot(self, data: bytes) -> None:
        if len(data) < _SNAP_HEADER.size + 4:
            raise ValueError("snapshot too short")
        version, crc = _SNAP_HEADER.unpack_from(data)
        if version != SNAPSHOT_VERSION or crc32c(data[_SNAP_HEADER.size :]) != crc:
            raise ValueError("bad snapshot version or CRC")
        (count,) = struct.unpack_from(">i", data, _SNAP_HEADER.size)
        pos = _SNAP_HEADER.size + 4
        if len(data) != pos + count * _SNAP_ENTRY.size:
            raise ValueError("snapshot length does not match its entry count")
        self.producers.clear()
        for _ in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, _, _ = _SNAP_ENTRY.unpack_from(data, pos)
            pos += _SNAP_ENTRY.size
            entry = ProducerStateEntry(pid, epoch)
            if last_seq >= 0:
                first_seq = (last_seq - delta) % (INT32_MAX + 1)
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
            self.producers[pid] = entry

    def truncate_and_reload(self) -> None:
        """Forget everything (the log was truncated); the log replays it again."""
        self.producers.clear()
        self.map_end_offset = 0

    def delete_snapshots_before(self, offset: int) -> None:
        for old in self.snapshot_offsets():
            if old < offset:
                snapshot_file(self.dir, old).unlink(missing_ok=True)
