"""LeaderEpochFileCache: where each leader epoch started in a partition's log (KIP-101).

Kafka's class: org.apache.kafka.storage.internals.epoch.LeaderEpochFileCache,
persisted in the partition directory as `leader-epoch-checkpoint`:

    0          <- version
    3          <- entries
    0 0        <- epoch 0 started at offset 0
    2 1200     <- epoch 2 started at offset 1200 (epoch 1 wrote nothing)
    3 1350

A follower that becomes a follower (or restarts) asks the leader "where did my
latest epoch end?" (OffsetForLeaderEpoch) and truncates there, instead of at
its high watermark, which is what lost or diverged data before KIP-101.

Invariants: epochs strictly increase from entry to entry and start offsets
never decrease; every change is written to the checkpoint before it returns.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from kafkalab.storage.checkpoint_file import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    def __init__(self, directory: str | Path) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(Path(directory) / LEADER_EPOCH_CHECKPOINT)
        self.entries: list[EpochEntry] = [EpochEntry(e, o) for e, o in self.checkpoint.read()]

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (Kafka: assign). A known or
        older epoch changes nothing; entries that conflict with the new one (a
        start offset at or past it) are dropped first. Returns True if it changed."""
        if epoch < 0 or (self.entries and epoch <= self.latest_epoch):
            return False
        self.entries = [e for e in self.entries if e.start_offset < start_offset]
        self.entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (Kafka: endOffsetFor): the
        largest known epoch <= requested, and the start offset of the first epoch
        after it (the log end offset for the latest epoch)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self.entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET  # newer than anything we know
        if higher == 0:
            return requested_epoch, self.entries[0].start_offset
        return self.entries[higher - 1].epoch, self.entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch that wrote `offset`: the latest entry starting at or before it
        (Kafka: epochForOffset); UNDEFINED_EPOCH before the first entry."""
        starts = [e.start_offset for e in self.entries]
        at = bisect.bisect_right(starts, offset)
        return self.entries[at - 1].epoch if at else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at `end_offset`: forget epochs that start at or after it."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop epochs wholly before it and
        move the start of the epoch that spans it (Kafka: truncateFromStart)."""
        before = [e for e in self.entries if e.start_offset <= start_offset]
        if not before:
            return
        kept = [EpochEntry(before[-1].epoch, start_offset)]
        kept += [e for e in self.entries if e.start_offset > start_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def clear(self) -> None:
        self.entries = []
        self._flush()

    def _flush(self) -> None:
        self.checkpoint.write((e.epoch, e.start_offset) for e in self.entries)
