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
   finished or undone when the log is loaded);
4. stores the end of the mapped range in `cleaner-offset-checkpoint`.

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
max.compaction.lag.ms) and cleans it; LogManager.tick runs it every
log.cleaner.backoff.ms. `clean(log, now_ms)` cleans one log now, whatever its
ratio (for tests and labs).
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Iterable, Mapping
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
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.log_segment import CLEANED_FILE_SUFFIX, LogSegment
from kafkalab.storage.transaction_index import AbortedTxn
from kafkalab.storage.unified_log import UnifiedLog, parse_topic_partition

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
#: log.cleaner.dedupe.buffer.size (Kafka's default, shared by the cleaner threads)
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
#: log.cleaner.io.buffer.load.factor
DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR = 0.9
#: log.cleaner.backoff.ms: how long the cleaner sleeps when no log needs cleaning
DEFAULT_CLEANER_BACKOFF_MS = 15_000
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

    def clean(self, to_clean: LogToClean, now_ms: int) -> tuple[int, CleanerStats]:
        """Clean `to_clean.log`; returns the first offset not cleaned (the new
        checkpoint) and the statistics (Kafka: Cleaner.doClean)."""
        log_ = to_clean.log
        stats = CleanerStats()
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
            self.clean_segments(log_, group, txn, now_ms, stats)
        stats.end_ns = time.perf_counter_ns()
        return end_offset, stats

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
    ) -> LogSegment:
        """Write the group's surviving batches into `<base>.log.cleaned` and swap it
        in (Kafka: Cleaner.cleanSegments). The only place the cleaner does I/O."""
        config = log_.config
        base = group[0].base_offset
        for stale in log_.dir.glob(f"{base:020d}.*{CLEANED_FILE_SUFFIX}"):
            stale.unlink()  # Kafka: LogSegment.deleteIfExists before createNewCleanedSegment
        cleaned = LogSegment.open(
            log_.dir, base, config, now_ms=now_ms, file_suffix=CLEANED_FILE_SUFFIX
        )
        producers = {
            pid: entry.batches[-1].last_offset
            for pid, entry in log_.producer_state.producers.items()
            if entry.batches
        }
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
        log_.replace_segments(cleaned, group)
        return cleaned

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


class LogCleaner:
    """Picks compacted logs to clean and keeps `cleaner-offset-checkpoint`
    (Kafka: LogCleaner and LogCleanerManager, without their threads: the owner
    calls `clean_filthiest_log` from its scheduler, e.g. LogManager.tick)."""

    def __init__(
        self,
        *,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        dedupe_buffer_load_factor: float = DEFAULT_DEDUPE_BUFFER_LOAD_FACTOR,
    ) -> None:
        self.cleaner = Cleaner(OffsetMap(dedupe_buffer_size, dedupe_buffer_load_factor))
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

    # -- cleaning -----------------------------------------------------------------------

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

    def clean_log(self, log_: UnifiedLog, now_ms: int, *, force: bool = True) -> CleanResult | None:
        """Clean one log (when `force` is False, only if its dirty ratio or
        max.compaction.lag.ms asks for it); None when nothing was cleaned."""
        if not log_.config.compact:
            raise ValueError(
                f"{log_.dir.name} has cleanup.policy={log_.config.cleanup_policy}; only logs with "
                "cleanup.policy=compact are cleaned"
            )
        to_clean = self.log_to_clean(log_, now_ms)
        if to_clean.cleanable_bytes <= 0 or (not force and not to_clean.should_clean):
            return None
        return self._clean(to_clean, now_ms)

    def _clean(self, to_clean: LogToClean, now_ms: int) -> CleanResult:
        log_ = to_clean.log
        end_offset, stats = self.cleaner.clean(to_clean, now_ms)
        self.update_checkpoint(log_.dir.parent, to_clean.topic_partition, end_offset)
        result = CleanResult(
            to_clean.topic_partition,
            to_clean.first_dirty_offset,
            end_offset,
            to_clean.cleanable_ratio,
            stats,
        )
        log.info(
            "cleaned %s-%d [%d, %d): %d -> %d bytes, %d -> %d records in %.3f s",
            *result.topic_partition,
            result.first_dirty_offset,
            end_offset,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_read,
            stats.records_written,
            stats.elapsed_s,
        )
        self.last_results = [result]
        return result

    def clean_filthiest_log(
        self, logs: Mapping[TopicPartition, UnifiedLog], now_ms: int
    ) -> CleanResult | None:
        """Clean the compacted log with the largest dirty ratio among those above
        min.cleanable.dirty.ratio or past max.compaction.lag.ms (Kafka:
        grabFilthiestCompactedLog + cleanLog). None when no log needs it."""
        candidates = []
        for lg in logs.values():
            if not lg.config.compact:
                continue
            # Rank by a quick estimate; open transactions can only shrink the range.
            estimate = self.log_to_clean(lg, now_ms, with_transactions=False)
            if estimate.should_clean:
                candidates.append(estimate)
        for estimate in sorted(candidates, key=lambda c: c.cleanable_ratio, reverse=True):
            to_clean = self.log_to_clean(estimate.log, now_ms)
            if to_clean.should_clean:
                return self._clean(to_clean, now_ms)
        return None


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
    "CleanResult",
    "CleanedTransactionMetadata",
    "Cleaner",
    "CleanerStats",
    "LogCleaner",
    "LogToClean",
    "OffsetMap",
    "clean",
    "filter_batch",
    "group_segments_by_size",
    "log_to_clean",
    "scan_transactions",
]
