"""UnifiedLog: one partition's log, a directory of segments that only grows at the end.

Kafka's class: kafka.log.UnifiedLog (with LocalLog and LogLoader folded in). A
partition directory `<topic>-<partition>` holds segments named by base offset;
the last one is the active segment, the only one appended to.

    log start offset                    high watermark     log end offset (LEO)
          |                                    |                 |
          v                                    v                 v
    [00000000000000000000.log][00000000000000004096.log][...active.log]

Invariants kept here:
- Segments are sorted by base offset, do not overlap, and the active segment is
  the last. Offsets only grow: every append starts at or after the LEO.
- Offsets of a log whose cleanup.policy has no `compact` have no gaps: each
  batch starts where the previous one ended (recovery cuts the log at a batch
  that does not, which catches a scribbled baseOffset). Under `compact`, the
  LogCleaner removes records and whole batches, so offsets have gaps and only
  strictly increase (a batch starts after the previous batch's last offset);
  followers copy the gaps, reads and index lookups land on the next batch that
  exists. (A topic switched from compact back to delete keeps its gaps: set
  compact again before recovering such a log, or recovery cuts it at the first gap.)
- log_start_offset <= high_watermark <= log_end_offset, and
  recovery_point <= log_end_offset. The recovery point is the offset below
  which every byte was fsynced; after a crash only data past it is checked.
- Retention deletes whole segments from the front, only segments wholly below
  the high watermark, and moves the log start offset forward, never back.
- A batch in the log is whole and its CRC is valid: leader appends check every
  CRC before writing, and recovery cuts the tail at the first invalid batch.
  Its records are well formed: a leader walks every record first
  (kafkalab.storage.log_validator, Kafka's LogValidator), and recompresses
  batches whose codec is not the topic's compression.type.

Time is read from `clock` (ms), so labs and tests can drive segment.ms,
retention.ms and flush.ms with a fake clock.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from kafkalab.records.control_record import EndTransactionMarker, read_end_txn_marker
from kafkalab.records.memory_records import decode_batch
from kafkalab.records.record_batch import (
    CONTROL_FLAG_MASK,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    ensure_valid,
    peek_size,
)
from kafkalab.storage.checkpoint_file import fsync_dir
from kafkalab.storage.errors import (
    ControlBatchFromClientError,
    CorruptIndexError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalab.storage.file_records import FileRecords
from kafkalab.storage.leader_epoch_file_cache import LeaderEpochFileCache
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
)
from kafkalab.storage.log_validator import validate_and_assign_offsets
from kafkalab.storage.offset_index import OffsetPosition
from kafkalab.storage.producer_state_manager import ProducerStateManager, VerificationGuard
from kafkalab.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

#: ListOffsets special timestamps (Kafka: ListOffsetsRequest.*_TIMESTAMP).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3  # v7+ (KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # v8+ (KIP-405): the local log start; no tiered storage here
LATEST_TIERED_TIMESTAMP = -5  # v9+ (KIP-1005): the last tiered offset; none here


class AppendOrigin(Enum):
    """Who is appending (Kafka: AppendOrigin). Only the coordinator may write
    control batches; replication keeps the leader's offsets."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class FetchIsolation(Enum):
    """How far a read may go (Kafka: FetchIsolation): a follower reads to the log end
    offset, a consumer below the high watermark, and a read_committed consumer
    below the last stable offset."""

    LOG_END = "log end offset"
    HIGH_WATERMARK = "high watermark"
    TXN_COMMITTED = "last stable offset"


def _whole_batches_length(buf: bytes) -> int:
    """How many bytes at the start of `buf` are whole batches, by their length
    fields: all of it but a trailing partial batch. An impossible length keeps
    everything (the append's validation then refuses it as corrupt)."""
    pos = 0
    while True:
        size = peek_size(buf, pos)
        if size is None or pos + size > len(buf):
            return pos
        if size < RECORD_BATCH_OVERHEAD:
            return len(buf)
        pos += size


@dataclass(slots=True)  # not frozen: built on every append, and frozen init is slow
class LogAppendInfo:
    """What an append did (Kafka: LogAppendInfo)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int
    rolled: str | None = None  # why a new segment was rolled first, if one was
    duplicate: bool = False  # a producer's retry: nothing written, first offsets returned


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """ListOffsets answer (Kafka: FileRecords.TimestampAndOffset)."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class DeletedSegment:
    """A segment removed by retention, and the rule that removed it (for the labs)."""

    base_offset: int
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class PendingFlush:
    """A flush begun by `UnifiedLog.begin_flush`: the segments to fsync and the
    offset they cover. `run()` may run in another thread (a LogManager's writer
    thread, Kafka's kafka-log-flusher); `UnifiedLog.complete_flush` then moves the
    recovery point, in the log's own thread."""

    segments: tuple[LogSegment, ...]
    upto: int  # the log end offset when the flush began
    truncations: int  # the log's truncation count then: a truncation since voids it
    # the partition directory when a segment created since the last flush is among
    # them: its name is durable only once the directory is fsynced (Kafka:
    # LocalLog.flush flushes the directory when it flushes a new segment)
    new_segments_in: Path | None = None

    def run(self) -> None:
        for segment in self.segments:
            try:
                segment.flush()
            except (OSError, ValueError):
                if segment.log.fileno() >= 0:
                    raise
                # closed meanwhile (retention, the cleaner's swap, a truncation):
                # nothing of it is left to make durable
        if self.new_segments_in is not None:
            try:
                fsync_dir(self.new_segments_in)
            except FileNotFoundError:  # deleted meanwhile: nothing left to make durable
                pass


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def parse_topic_partition(directory: Path) -> tuple[str, int]:
    """`orders-3` -> ('orders', 3). Topic names may contain '-'."""
    topic, sep, partition = directory.name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(
            f"{directory} is not a partition directory: its name must be <topic>-<partition>"
        )
    return topic, int(partition)


def cut_to(partition_dir: Path, point: int) -> int:
    """A power failure of one partition directory: what was written after `point`
    (its recovery point, the last fsync) is lost. Segments that begin after it go
    whole, the one holding it is truncated at its batch boundary, and every index
    goes (recovery rebuilds them from the logs). Returns the bytes cut. Used by the
    cluster's power-failure fault and by the KRaft metadata log's."""
    removed = 0
    for log_path in sorted(partition_dir.glob("*.log")):
        if int(log_path.stem) > point:  # written entirely after the last fsync: gone
            removed += log_path.stat().st_size
            log_path.unlink()
            continue
        records = FileRecords.open(log_path)
        try:
            found = records.search_for_offset_with_size(point, 0)
            if found is not None:
                removed += records.truncate_to(found.position)
        finally:
            records.close()
    for index in [*partition_dir.glob("*.index"), *partition_dir.glob("*.timeindex")]:
        index.unlink()
    return removed


class UnifiedLog:
    """A partition's segmented log in `directory` (created when missing)."""

    def __init__(
        self,
        directory: str | Path,
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.dir = Path(directory)
        self.config = config or LogConfig()
        self.clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []  # base offsets of _segments, for bisect
        if not self.dir.is_dir():
            self.dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.dir.parent)  # the new directory's name is durable
        self.recovered: list[tuple[int, int]] = []  # (segment base, bytes cut), for the labs
        # The lowest offset truncated to since the LogCleaner last looked: records from
        # there on are new, so its checkpoint must not call them clean (Kafka:
        # LogCleanerManager.maybeTruncateCheckpoint, called by truncateTo).
        self.truncated_to: int | None = None
        self._truncations = 0  # how many times the log was truncated: voids a flush in flight
        # Who deletes a dropped segment's files once they are renamed `.deleted`: the
        # caller, at once, when None; a broker's LogManager hands them to a
        # background thread (Kafka: the scheduler's delete-file task), so that
        # retention, truncation and the cleaner's swap do not wait for the unlink
        # of a large file. A crash before that leaves `.deleted` files, which the
        # next load deletes.
        self.segment_deleter: Callable[[LogSegment], None] | None = None
        self.producer_state = ProducerStateManager(self.dir)
        self._load(log_start_offset, recovery_point, clean_shutdown)
        self._log_end_offset = self.active_segment.read_next_offset()
        self.log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.high_watermark = self.log_start_offset
        self.update_high_watermark(
            self.log_start_offset if high_watermark is None else high_watermark
        )
        self.last_flush_ms = self.clock()
        # Segments recovery re-read had their `.txnindex` emptied: the replay refills it.
        self._rebuild_producer_state({base for base, _ in self.recovered})
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir)
        self._reconcile_leader_epochs()

    # -- loading (Kafka: LogLoader) ------------------------------------------------------

    def _reconcile_leader_epochs(self) -> None:
        """Make the epoch checkpoint agree with the log after loading: drop epochs
        past the (recovered) log end or before its start, and learn the epochs of
        batches that recovery re-read (Kafka assigns them during recovery)."""
        cache = self.leader_epoch_cache
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        if self.recovered:
            first = min(base for base, _ in self.recovered)
            for segment in self._segments[max(0, self._floor_index(first)) :]:
                for _, header in segment.log.batch_headers(0):
                    if header.partition_leader_epoch >= 0:
                        cache.assign(header.partition_leader_epoch, header.base_offset)

    def _rebuild_producer_state(self, rebuild_txn_index: set[int] | None = None) -> None:
        """Latest snapshot, then the batch headers after it (Kafka: rebuildProducerState).

        `rebuild_txn_index`: base offsets of segments whose `.txnindex` was emptied
        (recovery re-read them); the replay starts at a snapshot no later than the
        first of them, so it knows where their aborted transactions began, and
        writes their ABORT markers into their indexes again (Kafka: LogSegment.recover
        with the producer state rebuilt up to the segment)."""
        state = self.producer_state
        rebuild = rebuild_txn_index or set()
        # From the high watermark at the latest: transactions completed at or past
        # it are still unstable, and only a replay re-learns them (a snapshot does
        # not keep completed transactions).
        replay_from = min(min(rebuild, default=self.log_end_offset), self.high_watermark)
        start = max(state.load_snapshot(replay_from, self.log_end_offset), self.log_start_offset)
        for segment in self._segments[max(0, self._floor_index(start)) :]:
            position = 0
            if segment.base_offset < start:
                found = segment.translate_offset(start)
                if found is None:
                    continue
                position = found.position
            target = segment if segment.base_offset in rebuild else None
            for pos, header in segment.log.batch_headers(position):
                if header.last_offset < start or header.producer_id < 0:
                    continue
                marker = None
                if header.is_control_batch:
                    data = segment.log.read(pos, header.size_in_bytes)
                    marker = read_end_txn_marker(data, 0, header)
                self._update_producer_state(header, marker, target)
        state.map_end_offset = self.log_end_offset
        state.on_high_watermark_updated(self.high_watermark)

    def _update_producer_state(
        self,
        header: BatchHeader,
        marker: EndTransactionMarker | None,
        segment: LogSegment | None,
    ) -> None:
        """One producer batch is in the log: update the producer state; an ABORT
        marker goes into `segment`'s `.txnindex` (None: it is there already)."""
        state = self.producer_state
        completed = state.update(header, marker)
        if completed is None:
            return
        if completed.is_aborted and segment is not None:
            segment.update_txn_index(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    state.last_stable_offset(completed),
                )
            )
        state.complete_txn(completed)

    def _load(self, log_start_offset: int, recovery_point: int, clean_shutdown: bool) -> None:
        for leftover in sorted(self.dir.glob("*" + DELETED_FILE_SUFFIX)):
            log.info("deleting %s left over from an interrupted segment deletion", leftover)
            leftover.unlink()
        for stray in sorted(self.dir.glob("*.tmp")):
            stray.unlink()
        self._complete_swaps()
        for index in (
            sorted(self.dir.glob("*" + INDEX_FILE_SUFFIX))
            + sorted(self.dir.glob("*" + TIME_INDEX_FILE_SUFFIX))
            + sorted(self.dir.glob("*" + TXN_INDEX_FILE_SUFFIX))
        ):
            if not index.with_suffix(LOG_FILE_SUFFIX).exists():
                log.info("deleting index %s: it has no log file", index)
                index.unlink()
        for data in sorted(self.dir.glob("*" + LOG_FILE_SUFFIX)):
            base = int(data.stem)
            missing = not (
                offset_index_file(self.dir, base).exists()
                and time_index_file(self.dir, base).exists()
            )
            segment = LogSegment.open(self.dir, base, self.config, now_ms=self.clock())
            try:
                if missing:
                    raise CorruptIndexError(f"index files of segment {base} are missing")
                segment.sanity_check()
            except CorruptIndexError as e:
                log.warning("%s: rebuilding the indexes of segment %d (%s)", self.dir, base, e)
                self._note_recovered(base, segment.recover(self.config.compact))
            self._add_segment(segment)
        if not self._segments:
            self._add_segment(
                LogSegment.open(self.dir, log_start_offset, self.config, now_ms=self.clock())
            )
        if not clean_shutdown:
            self._recover_from(recovery_point)
        self.active_segment.resize_indexes(self.config.segment_index_bytes)

    def _recover_from(self, recovery_point: int) -> None:
        """Check every batch after the recovery point; cut the log at the first bad one.

        Kafka: LogLoader.recoverLog. Segments before the one holding the recovery
        point were fsynced and are trusted; from there on every batch is read and
        its CRC checked. When a segment had to be cut, everything after it is
        garbage from the crash and its segments are deleted.
        """
        rebuilt = dict(self.recovered)  # segments already recovered while loading
        i = max(0, self._floor_index(recovery_point))
        while i < len(self._segments):
            segment = self._segments[i]
            truncated = rebuilt.get(segment.base_offset)
            if truncated is None:
                truncated = segment.recover(self.config.compact)
                self._note_recovered(segment.base_offset, truncated)
            if truncated > 0:
                for later in self._segments[i + 1 :]:
                    log.warning(
                        "%s: deleting segment %d after a corrupt tail", self.dir, later.base_offset
                    )
                    later.delete()
                del self._segments[i + 1 :]
                del self._bases[i + 1 :]
                break
            i += 1

    def _complete_swaps(self) -> None:
        """Finish or undo a LogCleaner swap that a crash interrupted (Kafka: LogLoader).

        The cleaner writes `<base>.log.cleaned` (and its indexes), fsyncs it, renames
        it `.swap` (the `.log` last: that rename commits the swap), renames the
        segments it replaces `.deleted` and deletes them, then renames the `.swap`
        files to their final names. So after a crash:
        - `.cleaned` files: the swap never committed; the old segments are whole.
        - a `<base>.log.swap`: committed. It replaces every segment with a base
          offset in [base, the swap's next offset) (the cleaner keeps each group's
          last batch, so that range is exactly the replaced group); those go, the
          `.swap` becomes `<base>.log`, and its indexes are rebuilt.
        - index `.swap` files are always dropped and rebuilt from their `.log`.
        """
        for leftover in sorted(self.dir.glob("*" + CLEANED_FILE_SUFFIX)):
            log.info("deleting %s left over from an interrupted cleaning", leftover)
            leftover.unlink()
        swaps = sorted(self.dir.glob("*" + LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX))
        for index in sorted(self.dir.glob("*" + SWAP_FILE_SUFFIX)):
            if not index.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                index.unlink()
        for swap in swaps:
            base = int(swap.name.split(".")[0])
            records = FileRecords.open(swap, mutable=False)
            try:
                end = base
                for _, header in records.batch_headers(0):
                    end = header.next_offset
            finally:
                records.close()
            for old in sorted(self.dir.iterdir()):
                stem = old.name.split(".")[0]
                if old == swap or not stem.isdigit() or not base <= int(stem) < end:
                    continue
                if old.suffix in (
                    LOG_FILE_SUFFIX,
                    INDEX_FILE_SUFFIX,
                    TIME_INDEX_FILE_SUFFIX,
                    TXN_INDEX_FILE_SUFFIX,
                ):
                    log.info("deleting %s: replaced by the cleaned segment %s", old, swap.name)
                    old.unlink()
            for index in (offset_index_file(self.dir, base), time_index_file(self.dir, base)):
                index.unlink(missing_ok=True)  # rebuilt from the cleaned data below
            os.replace(swap, log_file(self.dir, base))
            log.info("%s: completed the interrupted swap of cleaned segment %d", self.dir, base)
        if swaps:
            fsync_dir(self.dir)

    def _note_recovered(self, base: int, truncated: int) -> None:
        self.recovered.append((base, truncated))
        if truncated:
            log.warning(
                "%s: cut %d bytes of corrupt or torn data from segment %d",
                self.dir,
                truncated,
                base,
            )

    def _add_segment(self, segment: LogSegment) -> None:
        i = bisect.bisect_left(self._bases, segment.base_offset)
        self._segments.insert(i, segment)
        self._bases.insert(i, segment.base_offset)

    def _floor_index(self, offset: int) -> int:
        """Index of the segment that would hold `offset` (-1 if before the first)."""
        return bisect.bisect_right(self._bases, offset) - 1

    # -- facts ----------------------------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy; the log owns them)."""
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""
        return self._log_end_offset

    @property
    def size(self) -> int:
        """Bytes in all segment data files."""
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    # -- appends --------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate whole batches, assign them offsets from the LEO, stamp the leader
        epoch (and LogAppendTime if configured), and append them.

        `verification_guard`: None when transaction verification is off
        (transaction.partition.verification.enable=false); else the guard the leader
        got from `maybe_start_transaction_verification` before asking the transaction
        coordinator. A transactional batch that would open a transaction here without
        that guard still current raises InvalidTxnStateError (KIP-890 part 1).

        Kafka: UnifiedLog.appendAsLeader. Raises CorruptRecordError (bad CRC or
        framing), InvalidRecordError, RecordBatchTooLargeError; nothing is written
        unless every batch is valid. A bytearray is patched in place (as Kafka
        patches the request's buffer); other buffers are copied first.
        """
        buf = records if isinstance(records, bytearray) else bytearray(records)
        headers = self._validate(buf, origin)
        client = origin is AppendOrigin.CLIENT
        if client or origin is AppendOrigin.COORDINATOR:
            for pos, header in headers:
                if header.producer_id >= 0:
                    if header.is_control_batch:  # only a coordinator gets here
                        marker = read_end_txn_marker(buf, pos, header)
                        if marker is not None:
                            self.producer_state.check_marker(header, marker)
                        continue
                    duplicate = self.producer_state.check(header, client)
                    if client and verification_guard is not None and duplicate is None:
                        self.producer_state.check_verified(header, verification_guard)
                    if duplicate is not None:  # a retry: answer with the first offsets
                        return LogAppendInfo(
                            duplicate.first_offset,
                            duplicate.last_offset,
                            duplicate.timestamp,
                            duplicate.last_offset,
                            -1,
                            self.log_start_offset,
                            0,
                            0,
                            0,
                            duplicate=True,
                        )
        # Every record checked, then offsets, the leader epoch and timestamps assigned,
        # batches recompressed where compression.type says (Kafka: LogValidator).
        result = validate_and_assign_offsets(
            buf,
            headers,
            first_offset=self._log_end_offset,
            leader_epoch=leader_epoch,
            now=self.clock(),
            config=self.config,
            where=self.dir.name,
        )
        buf = result.records
        batches = []
        headers = []
        for batch in result.batches:
            header = batch.header
            headers.append((batch.position, header))
            batches.append(
                (batch.position, header.size_in_bytes, header.last_offset, batch.max_timestamp)
            )
        return self._append(buf, batches, headers, result.log_append_time, leader_epoch)

    def maybe_start_transaction_verification(
        self, producer_id: int, producer_epoch: int
    ) -> VerificationGuard:
        """Kafka: UnifiedLog.maybeStartTransactionVerification (the producer state's)."""
        return self.producer_state.maybe_start_verification(producer_id, producer_epoch)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches with the offsets and epochs the leader gave them.

        Kafka: UnifiedLog.appendAsFollower. Without compaction the first batch must
        start at the LEO and each batch where the previous one ended; under
        cleanup.policy=compact the leader's log has gaps, so a batch may start
        later (never earlier). Otherwise UnexpectedAppendOffsetError (the replica
        fetcher then truncates and fetches again).
        """
        buf = bytes(records)
        # A fetch response is a byte range of the leader's file cut at the fetch's
        # max bytes: it may end inside a batch. Keep the whole batches (Kafka:
        # trimInvalidBytes); the next fetch starts where they end.
        whole = _whole_batches_length(buf)
        if whole == 0:  # not even one whole batch: nothing to append
            return LogAppendInfo(
                self.log_end_offset, self.log_end_offset - 1, -1, -1, -1,
                self.log_start_offset, 0, 0, 0,
            )  # fmt: skip
        buf = buf[:whole]
        headers = self._validate(buf, AppendOrigin.REPLICATION)
        expected = self.log_end_offset
        gaps = self.config.compact
        for pos, header in headers:
            # The log's offset rule (module docstring): contiguous, or under
            # compaction strictly increasing, as Kafka checks for every log.
            if header.base_offset != expected and not (gaps and header.base_offset > expected):
                first, last = headers[0][1].base_offset, headers[-1][1].last_offset
                raise UnexpectedAppendOffsetError(
                    f"{self.dir.name}: batch at offset {header.base_offset} (position {pos}) "
                    f"does not continue at {expected}{' or later' if gaps else ''}, the log "
                    "end offset or the previous "
                    "batch's end; a follower must truncate (or truncate_fully_and_start_at) "
                    "before it appends other offsets",
                    first,
                    last,
                )
            expected = header.next_offset
        batches = [(pos, h.size_in_bytes, h.last_offset, h.max_timestamp) for pos, h in headers]
        return self._append(buf, batches, headers, -1, None)

    def _validate(
        self, buf: bytes | bytearray, origin: AppendOrigin
    ) -> list[tuple[int, BatchHeader]]:
        """Every batch whole, CRC-checked, within max.message.bytes and segment.bytes."""
        headers: list[tuple[int, BatchHeader]] = []
        config = self.config
        limit = min(config.max_message_bytes, config.segment_bytes)
        from_client = origin is AppendOrigin.CLIENT
        end = len(buf)
        pos = 0
        while pos < end:
            size = peek_size(buf, pos)
            if size is None or size < RECORD_BATCH_OVERHEAD or pos + size > end:
                raise CorruptRecordError(
                    f"{self.dir.name}: the records end with a partial batch at position {pos}; "
                    "a produce request must carry whole batches"
                )
            header = ensure_valid(buf, pos)
            if size > limit:
                self._refuse_size(size)
            if origin is not AppendOrigin.REPLICATION:
                if header.records_count != header.last_offset_delta + 1:
                    raise InvalidRecordError(
                        f"{self.dir.name}: batch at position {pos} says {header.records_count} "
                        f"records but lastOffsetDelta {header.last_offset_delta}"
                    )
                if from_client and header.attributes & CONTROL_FLAG_MASK:
                    raise ControlBatchFromClientError(
                        f"{self.dir.name}: clients may not write control batches; "
                        "transaction markers are written by the transaction coordinator"
                    )
            headers.append((pos, header))
            pos += size
        if not headers:
            raise InvalidRecordError(f"{self.dir.name}: an append must carry at least one batch")
        return headers

    def _refuse_size(self, size: int) -> None:
        if size > self.config.max_message_bytes:
            raise RecordBatchTooLargeError(
                f"{self.dir.name}: a batch of {size} bytes exceeds max.message.bytes="
                f"{self.config.max_message_bytes}; send smaller batches (batch.size) or "
                "raise max.message.bytes for the topic"
            )
        raise RecordBatchTooLargeError(
            f"{self.dir.name}: a batch of {size} bytes does not fit in a segment "
            f"(segment.bytes={self.config.segment_bytes}); raise segment.bytes"
        )

    def _append(
        self,
        buf: bytes | bytearray,
        batches: list[tuple[int, int, int, int]],
        headers: list[tuple[int, BatchHeader]],
        append_time: int,
        leader_epoch: int | None,
    ) -> LogAppendInfo:
        """Write validated batches: `batches` holds (position, size, last offset,
        max timestamp) of each, as they will be stored."""
        last = batches[-1][2]
        first = batches[0][2] - headers[0][1].last_offset_delta
        max_ts, offset_of_max = -1, first
        for _, _, last_offset, max_timestamp in batches:
            if max_timestamp > max_ts:
                max_ts, offset_of_max = max_timestamp, last_offset
        segment = self._segments[-1]
        reason = segment.should_roll(len(buf), last, max_ts, self.clock(), self.config)
        if reason is not None:
            segment = self.roll(first)
        segment.append(last, max_ts, offset_of_max, buf, batches)
        self._log_end_offset = last + 1
        if leader_epoch is not None:  # the leader stamped every batch with its epoch
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first)
        else:  # a follower learns epochs from the leader's batches
            for _, header in headers:
                if header.partition_leader_epoch > self.leader_epoch_cache.latest_epoch:
                    self.leader_epoch_cache.assign(
                        header.partition_leader_epoch, header.base_offset
                    )
        for (_, _, last_offset, _), (pos, header) in zip(batches, headers, strict=True):
            if header.producer_id >= 0:
                marker = None
                if header.is_control_batch:  # a COMMIT/ABORT marker: one record to read
                    marker = read_end_txn_marker(buf, pos, header)
                self._update_producer_state(
                    header._replace(base_offset=last_offset - header.last_offset_delta),
                    marker,
                    segment,
                )
        if self._log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        num_records = 0
        for _, header in headers:
            num_records += header.records_count
        return LogAppendInfo(
            first,
            last,
            max_ts,
            offset_of_max,
            append_time,
            self.log_start_offset,
            len(headers),
            num_records,
            len(buf),
            reason,
        )

    # -- reads ----------------------------------------------------------------------------

    def last_fetchable_offset(self, isolation: FetchIsolation) -> int:
        """Where a read with `isolation` must stop (exclusive): the LEO for a
        follower, the high watermark for read_uncommitted, the last stable offset
        for read_committed."""
        if isolation == FetchIsolation.LOG_END:
            return self.log_end_offset
        if isolation == FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """LSO: the first offset of the oldest transaction not yet complete (or whose
        marker is not yet below the high watermark), capped by the high watermark
        (Kafka: UnifiedLog.lastStableOffset). A read_committed consumer reads below it."""
        first = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        if first is not None:
            first = max(first, self.log_start_offset)
            if first < hw:
                return first
        return hw

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset): what a
        read_committed fetch of that range answers with, so the consumer drops
        their records (Kafka: UnifiedLog.collectAbortedTransactions). Reads the
        `.txnindex` of the segment holding `start_offset` and later ones, until an
        entry's last stable offset shows no earlier transaction can still overlap."""
        out: list[AbortedTxn] = []
        for segment in self._segments[max(0, self._floor_index(start_offset)) :]:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(result.aborted)
            if result.is_complete:
                break
        return out

    def fetch_upper_bound_offset(self, info: FetchDataInfo) -> int:
        """An offset no batch of `info`'s bytes reaches past: the first offset-index
        entry at or beyond the end of the bytes read, else the next segment's base
        offset, else the LEO (Kafka: UnifiedLog.addAbortedTransactions's bound). A
        read_committed fetch names the aborted transactions below it only."""
        meta = info.fetch_offset_metadata
        i = self._floor_index(meta.segment_base_offset)
        segment = self._segments[i]
        start = OffsetPosition(meta.message_offset, meta.relative_position_in_segment)
        found = segment.offset_index.fetch_upper_bound_offset(start, info.size_in_bytes)
        if found is not None:
            return found.offset
        if i + 1 < len(self._segments):
            return self._segments[i + 1].base_offset
        return self.log_end_offset

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """The file byte range holding batches from `start_offset`, at most
        `max_bytes` (but one whole first batch when `min_one_message`), and only
        batches below `max_offset` (a consumer's limit is the high watermark).

        Kafka: UnifiedLog.read. Raises OffsetOutOfRangeError outside
        [log start offset, LEO].
        """
        leo = self.log_end_offset
        if start_offset > leo or start_offset < self.log_start_offset:
            raise OffsetOutOfRangeError(start_offset, self.log_start_offset, leo, self.dir.name)
        limit = leo if max_offset is None else min(max_offset, leo)
        if start_offset >= limit:
            return FetchDataInfo(LogOffsetMetadata(start_offset))
        limit_meta = self.offset_metadata(limit)
        for segment in self._segments[max(0, self._floor_index(start_offset)) :]:
            if segment.base_offset == limit_meta.segment_base_offset:
                max_position = limit_meta.relative_position_in_segment
            else:
                max_position = segment.size
            info = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if info is not None:
                return info
        return FetchDataInfo(LogOffsetMetadata(start_offset))

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Which segment and byte position `offset`'s batch starts at (its end if past)."""
        if offset == self.log_end_offset and self._segments:
            # The LEO is the end of the active segment, no search needed (Kafka keeps
            # it as logEndOffsetMetadata). A follower's waiting fetch asks this for
            # every partition of its session, most of them idle.
            active = self._segments[-1]
            return LogOffsetMetadata(offset, active.base_offset, active.size)
        i = self._floor_index(offset)
        if i < 0:
            raise OffsetOutOfRangeError(
                offset, self.log_start_offset, self.log_end_offset, self.dir.name
            )
        segment = self._segments[i]
        found = segment.translate_offset(offset)
        position = segment.size if found is None else found.position
        return LogOffsetMetadata(offset, segment.base_offset, position)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1),
        MAX_TIMESTAMP (-3), EARLIEST_LOCAL_TIMESTAMP (-4, the log start: no
        tiered storage), LATEST_TIERED_TIMESTAMP (-5, offset -1: nothing is
        tiered), or the first record with a timestamp >= `timestamp` (None when
        there is none). Kafka: UnifiedLog.fetchOffsetByTimestamp."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(-1, self.log_start_offset, -1)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_end_offset, -1)
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(-1, -1, -1)
        if timestamp == MAX_TIMESTAMP:
            return self._offset_of_max_timestamp()
        for segment in self._segments:
            if segment.max_timestamp_so_far >= timestamp or segment is self.active_segment:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return TimestampAndOffset(*found)
        return None

    def _offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (the first, if several have it):
        the segment with the largest timestamp, then the batch the time index
        points at (it keeps the batch's last offset), then the record inside it
        (Kafka 3.8+, KAFKA-16310: RecordBatch.offsetOfMaxTimestamp; under
        LogAppendTime every record has the batch's time, so its first record)."""
        best = max(self._segments, key=lambda s: s.max_timestamp_so_far)
        max_ts = best.max_timestamp_so_far
        if max_ts < 0:
            return None
        found = best.translate_offset(best.offset_of_max_timestamp_so_far)
        start = found.position if found is not None else 0
        for pos, header in best.log.batch_headers(start):
            if header.max_timestamp != max_ts:
                continue
            if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
                return TimestampAndOffset(max_ts, header.base_offset, -1)
            data = best.log.read(pos, header.size_in_bytes)
            for record in decode_batch(data, verify_crc=False).records:
                if record.timestamp == max_ts:
                    return TimestampAndOffset(max_ts, record.offset, -1)
            return TimestampAndOffset(max_ts, header.last_offset, -1)
        return TimestampAndOffset(max_ts, best.offset_of_max_timestamp_so_far, -1)

    # -- rolling, flushing, high watermark ----------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, LEO).

        Kafka: UnifiedLog.roll. The old active segment gets its final time index
        entry and its indexes trimmed to size.
        """
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        old = self.active_segment
        if old.base_offset == new_base:
            if old.size == 0:
                return old  # an empty active segment at the LEO is already what we want
            raise RuntimeError(f"cannot roll {self.dir.name}: segment {new_base} already exists")
        old.on_become_inactive_segment()
        segment = LogSegment.open(self.dir, new_base, self.config, now_ms=self.clock())
        self._add_segment(segment)
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        return segment

    def flush(self) -> None:
        """fsync every segment with unflushed data and move the recovery point to the LEO.

        Kafka: UnifiedLog.flush. Triggered by flush.messages after an append, by
        flush.ms (`flush_due`, from the LogManager), and on close.
        """
        pending = self.begin_flush()
        pending.run()
        self.complete_flush(pending)

    def begin_flush(self) -> PendingFlush:
        """What a flush of everything written so far must fsync; `run()` it (here or
        in another thread), then `complete_flush` it here."""
        self.last_flush_ms = self.clock()
        start = max(0, self._floor_index(self.recovery_point))
        segments = tuple(self._segments[start:])
        new = any(s.base_offset >= self.recovery_point for s in segments)
        return PendingFlush(
            segments, self.log_end_offset, self._truncations, self.dir if new else None
        )

    def complete_flush(self, pending: PendingFlush) -> bool:
        """Move the recovery point to what `pending` made durable; False when the log
        was truncated since it began (the offsets it covered may hold new data now)."""
        if pending.truncations != self._truncations:
            return False
        self.recovery_point = max(self.recovery_point, min(pending.upto, self.log_end_offset))
        return True

    def flush_due(self) -> bool:
        """flush.ms has passed since the last flush and data is waiting."""
        return (
            self.unflushed_messages > 0
            and self.clock() - self.last_flush_ms >= self.config.flush_ms
        )

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start offset, LEO]; returns it.
        (The Partition layer moves it as replicas confirm data; a single-replica
        log may move it to the LEO after each append.)"""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        return self.high_watermark

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords: move the log start offset forward (never past the HW);
        segments wholly below it go at the next retention pass."""
        if new_log_start_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                new_log_start_offset, self.log_start_offset, self.high_watermark + 1, self.dir.name
            )
        if new_log_start_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        return True

    # -- retention ----------------------------------------------------------------------------

    def delete_old_segments(self) -> list[DeletedSegment]:
        """Apply retention.ms, retention.bytes and the log start offset; return what went.

        Kafka: UnifiedLog.deleteOldSegments. retention.ms and retention.bytes
        apply only when cleanup.policy includes delete; the log start offset
        (DeleteRecords) always does. Only a prefix of segments can go,
        each wholly below the high watermark; if every segment goes, a new empty
        active segment is rolled first so the log always has one.
        """
        now = self.clock()
        deleted: list[DeletedSegment] = []
        retain = self.config.delete  # cleanup.policy=compact alone keeps every segment
        if retain and self.config.retention_ms >= 0:
            deleted += self._delete_prefix(
                lambda seg, _next: now - seg.largest_timestamp() > self.config.retention_ms,
                lambda seg: (
                    f"retention.ms: newest record is {now - seg.largest_timestamp()} "
                    f"ms old > {self.config.retention_ms}"
                ),
            )
        if retain and self.config.retention_bytes >= 0:
            excess = [self.size - self.config.retention_bytes]

            def over_size(seg: LogSegment, _next: LogSegment | None) -> bool:
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False

            deleted += self._delete_prefix(
                over_size,
                lambda seg: (
                    f"retention.bytes: log is {self.size} bytes > {self.config.retention_bytes}"
                ),
            )
        deleted += self._delete_prefix(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
            lambda seg: f"log start offset {self.log_start_offset} is past it",
        )
        return deleted

    def _delete_prefix(self, predicate, describe) -> list[DeletedSegment]:
        doomed: list[tuple[LogSegment, str]] = []
        for i, segment in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and segment.size == 0:
                break
            if self.high_watermark < upper or not predicate(segment, nxt):
                break
            doomed.append((segment, describe(segment)))
        if not doomed:
            return []
        if len(doomed) == len(self._segments):
            self.roll()
        out = []
        for segment, reason in doomed:
            out.append(DeletedSegment(segment.base_offset, segment.size, reason))
            self._delete_segment(segment)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.producer_state.delete_snapshots_before(self.log_start_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return out

    def _delete_segment(self, segment: LogSegment) -> None:
        """Rename the files `.deleted` (so a crash mid-way leaves no half segment in
        the log), then delete them. Kafka waits file.delete.delay.ms before the
        delete so in-flight reads finish; our reads copy or send synchronously."""
        i = self._bases.index(segment.base_offset)
        del self._segments[i]
        del self._bases[i]
        segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
        if self.segment_deleter is None:
            segment.delete()
        else:
            self.segment_deleter(segment)

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """Swap a LogCleaner's `.cleaned` segment in for the segments it was cleaned
        from (Kafka: LocalLog.replaceSegments), crash-safe at every step:

        1. the cleaned files (already fsynced) are renamed `.swap`, the `.log`
           last, and the directory fsynced: from here on the swap is committed,
           and a crash is completed by `_complete_swaps` at the next load;
        2. the old segments leave the log and their files are renamed `.deleted`
           and deleted, and the directory fsynced (so no old segment can come
           back after the `.swap` name, which marks the swap unfinished, is gone);
        3. the `.swap` files get their final names, and the directory is fsynced.

        `cleaned` must start at the first old segment's base offset and hold no
        offset at or past the end of the last old segment.
        """
        if not old or cleaned.base_offset != old[0].base_offset:
            raise ValueError("a cleaned segment replaces segments starting at its base offset")
        if old[-1] is self.active_segment:
            raise ValueError(f"{self.dir.name}: the active segment is never cleaned")
        cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, log_last=True)
        fsync_dir(self.dir)
        for segment in old:
            self._delete_segment(segment)
        fsync_dir(self.dir)  # the deletions are durable before the `.swap` name goes
        self._add_segment(cleaned)
        cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        fsync_dir(self.dir)

    # -- truncation (replication) -------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at `offset` or later (a follower dropping a
        divergent tail). Returns False when there was nothing to remove."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.dir.name} to a negative offset {offset}")
        if offset >= self.log_end_offset:
            # The cache may still name an epoch that starts at the LEO (we led it and
            # wrote nothing); it conflicts with the leader's history, so it goes, as
            # in Kafka's UnifiedLog.truncateTo.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._note_truncation(offset)
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            segment = self._segments[-1]
            self._delete_segment(segment)
        self.active_segment.truncate_to(offset)
        self._log_end_offset = self.active_segment.read_next_offset()
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self.high_watermark = min(self.high_watermark, self._log_end_offset)
        self._rebuild_producer_state()
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        return True

    def _note_truncation(self, offset: int) -> None:
        self._truncations += 1
        if self.truncated_to is None or offset < self.truncated_to:
            self.truncated_to = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and start an empty log at `offset` (a follower far
        behind a leader whose log now starts later)."""
        self._note_truncation(offset)
        for segment in list(self._segments):
            self._delete_segment(segment)
        self._add_segment(LogSegment.open(self.dir, offset, self.config, now_ms=self.clock()))
        self._log_end_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_snapshots_before(2**63 - 1)
        self.producer_state.truncate_and_reload()
        self.producer_state.map_end_offset = offset

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and close every file. The log directory stays as it is."""
        if not self._segments:
            return
        self.flush()
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        for segment in self._segments:
            segment.close()
        self._segments = []
        self._bases = []

    def delete(self) -> None:
        """Delete every file and the directory."""
        for segment in list(self._segments):
            self._delete_segment(segment)
        for leftover in self.dir.iterdir():
            leftover.unlink(missing_ok=True)  # a segment_deleter may be deleting it too
        self.dir.rmdir()

    def __enter__(self) -> UnifiedLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.dir.name}: [{self.log_start_offset}, {self.log_end_offset}), "
            f"{len(self._segments)} segments, hw={self.high_watermark})"
        )


#: Kafka's older name, as in the course material.
Log = UnifiedLog
