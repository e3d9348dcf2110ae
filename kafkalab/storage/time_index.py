"""TimeIndex: the sparse `.timeindex` file mapping timestamps to offsets in a segment.

Kafka's class: org.apache.kafka.storage.internals.log.TimeIndex. Each entry is
12 bytes, big-endian: a timestamp (int64) and an offset relative to the
segment's base offset (int32). The timestamp is the **largest timestamp seen so
far** in the segment and the offset is that of the batch that carried it, so
both columns only grow, even when producers send timestamps out of order.

Invariant: timestamps and offsets strictly increase from entry to entry, and
the first timestamp is >= 0 (NO_TIMESTAMP, -1, is never indexed).

The index keeps one slot free, as Kafka's TimeIndex.isFull does
(`entries >= max_entries - 1`), so the final entry can always be written when
the segment rolls or closes: LogSegment calls
`maybe_append(max_timestamp, its_offset, skip_full_check=True)`, which may use
that last slot. Only when every slot is used does even that raise IndexFullError.

Differences from Kafka's TimeIndex.maybeAppend, on purpose:
- an append that would be skipped anyway (timestamp not larger than the last)
  is a no-op even on a full index (Kafka checks fullness first);
- a timestamp below the last one is skipped, not an IllegalStateException
  (the caller passes the segment's running maximum, so it cannot happen there);
- a larger timestamp for the *same* offset as the last entry replaces that
  entry's timestamp instead of adding a second entry with the same offset.
  That keeps offsets strictly increasing, which the reopen rule in
  AbstractIndex relies on; lookups stay correct (an entry for an earlier
  offset is still a lower bound of where to start scanning).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalab.storage.abstract_index import AbstractIndex
from kafkalab.storage.errors import CorruptIndexError, IndexFullError, InvalidOffsetError

_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A timestamp and an offset (Kafka: TimestampOffset). -1 means no timestamp."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    _RELATIVE_OFFSET_AT = 8

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range: {self.path.name} has {self._entries}")
        timestamp, relative = _ENTRY.unpack_from(self._mmap, n * self.ENTRY_SIZE)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _on_entries_changed(self) -> None:
        self._last = (
            self.entry(self._entries - 1)
            if self._entries
            else TimestampOffset(-1, self.base_offset)
        )

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry; TimestampOffset(-1, base offset) when there is none."""
        return self._last

    def is_full(self) -> bool:
        """Full one slot early: the last slot is kept for the final entry written on
        roll/close with skip_full_check=True (Kafka: TimeIndex.isFull)."""
        return self._entries >= self.max_entries - 1

    def _sanity_check_entries(self, rebuild: str) -> None:
        first, last = self._timestamp(0), self._timestamp(self._entries - 1)
        if last < first or (self._entries > 1 and last == first):
            raise CorruptIndexError(
                f"corrupt time index file {self.path}: its last timestamp {last} is not "
                f"after its first timestamp {first}; {rebuild}"
            )

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset) when
        every entry is later (Kafka: TimeIndex.lookup)."""
        lo, hi = 0, self._entries  # first entry with timestamp > target
        while lo < hi:
            mid = (lo + hi) // 2
            if self._timestamp(mid) <= target_timestamp:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return TimestampOffset(-1, self.base_offset)
        return self.entry(lo - 1)

    def _timestamp(self, n: int) -> int:
        return _ENTRY.unpack_from(self._mmap, n * self.ENTRY_SIZE)[0]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's
        (or than -1 when empty) (Kafka: TimeIndex.maybeAppend).

        Raises InvalidOffsetError if `offset` is below the last entry's offset or
        outside [base_offset, base_offset + 2**31 - 1]; IndexFullError if the index
        is full (`is_full`) and `skip_full_check` is False, or if no slot at all is
        left. `skip_full_check=True` is for the final entry on roll/close.
        """
        if not self.writable:
            raise InvalidOffsetError(f"index {self.path} is open read-only")
        last = self._last
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to {self.path.name} after offset "
                f"{last.offset}: time index offsets must not go back"
            )
        if timestamp <= last.timestamp:
            return  # the largest timestamp did not grow (or is NO_TIMESTAMP): nothing to index
        if self._entries and offset == last.offset:
            # Same offset, larger timestamp: replace the last entry's timestamp so
            # offsets stay strictly increasing (see the module docstring).
            struct.pack_into(">q", self._mmap, (self._entries - 1) * self.ENTRY_SIZE, timestamp)
            self._last = TimestampOffset(timestamp, offset)
            return
        if not skip_full_check and self.is_full():
            raise IndexFullError(
                f"attempt to append to a full time index {self.path.name} "
                f"({self._entries} entries); the segment must roll first"
            )
        if self._entries >= self.max_entries:
            raise IndexFullError(f"time index {self.path.name} has no slot left at all")
        _ENTRY.pack_into(
            self._mmap, self._entries * self.ENTRY_SIZE, timestamp, self.relative_offset(offset)
        )
        self._entries += 1
        self._last = TimestampOffset(timestamp, offset)
