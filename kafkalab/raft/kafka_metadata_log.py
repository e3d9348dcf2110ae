"""KafkaMetadataLog: the quorum's log on disk, `__cluster_metadata-0` (Kafka:
org.apache.kafka.raft.KafkaMetadataLog, a ReplicatedLog over a UnifiedLog).

The same interface as RaftLog (raft_log.py), kept in two places: the entries in
memory (what Raft reads) and the UnifiedLog on disk, written in Kafka's record
format (record_serde: one batch per run of an epoch, the epoch in the batch's
PartitionLeaderEpoch, LeaderChange a control batch), with the log's own
leader-epoch-checkpoint as the leader-epoch history that DivergingEpoch answers
come from. One batch holds one entry here, so that Raft may truncate at any
offset (a UnifiedLog is cut between batches); the wire groups an epoch's entries
into one batch. Offsets are assigned by Raft, so the leader's appends and the
follower's are both written as a follower writes (UnifiedLog.append_as_follower:
offsets and epochs as given).

Durability as Kafka has it: an append reaches the page cache; `flush()` fsyncs it
and checkpoints the recovery point (`recovery-point-offset-checkpoint` beside the
log, as a broker keeps one per data directory). KafkaRaftClient flushes before a
leader's own end offset counts for the high watermark and before a follower's next
Fetch. After a power failure the log is cut to the recovery point
(`cut_to_recovery_point`, what kafkalab's fault verb does to a broker) and reopened:
nothing below the high watermark can be gone, because a majority flushed it.

Reopening reads every batch back (recovery drops a torn tail), then truncates
the leader-epoch history to what the log holds (UnifiedLog does). The high
watermark is not persisted (Kafka does not either): a restarted voter learns it
from the leader.

Snapshots (KIP-630) are files in the partition directory, named as Kafka names
them (Snapshots.filenameFromSnapshotId): `<end offset, 20 digits>-<epoch, 10
digits>.checkpoint`, record batches from a SnapshotHeader to a SnapshotFooter
(kafkalab/raft/snapshot.py). One is written as `.checkpoint.part`, fsynced, renamed
and the directory fsynced (FileRawSnapshotWriter.freeze), so a `.checkpoint` is
always whole; a `.part` found at start is a snapshot torn by a crash and is deleted.
Moving the log start offset to a snapshot (deleteBeforeSnapshot) deletes the older
snapshots and the segments wholly below it (a segment holding the snapshot's end
offset stays, its prefix unread). At start the latest snapshot sets the log start
offset; if the log does not hold that snapshot's end offset and epoch (a follower
that installed a leader's snapshot crashed before its log was emptied, or a power
failure cut the log below it) the log is emptied and starts at the snapshot's end
(Kafka: truncateToLatestSnapshot).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch, RaftLog
from kafkalab.raft.raft_wire import METADATA_PARTITION, METADATA_TOPIC
from kafkalab.raft.record_serde import decode_entries, encode_batch
from kafkalab.raft.snapshot import PARTIAL_SUFFIX, parse_snapshot_filename, snapshot_filename
from kafkalab.storage.checkpoint_file import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog, cut_to

METADATA_LOG_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"
_TP = (METADATA_TOPIC, METADATA_PARTITION)


class KafkaMetadataLog(RaftLog):
    """The Raft log of one voter in `directory` (its metadata.log.dir): the partition
    directory `__cluster_metadata-0` and the recovery-point checkpoint beside it."""

    def __init__(self, directory: str | Path, segment_bytes: int | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._checkpoint = OffsetCheckpointFile(self.directory / RECOVERY_POINT_OFFSET_CHECKPOINT)
        recovery_point = self._checkpoint.read().get(_TP, 0)
        config = LogConfig(retention_ms=-1)
        if segment_bytes is not None:  # Kafka: metadata.log.segment.bytes
            config = LogConfig(retention_ms=-1, segment_bytes=segment_bytes)
        self.unified_log = UnifiedLog(
            self.directory / METADATA_LOG_DIR, config, recovery_point=recovery_point
        )
        super().__init__()
        self._entries = list(self._read_all())
        self._start = self._entries[0].offset if self._entries else self.unified_log.log_end_offset
        self._recover_snapshots()

    # -- snapshots on disk -----------------------------------------------------------------

    @property
    def partition_dir(self) -> Path:
        return self.directory / METADATA_LOG_DIR

    def snapshot_path(self, snapshot_id: OffsetAndEpoch) -> Path:
        return self.partition_dir / snapshot_filename(snapshot_id)

    def _recover_snapshots(self) -> None:
        """Kafka: KafkaMetadataLog.recoverSnapshots and truncateToLatestSnapshot. Torn
        `.part` files go; the latest snapshot sets the log start offset."""
        found: list[OffsetAndEpoch] = []
        for path in sorted(self.partition_dir.iterdir()):
            parsed = parse_snapshot_filename(path.name)
            if parsed is None:
                continue
            snapshot_id, partial = parsed
            if partial:
                path.unlink()  # a snapshot torn by a crash before its rename
            else:
                found.append(snapshot_id)
        fsync_dir(self.partition_dir)
        for snapshot_id in found:
            self._snapshots[snapshot_id] = b""  # the bytes stay in the file
        latest = self.latest_snapshot_id
        if latest is None:
            return
        # Kafka's rule: the log is emptied only when the snapshot lies beyond it (a
        # later epoch than its last record's, or past its end: a leader's snapshot
        # installed before the log was truncated to it); otherwise the snapshot only
        # moves the log start. (Asking the log whether it holds the snapshot's offset
        # and epoch is wrong here: segments below the log start survive a restart
        # with records whose epochs the leader-epoch checkpoint no longer lists.)
        last_epoch = self._entries[-1].epoch if self._entries else -1
        if latest.epoch > last_epoch or not self._start <= latest.offset <= self.end_offset:
            self._truncate_fully_and_start_at(latest)
        else:
            self.delete_before_snapshot(latest)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        if snapshot_id not in self._snapshots:
            return None
        return self.snapshot_path(snapshot_id).read_bytes()

    def _store_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Write `.checkpoint.part`, fsync, rename to `.checkpoint`, fsync the directory
        (Kafka: FileRawSnapshotWriter.append/freeze)."""
        final = self.snapshot_path(snapshot_id)
        part = final.with_name(final.name + PARTIAL_SUFFIX)
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)
        fsync_dir(self.partition_dir)
        self._snapshots[snapshot_id] = b""

    def _drop_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        super()._drop_snapshot(snapshot_id)
        self.snapshot_path(snapshot_id).unlink(missing_ok=True)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        """Move the log start offset to the snapshot; segments wholly below it go
        (Kafka: deleteBeforeSnapshot, then the log's retention pass)."""
        moved = super().delete_before_snapshot(snapshot_id)
        log = self.unified_log
        if snapshot_id.offset > log.log_start_offset:
            log.update_high_watermark(snapshot_id.offset)
            log.maybe_increment_log_start_offset(snapshot_id.offset)
            log.delete_old_segments()
        fsync_dir(self.partition_dir)
        return moved

    def _truncate_fully_and_start_at(self, snapshot_id: OffsetAndEpoch) -> None:
        super()._truncate_fully_and_start_at(snapshot_id)
        self.unified_log.truncate_fully_and_start_at(snapshot_id.offset)
        self._checkpoint.write({_TP: self.unified_log.recovery_point})

    def _read_all(self) -> tuple[LogEntry, ...]:
        out: list[LogEntry] = []
        for segment in self.unified_log.segments:
            out.extend(decode_entries(segment.log.read()))
        return tuple(out)

    # -- durability ------------------------------------------------------------------------

    @property
    def flushed_end_offset(self) -> int:
        """Everything below survives a power failure."""
        return self.unified_log.recovery_point

    def flush(self) -> None:
        """fsync the log and checkpoint its recovery point (Kafka: KafkaMetadataLog.flush)."""
        if self.unified_log.recovery_point == self.end_offset:
            return
        self.unified_log.flush()
        self._checkpoint.write({_TP: self.unified_log.recovery_point})

    def close(self) -> None:
        self.flush()
        self.unified_log.close()

    # -- reading ---------------------------------------------------------------------------

    def epoch_history(self) -> list[tuple[int, int]]:
        """The leader-epoch-checkpoint's entries: (epoch, start offset), oldest first."""
        return [(e.epoch, e.start_offset) for e in self.unified_log.leader_epoch_cache.entries]

    # -- writing ---------------------------------------------------------------------------

    def append_as_leader(self, records: Sequence[object], epoch: int) -> tuple[LogEntry, ...]:
        new = super().append_as_leader(records, epoch)
        self._write(new)
        return new

    def append_as_follower(self, entries: Sequence[LogEntry]) -> None:
        held = len(self._entries)
        super().append_as_follower(entries)
        self._write(self._entries[held:])

    def _write(self, entries: Sequence[LogEntry]) -> None:
        """One batch an entry, so that Raft may truncate at any offset (UnifiedLog cuts
        between batches)."""
        if entries:
            self.unified_log.append_as_follower(b"".join(encode_batch([e]) for e in entries))

    def truncate_to(self, offset: int) -> None:
        flushed = self.unified_log.recovery_point
        super().truncate_to(offset)
        self.unified_log.truncate_to(offset)
        if flushed > self.unified_log.recovery_point:  # the checkpoint must not name cut offsets
            self._checkpoint.write({_TP: self.unified_log.recovery_point})


def cut_to_recovery_point(directory: str | Path) -> int:
    """A power failure: cut `__cluster_metadata-0` in `directory` back to the
    checkpointed recovery point, as if the page cache was lost; the bytes cut. Reopen
    with KafkaMetadataLog(directory)."""
    directory = Path(directory)
    point = OffsetCheckpointFile(directory / RECOVERY_POINT_OFFSET_CHECKPOINT).read().get(_TP, 0)
    return cut_to(directory / METADATA_LOG_DIR, point)


__all__ = ["METADATA_LOG_DIR", "KafkaMetadataLog", "cut_to_recovery_point"]
