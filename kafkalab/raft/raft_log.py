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
                                       (FetchOffset, LastFetchedEpoch): VALID,
                                       DIVERGING, or SNAPSHOT (fetch the snapshot)
    create_snapshot(id, data)          a snapshot of the state at `id.offset` (KIP-630)
    delete_before_snapshot(id)         drop the entries below it: the log start offset
    install_snapshot(id, data)         a follower's copy of the leader's snapshot

The leader-epoch history is computed from the entries (the first offset of each
epoch), as Kafka's LeaderEpochFileCache keeps it beside the log. Snapshots (Kafka:
RawSnapshotWriter/Reader, ReplicatedLog.createNewSnapshot, deleteBeforeSnapshot)
are the bytes the state machine wrote (kafkalab/raft/snapshot.py: record batches
between a SnapshotHeader and a SnapshotFooter), named by their SnapshotId: the end
offset (the first offset *not* in the snapshot) and the epoch of the record before
it. Entries below the log start offset are gone; the snapshot at the log start
stands in for them. The log
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
    """Kafka: ValidOffsetAndEpoch.Kind."""

    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"  # the offset lies before the log start: fetch this snapshot


@dataclass(frozen=True)
class ValidOffsetAndEpoch:
    """The answer of validate_offset_and_epoch: VALID, DIVERGING with the (end
    offset, epoch) the follower must truncate to (a Fetch's DivergingEpoch), or
    SNAPSHOT with the id of the snapshot to fetch (a Fetch's SnapshotId)."""

    kind: ValidOffsetAndEpochKind
    offset_and_epoch: OffsetAndEpoch


class RaftLog:
    """The log of one voter: entries at offsets log_start_offset, ... with non-decreasing
    epochs, and the snapshots that stand in for the entries below the log start."""

    def __init__(self, entries: Iterable[LogEntry] = ()) -> None:
        self._entries: list[LogEntry] = []
        self._start = 0
        self._snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.append_as_follower(list(entries))

    # -- reading -----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset held as an entry; below it only the snapshot at it."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next record gets."""
        return self._start + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record (0 for an empty log; the epoch of the snapshot at
        the log start if no entry follows it): a Fetch's LastFetchedEpoch."""
        if self._entries:
            return self._entries[-1].epoch
        snapshot = self.earliest_snapshot_id
        return snapshot.epoch if snapshot is not None and snapshot.offset == self._start else 0

    def end_offset_and_epoch(self) -> OffsetAndEpoch:
        """(log end offset, last epoch): what a candidate puts in its VoteRequest."""
        return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)

    @property
    def entries(self) -> tuple[LogEntry, ...]:
        """The entries held, from the log start offset."""
        return tuple(self._entries)

    def read(self, start_offset: int, max_entries: int) -> tuple[LogEntry, ...]:
        """Up to `max_entries` entries from `start_offset` (none past the end)."""
        if start_offset < self._start:
            raise ValueError(
                f"offset {start_offset} is below the log start offset {self._start}: "
                "read the snapshot instead"
            )
        at = start_offset - self._start
        return tuple(self._entries[at : at + max_entries])

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
        start of the next epoch, or the log end offset). Below the entries, the snapshot
        at the log start: its epoch ended at its end offset. (offset 0, epoch 0) when the
        log holds no such epoch (Kafka: ReplicatedLog.endOffsetForEpoch)."""
        history = self.epoch_history()
        for i in range(len(history) - 1, -1, -1):
            found, _start = history[i]
            if found <= epoch:
                end = history[i + 1][1] if i + 1 < len(history) else self.end_offset
                return OffsetAndEpoch(end, found)
        snapshot = self.earliest_snapshot_id
        if snapshot is not None and snapshot.offset == self._start and snapshot.epoch <= epoch:
            return snapshot
        return OffsetAndEpoch(0, 0)

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidOffsetAndEpoch:
        """Does a follower whose log ends at `offset` with last epoch `epoch` agree with
        this (the leader's) log? SNAPSHOT if that lies before what the log can check
        (below the log start, at it in another epoch than the oldest snapshot's, or in
        an epoch older than that snapshot's: Kafka's three cases); VALID if this log
        holds `epoch` up to at least `offset`; otherwise DIVERGING with where our copy
        of that epoch ends (Kafka: KafkaMetadataLog.validateOffsetAndEpoch)."""
        if self._start == 0 and offset == 0 and epoch == 0:
            return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.VALID, OffsetAndEpoch(0, 0))
        earliest = self.earliest_snapshot_id
        if earliest is not None and (
            offset < self._start
            or (offset == self._start and epoch != earliest.epoch)
            or epoch < earliest.epoch
        ):
            latest = self.latest_snapshot_id
            assert latest is not None
            return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.SNAPSHOT, latest)
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.DIVERGING, end)
        return ValidOffsetAndEpoch(ValidOffsetAndEpochKind.VALID, OffsetAndEpoch(offset, epoch))

    # -- snapshots ---------------------------------------------------------------------------

    @property
    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        """The snapshots held, oldest first."""
        return sorted(self._snapshots, key=lambda s: (s.offset, s.epoch))

    @property
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """Kafka: ReplicatedLog.latestSnapshotId."""
        ids = self.snapshot_ids
        return ids[-1] if ids else None

    @property
    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """Kafka: ReplicatedLog.earliestSnapshotId (the one at the log start, if any)."""
        ids = self.snapshot_ids
        return ids[0] if ids else None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        """The bytes of a snapshot (Kafka: RawSnapshotReader), None if not held."""
        return self._snapshots.get(snapshot_id)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep a snapshot of the state after the entries below `snapshot_id.offset`.
        The id must name a place this log holds: its offset within [log start, log end]
        and its epoch the epoch of the entry before it (Kafka: createNewSnapshot checks
        the same through validateOffsetAndEpoch; the client checks the high watermark)."""
        if not self._start <= snapshot_id.offset <= self.end_offset:
            raise ValueError(
                f"snapshot {snapshot_id} is outside the log [{self._start}, {self.end_offset}]"
            )
        earliest = self.earliest_snapshot_id
        if snapshot_id.offset > self._start:
            epoch = self._entries[snapshot_id.offset - 1 - self._start].epoch
        elif earliest is not None and earliest.offset == self._start:
            epoch = earliest.epoch
        else:
            epoch = 0  # nothing before offset 0
        if epoch != snapshot_id.epoch:
            raise ValueError(
                f"snapshot {snapshot_id}: the record before offset {snapshot_id.offset} "
                f"has epoch {epoch}"
            )
        self._store_snapshot(snapshot_id, data)

    def _store_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._snapshots[snapshot_id] = bytes(data)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        """Move the log start offset up to a snapshot held: drop the entries below it and
        the older snapshots (Kafka: ReplicatedLog.deleteBeforeSnapshot). False if the
        log already starts there."""
        if snapshot_id not in self._snapshots:
            raise ValueError(f"no snapshot {snapshot_id}")
        if snapshot_id.offset <= self._start:
            return False
        del self._entries[: snapshot_id.offset - self._start]
        self._start = snapshot_id.offset
        for older in [s for s in self._snapshots if s.offset < snapshot_id.offset]:
            self._drop_snapshot(older)
        return True

    def _drop_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        del self._snapshots[snapshot_id]

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A follower's whole copy of the leader's snapshot (Kafka: onSnapshotFrozen and
        truncateToLatestSnapshot): if this log holds the snapshot's epoch up to its end
        offset, the entries after it stay and the prefix goes; otherwise the log becomes
        the snapshot: empty, starting at its end offset."""
        holds = (
            snapshot_id.offset <= self.end_offset
            and snapshot_id.offset >= self._start
            and self.validate_offset_and_epoch(snapshot_id.offset, snapshot_id.epoch).kind
            is ValidOffsetAndEpochKind.VALID
        )
        self._store_snapshot(snapshot_id, data)
        if holds:
            self.delete_before_snapshot(snapshot_id)
        else:
            self._truncate_fully_and_start_at(snapshot_id)

    def _truncate_fully_and_start_at(self, snapshot_id: OffsetAndEpoch) -> None:
        self._entries.clear()
        self._start = snapshot_id.offset
        for other in [s for s in self._snapshots if s != snapshot_id]:
            self._drop_snapshot(other)

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
        """Drop every entry at `offset` and after (never below the log start: the
        snapshot there is committed)."""
        if offset < self._start:
            raise ValueError(
                f"cannot truncate to {offset}, below the log start offset {self._start}"
            )
        del self._entries[offset - self._start :]

    def truncation_offset_for(self, end: OffsetAndEpoch) -> int:
        """Where a follower truncates after a DivergingEpoch `end` from the leader, by
        Kafka's rule (ReplicatedLog.truncateToEndOffset): where our copy of that epoch
        ends, or the leader's end of it if smaller; without a copy of that epoch, the
        end of the largest older epoch we hold. Never below the log start."""
        if end.epoch == 0:
            return max(self._start, min(end.offset, self.end_offset))
        local = self.end_offset_for_epoch(end.epoch)
        offset = min(local.offset, end.offset) if local.epoch == end.epoch else local.offset
        return max(self._start, offset)

    def truncate_to_end_offset(self, end: OffsetAndEpoch) -> int:
        """Truncate after a DivergingEpoch `end`; the offset truncated to."""
        offset = self.truncation_offset_for(end)
        self.truncate_to(offset)
        return offset
