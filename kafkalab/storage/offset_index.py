"""OffsetIndex: the sparse `.index` file mapping offsets to byte positions in a segment.

Kafka's class: org.apache.kafka.storage.internals.log.OffsetIndex. Each entry is
8 bytes, big-endian: the offset relative to the segment's base offset (int32)
and the byte position of a batch in the `.log` file (int32). An entry names a
batch's **last** offset and the position where that batch **starts**, so a
lookup of any offset at or below it lands at or before the wanted batch.

    relative offset | position
    ----------------+---------
               35   |   4143     <- batch ending at base+35 starts at byte 4143
               71   |   8290

Invariant: offsets and positions strictly increase from entry to entry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalab.storage.abstract_index import AbstractIndex
from kafkalab.storage.errors import InvalidOffsetError

_ENTRY = struct.Struct(">ii")
_POSITION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset and the byte position of its batch (Kafka: OffsetPosition)."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8
    _RELATIVE_OFFSET_AT = 0

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry, with the offset made absolute."""
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range: {self.path.name} has {self._entries}")
        relative, position = _ENTRY.unpack_from(self._mmap, n * self.ENTRY_SIZE)
        return OffsetPosition(self.base_offset + relative, position)

    def _on_entries_changed(self) -> None:
        self._last_offset = self.entry(self._entries - 1).offset if self._entries else None

    @property
    def last_offset(self) -> int:
        """Offset of the last entry; the base offset when there is none."""
        return self.base_offset if self._last_offset is None else self._last_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= `target_offset`, or (base offset, 0)
        when every entry is larger (Kafka: OffsetIndex.lookup)."""
        relative = target_offset - self.base_offset
        lo, hi = 0, self._entries  # find the first entry with offset > target
        while lo < hi:
            mid = (lo + hi) // 2
            if self._relative_offset(mid) <= relative:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(lo - 1)

    def fetch_upper_bound_offset(
        self, fetch_position: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry whose position is >= fetch_position.position + fetch_size:
        an offset beyond what a fetch of `fetch_size` bytes can reach, or None."""
        limit = fetch_position.position + fetch_size
        lo, hi = 0, self._entries  # positions increase with offsets
        while lo < hi:
            mid = (lo + hi) // 2
            if _POSITION.unpack_from(self._mmap, mid * self.ENTRY_SIZE + 4)[0] < limit:
                lo = mid + 1
            else:
                hi = mid
        return self.entry(lo) if lo < self._entries else None

    def append(self, offset: int, position: int) -> None:
        """Add an entry (Kafka: OffsetIndex.append).

        Raises IndexFullError when every slot is used (the segment must roll), and
        InvalidOffsetError when `offset` is not above the last entry's offset, does
        not fit an int32 relative to the base offset, or `position` is not an int32 >= 0.
        """
        self._check_appendable()
        if self._last_offset is not None and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to {self.path.name} after offset "
                f"{self.last_offset}: index entries must have increasing offsets"
            )
        if position < 0 or position > 2**31 - 1:
            raise InvalidOffsetError(f"position {position} does not fit an int32 index entry")
        _ENTRY.pack_into(
            self._mmap, self._entries * self.ENTRY_SIZE, self.relative_offset(offset), position
        )
        self._entries += 1
        self._last_offset = offset
