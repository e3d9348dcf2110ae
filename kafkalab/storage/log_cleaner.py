"""LogCleaner: log compaction, keeping the latest record per key (cleanup.policy=compact).

Kafka's classes: kafka.log.LogCleaner (with Cleaner and LogToClean),
LogCleanerManager (which log, which offsets) and SkimpyOffsetMap (here
OffsetMap). A compacted log is two sections, split by the offset stored for the
partition in the log dir's `cleaner-offset-checkpoint` (Kafka's checkpoint
format: `topic partition offset` lines):

    log start                 first dirty offset        first uncleanable offset   LEO
        |  clean (compacted before) |  dirty (appended since)  |  active segment, past the HW |
        [seg 0][seg 1]              [seg 2][seg 3]             [active .....................]

A cleaning pass (Cleaner.clean):
1. builds an OffsetMap, key -> latest offset, of the dirty section's records
   (skipping aborted transactions), up to the first uncleanable offset: the
   active segment's base, the last stable offset (never past the high
   watermark, never into an open transaction), and the first segment younger
   than min.compaction.lag.ms, rounded down to a segment start;
2. rewrites every segment from the log start to the end of the mapped range,
   in groups of consecutive segments that fit one segment (segment.bytes,
   segment.index.bytes, int32 relative offsets), each group into one
   `<base>.log.cleaned` segment, keeping a record only when it is the latest of
   its key (or past the map), and a tombstone (null value) only until its
   batch's delete horizon (KIP-534: the first pass that keeps a tombstone
   stamps its batch with now + delete.retention.ms; a later pass after that
   time drops it);
3. swaps each cleaned segment in (UnifiedLog.replace_segments: `.cleaned` ->
   `.swap`, old segments deleted, `.swap` -> `.log`; a crash at any step is
   finished or undone when the log is loaded), if the log still holds the very
   segments cleaned;
4. stores the end of the mapped range in `cleaner-offset-checkpoint`.

Steps 1-2 are a CleanTask (`run_clean_task`): they read only segment files and
write only `.cleaned` files, so they can run in another process; steps 3-4
(`LogCleaner.swap_in`) run where the log is owned (the broker's event loop).

Batches keep their base offset, last offset, producer fields, leader epoch,
timestamp type and codec; records keep offsets, timestamps and headers; a
rewritten batch gets a new CRC-32C. A batch left with no record is dropped,
except (as Kafka does) when it is an active producer's last batch (its
sequence numbers protect the producer's idempotence) or the last batch of a
group (so a cleaned segment still ends where the segments it replaced ended;
Kafka keeps only the last batch of the whole pass. A crash recovery finds a
`.swap`'s replaced segments by its offset range (UnifiedLog._complete_swaps):
with each group's end kept that range is exact, where Kafka's can leave an old
segment of the group behind, for the next pass to clean again).

Transactions: one scan of batch headers finds aborted transactions (their
ABORT markers) and open ones (which bound the last stable offset); the
`.txnindex` entries of the segments a cleaned segment replaces move to it when
their marker is kept. Records of aborted transactions are
removed; a marker goes, after its delete horizon, once no record of its
transaction is left. Control batches are otherwise kept.

Decisions (what to keep) are pure functions of batch headers, records, the
offset map and `now_ms`; file I/O happens in Cleaner.clean_segments and
UnifiedLog.replace_segments.

Scheduling: `LogCleaner.clean_filthiest_log(logs, now_ms)` picks the compacted
log with the largest dirty ratio above min.cleanable.dirty.ratio (or past
max.compaction.lag.ms) and cleans it in the caller; LogManager.tick runs it
every log.cleaner.backoff.ms. With `threads` >= 1 (log.cleaner.threads, the
broker) `start_cleaning` hands such logs to CleanerThreads, each a process of
its own (pure-Python cleaning in a thread would hold the GIL and slow the
event loop to a crawl; benchmarks/bench_cleaner_loop.py), and `poll` swaps in
what they finished. `clean(log, now_ms)` cleans one log now, whatever its
ratio (for tests and labs).
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.records.compression import decompress
from kafkalab.records.control_record import ControlRecordType
from kafkalab.records.memory_records import build_retained_batch
from kafkalab.records.record import Record, decode_record
from kafkalab.records.record_batch import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    TimestampType,
    read_header,
)
from kafkalab.records.varint import read_unsigned_varint
from kafkalab.storage import durability_ledger
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.errors import KafkaStorageError
from kafkalab.storage.file_records import FileRecords
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_segment import (
    CLEANED_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
)
from kafkalab.storage.offset_index import OffsetIndex
from kafkalab.storage.time_index import TimeIndex
from kafkalab.storage.transaction_index import AbortedTxn, TransactionIndex, txn_index_file
from kafkalab.storage.unified_log import UnifiedLog, parse_topic_partition

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: log.cleaner.dedupe.buffer.size (Kafka's default, shared by the cleaner threads)
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
#: log.cleaner.io.buffer.load.factor
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9
#: log.cleaner.backoff.ms: how long the cleaner sleeps when no log needs cleaning
DEFAULT_CLEANER_BACKOFF_MS = 15_000
#: log.cleaner.threads (Kafka's default; the broker's, see LogCleaner for 0)
DEFAULT_CLEANER_THREADS = 1
#: log.cleaner.io.max.bytes.per.second: Kafka's default is Double.MaxValue, no limit
DEFAULT_MAX_IO_BYTES_PER_SECOND = float("inf")
_WRITE_CHUNK = 1 << 20  # cleaned batches are appended to the cleaned segment in ~1 MiB writes

TopicPartition = tuple[str, int]


class OffsetMap:
    """key -> offset of its latest record in the dirty section (Kafka: SkimpyOffsetMap).

    Kafka keeps a 16-byte MD5 hash and an 8-byte offset per slot in a fixed
    buffer; this map keeps the keys themselves in a dict (no hash collisions)
    but counts slots the same way, so `memory` bounds how many keys one pass
    can map: 24 bytes a slot, filled to `load_factor`. A pass whose dirty
    section has more keys maps a prefix and cleans up to there.
    """

    BYTES_PER_ENTRY = 24

    def __init__(
        self,
        memory: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR,
    ) -> None:
        self.slots = memory // self.BYTES_PER_ENTRY
        self.max_size = int(self.slots * load_factor)
        if self.max_size < 1:
            raise ValueError(
                f"an offset map of {memory} bytes holds no key; raise log.cleaner.dedupe.buffer.size"
            )
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset the map covers

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 when it is not in the map."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    @property
    def size(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_size

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1


@dataclass
class CleanerStats:
    """What a pass read and wrote (Kafka: CleanerStats), for logs, labs, benchmarks."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    records_read: int = 0
    records_written: int = 0
    invalid_records: int = 0  # records without a key: a compacted log cannot keep them
    tombstones_removed: int = 0
    start_ns: int = field(default_factory=time.perf_counter_ns)
    map_done_ns: int = 0
    end_ns: int = 0

    @property
    def elapsed_s(self) -> float:
        return max(self.end_ns - self.start_ns, 1) / 1e9

    @property
    def mb_per_s(self) -> float:
        """MB of log read by the cleaning (not the mapping) per second of the whole pass."""
        return self.bytes_read / (1 << 20) / self.elapsed_s


@dataclass(frozen=True, slots=True)
class TransactionScan:
    """What one scan of batch headers says about transactions in [start, end)."""

    aborted: list[AbortedTxn]
    first_unstable_offset: int | None  # the first offset of the oldest open transaction


def _control_type(data: memoryview, header: BatchHeader) -> ControlRecordType | None:
    records = _decode_records(data, header)[0]
    if not records or records[0].key is None or len(records[0].key) < 4:
        return None
    try:
        return ControlRecordType(int.from_bytes(records[0].key[2:4], "big", signed=True))
    except ValueError:
        return None


def scan_transactions(log: UnifiedLog, start: int, end: int) -> TransactionScan:
    """Find aborted and open transactions among the batches in [start, end)
    (what Kafka reads from `.txnindex` files and the producer state)."""
    open_txns: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for segment in _segments_between(log, start, end):
        for position, header in segment.log.batch_headers(0):
            if header.base_offset >= end:
                break
            if header.last_offset < start or not header.is_transactional:
                continue
            pid = header.producer_id
            if not header.is_control_batch:
                open_txns.setdefault(pid, header.base_offset)
                continue
            data = memoryview(segment.log.read(position, header.size_in_bytes))
            kind = _control_type(data, header)
            first = open_txns.pop(pid, None)
            if kind is ControlRecordType.ABORT and first is not None:
                aborted.append(AbortedTxn(pid, first, header.last_offset))
    return TransactionScan(aborted, min(open_txns.values(), default=None))


class CleanedTransactionMetadata:
    """Transaction state while the cleaner walks the log (Kafka: same name).

    Tells, for a data batch, whether it belongs to an aborted transaction (then
    its records go), and for a control batch whether it can go: an ABORT marker
    once none of its transaction's batches is left, a COMMIT marker when no
    batch of its transaction was seen in this pass (they were compacted away).
    """

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._aborted = [(a.first_offset, a.producer_id, a) for a in aborted]
        heapq.heapify(self._aborted)
        self._ongoing_aborted: dict[int, list] = {}  # pid -> [txn, last observed batch offset]
        self._ongoing_committed: set[int] = set()

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, pid, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(pid, [txn, None])

    def on_control_batch_read(self, header: BatchHeader, kind: ControlRecordType | None) -> bool:
        """True when the control batch can be discarded."""
        self._consume_aborted_up_to(header.last_offset)
        pid = header.producer_id
        if kind is None:  # an empty control batch: already cleaned
            return True
        if kind is ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(pid, None)
            return not (ongoing is not None and ongoing[1] is not None)
        if kind is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing[1] = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False


def _uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos` (the one-byte case inline: most are)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    return read_unsigned_varint(buf, pos, 10)


def scan_records(
    body: bytes | memoryview, header: BatchHeader
) -> list[tuple[int, bytes | None, bool, int, int]]:
    """(offset, key, value is null, start, end) of each record in a batch's
    decompressed records, reading only what cleaning needs (Kafka's cleaner
    iterates records the same way). Raises CorruptRecordError on bad framing."""
    out = []
    pos = 0
    size = len(body)
    base = header.base_offset
    try:
        for _ in range(header.records_count):
            start = pos
            raw, pos = _uvarint(body, pos)
            end = pos + ((raw >> 1) ^ -(raw & 1))
            p = pos + 1  # attributes
            while body[p] & 0x80:  # timestampDelta: not needed to decide
                p += 1
            raw, p = _uvarint(body, p + 1)
            offset = base + ((raw >> 1) ^ -(raw & 1))
            raw, p = _uvarint(body, p)
            key_len = (raw >> 1) ^ -(raw & 1)
            key = None
            if key_len >= 0:
                key = bytes(body[p : p + key_len])
                p += key_len
            raw, p = _uvarint(body, p)
            if p > end or end > size:
                raise CorruptRecordError(f"record at {start} of batch {base} runs past its end")
            out.append((offset, key, raw == 1, start, end))  # zigzag(-1) == 1: null value
            pos = end
    except IndexError:
        raise CorruptRecordError(f"batch at offset {base} ends inside a record") from None
    if pos != size:
        raise CorruptRecordError(f"batch at offset {base} has {size - pos} bytes after its records")
    return out


def _decode_records(data: memoryview, header: BatchHeader) -> tuple[list[Record], list[memoryview]]:
    """The batch's records and each record's bytes (to copy them when unchanged)."""
    body = memoryview(decompress(header.compression_type, data[RECORD_BATCH_OVERHEAD:]))
    records: list[Record] = []
    spans: list[memoryview] = []
    at = 0
    append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    base_offset, base_ts = header.base_offset, header.base_timestamp
    for _ in range(header.records_count):
        record, end = decode_record(body, at, base_offset, base_ts)
        if append_time:
            record = Record(
                record.offset, header.max_timestamp, record.key, record.value, record.headers
            )
        records.append(record)
        spans.append(body[at:end])
        at = end
    if at != len(body):
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has {len(body) - at} bytes after its records"
        )
    return records, spans


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log and its cleanable range (Kafka: LogToClean)."""

    topic_partition: TopicPartition
    log: UnifiedLog
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment's base offset: cleaning stops before it
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool  # a dirty segment is older than max.compaction.lag.ms
    aborted: tuple[AbortedTxn, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Dirty bytes / all bytes: compared with min.cleanable.dirty.ratio."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def should_clean(self) -> bool:
        """What LogCleanerManager.grabFilthiestCompactedLog asks of a log."""
        if self.cleanable_bytes <= 0:
            return False
        if self.need_compaction_now:
            return True
        return self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def _segments_between(log: UnifiedLog, start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in [start, end) (Kafka: UnifiedLog.logSegments(from, to))."""
    segments = log.segments
    out = []
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else 2**63 - 1
        if segment.base_offset < end and upper > start:
            out.append(segment)
    return out


def _first_batch_timestamp(segment: LogSegment) -> int:
    first = next(segment.log.batch_headers(0), None)
    return NO_TIMESTAMP if first is None else first[1].max_timestamp


def log_to_clean(
    log: UnifiedLog,
    last_clean_offset: int | None,
    now_ms: int,
    tp: TopicPartition | None = None,
    *,
    with_transactions: bool = True,
) -> tuple[LogToClean, bool]:
    """The cleanable range of `log` and whether its checkpoint must be reset
    (Kafka: LogCleanerManager.cleanableOffsets and calculateCleanableBytes).
    Without `with_transactions` the batch-header scan for open and aborted
    transactions is skipped (a quick estimate to rank logs; never clean with it)."""
    tp = tp or parse_topic_partition(log.dir)
    config = log.config
    first_dirty = log.log_start_offset if last_clean_offset is None else last_clean_offset
    reset = False
    if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
        first_dirty, reset = log.log_start_offset, last_clean_offset is not None
    scan = TransactionScan([], None)
    if with_transactions:
        scan = scan_transactions(log, log.log_start_offset, log.high_watermark)
    bounds = [log.high_watermark, log.active_segment.base_offset]
    if scan.first_unstable_offset is not None:
        bounds.append(scan.first_unstable_offset)  # the last stable offset
    segments = log.segments
    dirty = [s for s in _segments_between(log, first_dirty, 2**63 - 1) if s is not segments[-1]]
    if config.min_compaction_lag_ms > 0:
        for segment in dirty:
            if segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
                bounds.append(segment.base_offset)
                break
    uncleanable = max(first_dirty, min(bounds))
    # Round down to the start of the segment holding it: segments are cleaned whole.
    first_uncleanable = log.active_segment.base_offset
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > uncleanable:
            first_uncleanable = segment.base_offset
            break
    clean_bytes = sum(s.size for s in _segments_between(log, -1, first_dirty))
    cleanable_bytes = sum(
        s.size
        for s in _segments_between(log, min(first_dirty, first_uncleanable), first_uncleanable)
    )
    need_now = False
    if config.max_compaction_lag_ms < 2**63 - 1:
        stamps = [t for t in map(_first_batch_timestamp, dirty) if t > 0]
        need_now = bool(stamps) and min(stamps) < now_ms - config.max_compaction_lag_ms
    return (
        LogToClean(
            tp,
            log,
            first_dirty,
            first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            need_now,
            tuple(scan.aborted),
        ),
        reset,
    )


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose data fits one segment, whose indexes fit
    segment.index.bytes and whose offsets fit int32 relative to the first
    (Kafka: Cleaner.groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes()
        time_size = segments[i].time_index.size_in_bytes()
        i += 1
        while i < len(segments):
            nxt = segments[i]
            last_offset = (
                segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable - 1
            )
            if (
                size + nxt.size > max_size
                or index_size + nxt.offset_index.size_in_bytes() > max_index_size
                or time_size + nxt.time_index.size_in_bytes() > max_index_size
                or last_offset - group[0].base_offset > 2**31 - 1
            ):
                break
            group.append(nxt)
            size += nxt.size
            index_size += nxt.offset_index.size_in_bytes()
            time_size += nxt.time_index.size_in_bytes()
            i += 1
        groups.append(group)
    return groups


@dataclass(frozen=True, slots=True)
class BatchDecision:
    """What to write for one source batch: its new bytes (None: drop it)."""

    data: bytes | memoryview | None
    records_read: int
    records_kept: int
    tombstones_removed: int = 0
    invalid: int = 0


def filter_batch(
    header: BatchHeader,
    data: memoryview,
    offset_map: OffsetMap,
    txn: CleanedTransactionMetadata,
    *,
    now_ms: int,
    delete_retention_ms: int,
    retain_empty: bool,
) -> BatchDecision:
    """Decide what of one batch survives cleaning (Kafka: the cleaner's
    RecordFilter and MemoryRecords.filterTo). Pure: no I/O.

    `retain_empty`: keep the batch (empty if need be) even when no record is
    left: it is an active producer's last batch or the last of a group.
    """
    if header.is_control_batch:
        kind = _control_type(data, header) if header.records_count else None
        can_discard = txn.on_control_batch_read(header, kind)
        discard_records = (
            can_discard and header.has_delete_horizon and header.base_timestamp <= now_ms
        )
    else:
        can_discard = txn.on_batch_read(header)
        discard_records = can_discard
    count = header.records_count
    if discard_records and not retain_empty:
        return BatchDecision(None, count, 0)
    body = memoryview(decompress(header.compression_type, data[RECORD_BATCH_OVERHEAD:]))
    scanned = scan_records(body, header)
    kept: list[tuple[int, int]] = []  # (start, end) of each kept record
    tombstones = removed_tombstones = invalid = 0
    if not discard_records:
        horizon_passed = header.has_delete_horizon and now_ms >= header.base_timestamp
        latest_mapped = offset_map.latest_offset
        control = header.is_control_batch
        get = offset_map.get
        for offset, key, null_value, start, end in scanned:
            if control or offset > latest_mapped:
                keep = True
            elif key is None:
                invalid += 1
                keep = False
            else:
                keep = offset >= get(key)
                if keep and null_value and horizon_passed:
                    keep = False
                    removed_tombstones += 1
            if keep:
                kept.append((start, end))
                tombstones += null_value
    marker_for_empty_txn = can_discard and header.is_control_batch
    if kept:
        need_horizon = (tombstones or marker_for_empty_txn) and not header.has_delete_horizon
        if len(kept) == count and not need_horizon:
            return BatchDecision(data, count, count, removed_tombstones, invalid)
        if need_horizon:
            horizon = now_ms + delete_retention_ms
        else:
            horizon = header.base_timestamp if header.has_delete_horizon else NO_TIMESTAMP
        # Only the kept records are decoded whole (for their timestamps, or to
        # re-encode them when the base timestamp changes).
        spans = [body[start:end] for start, end in kept]
        records = [_decode_one(span, header) for span in spans]
        out = build_retained_batch(header, records, delete_horizon_ms=horizon, raw_records=spans)
        return BatchDecision(out, count, len(kept), removed_tombstones, invalid)
    if retain_empty:
        out = build_retained_batch(header, [])
        return BatchDecision(out, count, 0, removed_tombstones, invalid)
    return BatchDecision(None, count, 0, removed_tombstones, invalid)


def _decode_one(span: memoryview, header: BatchHeader) -> Record:
    record, _ = decode_record(span, 0, header.base_offset, header.base_timestamp)
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return Record(record.offset, header.max_timestamp, record.key, record.value, record.headers)
    return record


def _carry_txn_index(group: list[LogSegment], cleaned: LogSegment) -> None:
    """Give the cleaned segment the `.txnindex` entries of the segments it replaces
    whose ABORT marker it kept (a marker goes only once no record of its
    transaction is left, and then its entry has nothing left to describe)."""
    entries = [txn for segment in group for txn in segment.txn_index]
    if not entries:
        return
    kept = {h.last_offset for _, h in cleaned.log.batch_headers(0) if h.is_control_batch}
    for txn in entries:
        if txn.last_offset in kept:
            cleaned.update_txn_index(txn)


class Cleaner:
    """One cleaning pass over one log (Kafka: Cleaner)."""

    def __init__(self, offset_map: OffsetMap | None = None) -> None:
        self.offset_map = offset_map or OffsetMap()
        self.throttler: Throttler | None = None

    def clean(
        self,
        to_clean: LogToClean,
        now_ms: int,
        producers: Mapping[int, int],
        throttler: Throttler | None = None,
    ) -> tuple[int, CleanerStats, list[tuple[SegmentSnapshot, ...]]]:
        """Write the cleaned segments of `to_clean.log` as `.cleaned` files (closed,
        fsynced, not yet swapped in); returns the first offset not cleaned (the new
        checkpoint), the statistics and, per cleaned segment, the segments it
        replaces (Kafka: Cleaner.doClean, up to the swap). `producers`: each
        producer's last batch offset (Kafka keeps an active producer's last batch)."""
        log_ = to_clean.log
        stats = CleanerStats()
        self.throttler = throttler
        self.build_offset_map(to_clean, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done_ns = time.perf_counter_ns()
        txn = CleanedTransactionMetadata(to_clean.aborted)
        config = log_.config
        segments = [
            s for s in _segments_between(log_, 0, end_offset) if s is not log_.active_segment
        ]
        groups = group_segments_by_size(
            segments,
            config.segment_bytes,
            config.segment_index_bytes,
            to_clean.first_uncleanable_offset,
        )
        for group in groups:
            self.clean_segments(log_, group, txn, now_ms, stats, producers)
        stats.end_ns = time.perf_counter_ns()
        replaced = [tuple(SegmentSnapshot(s.base_offset, s.size) for s in g) for g in groups]
        return end_offset, stats, replaced

    def build_offset_map(self, to_clean: LogToClean, stats: CleanerStats) -> bool:
        """Map key -> latest offset over [first dirty, first uncleanable); True if
        the map filled up first (Kafka: buildOffsetMap)."""
        offset_map = self.offset_map
        offset_map.clear()
        start, end = to_clean.first_dirty_offset, to_clean.first_uncleanable_offset
        txn = CleanedTransactionMetadata(a for a in to_clean.aborted if a.last_offset >= start)
        dirty = _segments_between(to_clean.log, start, end)
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            position = segment.offset_index.lookup(start).position
            for _, header, data in segment.log.batches_with_bytes(position):
                if header.base_offset >= end:
                    break
                stats.map_bytes_read += header.size_in_bytes
                if self.throttler is not None:
                    self.throttler.maybe_throttle(header.size_in_bytes)
                if header.is_control_batch:
                    kind = _control_type(data, header) if header.records_count else None
                    txn.on_control_batch_read(header, kind)
                elif not txn.on_batch_read(header):
                    body = decompress(header.compression_type, data[RECORD_BATCH_OVERHEAD:])
                    for offset, key, _, _, _ in scan_records(body, header):
                        stats.map_records_read += 1
                        if key is not None and offset >= start:
                            if offset_map.full:
                                return True
                            offset_map.put(key, offset)
                if header.last_offset >= start:
                    offset_map.update_latest_offset(header.last_offset)
            # Offsets may have gaps: the map covers this segment up to the next one.
            offset_map.update_latest_offset(max(offset_map.latest_offset, next_start - 1))
        return False

    def clean_segments(
        self,
        log_: UnifiedLog,
        group: list[LogSegment],
        txn: CleanedTransactionMetadata,
        now_ms: int,
        stats: CleanerStats,
        producers: Mapping[int, int],
    ) -> None:
        """Write the group's surviving batches into `<base>.log.cleaned`, fsync and
        close it (Kafka: Cleaner.cleanSegments, before its replaceSegments: the
        swap is `LogCleaner.swap_in`, on the log owner's thread). The only place
        the cleaner writes."""
        config = log_.config
        base = group[0].base_offset
        for stale in log_.dir.glob(f"{base:020d}.*{CLEANED_FILE_SUFFIX}"):
            stale.unlink()  # Kafka: LogSegment.deleteIfExists before createNewCleanedSegment
        cleaned = LogSegment.open(
            log_.dir, base, config, now_ms=now_ms, file_suffix=CLEANED_FILE_SUFFIX
        )
        try:
            for n, segment in enumerate(group):
                last_of_group = n == len(group) - 1
                self._clean_into(
                    segment,
                    cleaned,
                    txn,
                    producers,
                    last_of_group,
                    now_ms,
                    config.delete_retention_ms,
                    stats,
                )
            _carry_txn_index(group, cleaned)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms())
        except BaseException:
            cleaned.close()
            for f in log_.dir.glob(f"{base:020d}.*{CLEANED_FILE_SUFFIX}"):
                f.unlink(missing_ok=True)
            raise
        cleaned.close()

    def _clean_into(
        self,
        source: LogSegment,
        dest: LogSegment,
        txn: CleanedTransactionMetadata,
        producers: Mapping[int, int],
        last_of_group: bool,
        now_ms: int,
        delete_retention_ms: int,
        stats: CleanerStats,
    ) -> None:
        pending = bytearray()
        batches: list[tuple[int, int, int, int]] = []
        largest_offset = -1
        max_ts, offset_of_max = NO_TIMESTAMP, -1
        size = source.size

        def write() -> None:
            if batches:
                dest.append(largest_offset, max_ts, offset_of_max, pending, batches)
                stats.bytes_written += len(pending)

        throttler = self.throttler
        for position, header, data in source.log.batches_with_bytes(0):
            stats.bytes_read += header.size_in_bytes
            retain_empty = (last_of_group and position + header.size_in_bytes == size) or (
                header.producer_id >= 0 and producers.get(header.producer_id) == header.last_offset
            )
            decision = filter_batch(
                header,
                data,
                self.offset_map,
                txn,
                now_ms=now_ms,
                delete_retention_ms=delete_retention_ms,
                retain_empty=retain_empty,
            )
            stats.records_read += decision.records_read
            stats.records_written += decision.records_kept
            stats.tombstones_removed += decision.tombstones_removed
            stats.invalid_records += decision.invalid
            if throttler is not None:  # Kafka throttles the bytes read and written
                throttler.maybe_throttle(
                    header.size_in_bytes + (0 if decision.data is None else len(decision.data))
                )
            if decision.data is None:
                continue
            out = decision.data
            kept_header = header if out is data else _header_of(out)
            batches.append(
                (len(pending), len(out), kept_header.last_offset, kept_header.max_timestamp)
            )
            pending += out
            largest_offset = kept_header.last_offset
            if kept_header.max_timestamp > max_ts:
                max_ts, offset_of_max = kept_header.max_timestamp, kept_header.last_offset
            if len(pending) >= _WRITE_CHUNK:
                write()
                pending = bytearray()
                batches = []
                max_ts, offset_of_max = NO_TIMESTAMP, -1
        write()


def _header_of(data: bytes) -> BatchHeader:
    return read_header(data)


@dataclass(frozen=True, slots=True)
class CleanResult:
    """One cleaned log: which, the range, and the statistics."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    cleanable_ratio: float
    stats: CleanerStats


@dataclass(frozen=True, slots=True)
class SegmentSnapshot:
    """A segment as the log's owner saw it when it handed the log to a cleaner."""

    base_offset: int
    size: int


class Throttler:
    """log.cleaner.io.max.bytes.per.second (Kafka: kafka.utils.Throttler, as the
    LogCleaner sets it up): the cleaner counts the bytes it reads and writes and,
    every 300 ms, sleeps long enough to bring the rate since the last check down
    to the limit. Kafka's default, Double.MaxValue, never sleeps."""

    CHECK_INTERVAL_S = 0.3

    def __init__(
        self,
        max_bytes_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_bytes_per_second <= 0:
            raise ValueError(
                f"log.cleaner.io.max.bytes.per.second must be positive, not {max_bytes_per_second}"
            )
        self.max_bytes_per_second = max_bytes_per_second
        self._clock, self._sleep = clock, sleep
        self._period_start = clock()
        self._observed = 0
        self.slept_s = 0.0

    def maybe_throttle(self, observed: int) -> None:
        self._observed += observed
        elapsed = self._clock() - self._period_start
        if elapsed < self.CHECK_INTERVAL_S:
            return
        wanted = self._observed / self.max_bytes_per_second
        if wanted > elapsed:
            self._sleep(wanted - elapsed)
            self.slept_s += wanted - elapsed
        self._period_start = self._clock()
        self._observed = 0


@dataclass(frozen=True)
class CleanTask:
    """One log handed to a cleaner: what it needs, by value (it may run in another
    process), as the log's owner saw the log when it planned the pass."""

    directory: Path
    topic_partition: TopicPartition
    config: LogConfig
    segments: tuple[SegmentSnapshot, ...]  # oldest first; the last is the active one
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    first_dirty_offset: int
    producers: dict[int, int]  # producer id -> offset of its last batch
    now_ms: int
    force: bool = True
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    dedupe_buffer_load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR
    max_io_bytes_per_second: float = DEFAULT_MAX_IO_BYTES_PER_SECOND


@dataclass(frozen=True)
class CleanOutcome:
    """What a cleaner wrote for a CleanTask: `.cleaned` segments, not yet swapped in.
    `end_offset` is None when the log had nothing worth cleaning after all (an open
    transaction bounds it more than the owner could see)."""

    task: CleanTask
    end_offset: int | None
    first_dirty_offset: int
    cleanable_ratio: float
    stats: CleanerStats | None = None
    #: per cleaned segment (at its first segment's base offset), the segments it replaces
    replaced: tuple[tuple[SegmentSnapshot, ...], ...] = ()


class SegmentChangedError(KafkaStorageError):
    """A segment a cleaner was given changed or went before the cleaner opened it
    (retention, truncation, a deleted topic): the pass is given up, and the log is
    cleaned again from its checkpoint at a later pass."""


class LogView:
    """A log as a CleanTask describes it: what a cleaner reads. In a cleaner
    process, its segments opened read-only by name: it never opens a log's file
    for writing nor creates one (the log's owner may delete a segment at any
    moment; that pass is then thrown away), and writes only its own `.cleaned`
    files. In the caller (`threads=0`), the log's own segment objects."""

    def __init__(self, task: CleanTask, segments: Iterable[LogSegment] | None = None) -> None:
        self.dir = task.directory
        self.config = task.config
        self.log_start_offset = task.log_start_offset
        self.high_watermark = task.high_watermark
        self.log_end_offset = task.log_end_offset
        self._owned = segments is None
        self.segments: list[LogSegment] = []
        if segments is not None:
            self.segments = list(segments)
            return
        try:
            for n, snapshot in enumerate(task.segments):
                self.segments.append(self._open(snapshot, n == len(task.segments) - 1))
        except BaseException:
            self.close()
            raise

    def _open(self, snapshot: SegmentSnapshot, active: bool) -> LogSegment:
        """The segment read-only, cut at the size it had (the active segment grows
        meanwhile; the transaction scan reads it up to the high watermark)."""
        base = snapshot.base_offset
        try:
            records = FileRecords.open(log_file(self.dir, base), mutable=False)
        except KafkaStorageError as e:
            raise SegmentChangedError(f"{self.dir.name}: segment {base} is gone: {e}") from e
        try:
            size = records.size_in_bytes()
            if size < snapshot.size or (size > snapshot.size and not active):
                raise SegmentChangedError(
                    f"{self.dir.name}: segment {base} is {size} bytes, "
                    f"not the {snapshot.size} it had when the pass was planned"
                )
            records = FileRecords(records.path, records.fileno(), 0, snapshot.size, False)
            size = self.config.segment_index_bytes
            return LogSegment(
                records,
                OffsetIndex(offset_index_file(self.dir, base), base, size, writable=False),
                TimeIndex(time_index_file(self.dir, base), base, size, writable=False),
                base,
                self.config.index_interval_bytes,
                txn_index=TransactionIndex(txn_index_file(self.dir, base), base),
            )
        except FileNotFoundError as e:
            records.close()
            raise SegmentChangedError(f"{self.dir.name}: segment {base} is gone: {e}") from e
        except BaseException:
            records.close()
            raise

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def close(self) -> None:
        for segment in self.segments if self._owned else ():
            segment.offset_index.close()
            segment.time_index.close()
            segment.txn_index.close()
            segment.log.close()
        self.segments = []


def run_clean_task(task: CleanTask, segments: Iterable[LogSegment] | None = None) -> CleanOutcome:
    """What a cleaner thread does with one log, up to the swap (Kafka:
    CleanerThread.cleanLog and Cleaner.doClean): find the cleanable range (the
    transaction scan bounds it by the last stable offset), build the offset map,
    write and fsync the `.cleaned` segments. Runs in a cleaner process, reading
    only the files the task names, or in the caller (`threads=0`) over the log's
    own `segments` as they were planned."""
    view = LogView(task, segments)
    try:
        to_clean, _ = log_to_clean(view, task.first_dirty_offset, task.now_ms, task.topic_partition)
        if to_clean.cleanable_bytes <= 0 or (not task.force and not to_clean.should_clean):
            return CleanOutcome(task, None, to_clean.first_dirty_offset, to_clean.cleanable_ratio)
        cleaner = Cleaner(OffsetMap(task.dedupe_buffer_size, task.dedupe_buffer_load_factor))
        throttler = None
        if task.max_io_bytes_per_second < DEFAULT_MAX_IO_BYTES_PER_SECOND:
            throttler = Throttler(task.max_io_bytes_per_second)
        end_offset, stats, replaced = cleaner.clean(
            to_clean, task.now_ms, task.producers, throttler
        )
        return CleanOutcome(
            task,
            end_offset,
            to_clean.first_dirty_offset,
            to_clean.cleanable_ratio,
            stats,
            tuple(replaced),
        )
    finally:
        view.close()


def remove_cleaned_files(directory: Path) -> list[Path]:
    """Delete the `.cleaned` files of an abandoned pass (a log has one pass at a time)."""
    removed = []
    for leftover in sorted(Path(directory).glob("*" + CLEANED_FILE_SUFFIX)):
        leftover.unlink(missing_ok=True)
        removed.append(leftover)
    return removed


def _die_with_parent(parent_pid: int) -> None:
    """Linux: be SIGKILLed when the process that started us dies, even by SIGKILL
    (a cleaner must never outlive its broker: it would write into log dirs that a
    restarted broker owns)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the poll loop below notices a new parent within a second
    if os.getppid() != parent_pid:
        os._exit(0)


def _cleaner_process_main(conn, parent_pid: int, ledger_dir: str | None = None) -> None:
    """A cleaner process: take a CleanTask, answer ("ok", CleanOutcome) or ("error", text).
    `ledger_dir`: the broker's durability ledger, which the fsyncs of the `.cleaned`
    files made here go to as well."""
    import signal
    import traceback

    _die_with_parent(parent_pid)
    if ledger_dir is not None:
        durability_ledger.attach(ledger_dir)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the broker; it stops us
    while True:
        try:
            if not conn.poll(1.0):
                if os.getppid() != parent_pid:
                    return
                continue
            task = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = ("ok", run_clean_task(task))
        except SegmentChangedError as e:
            answer = ("changed", str(e))
        except Exception:
            answer = ("error", traceback.format_exc())
        try:
            conn.send(answer)
        except (EOFError, OSError):
            return


class CleanerThread:
    """One of Kafka's CleanerThreads (`log.cleaner.threads` of them), run as a
    process of its own: cleaning is pure Python, and a thread of the broker's
    process would hold the GIL for most of a pass, so the event loop would get
    it back only every switch interval (5 ms) at each of its system calls
    (benchmarks/bench_cleaner.py measures the three ways). Started on first use
    with the `spawn` method (the broker's process has threads; fork would copy
    their locks), it lives until `stop()` or `kill()`; it dies with the process
    that started it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._process = None
        self._conn = None
        self.busy = False

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def submit(self, task: CleanTask) -> None:
        if self.busy:
            raise RuntimeError(f"{self.name} is already cleaning")
        if self._process is None or not self._process.is_alive():
            self._start()
        # A task is small (segment sizes, producer offsets), far below a pipe's buffer:
        # the send does not wait for the process to read it.
        self._conn.send(task)
        self.busy = True

    def _start(self) -> None:
        import multiprocessing

        self.kill()
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        ledger = durability_ledger.installed()
        process = ctx.Process(
            target=_cleaner_process_main,
            args=(theirs, os.getpid(), None if ledger is None else str(ledger.directory)),
            name=self.name,
            daemon=True,
        )
        process.start()
        theirs.close()
        self._process, self._conn = process, ours

    def poll(self) -> tuple[str, object] | None:
        """The answer to the task, once there is one: ("ok", CleanOutcome),
        ("changed", why) or ("error", why). Never waits."""
        if not self.busy:
            return None
        try:
            if self._conn.poll():
                answer = self._conn.recv()
                self.busy = False
                return answer
        except (EOFError, OSError):
            pass
        else:
            if self._process.is_alive():
                return None
        code = self._process.exitcode
        self.kill()
        return ("error", f"{self.name} died (exit code {code}) while cleaning")

    def kill(self) -> None:
        """Stop the process now, whatever it is doing (an abandoned pass's `.cleaned`
        files are the caller's to remove)."""
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._process.close()
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
        self.busy = False

    stop = kill


@dataclass
class _InFlight:
    """A pass handed to a cleaner thread: the log, the task and the log's segment
    objects when it was planned (the swap checks they are still the log's)."""

    log: UnifiedLog
    task: CleanTask
    segments: dict[int, LogSegment]
    thread: CleanerThread


class LogCleaner:
    """Picks compacted logs to clean, cleans them and keeps `cleaner-offset-checkpoint`
    (Kafka: LogCleaner, its CleanerThreads and LogCleanerManager).

    A pass has three steps. *Plan*, in the log's owner (cheap): which log, from
    which offset, and a snapshot of its segments. *Clean* (long: every record is
    read): `run_clean_task` writes `.cleaned` segments from read-only views of
    the log's files. *Swap in*, in the owner again (`swap_in`: renames and
    fsyncs): if the segments are still the ones cleaned (retention, truncation or
    a deleted topic may have changed them meanwhile; the pass is then thrown away,
    as Kafka's abortCleaning does), UnifiedLog.replace_segments puts each cleaned
    segment in place, crash-safe, and the checkpoint moves.

    With `threads=0` the three steps run one after the other in the caller
    (`clean_log`, `clean_filthiest_log`: labs, tests, `clean()`). With `threads`
    >= 1 (`log.cleaner.threads`, the broker's LogManager), the clean runs in that
    many CleanerThreads: `start_cleaning` hands them the filthiest logs, `poll`
    swaps in what they finished, and the caller's event loop never waits for a
    pass. `log.cleaner.dedupe.buffer.size` is shared among the threads, as in Kafka.
    """

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        dedupe_buffer_load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR,
        threads: int = 0,
        max_io_bytes_per_second: float = DEFAULT_MAX_IO_BYTES_PER_SECOND,
        backoff_ms: int = DEFAULT_CLEANER_BACKOFF_MS,
    ) -> None:
        if threads < 0:
            raise ValueError(f"log.cleaner.threads must be >= 0, not {threads}")
        self.dedupe_buffer_size = dedupe_buffer_size // max(1, threads)
        OffsetMap(self.dedupe_buffer_size, dedupe_buffer_load_factor)  # refuse a useless size now
        self.dedupe_buffer_load_factor = dedupe_buffer_load_factor
        if max_io_bytes_per_second <= 0:
            raise ValueError(
                "log.cleaner.io.max.bytes.per.second must be positive, not "
                f"{max_io_bytes_per_second}"
            )
        self.max_io_bytes_per_second = max_io_bytes_per_second
        self.backoff_ms = backoff_ms
        self.threads = [CleanerThread(f"kafka-log-cleaner-thread-{i}") for i in range(threads)]
        self._in_flight: dict[TopicPartition, _InFlight] = {}
        self._not_cleanable_until: dict[TopicPartition, int] = {}
        self.last_results: list[CleanResult] = []

    # -- checkpoints --------------------------------------------------------------------

    @staticmethod
    def checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)

    def checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        return self.checkpoint_file(log_dir).read()

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (or with None, remove) one partition's first dirty offset."""
        file = self.checkpoint_file(log_dir)
        entries = file.read()
        if offset is None:
            if entries.pop(tp, None) is None:
                return
        else:
            entries[tp] = offset
        file.write(entries)

    # -- planning -----------------------------------------------------------------------

    def log_to_clean(
        self, log_: UnifiedLog, now_ms: int, *, with_transactions: bool = True
    ) -> LogToClean:
        tp = parse_topic_partition(log_.dir)
        last = self.checkpoints(log_.dir.parent).get(tp)
        if log_.truncated_to is not None:  # Kafka: maybeTruncateCheckpoint
            if last is not None and last > log_.truncated_to:
                last = log_.truncated_to
                self.update_checkpoint(log_.dir.parent, tp, last)
            log_.truncated_to = None
        to_clean, reset = log_to_clean(log_, last, now_ms, tp, with_transactions=with_transactions)
        if reset:
            log.warning(
                "%s: cleaner checkpoint %s is outside the log [%d, %d]; cleaning from the start",
                log_.dir.name,
                last,
                log_.log_start_offset,
                log_.log_end_offset,
            )
            self.update_checkpoint(log_.dir.parent, tp, to_clean.first_dirty_offset)
        return to_clean

    def plan(
        self, log_: UnifiedLog, now_ms: int, *, force: bool = True
    ) -> tuple[CleanTask, dict[int, LogSegment]] | None:
        """The task for one pass over `log_` and its segments as they are now; None
        when nothing is cleanable (or, without `force`, not worth it). Cheap: no
        record is read (the transaction scan is the cleaner's)."""
        if not log_.config.compact:
            raise ValueError(
                f"{log_.dir.name} has cleanup.policy={log_.config.cleanup_policy}; only logs with "
                "cleanup.policy=compact are cleaned"
            )
        # Open transactions and aborted ones only shrink the range: the cleaner scans them.
        estimate = self.log_to_clean(log_, now_ms, with_transactions=False)
        if estimate.cleanable_bytes <= 0 or (not force and not estimate.should_clean):
            return None
        segments = log_.segments
        producers = {
            pid: entry.batches[-1].last_offset
            for pid, entry in log_.producer_state.producers.items()
            if entry.batches
        }
        task = CleanTask(
            log_.dir,
            estimate.topic_partition,
            log_.config,
            tuple(SegmentSnapshot(s.base_offset, s.size) for s in segments),
            log_.log_start_offset,
            log_.high_watermark,
            log_.log_end_offset,
            estimate.first_dirty_offset,
            producers,
            now_ms,
            force,
            self.dedupe_buffer_size,
            self.dedupe_buffer_load_factor,
            self.max_io_bytes_per_second,
        )
        return task, {s.base_offset: s for s in segments}

    def _candidates(
        self, logs: Mapping[TopicPartition, UnifiedLog], now_ms: int
    ) -> list[LogToClean]:
        """Compacted logs above min.cleanable.dirty.ratio (or past
        max.compaction.lag.ms), filthiest first, not being cleaned (Kafka:
        grabFilthiestCompactedLog), ranked by a quick estimate."""
        candidates = []
        for tp, lg in logs.items():
            if not lg.config.compact or tp in self._in_flight:
                continue
            if self._not_cleanable_until.get(tp, -1) > now_ms:
                continue
            estimate = self.log_to_clean(lg, now_ms, with_transactions=False)
            if estimate.should_clean:
                candidates.append(estimate)
        return sorted(candidates, key=lambda c: c.cleanable_ratio, reverse=True)

    # -- cleaning in the caller (threads=0) ----------------------------------------------

    def clean_log(self, log_: UnifiedLog, now_ms: int, *, force: bool = True) -> CleanResult | None:
        """Clean one log now, in the caller (when `force` is False, only if its dirty
        ratio or max.compaction.lag.ms asks for it); None when nothing was cleaned."""
        planned = self.plan(log_, now_ms, force=force)
        if planned is None:
            return None
        task, segments = planned
        return self.swap_in(log_, run_clean_task(task, segments.values()), segments)

    def clean_filthiest_log(
        self, logs: Mapping[TopicPartition, UnifiedLog], now_ms: int
    ) -> CleanResult | None:
        """Clean, in the caller, the compacted log with the largest dirty ratio among
        those above min.cleanable.dirty.ratio or past max.compaction.lag.ms (Kafka:
        grabFilthiestCompactedLog + cleanLog). None when no log needs it."""
        for estimate in self._candidates(logs, now_ms):
            result = self.clean_log(estimate.log, now_ms, force=False)
            if result is not None:
                return result
        return None

    # -- swapping in ------------------------------------------------------------------------

    def swap_in(
        self, log_: UnifiedLog, outcome: CleanOutcome, segments: Mapping[int, LogSegment]
    ) -> CleanResult | None:
        """Put a pass's `.cleaned` segments in place of the segments they were cleaned
        from and move the checkpoint (Kafka: replaceSegments, then
        doneCleaning), if the log still holds exactly those segments (same
        objects, same sizes, none of them active). Otherwise the pass is thrown
        away (its files deleted, the checkpoint unchanged) and None returned."""
        task = outcome.task
        if outcome.end_offset is None or outcome.stats is None:
            return None
        if log_.truncated_to is not None and log_.truncated_to < task.high_watermark:
            # Kafka: truncateTo aborts the cleaning. What the pass read of transactions
            # (markers up to the high watermark) may be gone; the next plan moves the
            # checkpoint back to the truncation point.
            log.warning(
                "%s: truncated to %d while it was cleaned; the pass is thrown away",
                task.directory.name,
                log_.truncated_to,
            )
            remove_cleaned_files(task.directory)
            return None
        current = {s.base_offset: s for s in log_.segments}
        active = log_.active_segment if current else None
        groups: list[list[LogSegment]] = []
        for replaced in outcome.replaced:
            old = []
            for snapshot in replaced:
                segment = current.get(snapshot.base_offset)
                if (
                    segment is None
                    or segment is not segments.get(snapshot.base_offset)
                    or segment is active
                    or segment.size != snapshot.size
                ):
                    log.warning(
                        "%s: segment %d changed while it was cleaned (retention, truncation "
                        "or deletion); the pass is thrown away and cleaned again later",
                        task.directory.name,
                        snapshot.base_offset,
                    )
                    remove_cleaned_files(task.directory)
                    return None
                old.append(segment)
            groups.append(old)
            cleaned_file = log_file(task.directory, old[0].base_offset, CLEANED_FILE_SUFFIX)
            if not cleaned_file.exists():  # opening it would create it empty
                log.error("%s: %s is missing; the pass is thrown away", log_.dir, cleaned_file.name)
                remove_cleaned_files(task.directory)
                return None
        for old in groups:
            cleaned = LogSegment.open(
                log_.dir,
                old[0].base_offset,
                log_.config,
                now_ms=task.now_ms,
                file_suffix=CLEANED_FILE_SUFFIX,
            )
            log_.replace_segments(cleaned, old)
        self.update_checkpoint(log_.dir.parent, task.topic_partition, outcome.end_offset)
        stats = outcome.stats
        result = CleanResult(
            task.topic_partition,
            outcome.first_dirty_offset,
            outcome.end_offset,
            outcome.cleanable_ratio,
            stats,
        )
        log.info(
            "cleaned %s-%d [%d, %d): %d -> %d bytes, %d -> %d records in %.3f s",
            *result.topic_partition,
            result.first_dirty_offset,
            result.end_offset,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_read,
            stats.records_written,
            stats.elapsed_s,
        )
        self.last_results = [result]
        return result

    # -- cleaner threads (threads >= 1) -------------------------------------------------

    def in_progress(self, tp: TopicPartition) -> bool:
        """A cleaner thread holds this log (Kafka: LogCleaningInProgress)."""
        return tp in self._in_flight

    def start_cleaning(
        self, logs: Mapping[TopicPartition, UnifiedLog], now_ms: int
    ) -> list[TopicPartition]:
        """Hand the filthiest logs to the idle cleaner threads; returns which. Only
        plans: the call is cheap, whatever the size of the logs."""
        idle = [t for t in self.threads if not t.busy]
        started: list[TopicPartition] = []
        if not idle:
            return started
        for estimate in self._candidates(logs, now_ms):
            if not idle:
                break
            planned = self.plan(estimate.log, now_ms, force=False)
            if planned is None:
                continue
            task, segments = planned
            thread = idle.pop(0)
            thread.submit(task)
            log.info(
                "cleaning %s-%d from offset %d in %s (pid %s)",
                *task.topic_partition,
                task.first_dirty_offset,
                thread.name,
                thread.pid,
            )
            self._in_flight[task.topic_partition] = _InFlight(estimate.log, task, segments, thread)
            started.append(task.topic_partition)
        return started

    def poll(self) -> list[CleanResult]:
        """Swap in the passes the cleaner threads finished; never waits for one."""
        results = []
        for tp, job in list(self._in_flight.items()):
            answer = job.thread.poll()
            if answer is None:
                continue
            del self._in_flight[tp]
            kind, payload = answer
            if kind == "ok" and isinstance(payload, CleanOutcome):
                if payload.end_offset is None:  # an open transaction: not worth it yet
                    self._not_cleanable_until[tp] = job.task.now_ms + self.backoff_ms
                    continue
                result = self.swap_in(job.log, payload, job.segments)
                if result is not None:
                    results.append(result)
                continue
            remove_cleaned_files(job.task.directory)
            if kind == "changed":
                log.warning("%s: %s; cleaned again later", job.task.directory.name, payload)
            else:
                log.error("cleaning %s failed: %s", job.task.directory.name, payload)
                self._not_cleanable_until[tp] = job.task.now_ms + self.backoff_ms
        return results

    def abort(self, tp: TopicPartition) -> bool:
        """Stop cleaning `tp` now (Kafka: abortCleaning): its cleaner thread is
        killed (restarted at its next pass) and its `.cleaned` files deleted. For a
        log about to be deleted or closed."""
        job = self._in_flight.pop(tp, None)
        if job is None:
            return False
        job.thread.kill()
        remove_cleaned_files(job.task.directory)
        log.info("aborted the cleaning of %s", job.task.directory.name)
        return True

    def shutdown(self) -> None:
        """Abort every pass and stop the cleaner threads (Kafka: LogCleaner.shutdown)."""
        for tp in list(self._in_flight):
            self.abort(tp)
        for thread in self.threads:
            thread.stop()


def clean(
    log_: UnifiedLog,
    now_ms: int | None = None,
    *,
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    force: bool = True,
) -> CleanResult | None:
    """Clean `log_` now (for tests and labs): whatever its dirty ratio unless
    `force` is False. Reads and updates `cleaner-offset-checkpoint` in its log dir."""
    now = log_.clock() if now_ms is None else now_ms
    return LogCleaner(dedupe_buffer_size=dedupe_buffer_size).clean_log(log_, now, force=force)


__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "AbortedTxn",
    "CleanOutcome",
    "CleanResult",
    "CleanTask",
    "CleanedTransactionMetadata",
    "Cleaner",
    "CleanerStats",
    "CleanerThread",
    "LogCleaner",
    "LogToClean",
    "LogView",
    "OffsetMap",
    "SegmentChangedError",
    "SegmentSnapshot",
    "Throttler",
    "clean",
    "filter_batch",
    "group_segments_by_size",
    "log_to_clean",
    "remove_cleaned_files",
    "run_clean_task",
    "scan_transactions",
]
