"""LogSegment: one `.log` data file with its sparse `.index` and `.timeindex` (and `.txnindex`).

Kafka's class: org.apache.kafka.storage.internals.log.LogSegment. A segment is
named by its base offset, the offset of its first record, written as 20 digits:

    00000000000000004096.log         batches back to back (FileRecords)
    00000000000000004096.index       (offset - 4096, file position), 8 bytes each
    00000000000000004096.timeindex   (max timestamp so far, offset - 4096), 12 bytes each
    00000000000000004096.txnindex    aborted transactions whose ABORT marker is here
                                     (only when there is one; TransactionIndex)

Invariants kept here:
- Every offset in the segment is >= base_offset and < base_offset + 2**31, so
  relative offsets fit the indexes' int32 (`can_convert_to_relative_offset`).
- The indexes are sparse: after at least `index.interval.bytes` of batches a new
  entry (the batch's last offset, the batch's position) is added. A lookup gives
  a position at or before the wanted batch; a short scan of batch headers finds it.
- The time index only grows: an entry is added only when the largest timestamp
  seen so far grew.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kafkalab.records.record_batch import CorruptRecordError, ensure_valid
from kafkalab.storage.errors import LogOffsetMetadataError
from kafkalab.storage.file_records import FileRecords, LogOffsetPosition
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.offset_index import OffsetIndex
from kafkalab.storage.time_index import TimeIndex, TimestampOffset
from kafkalab.storage.transaction_index import (
    TXN_INDEX_FILE_SUFFIX,
    AbortedTxn,
    TransactionIndex,
    txn_index_file,
)

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"  # a segment the LogCleaner is still writing
SWAP_FILE_SUFFIX = ".swap"  # a cleaned segment about to replace the segments it was cleaned from
INT32_MAX = 2**31 - 1


def filename_prefix(base_offset: int) -> str:
    """Kafka's LogFileUtils.filenamePrefixFromOffset: 20 digits, zero padded."""
    return f"{base_offset:020d}"


def log_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (filename_prefix(base_offset) + TIME_INDEX_FILE_SUFFIX + suffix)


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset and where it is on disk (Kafka: LogOffsetMetadata)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it started and the file byte range to send.

    `records` is a slice of the segment file (send it with `os.sendfile(sock,
    records.fileno(), records.start, records.size_in_bytes())`) or None when
    there is nothing to read. The range may end inside a batch, exactly as
    Kafka's does; clients drop a trailing partial batch.
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords | None = None
    first_entry_incomplete: bool = False

    @property
    def size_in_bytes(self) -> int:
        return 0 if self.records is None else self.records.size_in_bytes()

    def read_bytes(self) -> bytes:
        """The bytes of the range (a copy; servers send the file range instead)."""
        return b"" if self.records is None else self.records.read()


class LogSegment:
    """A data file and its two indexes, starting at `base_offset`."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int = 0,
        created_ms: int | None = None,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        if txn_index is None:
            path = log.path.with_name(
                log.path.name.replace(LOG_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX, 1)
            )
            txn_index = TransactionIndex(path, base_offset)
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self._bytes_since_last_index_entry = 0
        # Largest timestamp in the segment and the offset of its batch; loaded lazily
        # from the time index's last entry for a segment read back from disk.
        self._max_timestamp_and_offset: TimestampOffset | None = None
        # Timestamp of the first batch (what segment.ms is measured from).
        self._rolling_based_timestamp: int | None = None

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int | None = None,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or create) the three files of the segment at `base_offset`; a
        `file_suffix` (".cleaned", ".swap") names them as Kafka's LogCleaner does."""
        directory = Path(directory)
        size = config.segment_index_bytes
        return cls(
            FileRecords.open(log_file(directory, base_offset, file_suffix)),
            OffsetIndex(offset_index_file(directory, base_offset, file_suffix), base_offset, size),
            TimeIndex(time_index_file(directory, base_offset, file_suffix), base_offset, size),
            base_offset,
            config.index_interval_bytes,
            config.segment_jitter_ms,
            now_ms,
            TransactionIndex(txn_index_file(directory, base_offset, file_suffix), base_offset),
        )

    # -- facts about the segment ----------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size_in_bytes()

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts_and_offset().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts_and_offset().offset

    def _max_ts_and_offset(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    def largest_timestamp(self) -> int:
        """What time retention judges the segment by: its largest record timestamp,
        or the file's modification time when no record carries one."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return int(os.stat(self.log.path).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- appends ------------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
        batches: list[tuple[int, int, int, int]],
    ) -> None:
        """Append whole, validated batches that hold offsets up to `largest_offset`.

        `batches` lists, for each batch in `records`, (relative position, size,
        last offset, max timestamp), as the log found them when it validated the
        batches; the segment does not parse the bytes again.
        """
        if not records:
            return
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise LogOffsetMetadataError(
                f"offset {largest_offset} cannot be stored in segment {self.base_offset}: "
                "relative offsets must fit in an int32; the log should have rolled"
            )
        physical_position = self.log.size_in_bytes()
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        self.log.append(records)
        current = self._max_ts_and_offset()
        max_ts, max_ts_offset = current.timestamp, current.offset
        since_entry = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        for rel_position, size, last_offset, max_timestamp in batches:
            if max_timestamp > max_ts:
                max_ts, max_ts_offset = max_timestamp, last_offset
            # Kafka: one index entry per index.interval.bytes of appended batches.
            if since_entry > interval:
                self.offset_index.append(last_offset, physical_position + rel_position)
                self.time_index.maybe_append(max_ts, max_ts_offset)
                since_entry = 0
            since_entry += size
        self._bytes_since_last_index_entry = since_entry
        if max_ts != current.timestamp:
            self._max_timestamp_and_offset = TimestampOffset(max_ts, max_ts_offset)

    # -- reads --------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """Position of the first batch holding an offset >= `offset`, or None.

        The index lookup finds the largest indexed batch ending at or below
        `offset`; from there batch headers are scanned (Kafka: translateOffset).
        """
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(
            offset, max(mapping.position, starting_position)
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """The byte range from the batch holding `start_offset`, at most `max_size`
        bytes and never past `max_position`; None when the segment has no such
        offset. With `min_one_message`, a first batch larger than `max_size` is
        returned whole (so a consumer can always make progress)."""
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0, got {max_size}")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, found.position)
        max_position = self.size if max_position is None else max_position
        adjusted = max(max_size, found.size) if min_one_message else max_size
        if adjusted == 0 or max_position <= found.position:
            return FetchDataInfo(metadata, None)
        fetch_size = min(max_position - found.position, adjusted)
        return FetchDataInfo(
            metadata, self.log.slice(found.position, fetch_size), adjusted < found.size
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch in this segment (base offset if empty)."""
        last = self.offset_index.lookup(2**63 - 1)
        next_offset = self.base_offset
        for _, header in self.log.batch_headers(last.position):
            next_offset = header.next_offset
        return next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record with a timestamp
        >= `timestamp` and an offset >= `starting_offset`, or None (Kafka:
        findOffsetByTimestamp). Uses the time index, then the offset index, then
        scans batches and the records of the first batch that can hold it."""
        from kafkalab.records.memory_records import decode_batch

        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for pos, header in self.log.batch_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            batch = decode_batch(self.log.read(pos, header.size_in_bytes))
            for record in batch.records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.timestamp, record.offset, header.partition_leader_epoch
        return None

    # -- rolling ------------------------------------------------------------------------------

    def time_waited_for_roll(self, now_ms: int, largest_timestamp: int) -> int:
        """ms since this segment's first batch timestamp (or creation), for segment.ms."""
        if self._rolling_based_timestamp is None and self.size > 0:
            first = next(self.log.batch_headers(0), None)
            self._rolling_based_timestamp = None if first is None else first[1].max_timestamp
        based = self._rolling_based_timestamp
        if based is not None and based >= 0:
            return largest_timestamp - based
        return now_ms - self.created_ms

    def should_roll(
        self,
        messages_size: int,
        max_offset_in_messages: int,
        max_timestamp: int,
        now_ms: int,
        config: LogConfig,
    ) -> str | None:
        """Why the next append must go to a new segment, or None (Kafka: shouldRoll).
        The reason string is what the labs show."""
        size = self.log.size_in_bytes()
        if size > config.segment_bytes - messages_size:
            return f"segment.bytes: {size} + {messages_size} bytes > {config.segment_bytes}"
        if size > 0:
            reach = self.time_waited_for_roll(now_ms, max_timestamp)
            limit = config.max_segment_ms
            if reach > limit - self.roll_jitter_ms:
                name = "segment.ms" if limit == config.segment_ms else "max.compaction.lag.ms"
                return f"{name}: segment is {reach} ms old > {limit}"
        if self.offset_index.is_full():
            return f"offset index full ({self.offset_index.entries} entries)"
        if self.time_index.is_full():
            return f"time index full ({self.time_index.entries} entries)"
        if not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX:
            return f"offset {max_offset_in_messages} does not fit relative to {self.base_offset}"
        return None

    def on_become_inactive_segment(self) -> None:
        """The log rolled past this segment: write the final time index entry and
        trim both indexes to their entries (Kafka: onBecomeInactiveSegment)."""
        self._write_final_time_index_entry()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def _write_final_time_index_entry(self) -> None:
        current = self._max_ts_and_offset()
        if current.timestamp >= 0:
            self.time_index.maybe_append(current.timestamp, current.offset, skip_full_check=True)

    # -- recovery and truncation --------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when an index file is missing or inconsistent."""
        for index in (self.offset_index, self.time_index):
            index.sanity_check()
        self.txn_index.sanity_check()

    def update_txn_index(self, txn: AbortedTxn) -> None:
        """An ABORT marker in this segment ended `txn` (Kafka: updateTxnIndex)."""
        self.txn_index.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        """The `.txnindex` entries overlapping [fetch_offset, upper_bound_offset)."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def recover(self, allow_gaps: bool = False) -> int:
        """Rebuild both indexes from the data file, checking every batch's CRC, and
        cut the file at the first invalid batch. Returns the bytes cut off.

        Invariant: afterwards every byte of the file is a valid batch, the indexes
        describe exactly those batches, and offsets follow the rule of the log:

        - `allow_gaps=False` (cleanup.policy without compact): offsets have no gaps,
          so each batch starts exactly where the previous one ended and the first
          at the segment's base offset. This also catches a scribbled baseOffset,
          which the CRC does not cover.
        - `allow_gaps=True` (cleanup.policy with compact, whose cleaned segments
          and whose followers' copies of them have gaps): offsets strictly
          increase, each batch starting after the previous batch's last offset and
          the first at or after the base offset. A cleaned batch keeps its original
          base and last offsets (lastOffsetDelta), even when records, or all of
          them, were removed. Kafka checks no more than this for any log.
        """
        self.offset_index.truncate()
        self.time_index.truncate()
        self.txn_index.reset()  # the log rebuilds it from the producer state (UnifiedLog)
        self.resize_indexes(self.offset_index.max_index_size)
        valid_bytes = 0
        last_index_entry = 0
        expected_offset = self.base_offset
        current = TimestampOffset(-1, self.base_offset)
        try:
            for position, header, data in self.log.batches_with_bytes(0):
                ensure_valid(data)
                # See the docstring: contiguous offsets, or (compacted) increasing ones.
                if header.base_offset != expected_offset and not (
                    allow_gaps and header.base_offset > expected_offset
                ):
                    raise CorruptRecordError(
                        f"batch at position {position} has base offset {header.base_offset}, "
                        f"{'below' if allow_gaps else 'not'} {expected_offset} where the "
                        "previous batch ended"
                    )
                if not self.can_convert_to_relative_offset(header.last_offset):
                    raise CorruptRecordError(
                        f"batch at position {position} has last offset {header.last_offset}, "
                        f"out of range for segment {self.base_offset}"
                    )
                if header.max_timestamp > current.timestamp:
                    current = TimestampOffset(header.max_timestamp, header.last_offset)
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid_bytes)
                    self.time_index.maybe_append(current.timestamp, current.offset)
                    last_index_entry = valid_bytes
                valid_bytes += header.size_in_bytes
                expected_offset = header.next_offset
        except CorruptRecordError:
            pass  # everything from here on is cut off below
        truncated = self.log.truncate_to(valid_bytes)
        self._max_timestamp_and_offset = current
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        self.offset_index.trim_to_valid_size()
        self._write_final_time_index_entry()
        self.time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= `offset`; returns bytes removed.
        `offset` must fall on a batch boundary or past the end (Kafka truncates
        whole batches: the batch holding `offset` goes entirely)."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.offset_index.max_index_size)  # it is the active segment now
        if found is None:
            return 0
        removed = self.log.truncate_to(found.position)
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            self._bytes_since_last_index_entry = found.position - last.position
        else:
            self._bytes_since_last_index_entry = found.position
        self._max_timestamp_and_offset = None  # reloaded from the (truncated) time index
        if self.size == 0:
            self._rolling_based_timestamp = None
            self.created_ms = int(time.time() * 1000)
        return removed

    # -- files --------------------------------------------------------------------------------

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Write the final time index entry, trim the indexes and close the files."""
        if self.log.fileno() >= 0:
            self._write_final_time_index_entry()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def delete(self) -> None:
        """Delete the files (Kafka renames them `.deleted` first; see UnifiedLog)."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log.delete()

    def change_file_suffixes(self, old: str, new: str, *, log_last: bool = False) -> None:
        """Rename all three files, e.g. suffix '' -> '.deleted' before deleting them.
        With `log_last` the `.log` file is renamed after its indexes, so its rename
        is the one that counts (the cleaner's `.cleaned` -> `.swap` commit)."""
        files = (self.log, self.offset_index, self.time_index, self.txn_index)
        if log_last:
            files = (self.offset_index, self.time_index, self.txn_index, self.log)
        for f in files:
            name = str(f.path)
            if not name.endswith(old):
                raise ValueError(f"{name} does not end with {old!r}")
            f.rename_to(Path(name[: len(name) - len(old)] + new))

    def set_last_modified(self, ms: int) -> None:
        """Set the data file's modification time (the cleaner keeps the original's)."""
        os.utime(self.log.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def resize_indexes(self, size: int) -> None:
        """Give the indexes `size` bytes of room again (the active segment after load)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"


__all__ = [
    "CLEANED_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "FetchDataInfo",
    "LogOffsetMetadata",
    "LogSegment",
    "filename_prefix",
    "log_file",
    "offset_index_file",
    "time_index_file",
    "txn_index_file",
]
