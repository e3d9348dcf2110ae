"""The LogCleaner's cleaner threads (log.cleaner.threads >= 1): a pass runs in a
cleaner process of its own, LogManager.tick() only hands logs out and swaps in
what finished, and whatever happens to a log meanwhile (appends, truncation,
retention, deletion, shutdown, a killed cleaner) loses nothing.

Passes are slowed with log.cleaner.io.max.bytes.per.second where a test needs one
still running: the throttle sleeps for every byte over the rate, so "still
running after tick() returned" holds however fast or loaded the machine is."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, Throttler, clean
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalab.storage.unified_log import UnifiedLog

T0 = 1_700_000_000_000
TP = ("compacted", 0)
SLOW = 20_000  # bytes/s: a pass over ~40 KB (read twice) takes seconds


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def manager_for(tmp_path, clock, **kw) -> LogManager:
    return LogManager(
        tmp_path / "logs",
        LogConfig(segment_bytes=4000),
        topic_configs={"compacted": {"cleanup.policy": "compact"}},
        cleaner_backoff_ms=1000,
        cleaner_threads=1,
        clock=clock,
        **kw,
    )


def fill(log: UnifiedLog, rounds: int = 40, keys: int = 10, start: int = 0) -> None:
    """`rounds` batches of `keys` records, every key in each: about 1 KB a batch."""
    for r in range(start, start + rounds):
        records = [
            SimpleRecord(b"v%d-" % r + b"x" * 60, key=b"k%d" % k, timestamp=T0 + r)
            for k in range(keys)
        ]
        log.append_as_leader(build_batch(records))
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def records_of(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (r.offset, r.key, r.value)
        for segment in log.segments
        for b in iter_batches(segment.log.read())
        for r in b.records
    ]


def wait_until(predicate, manager: LogManager, timeout_s: float = 120):
    """Tick the manager until `predicate(tick's result)` holds (the cleaner is
    another process: this waits for it, it does not time it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = manager.tick()
        if predicate(done):
            return done
        time.sleep(0.05)
    raise AssertionError("the cleaner thread did not get there")


def hand_out(manager: LogManager, clock: FakeClock):
    """One tick once log.cleaner.backoff.ms has passed: what it handed to a cleaner."""
    clock.now += 1000
    return manager.tick().get("cleaner")


def cleaned_files(log: UnifiedLog) -> list[str]:
    return [p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_a_pass_runs_in_a_cleaner_process_and_writes_what_cleaning_in_the_caller_writes(
    tmp_path, clock
):
    manager = manager_for(tmp_path, clock)
    try:
        log = manager.get_or_create_log(*TP)
        fill(log)
        reference = UnifiedLog(tmp_path / "inline" / "compacted-0", log.config, clock=clock)
        fill(reference)
        expected = clean(reference, clock.now)
        assert hand_out(manager, clock) == [TP]  # handed out, not cleaned here
        pid = manager.cleaner.threads[0].pid
        assert pid is not None and pid != os.getpid()
        done = wait_until(lambda d: "cleaned" in d, manager)
        (result,) = done["cleaned"]
        assert (result.first_dirty_offset, result.end_offset) == (0, expected.end_offset)
        assert records_of(log) == records_of(reference)
        assert [s.log.read() for s in log.segments] == [s.log.read() for s in reference.segments]
        checkpoint = OffsetCheckpointFile(tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT)
        assert checkpoint.read() == {TP: expected.end_offset}
        assert cleaned_files(log) == []
        reference.close()
    finally:
        manager.shutdown()


def test_tick_returns_while_the_pass_runs_and_the_log_keeps_taking_writes(tmp_path, clock):
    manager = manager_for(tmp_path, clock, cleaner_io_max_bytes_per_second=SLOW)
    try:
        log = manager.get_or_create_log(*TP)
        fill(log)
        assert hand_out(manager, clock) == [TP]
        assert manager.cleaner.in_progress(TP)  # tick() came back before the pass ended
        # The owner goes on: appends, rolls and reads while the cleaner reads the old segments.
        fill(log, rounds=5, start=1000)
        during = records_of(log)
        assert manager.cleaner.in_progress(TP)
        wait_until(lambda d: "cleaned" in d, manager)
        after = records_of(log)
        newest = {key: (offset, value) for offset, key, value in during}
        assert {key: (offset, value) for offset, key, value in after} == newest
        assert [r for r in during if r[0] >= 400] == [r for r in after if r[0] >= 400]
        assert len(after) < len(during)
    finally:
        manager.shutdown()


def test_a_truncation_during_the_pass_throws_it_away_and_the_next_pass_cleans(tmp_path, clock):
    manager = manager_for(tmp_path, clock, cleaner_io_max_bytes_per_second=SLOW)
    try:
        log = manager.get_or_create_log(*TP)
        fill(log)
        assert hand_out(manager, clock) == [TP]
        log.truncate_to(150)  # a follower dropping a divergent tail, mid-pass
        kept = records_of(log)
        wait_until(lambda d: not manager.cleaner.in_progress(TP), manager)
        assert records_of(log) == kept  # nothing swapped in
        assert cleaned_files(log) == []
        checkpoint = OffsetCheckpointFile(tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT)
        assert TP not in checkpoint.read()
        fill(log, rounds=10, start=500)
        clock.now += 1000
        done = wait_until(lambda d: "cleaned" in d, manager)
        assert done["cleaned"][0].end_offset == log.log_end_offset
        assert {k for _, k, _ in records_of(log)} == {b"k%d" % k for k in range(10)}
    finally:
        manager.shutdown()


def test_retention_waits_for_the_pass_and_deleting_the_log_aborts_it(tmp_path, clock):
    manager = manager_for(tmp_path, clock, cleaner_io_max_bytes_per_second=SLOW)
    try:
        log = manager.get_or_create_log(*TP)
        fill(log)
        log.maybe_increment_log_start_offset(200)  # DeleteRecords: segments below may go
        assert hand_out(manager, clock) == [TP]
        assert manager.cleanup_logs() == {}  # skipped while its segments are being cleaned
        pid = manager.cleaner.threads[0].pid
        directory = log.dir
        assert manager.delete_log(*TP)
        assert not manager.cleaner.in_progress(TP)
        assert manager.cleaner.threads[0].pid is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # killed and reaped
        assert not directory.exists()
        # The next log gets a fresh cleaner process.
        log = manager.get_or_create_log(*TP)
        fill(log, rounds=5)
        clock.now += 1000
        wait_until(lambda d: "cleaned" in d, manager)
        assert manager.cleaner.threads[0].pid not in (None, pid)
    finally:
        manager.shutdown()


def test_shutdown_during_a_pass_stops_the_cleaner_and_loses_nothing(tmp_path, clock):
    manager = manager_for(tmp_path, clock, cleaner_io_max_bytes_per_second=SLOW)
    log = manager.get_or_create_log(*TP)
    fill(log)
    before = records_of(log)
    assert hand_out(manager, clock) == [TP]
    pid = manager.cleaner.threads[0].pid
    manager.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    reopened = LogManager(
        tmp_path / "logs", topic_configs={"compacted": {"cleanup.policy": "compact"}}
    )
    try:
        again = reopened.get_log(*TP)
        assert records_of(again) == before
        assert cleaned_files(again) == []
    finally:
        reopened.shutdown()


def test_a_killed_cleaner_process_fails_its_pass_only(tmp_path, clock, caplog):
    manager = manager_for(tmp_path, clock, cleaner_io_max_bytes_per_second=SLOW)
    try:
        log = manager.get_or_create_log(*TP)
        fill(log)
        before = records_of(log)
        assert hand_out(manager, clock) == [TP]
        os.kill(manager.cleaner.threads[0].pid, signal.SIGKILL)  # the OOM killer, say
        wait_until(lambda d: not manager.cleaner.in_progress(TP), manager)
        assert "died" in caplog.text
        assert records_of(log) == before and cleaned_files(log) == []
        manager.cleaner.max_io_bytes_per_second = float("inf")
        clock.now += 1000  # after log.cleaner.backoff.ms the log is tried again
        done = wait_until(lambda d: "cleaned" in d, manager)
        assert done["cleaned"][0].end_offset == log.log_end_offset
    finally:
        manager.shutdown()


def test_the_throttler_sleeps_the_bytes_over_the_rate_at_each_check():
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    throttler = Throttler(1000, clock=lambda: now[0], sleep=sleep)
    throttler.maybe_throttle(600)  # no check before 300 ms have passed
    assert slept == []
    now[0] += 0.3
    throttler.maybe_throttle(0)  # 600 bytes in 0.3 s: 0.6 s at 1000 B/s, so 0.3 s more
    assert slept == [pytest.approx(0.3)]
    now[0] += 1.0
    throttler.maybe_throttle(500)  # 500 bytes in 1 s: under the rate
    assert slept == [pytest.approx(0.3)]
    with pytest.raises(ValueError, match="log.cleaner.io.max.bytes.per.second"):
        Throttler(0)


def test_a_log_loaded_at_startup_takes_its_topics_configs_from_the_metadata(tmp_path, clock):
    """Found by the fault test: a restarted broker loads its logs before the metadata
    names their topics' configs, and kept the broker defaults (cleanup.policy=delete):
    a compacted topic was never cleaned again."""
    manager = manager_for(tmp_path, clock)
    fill(manager.get_or_create_log(*TP))
    manager.shutdown()
    restarted = LogManager(
        tmp_path / "logs", LogConfig(segment_bytes=4000), cleaner_backoff_ms=1000, clock=clock
    )
    try:
        assert not restarted.get_log(*TP).config.compact  # what the files alone say
        log = restarted.get_or_create_log(*TP, {"cleanup.policy": "compact"})
        assert log is restarted.get_log(*TP) and log.config.compact
        assert log.config.segment_bytes == 4000
        clock.now += 1000
        assert restarted.tick()["cleaner"].topic_partition == TP
    finally:
        restarted.shutdown()


def test_with_background_threads_checkpoints_are_written_off_the_caller_in_order(
    tmp_path, clock, monkeypatch
):
    from kafkalab.storage import log_manager
    from kafkalab.storage.checkpoint_file import RECOVERY_POINT_OFFSET_CHECKPOINT

    writes: list[tuple[str, str, dict]] = []
    real_write = log_manager.OffsetCheckpointFile.write

    def recording_write(self, offsets):
        time.sleep(0.05)  # a slow disk: later requests queue behind this one
        writes.append((threading.current_thread().name, self.path.name, dict(offsets)))
        real_write(self, offsets)

    monkeypatch.setattr(log_manager.OffsetCheckpointFile, "write", recording_write)
    manager = LogManager(tmp_path / "logs", LogConfig(), background_threads=1, clock=clock)
    log = manager.get_or_create_log("t", 0)
    futures = []
    for _ in range(3):
        log.append_as_leader(build_batch([SimpleRecord(b"v", key=b"k")]))
        log.flush()
        futures.append(manager.checkpoint())
    assert all(f is not None for f in futures)
    manager.shutdown()  # waits for the queued writes, then writes its own last
    recovery = [(t, o) for t, name, o in writes if name == RECOVERY_POINT_OFFSET_CHECKPOINT]
    assert [o[("t", 0)] for _, o in recovery] == [1, 2, 3, 3]
    assert {t for t, _ in recovery[:3]} == {"kafka-scheduler_0"}
    assert recovery[3][0] == threading.current_thread().name
    assert OffsetCheckpointFile(tmp_path / "logs" / RECOVERY_POINT_OFFSET_CHECKPOINT).read() == {
        ("t", 0): 3
    }


def test_with_background_threads_dropped_segments_are_deleted_off_the_caller(tmp_path, clock):
    """Retention renames the segments `.deleted` and leaves the log at once; the
    writer thread unlinks the files (blocked here until the test lets it). A crash
    before it did leaves `.deleted` files, which the next load deletes."""
    from kafkalab.storage.log_segment import LogSegment

    release = threading.Event()
    real_delete = LogSegment.delete
    deleters: list[str] = []

    def slow_delete(self):
        deleters.append(threading.current_thread().name)
        release.wait(30)
        real_delete(self)

    config = LogConfig(segment_bytes=4000, retention_ms=1)
    manager = LogManager(tmp_path / "logs", config, background_threads=1, clock=clock)
    LogSegment.delete = slow_delete
    try:
        log = manager.get_or_create_log("t", 0)
        fill(log, rounds=20)
        clock.now += 10_000
        deleted = manager.cleanup_logs()  # returns while the deletes wait
        assert len(deleted[("t", 0)]) > 1
        assert [s.base_offset for s in log.segments] == [log.log_end_offset]
        waiting = sorted(p.name for p in log.dir.glob("*.deleted"))
        assert waiting, "the files are renamed, not yet deleted"
        crash = tmp_path / "crash"
        shutil.copytree(tmp_path / "logs", crash)  # the disk if we crashed now
        (crash / ".lock").unlink(missing_ok=True)
        release.set()
        manager.shutdown()  # waits for the writer thread
        assert list(log.dir.glob("*.deleted")) == []
        assert set(deleters) == {"kafka-scheduler_0"}
    finally:
        LogSegment.delete = real_delete
        release.set()
    recovered = UnifiedLog(crash / "t-0", config)
    assert list(recovered.dir.glob("*.deleted")) == []
    assert recovered.log_end_offset == log.log_end_offset
    recovered.close()


def test_a_pass_whose_cleaned_files_are_gone_is_not_swapped_in(tmp_path, clock):
    """Opening a missing `.cleaned` segment would create it empty and swap it in for
    the segments it replaces: the swap checks the files first."""
    from kafkalab.storage.log_cleaner import LogCleaner, run_clean_task

    log = UnifiedLog(tmp_path / "compacted-0", LogConfig(cleanup_policy="compact"), clock=clock)
    fill(log)
    before = records_of(log)
    cleaner = LogCleaner()
    task, segments = cleaner.plan(log, clock.now)
    outcome = run_clean_task(task, segments.values())
    assert outcome.end_offset == 400 and cleaned_files(log)
    for leftover in log.dir.glob("*.cleaned"):
        leftover.unlink()
    assert cleaner.swap_in(log, outcome, segments) is None
    assert records_of(log) == before
    assert CLEANER_OFFSET_CHECKPOINT not in [p.name for p in tmp_path.iterdir()]
    log.close()


def test_the_broker_reads_the_cleaner_keys_under_kafkas_names(tmp_path):
    from kafkalab.server.broker import BrokerThread

    props = {
        "log.dirs": str(tmp_path / "a"),
        "log.cleaner.threads": "2",
        "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",  # Kafka's default
        "log.cleaner.dedupe.buffer.size": str(48 * 1024 * 1024),
    }
    with BrokerThread(props) as thread:
        cleaner = thread.broker.log_manager.cleaner
        assert len(cleaner.threads) == 2
        assert cleaner.dedupe_buffer_size == 24 * 1024 * 1024  # shared by the threads
        assert cleaner.max_io_bytes_per_second == 1.7976931348623157e308
        assert thread.broker.log_manager._writer is not None  # background.threads=10
    # log.cleaner.threads=0: no cleaner thread, so no cleaning (as in Kafka), and never
    # a pass on the broker's event loop.
    with BrokerThread({"log.dirs": str(tmp_path / "b"), "log.cleaner.threads": "0"}) as thread:
        manager = thread.broker.log_manager
        assert manager._intervals["cleaner"] == 2**63 - 1
        assert len(manager.cleaner.threads) == 1


def test_with_background_threads_flush_ms_fsyncs_off_the_caller(tmp_path, clock):
    """A flush.ms flush hands its fsyncs to the writer thread and returns; the
    recovery point moves only in the tick after they are done, and not at all when
    the log was truncated meanwhile (its offsets may hold new, unflushed data)."""
    from kafkalab.storage.log_segment import LogSegment

    release = threading.Event()
    real_flush = LogSegment.flush
    flushers: list[str] = []

    def slow_flush(self):
        flushers.append(threading.current_thread().name)
        release.wait(30)
        real_flush(self)

    config = LogConfig(flush_ms=1000)
    manager = LogManager(tmp_path / "logs", config, background_threads=1, clock=clock)
    LogSegment.flush = slow_flush
    try:
        log = manager.get_or_create_log("t", 0)
        for _ in range(3):
            log.append_as_leader(build_batch([SimpleRecord(b"v")]))
        clock.now += 1000
        assert manager.flush_dirty_logs() == [("t", 0)]  # returns while the fsync waits
        assert log.recovery_point == 0 and manager.complete_flushes() == 0
        release.set()
        manager._writer.submit(lambda: None).result(30)  # the writer is past the fsync
        assert manager.tick()["flushed"] is True
        assert log.recovery_point == 3 and flushers == ["kafka-scheduler_0"]

        release.clear()
        for _ in range(2):
            log.append_as_leader(build_batch([SimpleRecord(b"w")]))
        clock.now += 1000
        assert manager.flush_dirty_logs() == [("t", 0)]
        log.truncate_to(4)  # a follower's truncation while the fsync is in flight
        log.append_as_leader(build_batch([SimpleRecord(b"new")]))
        release.set()
        manager._writer.submit(lambda: None).result(30)
        assert manager.complete_flushes() == 0
        assert log.recovery_point == 3  # offset 4 holds a record the flush never saw
    finally:
        LogSegment.flush = real_flush
        release.set()
        manager.shutdown()


def test_without_background_threads_flush_ms_flushes_in_the_caller(tmp_path, clock):
    manager = LogManager(tmp_path / "logs", LogConfig(flush_ms=1000), clock=clock)
    try:
        log = manager.get_or_create_log("t", 0)
        log.append_as_leader(build_batch([SimpleRecord(b"v")]))
        assert manager.flush_dirty_logs() == []  # flush.ms has not passed
        clock.now += 1000
        assert manager.flush_dirty_logs() == [("t", 0)] and log.recovery_point == 1
    finally:
        manager.shutdown()
