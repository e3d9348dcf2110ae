"""FileRecords: a `.log` file, or a byte range of one, holding RecordBatch v2 frames.

Kafka's class: org.apache.kafka.common.record.FileRecords. A segment's data
file is nothing but batches back to back; there is no file header and no
padding. A slice (`file.slice(position, size)`) shares the open file and names a
byte range: that is what a fetch returns, so that a server can hand the range to
`os.sendfile` without the bytes passing through Python.

Invariant kept here: bytes are only ever appended at the end (`size_in_bytes`)
or cut off the end (`truncate_to`); nothing in the middle is rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalab.records.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    read_header,
)
from kafkalab.storage import durability_ledger
from kafkalab.storage.errors import KafkaStorageError

#: How much recovery and dump-log read at a time.
SCAN_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where a batch starts (Kafka: FileRecords.LogOffsetPosition)."""

    offset: int  # the batch's last offset
    position: int  # byte position of the batch in the file
    size: int  # the batch's size in bytes


class FileRecords:
    """An open `.log` file, or a slice [start, end) of one."""

    _owns_fd = False  # a pinned slice closes its own descriptor

    def __init__(self, path: Path, fd: int, start: int, end: int | None, is_slice: bool) -> None:
        self.path = path
        self._fd = fd
        self._start = start
        self._end = end  # None: the whole file, growing with appends
        self.is_slice = is_slice
        self._size = (end - start) if end is not None else os.fstat(fd).st_size - start

    @classmethod
    def open(cls, path: str | os.PathLike, *, mutable: bool = True) -> FileRecords:
        path = Path(path)
        flags = (os.O_RDWR | os.O_CREAT) if mutable else os.O_RDONLY
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open log file {path}: {e}") from e
        return cls(path, fd, 0, None, False)

    # -- size and bytes ---------------------------------------------------------------

    def size_in_bytes(self) -> int:
        return self._size

    @property
    def start(self) -> int:
        """Byte position of this slice in the file (0 for a whole file)."""
        return self._start

    def fileno(self) -> int:
        """The open file descriptor, for `os.sendfile(out, fileno(), start, size)`."""
        return self._fd

    def read(self, position: int = 0, size: int | None = None) -> bytes:
        """Bytes [position, position+size) of this slice (copying; for tests, tools, labs)."""
        size = self._size - position if size is None else min(size, self._size - position)
        if size <= 0:
            return b""
        return os.pread(self._fd, size, self._start + position)

    def slice(self, position: int, size: int) -> FileRecords:
        """A view of [position, position+size) of this file, clipped to its end."""
        if position < 0 or position > self._size:
            raise ValueError(f"slice position {position} outside [0, {self._size}] of {self.path}")
        size = max(0, min(size, self._size - position))
        start = self._start + position
        return FileRecords(self.path, self._fd, start, start + size, True)

    def pinned(self) -> FileRecords:
        """This range with a file descriptor of its own (a dup), closed by `close()`
        or when the slice is collected. What a response that is sent later must hold:
        by then the segment may be closed (its topic deleted, retention), and its
        descriptor number given to another file or socket, so that a plain slice
        would send some other file's bytes. (Kafka keeps deleted segments open for
        file.delete.delay.ms for the same reason.)"""
        pinned = FileRecords(
            self.path, os.dup(self._fd), self._start, self._start + self._size, True
        )
        pinned._owns_fd = True
        return pinned

    def __del__(self) -> None:
        if self._owns_fd:
            self.close()

    # -- writes (whole files only) -------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at the end. Returns the bytes written (all of them)."""
        if self.is_slice:
            self._check_whole_file("append to")
        written = os.pwrite(self._fd, data, self._size)
        while written < len(data):  # a short write: rare, but allowed by POSIX
            written += os.pwrite(self._fd, memoryview(data)[written:], self._size + written)
        self._size += written
        return written

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes. Returns the bytes removed."""
        self._check_whole_file("truncate")
        if size < 0 or size > self._size:
            raise KafkaStorageError(
                f"cannot truncate {self.path} to {size} bytes: it is {self._size} bytes"
            )
        removed = self._size - size
        if removed:
            os.ftruncate(self._fd, size)
            self._size = size
            durability_ledger.file_rewritten(self._fd)
        return removed

    def flush(self) -> None:
        """fsync: after this returns, the bytes survive a power failure."""
        os.fsync(self._fd)
        durability_ledger.file_synced(self.path, self._fd, append_only=True)

    def close(self) -> None:
        if (self._owns_fd or not self.is_slice) and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> bool:
        self.close()
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_path: Path) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def _check_whole_file(self, what: str) -> None:
        if self.is_slice:
            raise TypeError(f"cannot {what} a slice of {self.path}; only the whole file")

    # -- scanning batch headers ----------------------------------------------------------

    def batch_headers(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start_position`, reading only
        the 61-byte headers. Stops at a trailing partial batch; raises
        CorruptRecordError on an impossible header. CRCs are not checked."""
        position = start_position
        while self._size - position >= RECORD_BATCH_OVERHEAD:
            header = read_header(self.read(position, RECORD_BATCH_OVERHEAD))
            if position + header.size_in_bytes > self._size:
                return
            yield position, header
            position += header.size_in_bytes

    def batches_with_bytes(
        self, start_position: int = 0
    ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, batch bytes) of each batch, reading in big chunks.

        Used where every byte is needed anyway (recovery, dump-log). Stops quietly
        at a trailing partial batch; raises CorruptRecordError on an impossible
        header, so a caller can stop at the last valid batch.
        """
        position = start_position
        while self._size - position >= LOG_OVERHEAD:
            chunk = memoryview(self.read(position, SCAN_CHUNK_BYTES))
            pos = 0
            while len(chunk) - pos >= RECORD_BATCH_OVERHEAD:
                header = read_header(chunk, pos)
                size = header.size_in_bytes
                if pos + size > len(chunk):
                    if pos == 0:  # one batch bigger than a chunk: read it whole
                        if position + size > self._size:
                            return
                        chunk = memoryview(self.read(position, size))
                        continue
                    break
                yield position + pos, header, chunk[pos : pos + size]
                pos += size
            if pos == 0:
                if self._size - position >= RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(f"unreadable batch at position {position}")
                return  # a torn header at the very end
            position += pos

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch at or after `starting_position` whose last offset is
        >= `target_offset` (Kafka: FileRecords.searchForOffsetWithSize)."""
        for position, header in self.batch_headers(starting_position):
            if header.last_offset >= target_offset:
                return LogOffsetPosition(header.last_offset, position, header.size_in_bytes)
        return None

    def __repr__(self) -> str:
        kind = "slice" if self.is_slice else "file"
        return f"FileRecords({kind} {self.path.name} [{self._start}, {self._start + self._size}))"
