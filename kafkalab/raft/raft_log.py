"""RaftLog: the replicated log of one voter, in memory (Kafka: ReplicatedLog).

Kafka's interface: org.apache.kafka.raft.ReplicatedLog, implemented over a
UnifiedLog by KafkaMetadataLog. Here the log is a list of `LogEntry(offset,
epoch, record)` with what Raft asks of a log and nothing more:

    append_as_leader(records, epoch)   the leader writes in its epoch
    append_as_follower(entries)        a follower copies the leader's entries
    truncate_to(offset)                drop the tail from `offset`
    truncate_to_end_offset(oe)         the follower's rule for a DivergingEpoch
    end_offset_for_epoch(epoch)        the leader-epoch history: where `epoch` ended
    validate_offset_and_epoch(o, e)    the leader's check of a Fetch's
                                       (FetchOffset, LastFetchedEpoch)

The leader-epoch history is computed from the entries (the first offset of each
epoch), as Kafka's LeaderEpochFileCache keeps it beside the log. There is no
log start offset other than 0: snapshots (KIP-630) are a later step. The log
is kept across a restart of its voter (the test harness passes the same object
to the rebuilt client), as if every append were flushed before it is counted,
which is what Kafka's KafkaRaftClient does (the leader flushes before its own
end offset counts for the high watermark, a follower before its next Fetch): the
client calls `flush()`, a no-op here. KafkaMetadataLog (kafka_metadata_log.py) is
the same interface on disk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import total_ordering


@total_ordering
@dataclass(frozen=True)
class OffsetAndEpoch:
    """An offset and the epoch of the record before it (Kafka: OffsetAndEpoch).
    Ordered by epoch first, then offset: the order Vote uses to ask whether a
    candidate's log is at least as up to date as the voter's."""

    offset: int
    epoch: int

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, OffsetAndEpoch):
            return NotImplemented
        return (self.epoch, self.offset) < (other.epoch, other.offset)


@dataclass(frozen=True)
class LogEntry:
    """One record of the log: its offset, the leader epoch that wrote it, the record."""

    offset: int
    epoch: int
    record: object


class ValidOffsetAndEpochKind(Enum):
    """Kafka: ValidOffsetAndEpoch.Kind (SNAPSHOT is not here: no snapshots yet)."""

    VALID = "valid"
    DIVERGING = "diverging"


@dataclass(frozen=True)
class ValidOffsetAndEpoch:
    """The answer of validate_offset_and_epoch: VALID, or DIVERGING with the
    (end offset, epoch) the follower must truncate to (a Fetch's DivergingEpoch)."""

    kind: ValidOffsetAndEpochKind
    offset_and_epoch: OffsetAndEpoch


class RaftLog:
    """The log of one voter: entries at offsets 0, 1, 2, ... with non-decreasing epochs."""

    def __init__(self, entries: Iterable[LogEntry] = ()) -> None:
        self._entries: list[LogEntry] = []
        self.append_as_follower(list(entries))

    # -- reading -----------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next record gets."""
        return len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record (0 for an empty log): a Fetch's LastFetchedEpoch."""
        return self._entries[-1].epoch if self._entries else 0

    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        """(log end offset, last epoch): what a candidate puts in its VoteRequest."""
        return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)

    @property
    def entries(self) -> tuple[LogEntry, ...]:
        return tuple(self._entries)

    def read(self, start_offset: int, max_entries: int) -> tuple[LogEntry, ...]:
        """Up to `max_entries` entries from `start_offset` (none past the end)."""
        if start_offset < 0:
            raise ValueError(f"offset {start_offset} is negative")
        return tuple(self._entries[start_offset : start_offset + max_entries])

    def epoch_history(self) -> list[tuple[int, int]]:
        """The leader-epoch history: (epoch, start offset) for every epoch in the log,
        oldest first (Kafka: the entries of the leader-epoch-checkpoint)."""
        history: list[tuple[int, int]] = []
        for entry in self._entries:
            if not history or history[-1][0] != entry.epoch:
                history.append((entry.epoch, entry.offset))
        return history

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in this log and the offset where it ended (the
        start of the next epoch, or the log end offset). (offset 0, epoch 0) when the
        log holds no such epoch (Kafka: ReplicatedLog.endOffsetForEpoch)."""
        history = self.epoch_history()
        for i in range(len(history) - 1, -1, -1):
            found, _start = history[i]
            if found <= epoch:
                end = history[i + 1][1] if i + 1 < len(history) else self.end_offset
                return OffsetAndEpoch(end, found)
        return OffsetAndEpoch(0, 0)

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """Does a follower whose log ends at `offset` with last epoch `epoch` agree with
        this (the leader's) log? VALID if this log holds `epoch` up to at least `offset`;
        otherwise DIVERGING with where our copy of that epoch ends (Kafka:
        ReplicatedLog.validateOffsetAndEpoch, without the snapshot case)."""
        if offset == 0 and epoch == 0:
            return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.VALID, OffsetAndEpoch(0, 0))
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.DIVERGING, end)
        return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.VALID, OffsetAndEpoch(offset, epoch))

    # -- durability --------------------------------------------------------------------------

    @property
    def flushed_end_offset(self) -> int:
        """Below this offset the log survives a power failure: all of it in memory
        (KafkaMetadataLog keeps the fsynced recovery point)."""
        return self.end_offset

    def flush(self) -> None:
        """Make every append durable (KafkaRaftClient calls it as Kafka's does: before a
        leader's end offset counts, after a follower's append). Nothing to do here."""

    # -- writing -----------------------------------------------------------------------------

    def append_as_leader(self, records: Sequence[object], epoch: int) -> tuple[LogEntry, ...]:
        """Append `records` in `epoch` (never older than the last epoch); the new entries."""
        if epoch < self.last_fetched_epoch:
            raise ValueError(
                f"cannot append in epoch {epoch}: the log already holds epoch "
                f"{self.last_fetched_epoch}"
            )
        start = self.end_offset
        new = tuple(LogEntry(start + i, epoch, r) for i, r in enumerate(records))
        self._entries.extend(new)
        return new

    def append_as_follower(self, entries: Sequence[LogEntry]) -> None:
        """Append the leader's entries: contiguous from the log end offset, epochs never
        going down."""
        last_epoch = self.last_fetched_epoch
        for i, entry in enumerate(entries):
            if entry.offset != self.end_offset:
                raise ValueError(
                    f"entry {i} has offset {entry.offset}; the log ends at {self.end_offset}"
                )
            if entry.epoch < last_epoch:
                raise ValueError(f"entry at {entry.offset} has epoch {entry.epoch} < {last_epoch}")
            last_epoch = entry.epoch
            self._entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at `offset` and after."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        del self._entries[offset:]

    def truncation_offset_for(self, end: OffsetAndEpoch) -> int:
        """Where a follower truncates after a DivergingEpoch `end` from the leader, by
        Kafka's rule (ReplicatedLog.truncateToEndOffset): where our copy of that epoch
        ends, or the leader's end of it if smaller; without a copy of that epoch, the
        end of the largest older epoch we hold."""
        if end.epoch == 0:
            return min(end.offset, self.end_offset)
        local = self.end_offset_for_epoch(end.epoch)
        return min(local.offset, end.offset) if local.epoch == end.epoch else local.offset

    def truncate_to_end_offset(self, end: OffsetAndEpoch) -> int:
        """Truncate after a DivergingEpoch `end`; the offset truncated to."""
        offset = self.truncation_offset_for(end)
        self.truncate_to(offset)
        return offset
