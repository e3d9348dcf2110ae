"""The checks of Lab 01 (segments): right answers pass, wrong ones say "not yet"
and why, the placeholder says it is unanswered. The live objects are built as
the notebook builds them, smaller."""

import shutil
from pathlib import Path

import pytest

from kafkalab.labs.checks import segments
from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.storage import LogConfig, UnifiedLog


def payload(i: int) -> bytes:
    return f"order-{i:05d} ".encode() * 20  # a 310-byte batch, as in the notebook


def batches(n: int) -> list[bytes]:
    return [build_batch([SimpleRecord(payload(i))]) for i in range(n)]


@pytest.fixture
def log(tmp_path: Path):
    log = UnifiedLog(
        tmp_path / "orders-0", LogConfig(segment_bytes=4096, index_interval_bytes=1024)
    )
    for batch in batches(40):
        log.append_as_leader(batch, leader_epoch=0)
    yield log
    log.close()


def assert_not_yet(verdict, *words: str) -> None:
    assert not verdict
    assert str(verdict).startswith("not yet:")
    for word in words:
        assert word in str(verdict)


def test_batch_fields() -> None:
    words = [SimpleRecord(w.encode()) for w in "the quick brown fox".split()]
    batch = build_batch(words)
    assert segments.check_batch_fields(len(batch) - 12, 4, batch).require()
    assert_not_yet(segments.check_batch_fields(len(batch), 4, batch), "bytes 8-11", "after itself")
    assert_not_yet(segments.check_batch_fields(len(batch) - 12, 3, batch), "57-60")
    assert_not_yet(segments.check_batch_fields(..., 4, batch), "replace the ...")
    assert_not_yet(segments.check_batch_fields(len(batch) - 12, ..., batch), "replace the ...")


def test_segment_file(log: UnifiedLog) -> None:
    # 13 batches of 310 bytes fit in 4096: segments start at 0, 13, 26, 39.
    assert [s.base_offset for s in log.segments] == [0, 13, 26, 39]
    assert segments.check_segment_file("00000000000000000026.log", log, 30).require()
    assert segments.check_segment_file(log.segments[2].log.path, log, 30).require()
    assert_not_yet(
        segments.check_segment_file("00000000000000000013.log", log, 30), "largest base offset"
    )
    assert_not_yet(segments.check_segment_file("00000000000000000039.log", log, 30), "<= 30")
    assert_not_yet(segments.check_segment_file("26.log", log, 30), "20 digits")
    assert_not_yet(segments.check_segment_file(..., log, 30), "replace the ...")


def test_segment_file_at_a_base_offset(log: UnifiedLog) -> None:
    assert segments.check_segment_file("00000000000000000026.log", log, 26)
    assert not segments.check_segment_file("00000000000000000013.log", log, 26)


def test_segment_count() -> None:
    trial = batches(40)
    # 8192 // 310 = 26 batches a segment: 40 batches need 2 segments.
    assert segments.check_segment_count(2, trial, 8192).require()
    assert segments.check_segment_count(4, trial, 4096).require()
    assert_not_yet(segments.check_segment_count(1, trial, 8192), "whole batches")
    assert_not_yet(segments.check_segment_count(3, trial, 8192), "straddles")
    assert_not_yet(segments.check_segment_count(..., trial, 8192), "replace the ...")


def test_log_start_after_retention(log: UnifiedLog) -> None:
    log.update_high_watermark(log.log_end_offset)
    log.config = LogConfig(
        segment_bytes=4096, index_interval_bytes=1024, retention_bytes=log.size // 3
    )
    # 12400 bytes, keep >= 4133: 0 and 13 go (8060), 26 would leave 4340 - 4030 < 4133.
    assert segments.check_log_start_after_retention(26, log).require()
    assert_not_yet(segments.check_log_start_after_retention(39, log), "first segment")
    assert_not_yet(segments.check_log_start_after_retention(13, log), "retention.bytes")
    assert_not_yet(segments.check_log_start_after_retention(..., log), "replace the ...")
    # The check worked on a copy: the log itself still has every segment.
    assert log.log_start_offset == 0 and len(log.segments) == 4
    assert log.delete_old_segments() and log.log_start_offset == 26


def test_log_start_after_retention_waits_for_the_high_watermark(log: UnifiedLog) -> None:
    log.config = LogConfig(
        segment_bytes=4096, index_interval_bytes=1024, retention_bytes=log.size // 3
    )
    log.update_high_watermark(14)  # only segment 0 is wholly below it
    assert segments.check_log_start_after_retention(13, log).require()
    assert not segments.check_log_start_after_retention(26, log)


def crash(log: UnifiedLog, root: Path) -> tuple[Path, int]:
    """The notebook's crash: flush, 5 unflushed batches, tear the last, scribble the 4th."""
    log.flush()
    flushed_end = log.recovery_point
    for i in range(5):
        log.append_as_leader(build_batch([SimpleRecord(f"unflushed-{i}".encode() * 10)]))
    crashed = root / "crashed-0"
    shutil.copytree(log.dir, crashed)
    active = sorted(crashed.glob("*.log"))[-1]
    data = bytearray(active.read_bytes())
    last_size = len(build_batch([SimpleRecord(b"unflushed-4" * 10)]))
    data = data[: len(data) - last_size // 2]
    data[len(data) - last_size - 10] ^= 0xFF
    active.write_bytes(bytes(data))
    return crashed, flushed_end


def test_recovered_log_end(log: UnifiedLog, tmp_path: Path) -> None:
    crashed, flushed_end = crash(log, tmp_path)
    config = log.config
    assert segments.check_recovered_log_end(flushed_end + 3, crashed, config, flushed_end).require()
    assert_not_yet(
        segments.check_recovered_log_end(flushed_end, crashed, config, flushed_end), "CRC"
    )
    assert_not_yet(
        segments.check_recovered_log_end(flushed_end + 5, crashed, config, flushed_end), "torn"
    )
    assert_not_yet(
        segments.check_recovered_log_end(..., crashed, config, flushed_end), "replace the ..."
    )
    # The check recovered a copy: the crashed directory is still as the crash left it.
    with UnifiedLog(crashed, config, recovery_point=flushed_end) as recovered:
        assert recovered.log_end_offset == flushed_end + 3
