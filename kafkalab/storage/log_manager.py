"""LogManager: every partition log of a broker, its checkpoints and background duties.

Kafka's class: kafka.log.LogManager. A broker has one or more log directories
(`log.dirs`); each holds partition directories and the checkpoint files:

    /var/kafka-logs/
        .lock                              held (flock) while a broker has it open
        .kafka_cleanshutdown               present only after a clean shutdown
        recovery-point-offset-checkpoint   per partition: everything below was fsynced
        log-start-offset-checkpoint        per partition: first offset still readable
        replication-offset-checkpoint      per partition: the high watermark
        orders-0/  orders-1/  ...

Startup: if `.kafka_cleanshutdown` is there, logs are trusted as they are;
otherwise every log re-checks its data past its recovery point. The marker is
removed at startup and written again only by `shutdown()`.

The background duties (retention, flush.ms, checkpoints, log compaction, the
expiry of idle producer ids) are not threads here:
the owner calls `tick()` (the broker from its event loop, a lab by hand), which
runs each duty whose interval has passed. Time comes from `clock` (ms). The
cleaner duty (`clean_logs`, every log.cleaner.backoff.ms) cleans the filthiest
log with cleanup.policy=compact; its progress is `cleaner-offset-checkpoint` in
each log dir. With `cleaner_threads=0` (the default: labs, tests) it cleans one
log in the caller, as one Kafka cleaner thread does. With `cleaner_threads` >= 1
(`log.cleaner.threads`: the broker) the cleaning runs in that many cleaner
processes, so that a pass of seconds never holds up the caller's event loop:
`tick()` only hands logs to idle cleaners and swaps in (renames, fsyncs) what
they finished; it never waits for a pass. Retention skips a log while it is
being cleaned and deleting a log aborts its pass (Kafka: LogCleanerManager's
pauseCleaning / abortCleaning). With `background_threads` >= 1
(`background.threads`: the broker), the offset checkpoints are written by a
writer thread (their fsyncs took 50-90 ms for 100 partitions on a busy disk),
from offsets taken in the caller, and the files of segments that retention,
truncation or the cleaner dropped (renamed `.deleted` in the caller) are
deleted by it too, and it runs the fsyncs of flush.ms flushes (Kafka's
kafka-log-flusher), the recovery points moving in a later `tick()` once they
are done; `shutdown()` waits for it before its own checkpoint.
(Kafka's ReplicaManager writes replication-offset-checkpoint; the LogManager
writes it here because UnifiedLog holds the high watermark.)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafkalab.storage.checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from kafkalab.storage.file_lock import FileLock
from kafkalab.storage.log_cleaner import (
    DEFAULT_CLEANER_BACKOFF_MS,
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_MAX_IO_BYTES_PER_SECOND,
    CleanResult,
    LogCleaner,
)
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_segment import LogSegment
from kafkalab.storage.unified_log import (
    DeletedSegment,
    PendingFlush,
    UnifiedLog,
    parse_topic_partition,
)

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """Opens, creates, retains, flushes and checkpoints the logs under `log_dirs`."""

    def __init__(
        self,
        log_dirs: str | os.PathLike | Iterable[str | os.PathLike],
        default_config: LogConfig | None = None,
        *,
        topic_configs: Mapping[str, Mapping[str, Any]] | None = None,
        retention_check_interval_ms: int = 300_000,  # log.retention.check.interval.ms
        flush_check_interval_ms: int = 2**63 - 1,  # log.flush.scheduler.interval.ms
        checkpoint_interval_ms: int = 60_000,  # log.flush.offset.checkpoint.interval.ms
        cleaner_enable: bool = True,  # log.cleaner.enable
        cleaner_backoff_ms: int = DEFAULT_CLEANER_BACKOFF_MS,  # log.cleaner.backoff.ms
        cleaner_dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,  # log.cleaner.dedupe.buffer.size
        cleaner_threads: int = 0,  # log.cleaner.threads (0: clean in tick's caller)
        cleaner_io_max_bytes_per_second: float = DEFAULT_MAX_IO_BYTES_PER_SECOND,
        producer_id_expiration_ms: int = 86_400_000,  # producer.id.expiration.ms
        producer_id_expiration_check_interval_ms: int = 600_000,  # producer.id.expiration.check.interval.ms
        background_threads: int = 0,  # background.threads (0: checkpoints written in the caller)
        clock: Callable[[], int] = _wall_clock_ms,
        timer_clock: Callable[[], int] | None = None,
    ) -> None:
        """`clock`: wall time (ms), for what Kafka reads wall time for (segment
        roll, retention, flush.ms, LogAppendTime). `timer_clock`: when each duty is
        due (a broker passes a monotonic clock, as Kafka's scheduler is, so a
        stepped wall clock does not stall its checkpoints); `clock` when not given."""
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("log.dirs is empty: give at least one directory")
        self.default_config = default_config or LogConfig()
        self.topic_configs = {t: dict(c) for t, c in (topic_configs or {}).items()}
        self.clock = clock
        self.timer_clock = timer_clock or clock
        self._intervals = {
            "retention": retention_check_interval_ms,
            "flush": flush_check_interval_ms,
            "checkpoint": checkpoint_interval_ms,
            "cleaner": cleaner_backoff_ms if cleaner_enable else 2**63 - 1,
            "producer-expiration": producer_id_expiration_check_interval_ms,
        }
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.cleaner = LogCleaner(
            dedupe_buffer_size=cleaner_dedupe_buffer_size,
            threads=cleaner_threads,
            max_io_bytes_per_second=cleaner_io_max_bytes_per_second,
            backoff_ms=cleaner_backoff_ms,
        )
        self._last_run = dict.fromkeys(self._intervals, self.timer_clock())
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._locks: list[FileLock] = []
        # With background threads, checkpoint files (three fsyncs and a directory
        # fsync each) are written, and dropped segments' files deleted, by one writer
        # thread, in the order asked for (Kafka: the kafka-scheduler threads).
        self._writer: ThreadPoolExecutor | None = None
        self._flushes: list[tuple[UnifiedLog, PendingFlush, Future]] = []  # in the writer
        if background_threads > 0:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="kafka-scheduler")
        try:
            for directory in self.log_dirs:
                self._locks.append(FileLock(directory).lock())  # LogDirInUseError if taken
                self._load_dir(directory)
        except BaseException:
            self._unlock()
            raise

    def _unlock(self) -> None:
        for lock in self._locks:
            lock.unlock()
        self._locks = []

    def _load_dir(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[directory] = clean
        recovery_points = OffsetCheckpointFile(directory / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(directory / REPLICATION_OFFSET_CHECKPOINT).read()
        for child in sorted(directory.iterdir()):
            if not child.is_dir():
                continue
            try:
                tp = parse_topic_partition(child)
            except ValueError:
                log.warning("ignoring %s: not a <topic>-<partition> directory", child)
                continue
            if tp in self._logs:
                raise RuntimeError(
                    f"partition {tp[0]}-{tp[1]} is in two log dirs: {self._logs[tp].dir} and "
                    f"{child}; remove one of them"
                )
            self._logs[tp] = self._adopt(
                UnifiedLog(
                    child,
                    self.config_for(tp[0]),
                    log_start_offset=start_offsets.get(tp, 0),
                    recovery_point=recovery_points.get(tp, 0),
                    high_watermark=high_watermarks.get(tp, 0),
                    clean_shutdown=clean,
                    clock=self.clock,
                )
            )
        if clean:
            marker.unlink()  # from now on, a crash must be noticed at the next start
            fsync_dir(directory)

    # -- logs ------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        overrides = self.topic_configs.get(topic)
        return self.default_config.with_overrides(overrides) if overrides else self.default_config

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, overrides: Mapping[str, Any] | None = None
    ) -> UnifiedLog:
        """The log of topic-partition, created in the log dir with the fewest
        partitions when missing (Kafka: LogManager.getOrCreateLog). An existing
        log (loaded from disk at startup, before the metadata said what its topic's
        configs are) takes the `overrides` given (Kafka: UnifiedLog.updateConfig):
        otherwise a restarted broker would treat a compacted topic as
        cleanup.policy=delete."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            if overrides is not None:
                self.topic_configs[topic] = dict(overrides)
                existing.config = self.config_for(topic)
            return existing
        check_topic_name(topic)
        if overrides:
            self.topic_configs[topic] = dict(overrides)
        counts = {d: 0 for d in self.log_dirs}
        for existing in self._logs.values():
            counts[existing.dir.parent] = counts.get(existing.dir.parent, 0) + 1
        directory = min(self.log_dirs, key=lambda d: counts[d])
        created = UnifiedLog(
            directory / f"{topic}-{partition}",
            self.config_for(topic),
            clean_shutdown=True,
            clock=self.clock,
        )
        fsync_dir(directory)
        self._logs[tp] = self._adopt(created)
        return created

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> None:
        """A topic's overrides changed (AlterConfigs): its logs take them at once,
        the next append, roll or retention check sees them (Kafka:
        UnifiedLog.updateConfig). An empty `overrides` goes back to the defaults."""
        self.topic_configs[topic] = dict(overrides)
        config = self.config_for(topic)
        for (name, _), log_ in self._logs.items():
            if name == topic:
                log_.config = config

    def update_default_config(self, default: LogConfig) -> None:
        """The broker-wide defaults changed (a dynamic broker config): every log
        takes them, under its topic's own overrides."""
        self.default_config = default
        for (topic, _), log_ in self._logs.items():
            log_.config = self.config_for(topic)

    def _adopt(self, log_: UnifiedLog) -> UnifiedLog:
        """With background threads, a dropped segment's files are deleted by the
        writer thread, not by the caller (Kafka: the delete-file task)."""
        if self._writer is not None:
            log_.segment_deleter = self._delete_later
        return log_

    def _delete_later(self, segment: LogSegment) -> None:
        if self._writer is None:  # shutting down: at once
            segment.delete()
            return
        self._writer.submit(segment.delete).add_done_callback(_log_failure)

    def all_logs(self) -> dict[TopicPartition, UnifiedLog]:
        return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> bool:
        removed = self._logs.pop((topic, partition), None)
        if removed is None:
            return False
        self.cleaner.abort((topic, partition))  # its cleaner writes in the directory
        removed.segment_deleter = None  # the directory goes now, with every file in it
        removed.delete()
        self.checkpoint()
        self.cleaner.update_checkpoint(removed.dir.parent, (topic, partition), None)
        return True

    # -- background duties -----------------------------------------------------------------

    def cleanup_logs(self) -> dict[TopicPartition, list[DeletedSegment]]:
        """Retention on every log but those being cleaned, whose turn comes at the
        next check (Kafka: LogManager.cleanupLogs with the cleaner's pause)."""
        out = {}
        for tp, partition_log in self._logs.items():
            if self.cleaner.in_progress(tp):
                continue
            deleted = partition_log.delete_old_segments()
            if deleted:
                out[tp] = deleted
        if out:
            self.checkpoint()
        return out

    def clean_logs(self) -> CleanResult | list[TopicPartition] | None:
        """Compact the filthiest log with cleanup.policy=compact whose dirty ratio
        is above min.cleanable.dirty.ratio (or that max.compaction.lag.ms says is
        due); None when no log needs it (Kafka: a LogCleaner thread's doWork).
        With cleaner threads, hand such logs to the idle ones instead and return
        which (`tick` swaps in what they finish)."""
        if self.cleaner.threads:
            return self.cleaner.start_cleaning(self._logs, self.clock()) or None
        return self.cleaner.clean_filthiest_log(self._logs, self.clock())

    def remove_expired_producers(self) -> dict[TopicPartition, list[int]]:
        """Forget, in every log, the producers idle for producer.id.expiration.ms
        (Kafka: the PeriodicProducerExpirationCheck task); returns them per log."""
        now = self.clock()
        out = {}
        for tp, lg in self._logs.items():
            removed = lg.producer_state.remove_expired_producers(
                now, self.producer_id_expiration_ms
            )
            if removed:
                out[tp] = removed
        return out

    def flush_dirty_logs(self) -> list[TopicPartition]:
        """Flush each log whose flush.ms has passed (Kafka: flushDirtyLogs); returns
        them. In the caller, or with background threads by the writer thread (Kafka's
        kafka-log-flusher): an fsync of megabytes takes hundreds of ms, and the
        caller is an event loop. Their recovery points move when `tick` sees the
        fsyncs done."""
        due = [(tp, lg) for tp, lg in self._logs.items() if lg.flush_due()]
        for _, lg in due:
            if self._writer is None:
                lg.flush()
                continue
            pending = lg.begin_flush()
            future = self._writer.submit(pending.run)
            future.add_done_callback(_log_failure)
            self._flushes.append((lg, pending, future))
        return [tp for tp, _ in due]

    def complete_flushes(self) -> int:
        """Move the recovery points of the logs whose background fsyncs are done
        (not of those that failed or were truncated meanwhile); returns how many moved."""
        moved, waiting = 0, []
        for lg, pending, future in self._flushes:
            if not future.done():
                waiting.append((lg, pending, future))
            elif future.exception() is None and lg.complete_flush(pending):
                moved += 1
        self._flushes = waiting
        return moved

    def checkpoint(self) -> Future | None:
        """Write the three offset checkpoints of every log dir: the offsets as they
        are now, written in the caller, or with background threads by the writer
        thread (returns its Future): the fsyncs take tens of ms, more when the disk
        is busy, and the caller is an event loop (Kafka: the scheduler's
        kafka-recovery-point-checkpoint and similar tasks)."""
        offsets = {
            directory: {
                name: {tp: value(lg) for tp, lg in self._logs.items() if lg.dir.parent == directory}
                for name, value in _CHECKPOINTS.items()
            }
            for directory in self.log_dirs
        }
        if self._writer is None:
            _write_checkpoints(offsets)
            return None
        future = self._writer.submit(_write_checkpoints, offsets)
        future.add_done_callback(_log_failure)
        return future

    def tick(self) -> dict[str, object]:
        """Run every duty whose interval has passed; return what each did. With
        cleaner threads, first swap in the passes they finished (under
        "cleaned", a list of CleanResults) and, when one did, hand out the next
        logs at once, as a Kafka cleaner thread goes on while there is work."""
        now = self.timer_clock()
        done: dict[str, object] = {}
        if self._flushes and self.complete_flushes():
            done["flushed"] = True
        if self.cleaner.threads:
            cleaned = self.cleaner.poll()
            if cleaned:
                done["cleaned"] = cleaned
                self._last_run["cleaner"] = now - self._intervals["cleaner"]
        duties = {
            "retention": self.cleanup_logs,
            "flush": self.flush_dirty_logs,
            "checkpoint": self.checkpoint,
            "cleaner": self.clean_logs,
            "producer-expiration": self.remove_expired_producers,
        }
        for name, duty in duties.items():
            if now - self._last_run[name] >= self._intervals[name]:
                self._last_run[name] = now
                done[name] = duty()
        return done

    def shutdown(self) -> None:
        """Stop the cleaners (a pass under way is abandoned), flush and close every
        log, write the checkpoints, then the clean shutdown marker (last, so a
        crash before it means recovery next time)."""
        self.cleaner.shutdown()
        if self._writer is not None:
            self._writer.shutdown(wait=True)  # the last checkpoint below is written after them
            self._writer = None
        for lg in self._logs.values():
            lg.close()  # flushes: the recovery point becomes the LEO
        self.checkpoint()
        self._logs = {}
        for directory in self.log_dirs:
            (directory / CLEAN_SHUTDOWN_FILE).touch()
            fsync_dir(directory)
        self._unlock()  # last: the directory is consistent before another may open it

    close = shutdown

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


_CHECKPOINTS: dict[str, Callable[[UnifiedLog], int]] = {
    RECOVERY_POINT_OFFSET_CHECKPOINT: lambda lg: lg.recovery_point,
    LOG_START_OFFSET_CHECKPOINT: lambda lg: lg.log_start_offset,
    REPLICATION_OFFSET_CHECKPOINT: lambda lg: lg.high_watermark,
}


def _write_checkpoints(offsets: dict[Path, dict[str, dict[TopicPartition, int]]]) -> None:
    for directory, files in offsets.items():
        for name, entries in files.items():
            OffsetCheckpointFile(directory / name).write(entries)


def _log_failure(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("a background file operation failed", exc_info=future.exception())


_LEGAL_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_topic_name(topic: str) -> None:
    """Kafka's Topic.validate: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not topic or topic in (".", "..") or len(topic) > 249 or set(topic) - _LEGAL_TOPIC_CHARS:
        raise ValueError(
            f"invalid topic name {topic!r}: use 1 to 249 characters from a-z A-Z 0-9 . _ - "
            "(Kafka: INVALID_TOPIC_EXCEPTION)"
        )
