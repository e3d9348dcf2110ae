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

Transactions: a transactional data batch starts (or extends) its producer's
ongoing transaction in this partition; the state remembers the transaction's
first offset. A COMMIT or ABORT control batch (written by the transaction
coordinator) completes it (`update` returns a CompletedTxn; the log writes an
ABORT into the segment's `.txnindex` and calls `complete_txn`). A completed
transaction stays "unreplicated" until the high watermark passes its marker.
The first unstable offset is the smallest first offset of the ongoing and the
unreplicated transactions: the last stable offset (LSO) can never pass it.
The snapshot keeps each producer's coordinator epoch and current transaction
first offset (Kafka's snapshot has both fields), so ongoing transactions
survive a restart.

Transaction verification (KIP-890 part 1, `transaction.partition.verification.enable`):
before a producer's first transactional batch in this partition (no transaction
of its epoch ongoing here), the leader asks the transaction coordinator whether
the partition is in the producer's ongoing transaction. `maybe_start_verification`
hands out a VerificationGuard for that question (kept in a VerificationStateEntry
per producer: soft state, not in the snapshot); the append must bring the same
guard back. A marker (the transaction ended: COMMIT, ABORT, or an abort with a
bumped epoch) or the batch that opens the transaction clears the entry, so a
guard from before the marker no longer matches and the late write is refused
(INVALID_TXN_STATE) even if the coordinator's answer was yes.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.errors import Errors
from kafkalab.records.control_record import ControlRecordType, EndTransactionMarker
from kafkalab.records.crc import crc32c
from kafkalab.records.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from kafkalab.storage import durability_ledger
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


class InvalidTxnStateError(StorageError):
    """Kafka: INVALID_TXN_STATE (48). A producer with an ongoing transaction in the
    partition wrote a non-transactional batch."""

    code = Errors.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """Kafka: TRANSACTION_COORDINATOR_FENCED (52). A transaction marker came from a
    coordinator older than one that already wrote markers for this producer."""

    code = Errors.TRANSACTION_COORDINATOR_FENCED


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT/ABORT marker ended (Kafka: CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


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
    coordinator_epoch: int = -1  # of the last marker written for this producer
    current_txn_first_offset: int | None = None  # the ongoing transaction's first offset
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class VerificationGuard:
    """One verification of one producer's first transactional write to a partition
    (Kafka: VerificationGuard): compared by identity. `SENTINEL` is the guard of a
    write that needs no verification (its transaction is already ongoing here)."""

    SENTINEL: VerificationGuard

    def __repr__(self) -> str:
        return (
            "VerificationGuard.SENTINEL"
            if self is VerificationGuard.SENTINEL
            else (f"VerificationGuard({id(self):#x})")
        )


VerificationGuard.SENTINEL = VerificationGuard()


@dataclass(slots=True)
class VerificationStateEntry:
    """A verification under way for one producer (Kafka: VerificationStateEntry)."""

    guard: VerificationGuard
    producer_epoch: int


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state covers batches below this offset
        # first offset -> producer id, oldest first (appends come in offset order)
        self.ongoing_txns: dict[int, int] = {}
        self.unreplicated_txns: dict[int, CompletedTxn] = {}  # first offset -> txn
        self.verification: dict[int, VerificationStateEntry] = {}  # by producer id

    # -- transaction verification (KIP-890 part 1) ----------------------------------------------

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def maybe_start_verification(self, producer_id: int, producer_epoch: int) -> VerificationGuard:
        """The guard a transactional write of (producer_id, producer_epoch) must bring
        back to the append: SENTINEL if its transaction is ongoing here (nothing to
        verify), else the producer's verification under way for this epoch or a new one
        (Kafka: UnifiedLog.maybeStartTransactionVerification)."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return VerificationGuard.SENTINEL
        entry = self.verification.get(producer_id)
        if entry is None or entry.producer_epoch < producer_epoch:
            entry = self.verification[producer_id] = VerificationStateEntry(
                VerificationGuard(), producer_epoch
            )
        return entry.guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        entry = self.verification.get(producer_id)
        return None if entry is None else entry.guard

    def check_verified(self, header: BatchHeader, guard: VerificationGuard) -> None:
        """With verification on: a transactional batch that opens a transaction here
        must come with the guard of the producer's current verification. Raises
        InvalidTxnStateError (Kafka: 'Record was not part of an ongoing transaction')."""
        if not header.is_transactional or header.is_control_batch:
            return
        if self.has_ongoing_transaction(header.producer_id, header.producer_epoch):
            return
        if (
            guard is VerificationGuard.SENTINEL
            or self.verification_guard(header.producer_id) is not guard
        ):
            raise InvalidTxnStateError(
                f"producer {header.producer_id} epoch {header.producer_epoch}: the batch is not "
                "part of an ongoing transaction (the transaction coordinator did not confirm "
                "this partition, or the transaction ended since it did)"
            )

    # -- checking and updating (the leader's append path) ------------------------------------

    def check(self, header: BatchHeader, client: bool = True) -> BatchMetadata | None:
        """Validate a batch before it gets offsets. Returns the metadata of the
        original batch when this one is a client's retry (a duplicate), else None.
        Raises InvalidProducerEpochError, OutOfOrderSequenceError or
        InvalidTxnStateError. Coordinators' batches (`client=False`) are checked
        for their epoch only, as Kafka does."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.producer_epoch == NO_PRODUCER_EPOCH:
            return None  # unknown producer (or its state expired): any sequence starts it
        epoch = header.producer_epoch
        if epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {epoch} is older than the current "
                f"epoch {entry.producer_epoch}: a newer instance has fenced it"
            )
        if (
            not header.is_transactional
            and not header.is_control_batch
            and entry.current_txn_first_offset is not None
        ):
            raise InvalidTxnStateError(
                f"producer {header.producer_id} has a transaction open in this partition "
                f"since offset {entry.current_txn_first_offset}, but sent a non-transactional "
                "batch; commit or abort the transaction first"
            )
        if not client:
            return None
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

    def check_marker(self, header: BatchHeader, marker: EndTransactionMarker) -> None:
        """Validate a COMMIT/ABORT marker from the transaction coordinator: not from an
        older producer epoch (INVALID_PRODUCER_EPOCH) nor an older coordinator epoch
        (TRANSACTION_COORDINATOR_FENCED), as Kafka's ProducerAppendInfo checks."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"{marker.type.name} marker for producer {header.producer_id} has epoch "
                f"{header.producer_epoch}, older than the current {entry.producer_epoch}"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"{marker.type.name} marker for producer {header.producer_id} comes from "
                f"coordinator epoch {marker.coordinator_epoch}, older than "
                f"{entry.coordinator_epoch}: a newer transaction coordinator took over"
            )

    def update(
        self, header: BatchHeader, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Record a batch now in the log (with its final offsets). A control batch
        carries its `marker`; it ends the producer's transaction, returned as a
        CompletedTxn that stays ongoing until the caller calls `complete_txn`
        (after writing an ABORT to the `.txnindex` with `last_stable_offset`)."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        previous_epoch = entry.producer_epoch
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = header.max_timestamp
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        pending = self.verification.get(header.producer_id)
        next_transaction = (
            header.is_control_batch
            and pending is not None
            and previous_epoch < header.producer_epoch == pending.producer_epoch
        )
        if (header.is_transactional or header.is_control_batch) and not next_transaction:
            # a marker ended the transaction, or this batch opened it: a verification
            # started before is spent (its guard no longer matches). Except, in
            # transactions v2, the verification of the next transaction: the marker
            # carries the bumped epoch, which that transaction's writes already have
            # (the partition was added for it; the ended one's writes are fenced by
            # their older epoch)
            self.verification.pop(header.producer_id, None)
        if header.is_control_batch:
            if marker is None:
                return None  # an empty control batch (the cleaner emptied it)
            entry.coordinator_epoch = marker.coordinator_epoch
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = None
            return CompletedTxn(
                header.producer_id,
                header.last_offset if first is None else first,
                header.last_offset,
                marker.type == ControlRecordType.ABORT,
            )
        if header.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    header.last_offset,
                    header.last_offset_delta,
                    header.max_timestamp,
                )
            )
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = header.base_offset
            self.ongoing_txns[header.base_offset] = header.producer_id
        return None

    # -- transactions and the last stable offset ------------------------------------------------

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is done: the first offset of the oldest other
        ongoing transaction, or the offset after its marker (Kafka: same name).
        This is what the `.txnindex` entry of an aborted transaction records."""
        for first, pid in self.ongoing_txns.items():
            if pid != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction is no longer ongoing; it is unstable until the high
        watermark passes its marker (`on_high_watermark_updated`)."""
        if self.ongoing_txns.get(completed.first_offset) == completed.producer_id:
            del self.ongoing_txns[completed.first_offset]
        self.unreplicated_txns[completed.first_offset] = completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high watermark."""
        if self.unreplicated_txns:
            done = [f for f, t in self.unreplicated_txns.items() if t.last_offset < high_watermark]
            for first in done:
                del self.unreplicated_txns[first]

    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of an ongoing or not yet replicated transaction."""
        first = next(iter(self.ongoing_txns), None)
        if self.unreplicated_txns:
            oldest = min(self.unreplicated_txns)
            first = oldest if first is None else min(first, oldest)
        return first

    def _reindex_ongoing(self) -> None:
        self.ongoing_txns = dict(
            sorted(
                (e.current_txn_first_offset, pid)
                for pid, e in self.producers.items()
                if e.current_txn_first_offset is not None
            )
        )

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
            txn_first = entry.current_txn_first_offset
            entries += _SNAP_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                last.last_seq,
                last.last_offset,
                last.offset_delta,
                entry.last_timestamp,
                entry.coordinator_epoch,
                -1 if txn_first is None else txn_first,
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
            durability_ledger.file_synced(tmp, f.fileno())
        os.replace(tmp, path)
        return path

    def load_snapshot(self, max_offset: int, log_end_offset: int | None = None) -> int:
        """Load the latest valid snapshot at or below `max_offset`; corrupt ones and
        ones past `log_end_offset` (default `max_offset`) are deleted. Returns the
        offset to replay the log from (0 without a snapshot)."""
        end = max_offset if log_end_offset is None else log_end_offset
        self.unreplicated_txns.clear()
        for offset in reversed(self.snapshot_offsets()):
            path = snapshot_file(self.dir, offset)
            if offset > end:
                path.unlink()  # past the log end (the log was truncated): useless
                continue
            if offset > max_offset:
                continue
            try:
                self._read_snapshot(path.read_bytes())
            except ValueError:
                path.unlink()
                continue
            self.map_end_offset = offset
            return offset
        self.producers.clear()
        self.ongoing_txns.clear()
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
            pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
                _SNAP_ENTRY.unpack_from(data, pos)
            )
            pos += _SNAP_ENTRY.size
            entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts)
            if txn_first >= 0:
                entry.current_txn_first_offset = txn_first
            if last_seq >= 0:
                first_seq = (last_seq - delta) % (INT32_MAX + 1)
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
            self.producers[pid] = entry
        self._reindex_ongoing()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget every producer idle for `expiration_ms` (producer.id.expiration.ms)
        whose transaction, if any, is over (Kafka: removeExpiredProducers). Its
        next batch is then a new producer's, whatever its sequence: this is why a
        producer silent for longer than the expiration loses its duplicate check.
        Returns the producer ids removed."""
        expired = sorted(
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= expiration_ms
        )
        for pid in expired:
            del self.producers[pid]
        return expired

    def truncate_and_reload(self) -> None:
        """Forget everything (the log was truncated); the log replays it again."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self.verification.clear()
        self.map_end_offset = 0

    def delete_snapshots_before(self, offset: int) -> None:
        for old in self.snapshot_offsets():
            if old < offset:
                snapshot_file(self.dir, old).unlink(missing_ok=True)
