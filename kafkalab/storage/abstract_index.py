"""AbstractIndex: a memory-mapped file of fixed-size, sorted entries.

Kafka's class: org.apache.kafka.storage.internals.log.AbstractIndex. The
offset index and the time index share this plumbing: the file is preallocated
to `segment.index.bytes` (rounded down to whole entries), memory-mapped, and
trimmed to its entries when the segment rolls or closes.

Invariants kept here:
- Entries are appended in increasing order of offset (and, for the time index,
  of timestamp); nothing in the middle is ever rewritten.
- Every entry after the first has a relative offset > 0, because the first
  entry's offset is >= base_offset and offsets strictly increase (the time
  index keeps this too, see TimeIndex.maybe_append). A slot whose relative
  offset is 0 after the first is therefore an unused (zero) slot. On reopening
  a preallocated file (after a crash nobody trimmed it), the entries are the
  slots before the first such slot, found by binary search (O(log n) reads).
- Unused slots are zero: a new file is zero-filled, and truncation zeroes the
  slots it frees, so the rule above also holds after a truncation.

Kafka itself trusts an existing file's length (it counts every slot of a file
it did not create); kafkalab counts entries by the rule above so an untrimmed
file left by a crash reopens with its real entries, not with thousands of zeros.

Single-threaded: a segment's indexes are used by one event loop (Kafka takes a
lock around each operation; kafkalab does not), so lookups take no lock. They
read the mmap directly with struct.unpack_from and never copy the entries.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any, Self

from kafkalab.storage import durability_ledger
from kafkalab.storage.errors import CorruptIndexError, IndexFullError, InvalidOffsetError

INT32_MAX = 2**31 - 1
_INT32 = struct.Struct(">i")


class AbstractIndex:
    """Shared mmap plumbing for OffsetIndex and TimeIndex."""

    ENTRY_SIZE = 0  # set by subclasses
    #: byte offset of the int32 relative offset inside an entry
    _RELATIVE_OFFSET_AT = 0

    def __init__(
        self,
        path: str | os.PathLike,
        base_offset: int,
        max_index_size: int = 10 * 1024 * 1024,
        writable: bool = True,
    ) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        new_file = not self.path.exists()
        if new_file and not writable:
            raise FileNotFoundError(f"index file {self.path} does not exist")
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        self._file = os.fdopen(os.open(self.path, flags, 0o644), "r+b" if writable else "rb")
        length = os.fstat(self._file.fileno()).st_size
        if writable and new_file:
            length = self._round(max_index_size)
            self._file.truncate(length)
        self._length = length
        self._mmap: mmap.mmap | None = None
        self._map()
        # A file we just created is all zeros: nothing to count (and reading it would
        # fault in pages of a 10 MB file, a MB of memory per partition with readahead).
        self._entries = 0 if new_file else self._count_entries()
        self._on_entries_changed()

    def _on_entries_changed(self) -> None:
        """Hook for subclasses that cache their last entry."""

    # -- mapping ---------------------------------------------------------------------------

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _map(self) -> None:
        if self._length == 0:
            self._mmap = None
            return
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        self._mmap = mmap.mmap(self._file.fileno(), self._length, access=access)
        if hasattr(mmap, "MADV_RANDOM"):
            # Lookups are binary searches: a fault brings in its page, not the
            # readahead window around it (which made every index of an idle
            # partition hold 512 kB of memory).
            self._mmap.madvise(mmap.MADV_RANDOM)

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def _count_entries(self) -> int:
        """Entries in a file being opened: the slots before the first slot i >= 1
        whose relative offset is 0.

        Invariant used: valid entries are a prefix, every valid entry at i >= 1 has
        relative offset > 0, and every slot after the entries is zero. So the
        predicate "slot i (i >= 1) has relative offset 0" is False, ..., False,
        True, ..., True over the file, and its first True is found by binary search.
        Slot 0 may legally hold relative offset 0 (an entry at the base offset), so
        it is judged apart: an all-zero slot 0 followed by a zero slot 1 is an
        empty preallocated file; a file of exactly one slot is a trimmed file with
        one entry (truncation never leaves a one-slot file of zeros, see
        _truncate_to_entries).
        """
        slots = self._length // self.ENTRY_SIZE
        if slots == 0:
            return 0
        lo, hi = 1, slots  # answer in [1, slots]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._relative_offset(mid) == 0:
                hi = mid
            else:
                lo = mid + 1
        if lo == 1 and slots > 1 and self._is_zero_slot(0):
            return 0
        return lo

    def _relative_offset(self, n: int) -> int:
        return _INT32.unpack_from(self._mmap, n * self.ENTRY_SIZE + self._RELATIVE_OFFSET_AT)[0]

    def _is_zero_slot(self, n: int) -> bool:
        assert self._mmap is not None
        at = n * self.ENTRY_SIZE
        return not any(self._mmap[at : at + self.ENTRY_SIZE])

    # -- facts -----------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def relative_offset(self, offset: int) -> int:
        """offset - base_offset, checked to fit an int32 (Kafka: toRelative)."""
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored in index {self.path.name} of base offset "
                f"{self.base_offset}: it must be in [{self.base_offset}, "
                f"{self.base_offset + INT32_MAX}]"
            )
        return relative

    def _check_appendable(self) -> None:
        if not self.writable:
            raise InvalidOffsetError(f"index {self.path} is open read-only")
        if self.is_full():
            raise IndexFullError(
                f"attempt to append to a full index {self.path.name} "
                f"({self._entries} entries); the segment must roll first"
            )

    # -- size changes ----------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Remap to `new_size` bytes (whole entries, never fewer than the entries).
        Returns True when the size changed (Kafka: AbstractIndex.resize)."""
        rounded = max(self._round(new_size), self.size_in_bytes())
        if rounded == self._length or not self.writable:
            return False
        self._unmap()
        self._file.truncate(rounded)
        self._length = rounded
        self._map()
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes())

    def truncate(self) -> None:
        """Remove every entry."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        if self._mmap is not None and entries < self._entries:
            start = entries * self.ENTRY_SIZE
            end = self._entries * self.ENTRY_SIZE
            self._mmap[start:end] = bytes(end - start)  # keep unused slots zero
        self._entries = min(entries, self._entries)
        if self._entries == 0 and self._length == self.ENTRY_SIZE and self.writable:
            # A one-slot file reopens as one entry (_count_entries); an empty index
            # must not leave one behind, so give the slot back.
            self.resize(0)
        self._on_entries_changed()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset`."""
        self._truncate_to_entries(self._first_entry_at_or_above(offset))

    def _first_entry_at_or_above(self, offset: int) -> int:
        relative = offset - self.base_offset
        lo, hi = 0, self._entries
        while lo < hi:
            mid = (lo + hi) // 2
            if self._relative_offset(mid) < relative:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- files -----------------------------------------------------------------------------

    def flush(self) -> None:
        if self._mmap is not None and self.writable:
            self._mmap.flush()
            os.fsync(self._file.fileno())
            durability_ledger.file_synced(self.path, self._file.fileno())

    def close(self) -> None:
        """Trim to the entries, unmap and close. Idempotent."""
        if self._file.closed:
            return
        if self.writable:
            self.trim_to_valid_size()
        self._unmap()
        self._file.close()

    def delete(self) -> bool:
        self.close()
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_path: str | os.PathLike) -> None:
        new_path = Path(new_path)
        os.replace(self.path, new_path)
        self.path = new_path

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file cannot be this index (Kafka: sanityCheck).

        Checks the length (whole entries), that the last entry is not below the base
        offset, and order at a sample: the last entry must be after the first
        (subclasses add their own column, e.g. the time index's timestamps). The
        caller (LogSegment/UnifiedLog recovery) deletes and rebuilds a corrupt index.
        """
        rebuild = "delete it and it will be rebuilt from the segment's .log file"
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"corrupt index file {self.path}: {self._length} bytes is not a multiple of "
                f"the {self.ENTRY_SIZE}-byte entry size; {rebuild}"
            )
        if not self._entries:
            return
        first, last = self._relative_offset(0), self._relative_offset(self._entries - 1)
        if last < 0:
            raise CorruptIndexError(
                f"corrupt index file {self.path}: its last entry's offset "
                f"{self.base_offset + last} is below the base offset {self.base_offset}; "
                f"{rebuild}"
            )
        if self._entries > 1 and last <= first:
            raise CorruptIndexError(
                f"corrupt index file {self.path}: its last entry's offset "
                f"{self.base_offset + last} is not after its first entry's "
                f"{self.base_offset + first}; {rebuild}"
            )
        self._sanity_check_entries(rebuild)

    def _sanity_check_entries(self, rebuild: str) -> None:
        """Hook: subclass-specific checks of a non-empty index."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path.name}, entries={self._entries}, "
            f"max_entries={self.max_entries})"
        )
