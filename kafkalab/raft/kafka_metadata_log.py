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
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafkalab.raft.raft_log import LogEntry, RaftLog
from kafkalab.raft.raft_wire import METADATA_PARTITION, METADATA_TOPIC
from kafkalab.raft.record_serde import decode_entries, encode_batch
from kafkalab.storage.checkpoint_file import RECOVERY_POINT_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog, cut_to

METADATA_LOG_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"
_TP = (METADATA_TOPIC, METADATA_PARTITION)


class KafkaMetadataLog(RaftLog):
    """The Raft log of one voter in `directory` (its metadata.log.dir): the partition
    directory `__cluster_metadata-0` and the recovery-point checkpoint beside it."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._checkpoint = OffsetCheckpointFile(self.directory / RECOVERY_POINT_OFFSET_CHECKPOINT)
        recovery_point = self._checkpoint.read().get(_TP, 0)
        self.unified_log = UnifiedLog(
            self.directory / METADATA_LOG_DIR,
            LogConfig(retention_ms=-1),
            recovery_point=recovery_point,
        )
        super().__init__()
        self._entries = list(self._read_all())

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
        before = self.end_offset
        super().append_as_follower(entries)
        self._write(self._entries[before:])

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
