"""TimeIndex: the sparse `.timeindex` file mapping timestamps to offsets in a segment.

Kafka's class: org.apache.kafka.storage.internals.log.TimeIndex. Each entry is
12 bytes, big-endian: a timestamp (int64) and an offset relative to the
segment's base offset (int32). The timestamp is the **largest timestamp seen so
far** in the segment and the offset is that of the batch that carried it, so
both columns only grow, even when producers send timestamps out of order.

Invariant: timestamps strictly increase and offsets increase from entry to
entry. The index keeps one slot free (`is_full` one entry early) so the final
entry can always be written when the segment rolls or closes
(`maybe_append(..., skip_full_check=True)`), as Kafka's does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalab.storage.abstract_index import AbstractIndex
from kafkalab.storage.errors import IndexFullError, InvalidOffsetError

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
        # One slot stays free for the final entry written on roll/close.
        return self._entries >= self.max_entries - 1

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
        """Append (timestamp, offset) if the timestamp is larger than the last one
        (Kafka: TimeIndex.maybeAppend). `skip_full_check` uses the spare slot."""
        if not self.writable:
            raise InvalidOffsetError(f"index {self.path} is open read-only")
        last = self._last
        if self._entries and offset < last.offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to {self.path.name} after offset "
                f"{last.offset}: time index offsets must not go back"
            )
        if self._entries and timestamp <= last.timestamp:
            return  # the largest timestamp did not grow: nothing to index
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
