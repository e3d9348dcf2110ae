"""UnifiedLog, LogSegment and LogManager on real files in a temp dir."""

from __future__ import annotations

import os
import struct

import pytest

from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.record_batch import (
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    read_header,
)
from kafkalab.storage.checkpoint_file import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kafkalab.storage.errors import (
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalab.storage.log_config import InvalidConfigError, LogConfig
from kafkalab.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalab.storage.unified_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    UnifiedLog,
)


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(*values: bytes, ts: int = 1_700_000_000_000, **kw) -> bytes:
    return build_batch([SimpleRecord(v, timestamp=ts + i) for i, v in enumerate(values)], **kw)


def records_of(data: bytes) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in iter_batches(data) for r in b.records]


def read_all(log: UnifiedLog) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = records_of(log.read(offset, 1 << 20).read_bytes())
        assert got, f"no progress reading at {offset}"
        out += [(o, v) for o, v in got if o >= offset]
        offset = got[-1][0] + 1
    return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_leader_append_assigns_offsets_and_keeps_kafka_file_names(tmp_path, clock):
    log = UnifiedLog(tmp_path / "orders-0", clock=clock)
    first = log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=5)
    second = log.append_as_leader(batch(b"d"), leader_epoch=5)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset, log.log_end_offset) == (3, 3, 4)
    assert sorted(p.name for p in (tmp_path / "orders-0").iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",  # epoch 5 starts at offset 0
    ]
    assert (tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n5 0\n"
    data = (tmp_path / "orders-0" / "00000000000000000000.log").read_bytes()
    headers = [read_header(data, 0), read_header(data, read_header(data, 0).size_in_bytes)]
    assert [h.base_offset for h in headers] == [0, 3]
    assert {h.partition_leader_epoch for h in headers} == {5}
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    log.close()


def test_roll_on_segment_bytes_trims_old_indexes_and_preallocates_new(tmp_path, clock):
    config = LogConfig(segment_bytes=300, segment_index_bytes=8 * 100, index_interval_bytes=0)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    rolls = [log.append_as_leader(batch(b"x" * 60)).rolled for _ in range(6)]
    assert sum(r is not None for r in rolls) >= 2
    assert all("segment.bytes" in r for r in rolls if r)
    bases = [s.base_offset for s in log.segments]
    assert bases[0] == 0 and bases == sorted(bases) and len(bases) >= 3
    for old in log.segments[:-1]:
        assert old.offset_index.path.stat().st_size == old.offset_index.entries * 8
        assert old.time_index.path.stat().st_size == old.time_index.entries * 12
        assert old.size <= config.segment_bytes
    assert log.active_segment.offset_index.path.stat().st_size == 8 * 100
    assert [o for o, _ in read_all(log)] == list(range(6))
    log.close()


def test_roll_on_segment_ms_uses_first_batch_timestamp(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(batch(b"a", ts=clock.now))
    info = log.append_as_leader(batch(b"b", ts=clock.now + 500))
    assert info.rolled is None
    info = log.append_as_leader(batch(b"c", ts=clock.now + 1500))
    assert info.rolled is not None and "segment.ms" in info.rolled
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_sparse_offset_index_every_index_interval_bytes(tmp_path, clock):
    config = LogConfig(index_interval_bytes=4096)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    for i in range(200):
        log.append_as_leader(batch(bytes([i % 256]) * 1000))
    segment = log.active_segment
    size = len(batch(b"z" * 1000))
    # Kafka's rule: a batch gets an entry when more than 4096 bytes were appended since
    # the last entry, counting the indexed batch itself; with ~1 KiB batches that is
    # batches 4, 8, 12, ... (0-based).
    assert size * 4 > 4096 >= size * 3
    indexed = [segment.offset_index.entry(n).offset for n in range(segment.offset_index.entries)]
    assert indexed == list(range(4, 200, 4))
    positions = {i: i * size for i in range(200)}
    for n in range(segment.offset_index.entries):
        entry = segment.offset_index.entry(n)
        assert positions[entry.offset] == entry.position  # one record a batch here
    for target in (0, 1, 57, 123, 199):
        found = segment.translate_offset(target)
        assert found.position == positions[target]
    log.close()


def test_read_limits_min_one_message_and_max_offset(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", clock=clock)
    for i in range(5):
        log.append_as_leader(batch(bytes([65 + i]) * 100))
    one = len(batch(b"A" * 100))
    assert log.read(0, one * 2).size_in_bytes == one * 2
    big = log.read(0, 10, min_one_message=True)
    assert big.size_in_bytes == one and records_of(big.read_bytes()) == [(0, b"A" * 100)]
    assert log.read(0, 10, min_one_message=False).size_in_bytes == 10
    capped = log.read(1, 1 << 20, max_offset=3)
    assert [o for o, _ in records_of(capped.read_bytes())] == [1, 2]
    assert log.read(3, 100, max_offset=3).size_in_bytes == 0
    assert log.read(5, 100).size_in_bytes == 0  # at the LEO: nothing yet, no error
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 5\)") as err:
        log.read(6, 100)
    assert err.value.code == 1
    log.close()


def test_fetch_offset_by_timestamp(tmp_path, clock):
    config = LogConfig(segment_bytes=400, index_interval_bytes=100)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    for i in range(20):
        log.append_as_leader(batch(b"v" * 50, ts=1000 * (i + 1)))
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 20
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP).offset == 19
    for target, expected in ((0, 0), (1000, 0), (1001, 1), (7500, 7), (20000, 19)):
        found = log.fetch_offset_by_timestamp(target)
        assert (found.offset, found.timestamp) == (expected, 1000 * (expected + 1))
    assert log.fetch_offset_by_timestamp(20001) is None
    log.close()


def test_retention_ms_and_bytes_delete_whole_segments_below_the_high_watermark(tmp_path, clock):
    config = LogConfig(segment_bytes=200, retention_ms=10_000)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    for i in range(6):
        log.append_as_leader(batch(b"v" * 80, ts=clock.now - 60_000 + i))
    assert len(log.segments) >= 3
    assert log.delete_old_segments() == []  # nothing is below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    clock.now += 1
    deleted = log.delete_old_segments()
    assert deleted and all("retention.ms" in d.reason for d in deleted)
    # Every segment was expired: the log rolled a new empty segment at the LEO first.
    assert log.log_start_offset == log.log_end_offset == 6
    assert [s.base_offset for s in log.segments] == [6]
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    log.close()

    config = LogConfig(segment_bytes=200, retention_bytes=250, retention_ms=-1)
    log = UnifiedLog(tmp_path / "u-0", config, clock=clock)
    for _ in range(8):
        log.append_as_leader(batch(b"v" * 80))
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert deleted and all("retention.bytes" in d.reason for d in deleted)
    assert log.size - log.active_segment.size <= 250
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    log.close()


def test_log_start_offset_moves_forward_below_the_high_watermark_only(tmp_path, clock):
    """DeleteRecords' effect on a log: reads below the new log start offset are out
    of range at once; the segments wholly below it go at the next retention pass."""
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=400), clock=clock)
    for i in range(9):
        log.append_as_leader(batch(b"v%d" % i + b"." * 80))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3 and bases[1] >= 2  # several batches a segment
    log.update_high_watermark(bases[2])
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(bases[2] + 1)  # past the high watermark
    assert log.maybe_increment_log_start_offset(bases[1] + 1)
    assert not log.maybe_increment_log_start_offset(bases[1])  # never backward
    assert log.log_start_offset == bases[1] + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[1], 1 << 20)
    deleted = log.delete_old_segments()
    assert [d.base_offset for d in deleted] == [bases[0]]  # the second holds bases[1] + 1
    assert "log start offset" in deleted[0].reason
    assert read_all(log)[0] == (bases[1] + 1, b"v%d" % (bases[1] + 1) + b"." * 80)
    log.close()


def test_follower_append_keeps_offsets_and_refuses_gaps_or_going_back(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", clock=clock)
    log.truncate_fully_and_start_at(10)  # the leader's log starts at 10
    info = log.append_as_follower(batch(b"a", b"b", base_offset=10, partition_leader_epoch=3))
    assert (info.first_offset, log.log_end_offset) == (10, 12)
    with pytest.raises(UnexpectedAppendOffsetError, match="truncate"):
        log.append_as_follower(batch(b"c", base_offset=11))  # going back
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch(b"c", base_offset=13))  # a gap
    two = batch(b"c", base_offset=12) + batch(b"d", base_offset=12)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(two)
    assert log.log_end_offset == 12
    log.close()


def test_follower_append_keeps_the_whole_batches_of_a_fetch_cut_inside_one(tmp_path, clock):
    """A fetch response is a byte range of the leader's file, cut at the fetch's
    max bytes, so it may end inside a batch. The follower appends the whole
    batches and fetches the rest next time (Kafka: trimInvalidBytes). Found by
    the soak: a follower more than a fetch's 1 MiB behind refused every
    fetch as CORRUPT_MESSAGE and never caught up."""
    leader = UnifiedLog(tmp_path / "leader" / "t-0", clock=clock)
    for i in range(6):
        leader.append_as_leader(batch(bytes([65 + i]) * 100, partition_leader_epoch=0))
    one = len(batch(b"A" * 100))
    follower = UnifiedLog(tmp_path / "follower" / "t-0", clock=clock)
    cut = leader.read(0, one * 2 + one // 2).read_bytes()  # two batches and half a third
    info = follower.append_as_follower(cut)
    assert (info.first_offset, info.num_batches, follower.log_end_offset) == (0, 2, 2)
    assert follower.size == one * 2  # nothing of the half batch was written
    half = leader.read(2, one // 2, min_one_message=False).read_bytes()  # part of one batch
    assert follower.append_as_follower(half).num_batches == 0 and follower.log_end_offset == 2
    follower.append_as_follower(leader.read(2, 1 << 20).read_bytes())
    assert read_all(follower) == read_all(leader)
    corrupt = bytearray(leader.read(0, 1 << 20).read_bytes())
    corrupt[one + 30] ^= 0xFF  # a whole batch that is damaged is still refused
    other = UnifiedLog(tmp_path / "other" / "t-0", clock=clock)
    with pytest.raises(CorruptRecordError):
        other.append_as_follower(corrupt)
    for log in (leader, follower, other):
        log.close()


def test_appends_refuse_bad_batches_and_write_nothing(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(max_message_bytes=500), clock=clock)
    good = batch(b"ok")
    corrupt = bytearray(batch(b"payload"))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(good + bytes(corrupt))
    with pytest.raises(CorruptRecordError, match="partial"):
        log.append_as_leader(good + good[:30])
    with pytest.raises(RecordBatchTooLargeError, match="max.message.bytes"):
        log.append_as_leader(batch(b"x" * 1000))
    from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch

    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(build_end_txn_marker_batch(7, 0, ControlRecordType.COMMIT, 0))
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_log_append_time_restamps_and_recomputes_crc(tmp_path, clock):
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    info = log.append_as_leader(batch(b"a", ts=5))
    assert info.log_append_time == clock.now
    (stored,) = list(iter_batches(log.read(0, 1000).read_bytes()))
    assert stored.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stored.header.max_timestamp == clock.now
    log.close()


def test_truncate_to_and_truncate_fully(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=200), clock=clock)
    for i in range(8):
        log.append_as_leader(batch(bytes([48 + i]) * 60))
    log.update_high_watermark(8)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3 and log.high_watermark == 3
    assert [o for o, _ in read_all(log)] == [0, 1, 2]
    assert log.append_as_leader(batch(b"new")).first_offset == 3
    assert not log.truncate_to(10)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    assert log.append_as_leader(batch(b"z")).first_offset == 100
    log.close()


def _copy_dir(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())


def test_recovery_cuts_torn_and_corrupt_tails_and_rebuilds_indexes(tmp_path, clock):
    config = LogConfig(index_interval_bytes=200, segment_bytes=4000)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    for i in range(30):
        log.append_as_leader(batch(bytes([i]) * 100))
    log.flush()
    flushed = read_all(log)
    for _ in range(5):
        log.append_as_leader(batch(b"late" * 10))
    recovery_point = log.recovery_point
    assert recovery_point == 30
    # A crash: copy the files as they are now (indexes untrimmed), then forget the log.
    crashed = tmp_path / "crash-0"
    _copy_dir(tmp_path / "t-0", crashed)
    log.close()
    active = sorted(crashed.glob("*.log"))[-1]
    data = bytearray(active.read_bytes())
    size = len(batch(b"late" * 10))
    data = data[: len(data) - size // 2]  # the last batch is torn in half
    data[len(data) - size - 3] ^= 0x55  # and the one before it has a flipped byte
    active.write_bytes(bytes(data))
    sorted(crashed.glob("*.index"))[0].unlink()  # and one index file is gone
    reopened = UnifiedLog(crashed, config, recovery_point=recovery_point, clock=clock)
    survived = read_all(reopened)
    assert survived[:30] == flushed  # nothing flushed was lost
    assert reopened.log_end_offset == 33  # 3 late batches were whole and valid
    assert any(cut > 0 for _, cut in reopened.recovered)
    for segment in reopened.segments:
        for n in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(n)
            header = read_header(segment.log.read(entry.position, 61))
            assert header.last_offset == entry.offset
    assert reopened.append_as_leader(batch(b"after")).first_offset == 33
    reopened.close()


def test_recovery_deletes_segments_after_a_cut_one(tmp_path, clock):
    config = LogConfig(segment_bytes=300)
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    for i in range(9):
        log.append_as_leader(batch(bytes([i]) * 100))
    bases = [s.base_offset for s in log.segments]
    log.close()
    second = tmp_path / "t-0" / f"{bases[1]:020d}.log"
    with open(second, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")  # inside the CRC-covered part of the first batch
    reopened = UnifiedLog(tmp_path / "t-0", config, recovery_point=bases[1], clock=clock)
    assert [s.base_offset for s in reopened.segments] == [bases[0], bases[1]]
    assert reopened.log_end_offset == bases[1]
    reopened.close()


def test_log_manager_checkpoints_and_clean_shutdown(tmp_path, clock):
    manager = LogManager(tmp_path / "logs", LogConfig(flush_messages=2), clock=clock)
    orders = manager.get_or_create_log("orders", 0)
    for _ in range(5):
        orders.append_as_leader(batch(b"a"))
    assert orders.recovery_point == 4  # flush.messages=2 flushed at 2 and 4
    orders.update_high_watermark(5)
    manager.checkpoint()
    points = OffsetCheckpointFile(tmp_path / "logs" / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
    assert points == {("orders", 0): 4}
    manager.shutdown()
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    reopened = LogManager(tmp_path / "logs", clock=clock)
    assert reopened.had_clean_shutdown[tmp_path / "logs"]
    assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    log = reopened.get_log("orders", 0)
    assert (log.log_end_offset, log.recovery_point, log.high_watermark) == (5, 5, 5)
    assert log.recovered == []  # clean shutdown: nothing re-checked
    with pytest.raises(ValueError, match="invalid topic name"):
        reopened.get_or_create_log("bad/name", 0)
    reopened.shutdown()


def test_log_manager_tick_runs_retention_and_flush_ms(tmp_path, clock):
    config = LogConfig(segment_bytes=200, retention_ms=1000, flush_ms=500)
    manager = LogManager(
        tmp_path,
        config,
        retention_check_interval_ms=100,
        flush_check_interval_ms=100,
        clock=clock,
    )
    log = manager.get_or_create_log("t", 0)
    for _ in range(6):
        log.append_as_leader(batch(b"v" * 80, ts=clock.now))
    log.update_high_watermark(log.log_end_offset)
    clock.now += 600
    done = manager.tick()
    assert done["flush"] == [("t", 0)] and log.recovery_point == 6
    clock.now += 1000
    done = manager.tick()
    assert ("t", 0) in done["retention"]
    manager.shutdown()


def test_log_config_names_defaults_and_errors():
    config = LogConfig.from_properties({"segment.bytes": "1024", "retention.ms": "-1"})
    assert (config.segment_bytes, config.retention_ms, config.index_interval_bytes) == (
        1024,
        -1,
        4096,
    )
    broker = LogConfig.from_properties(
        {"log.segment.bytes": "2048", "log.retention.hours": "1", "node.id": "1"},
        broker_prefix=True,
    )
    assert (broker.segment_bytes, broker.retention_ms) == (2048, 3_600_000)
    assert LogConfig().to_properties()["segment.index.bytes"] == "10485760"
    # server.properties sets the topics' default min.insync.replicas under its own name
    # (a broker that ignored it let acks=all through with an ISR of one: lab 03 part 2)
    broker = LogConfig.from_properties({"min.insync.replicas": "2"}, broker_prefix=True)
    assert broker.min_insync_replicas == 2
    assert broker.with_overrides({"min.insync.replicas": "3"}).min_insync_replicas == 3
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        LogConfig.from_properties({"segment.bytes": "1"})
    with pytest.raises(InvalidConfigError, match="unknown topic config"):
        LogConfig.from_properties({"segment.byte": "1"})
    with pytest.raises(InvalidConfigError, match="expected int"):
        LogConfig.from_properties({"retention.ms": "soon"})


def test_compressed_batches_are_appended_and_read_back(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", clock=clock)
    for codec in CompressionType:
        log.append_as_leader(batch(b"abc" * 50, b"def" * 50, compression=codec))
    assert len(read_all(log)) == 2 * len(CompressionType)
    log.close()


def test_index_files_hold_kafka_byte_format(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(index_interval_bytes=1), clock=clock)
    for i in range(4):
        log.append_as_leader(batch(b"v", ts=100 + i))
    log.close()
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    size = len(batch(b"v"))
    assert len(raw) % 8 == 0 and len(raw) > 0
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert all(pos == rel * size for rel, pos in entries)
    traw = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    tentries = [struct.unpack_from(">qi", traw, i) for i in range(0, len(traw), 12)]
    assert tentries[-1] == (103, 3)  # the final entry written on close
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") == 4 * size


def test_the_log_end_offsets_place_on_disk_is_the_end_of_the_active_segment(tmp_path):
    """offset_metadata(LEO) takes no search (a waiting follower fetch asks it for every
    idle partition of its session); once more records came, the search for the same
    offset finds the same place, with and without a roll in between."""
    log = UnifiedLog(tmp_path / "t-0", LogConfig())
    for roll in (False, True, False):
        log.append_as_leader(build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")]), 0)
        if roll:
            log.roll()
        leo = log.log_end_offset
        at_end = log.offset_metadata(leo)
        log.append_as_leader(build_batch([SimpleRecord(b"c")]), 0)
        assert log.log_end_offset > leo
        assert log.offset_metadata(leo) == at_end
