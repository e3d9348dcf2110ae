"""The checks of Lab 02 (indexes): right answers pass, wrong ones say "not yet"
and why, the placeholder says it is unanswered. The logs are built as the
notebook builds them, smaller."""

from pathlib import Path

import pytest

from kafkalab.labs.checks import indexes
from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.storage import LogConfig, UnifiedLog

T0 = 1_700_000_000_000


def batch_at(i: int) -> bytes:
    # Two records of 450 bytes at T0 + i seconds: a 979-byte batch, as in the notebook.
    return build_batch(
        [
            SimpleRecord(f"event-{i:06d}-a ".encode() * 30, timestamp=T0 + 1000 * i),
            SimpleRecord(f"event-{i:06d}-b ".encode() * 30, timestamp=T0 + 1000 * i),
        ]
    )


def assert_not_yet(verdict, *words: str) -> None:
    assert not verdict
    assert str(verdict).startswith("not yet:")
    for word in words:
        assert word in str(verdict)


@pytest.fixture
def small(tmp_path: Path):
    log = UnifiedLog(
        tmp_path / "small-0", LogConfig(segment_bytes=16384, index_interval_bytes=4096)
    )
    for i in range(60):
        log.append_as_leader(batch_at(i))
    yield log
    log.close()


def test_scan_start(small: UnifiedLog) -> None:
    # 16 batches (32 offsets) a segment; entries at 4895, 9790, 14685 in each.
    assert [s.base_offset for s in small.segments] == [0, 32, 64, 96]
    third = small.segments[2].offset_index
    assert [third.entry(n).offset for n in range(third.entries)] == [75, 85, 95]
    assert indexes.check_scan_start((64, 9790), small, 90).require()
    assert indexes.check_scan_start([64, 0], small, 66).require()  # before the first entry
    assert indexes.check_scan_start((64, 4895), small, 75).require()  # an entry's own offset
    assert_not_yet(indexes.check_scan_start((64, 14685), small, 90), "largest offset <= 90")
    assert_not_yet(indexes.check_scan_start((32, 9790), small, 90), "largest base offset")
    assert_not_yet(indexes.check_scan_start((64, 4895), small, 66), "start at 0")
    assert_not_yet(indexes.check_scan_start(9790, small, 90), "pair")
    assert_not_yet(indexes.check_scan_start(..., small, 90), "replace the ...")


def test_index_entries() -> None:
    batches = [batch_at(i) for i in range(100)]
    # An entry every 3000 // 979 + 1 = 4 batches, never the first: at 4, 8, ..., 96.
    assert indexes.check_index_entries(24, batches, 3000).require()
    assert indexes.check_index_entries(19, batches, 4096).require()
    assert_not_yet(indexes.check_index_entries(25, batches, 3000), "MORE than")
    assert_not_yet(indexes.check_index_entries(33, batches, 3000), "every")
    assert_not_yet(indexes.check_index_entries(..., batches, 3000), "replace the ...")


def test_time_lookup_start(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "clicks-0", LogConfig(index_interval_bytes=4096))
    for i in range(100):
        log.append_as_leader(batch_at(i))
    segment = log.active_segment
    # Entries every 5 batches (batch 5 is offsets 10-11): (T0 + 5 s, offset 11) at 4895, ...
    assert segment.time_index.entry(0).offset == 11
    assert segment.offset_index.entry(0).position == 5 * 979
    assert indexes.check_time_lookup_start(5 * 979, segment, T0 + 7_500).require()
    assert indexes.check_time_lookup_start(10 * 979, segment, T0 + 10_000).require()
    assert indexes.check_time_lookup_start(0, segment, T0 + 4_999).require()
    assert_not_yet(
        indexes.check_time_lookup_start(7 * 979, segment, T0 + 7_500), "largest timestamp"
    )
    assert_not_yet(indexes.check_time_lookup_start(10 * 979, segment, T0 + 7_500), "<= the target")
    assert_not_yet(indexes.check_time_lookup_start(..., segment, T0 + 7_500), "replace the ...")
    log.close()


def test_rebuilt_entries(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=4096)
    directory = tmp_path / "clicks-0"
    with UnifiedLog(directory, config) as log:
        for i in range(100):
            log.append_as_leader(batch_at(i))
        before = log.active_segment.offset_index.entries
    index = directory / "00000000000000000000.index"
    index.unlink()
    assert indexes.check_rebuilt_entries(before, directory, config).require()
    assert_not_yet(indexes.check_rebuilt_entries(0, directory, config), "same index.interval.bytes")
    assert_not_yet(indexes.check_rebuilt_entries(..., directory, config), "replace the ...")
    assert not index.exists()  # the check reopened a copy
    # With another interval the rebuild follows the new rule.
    assert indexes.check_rebuilt_entries(99 // 9, directory, LogConfig(index_interval_bytes=8192))
