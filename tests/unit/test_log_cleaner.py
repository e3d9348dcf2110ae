"""Log compaction on real files: LogConfig's cleaner keys, LogCleaner, gaps in
offsets (recovery, follower appends, reads, indexes), LogManager's cleaner duty,
and dump-log on cleaned segments."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.record import Header
from kafkalab.records.record_batch import (
    CompressionType,
    InvalidRecordError,
    TimestampType,
    ensure_valid,
    iter_headers,
)
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.errors import CompactedRecordWithoutKeyError, UnexpectedAppendOffsetError
from kafkalab.storage.log_cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleaner,
    clean,
    log_to_clean,
)
from kafkalab.storage.log_config import InvalidConfigError, LogConfig
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.transaction_index import AbortedTxn
from kafkalab.storage.unified_log import AppendOrigin, UnifiedLog

T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact(**kw) -> LogConfig:
    return LogConfig(cleanup_policy="compact", **kw)


def rec(key: bytes | None, value: bytes | None, ts: int = T0, headers=()) -> SimpleRecord:
    return SimpleRecord(value, key=key, timestamp=ts, headers=headers)


def batches_of(log: UnifiedLog) -> list:
    out = []
    for segment in log.segments:
        out += list(iter_batches(segment.log.read()))
    return out


def records_of(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches_of(log) for r in b.records]


def append_all(log: UnifiedLog, pairs, *, per_batch: int = 1, **kw) -> None:
    pairs = list(pairs)
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i : i + per_batch]
        log.append_as_leader(build_batch([rec(k, v, T0 + i) for k, v in chunk], **kw))
    log.update_high_watermark(log.log_end_offset)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- config -------------------------------------------------------------------------------


def test_cleanup_policy_and_cleaner_keys_use_kafka_names_and_defaults():
    default = LogConfig()
    assert (default.compact, default.delete) == (False, True)
    assert default.delete_retention_ms == 86_400_000
    assert default.min_cleanable_dirty_ratio == 0.5
    assert default.min_compaction_lag_ms == 0
    assert default.max_compaction_lag_ms == 2**63 - 1
    both = LogConfig.from_properties(
        {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1"}
    )
    assert (both.compact, both.delete, both.min_cleanable_dirty_ratio) == (True, True, 0.1)
    assert LogConfig.from_properties({"cleanup.policy": "compact"}).delete is False
    broker = LogConfig.from_properties(
        {"log.cleaner.delete.retention.ms": "5", "log.cleaner.min.cleanable.ratio": "0.2"},
        broker_prefix=True,
    )
    assert (broker.delete_retention_ms, broker.min_cleanable_dirty_ratio) == (5, 0.2)
    with pytest.raises(InvalidConfigError, match="cleanup.policy"):
        LogConfig(cleanup_policy="shred")
    with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
        LogConfig(min_cleanable_dirty_ratio=1.5)
    assert both.to_properties()["cleanup.policy"] == "compact,delete"


def test_retention_applies_only_when_the_policy_includes_delete(tmp_path, clock):
    for policy, survives in (("compact", True), ("compact,delete", False), ("delete", False)):
        config = LogConfig(cleanup_policy=policy, retention_ms=1000, segment_bytes=200)
        log = UnifiedLog(tmp_path / f"{policy.replace(',', '_')}-0", config, clock=clock)
        append_all(log, [(b"k%d" % i, b"v" * 50) for i in range(6)])
        clock.now += 10_000
        log.delete_old_segments()
        assert (log.log_start_offset == 0) is survives, policy
        log.close()


def test_a_compacted_topic_refuses_records_without_a_key(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(), clock=clock)
    with pytest.raises(CompactedRecordWithoutKeyError, match="without a key") as refused:
        log.append_as_leader(build_batch([rec(b"k", b"v"), rec(None, b"v")]))
    assert isinstance(refused.value, InvalidRecordError) and refused.value.code == 87
    assert log.log_end_offset == 0
    log.close()


# -- cleaning -----------------------------------------------------------------------------


def test_clean_keeps_the_latest_record_per_key_with_original_offsets_and_fields(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(segment_bytes=600), clock=clock)
    for i in range(30):
        key = b"k%d" % (i % 3)
        log.append_as_leader(
            build_batch(
                [rec(key, b"v%d" % i, T0 + i, (Header("n", b"%d" % i),))],
                compression=CompressionType.GZIP if i % 2 else CompressionType.NONE,
            ),
            leader_epoch=3,
        )
    log.update_high_watermark(log.log_end_offset)
    active_base = log.active_segment.base_offset
    before_active = [r for r in records_of(log) if r[0] >= active_base]
    result = clean(log, clock.now)
    assert result is not None and result.end_offset == active_base
    kept = [b for b in batches_of(log) if b.base_offset < active_base and b.records]
    # The latest of each key below the active segment, nothing else.
    latest = {}
    for i in range(active_base):
        latest[b"k%d" % (i % 3)] = i
    assert sorted(r.offset for b in kept for r in b.records) == sorted(latest.values())
    for b in kept:
        (r,) = b.records
        assert r.value == b"v%d" % r.offset and r.timestamp == T0 + r.offset
        assert r.headers == (Header("n", b"%d" % r.offset),)
        assert b.header.partition_leader_epoch == 3
        assert b.header.compression_type == (
            CompressionType.GZIP if r.offset % 2 else CompressionType.NONE
        )
    for segment in log.segments:  # every batch whole, CRC valid, offsets increasing
        data = segment.log.read()
        last = segment.base_offset - 1
        for position, header in iter_headers(data):
            ensure_valid(data, position)
            assert header.base_offset > last
            last = header.last_offset
    assert [r for r in records_of(log) if r[0] >= active_base] == before_active
    names = sorted(p.name for p in log.dir.iterdir())
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == f"0\n1\nt 0 {active_base}\n"
    log.close()


def test_a_rewritten_batch_keeps_base_and_last_offset_codec_and_producer_fields(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(), clock=clock)
    log.append_as_leader(
        build_batch(
            [rec(b"a", b"1", T0), rec(b"b", b"2", T0 + 5), rec(b"a", b"3", T0 + 9)],
            compression=CompressionType.LZ4,
            producer_id=7,
            producer_epoch=2,
            base_sequence=0,
        )
    )
    log.append_as_leader(build_batch([rec(b"b", b"4", T0 + 20)]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock.now)
    first, second = batches_of(log)
    h = first.header
    assert (h.base_offset, h.last_offset, h.records_count) == (0, 2, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 0, 2)
    assert h.compression_type == CompressionType.LZ4
    assert (h.base_timestamp, h.max_timestamp) == (T0 + 9, T0 + 9)
    assert [(r.offset, r.value, r.timestamp) for r in first.records] == [(2, b"3", T0 + 9)]
    assert [(r.offset, r.value) for r in second.records] == [(3, b"4")]
    log.close()


def test_log_append_time_batches_keep_their_timestamp(tmp_path, clock):
    config = compact(message_timestamp_type="LogAppendTime")
    log = UnifiedLog(tmp_path / "t-0", config, clock=clock)
    hdrs = (Header("h", b"x"),)
    log.append_as_leader(build_batch([rec(b"a", b"1", 5), rec(b"a", b"2", 6, hdrs)]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock.now + 1)
    (b,) = batches_of(log)
    assert b.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [(r.offset, r.timestamp, r.value, r.headers) for r in b.records] == [(1, T0, b"2", hdrs)]
    log.close()


def test_tombstones_stay_until_their_delete_horizon_then_go(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(delete_retention_ms=1000), clock=clock)
    append_all(log, [(b"a", b"1"), (b"b", b"2"), (b"a", None)])
    log.roll()
    clean(log, clock.now)
    tomb = next(b for b in batches_of(log) if b.records and b.records[0].value is None)
    # KIP-534: the first pass that keeps a tombstone stamps its batch's horizon.
    assert tomb.header.has_delete_horizon and tomb.header.base_timestamp == clock.now + 1000
    assert records_of(log) == [(1, b"b", b"2"), (2, b"a", None)]
    assert clean(log, clock.now + 999) is None  # nothing dirty: no pass at all
    log.append_as_leader(build_batch([rec(b"c", b"3")]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock.now + 999)
    assert (2, b"a", None) in records_of(log)
    log.append_as_leader(build_batch([rec(b"d", b"4")]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    result = clean(log, clock.now + 1000)
    assert result.stats.tombstones_removed == 1
    assert records_of(log) == [(1, b"b", b"2"), (3, b"c", b"3"), (4, b"d", b"4")]
    log.close()


def test_the_active_segment_and_records_past_the_high_watermark_are_never_cleaned(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(segment_bytes=300), clock=clock)
    for i in range(20):
        log.append_as_leader(build_batch([rec(b"k", b"%d" % i)]))
    segments = [s.base_offset for s in log.segments]
    assert len(segments) >= 4
    log.update_high_watermark(segments[2] + 1)  # inside the third segment
    result = clean(log, clock.now)
    assert result.end_offset == segments[2]
    assert [r[0] for r in records_of(log) if r[0] >= segments[2]] == list(range(segments[2], 20))
    assert [r[0] for r in records_of(log) if r[0] < segments[2]] == [segments[2] - 1]
    log.close()


def test_dirty_ratio_min_compaction_lag_and_max_compaction_lag(tmp_path, clock):
    cleaner = LogCleaner()
    log = UnifiedLog(
        tmp_path / "t-0", compact(segment_bytes=300, min_cleanable_dirty_ratio=0.5), clock=clock
    )
    append_all(log, [(b"k%d" % i, b"x" * 40) for i in range(8)])
    log.roll()
    logs = {("t", 0): log}
    assert cleaner.clean_filthiest_log(logs, clock.now) is not None  # ratio 1.0 > 0.5
    append_all(log, [(b"k0", b"y" * 40)])
    log.roll()
    to_clean = cleaner.log_to_clean(log, clock.now)
    assert 0 < to_clean.cleanable_ratio < 0.5
    assert cleaner.clean_filthiest_log(logs, clock.now) is None
    # max.compaction.lag.ms: a dirty segment older than it is cleaned whatever the ratio.
    log.config = compact(segment_bytes=300, max_compaction_lag_ms=1000)
    assert cleaner.clean_filthiest_log(logs, T0 + 10_000) is not None
    # min.compaction.lag.ms: segments younger than it stay dirty.
    log.config = compact(segment_bytes=300, min_compaction_lag_ms=60_000)
    append_all(log, [(b"k1", b"z" * 40)])
    log.roll()
    to_clean, _ = log_to_clean(log, to_clean.first_dirty_offset, T0 + 1000)
    assert to_clean.first_uncleanable_offset == to_clean.first_dirty_offset
    assert to_clean.cleanable_bytes == 0
    log.close()


def test_a_small_offset_map_cleans_in_several_passes(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(segment_bytes=400), clock=clock)
    append_all(log, [(b"k%d" % (i % 20), b"%d" % i) for i in range(100)])
    log.roll()
    ends = []
    while (result := clean(log, clock.now, dedupe_buffer_size=24 * 12)) is not None:
        ends.append(result.end_offset)
        assert len(ends) < 50
    assert ends == sorted(ends) and len(ends) > 1 and ends[-1] == 100
    assert sorted(r[0] for r in records_of(log)) == list(range(80, 100))
    log.close()


def test_an_active_producers_last_batch_survives_as_an_empty_batch(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(), clock=clock)
    log.append_as_leader(
        build_batch([rec(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0)
    )
    log.append_as_leader(
        build_batch([rec(b"a", b"2")], producer_id=9, producer_epoch=0, base_sequence=1)
    )
    log.append_as_leader(build_batch([rec(b"a", b"3")]))
    log.append_as_leader(build_batch([rec(b"b", b"4")]))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock.now)
    headers = [b.header for b in batches_of(log)]
    # offset 0 goes; offset 1 (producer 9's last batch) stays, empty; 3 is the group's end.
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (1, 0, 9),
        (2, 1, -1),
        (3, 1, -1),
    ]
    log.close()
    log = UnifiedLog(tmp_path / "t-0", compact(), clock=clock)  # rebuilt from the log
    retry = build_batch([rec(b"a", b"2")], producer_id=9, producer_epoch=0, base_sequence=1)
    assert log.append_as_leader(retry).duplicate
    log.close()


def test_aborted_transactions_are_removed_and_open_ones_bound_the_cleaning(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(segment_bytes=10_000), clock=clock)
    coordinator = AppendOrigin.COORDINATOR

    def txn(pid: int, key: bytes, value: bytes) -> bytes:
        return build_batch(
            [rec(key, value)], producer_id=pid, producer_epoch=0, base_sequence=0,
            is_transactional=True,
        )  # fmt: skip

    def marker(pid: int, kind: ControlRecordType) -> bytes:
        return build_end_txn_marker_batch(pid, 0, kind, 0, timestamp=T0)

    log.append_as_leader(build_batch([rec(b"a", b"plain")]))  # 0
    log.append_as_leader(txn(1, b"a", b"aborted"))  # 1
    log.append_as_leader(marker(1, ControlRecordType.ABORT), origin=coordinator)  # 2
    log.append_as_leader(txn(2, b"b", b"committed"))  # 3
    log.append_as_leader(marker(2, ControlRecordType.COMMIT), origin=coordinator)  # 4
    log.append_as_leader(txn(3, b"c", b"open"))  # 5: no marker yet
    log.append_as_leader(build_batch([rec(b"c", b"after")]))  # 6
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    # The open transaction's segment (the only closed one) cannot be cleaned.
    assert clean(log, clock.now) is None
    # Finish it, put later data in another segment: now the first segment is cleanable.
    log.append_as_leader(marker(3, ControlRecordType.COMMIT), origin=coordinator)  # 7
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    result = clean(log, clock.now)
    assert result.end_offset == 8
    data = [(r[0], r[2]) for r in records_of(log) if r[1] in (b"a", b"b", b"c")]
    # "aborted" (1) is gone although it is a's latest record; plain (0) stays.
    assert data == [(0, b"plain"), (3, b"committed"), (6, b"after")]
    # The ABORT marker stays (its transaction's batch was seen this pass), and so does
    # its .txnindex entry, now in the cleaned segment that replaced the old one.
    first = log.segments[0]
    assert first.txn_index.path.name == "00000000000000000000.txnindex"
    assert first.txn_index.all_aborted_txns() == [AbortedTxn(1, 1, 2, 3)]
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 1, 2, 3)]
    log.close()
    reopened = UnifiedLog(tmp_path / "t-0", compact(segment_bytes=10_000), clock=clock)
    assert reopened.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 1, 2, 3)]
    reopened.close()


# -- gaps: recovery, follower appends, reads, indexes -------------------------------------


def _cleaned_log(tmp_path, clock, name="t-0", **kw) -> UnifiedLog:
    log = UnifiedLog(
        tmp_path / name, compact(segment_bytes=500, index_interval_bytes=60, **kw), clock=clock
    )
    keys = [b"u%d" % i if i % 3 == 0 else b"k%d" % (i % 4) for i in range(60)]
    append_all(log, [(k, b"v%d" % i) for i, k in enumerate(keys)], per_batch=2)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean(log, clock.now)
    return log


def test_recovery_keeps_a_cleaned_log_with_gaps(tmp_path, clock):
    log = _cleaned_log(tmp_path, clock)
    before = records_of(log)
    assert [r[0] for r in before] != list(range(before[0][0], before[-1][0] + 1))  # gaps
    for segment in log.segments:  # an unclean shutdown: indexes untrimmed, nothing flushed
        segment.offset_index.close()
    log = UnifiedLog(tmp_path / "t-0", log.config, recovery_point=0, clock=clock)
    assert records_of(log) == before
    assert all(cut == 0 for _, cut in log.recovered)
    log.close()


def test_recovery_of_a_delete_only_log_still_cuts_a_scribbled_base_offset(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(), clock=clock)
    for i in range(3):
        log.append_as_leader(build_batch([rec(b"k", b"%d" % i)]))
    log.close()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    second = len(data) // 3
    data[second + 7] += 5  # baseOffset 1 -> 6: still increasing, but a gap
    path.write_bytes(bytes(data))
    log = UnifiedLog(tmp_path / "t-0", LogConfig(), clock=clock)
    assert [r[0] for r in records_of(log)] == [0]
    log.close()
    compacted = UnifiedLog(tmp_path / "u-0", compact(), clock=clock)
    compacted.append_as_leader(build_batch([rec(b"k", b"0")]))
    compacted.close()
    path = tmp_path / "u-0" / "00000000000000000000.log"
    path.write_bytes(path.read_bytes() + bytes(data[second:]))  # offsets 6 and 2 follow 0
    compacted = UnifiedLog(tmp_path / "u-0", compact(), clock=clock)
    assert [r[0] for r in records_of(compacted)] == [0, 6]  # 2 goes back: cut there
    compacted.close()


def test_follower_appends_accept_gaps_only_under_compaction(tmp_path, clock):
    leader = _cleaned_log(tmp_path, clock, "leader-0")
    data = b"".join(s.log.read() for s in leader.segments)
    follower = UnifiedLog(tmp_path / "follower-0", leader.config, clock=clock)
    info = follower.append_as_follower(data)
    assert records_of(follower) == records_of(leader)
    assert follower.log_end_offset == leader.log_end_offset == info.last_offset + 1
    with pytest.raises(UnexpectedAppendOffsetError):  # going back is refused
        follower.append_as_follower(build_batch([rec(b"k", b"x")], base_offset=3))
    plain = UnifiedLog(tmp_path / "plain-0", LogConfig(), clock=clock)
    plain.append_as_follower(build_batch([rec(b"k", b"x")], base_offset=0))
    with pytest.raises(UnexpectedAppendOffsetError):
        plain.append_as_follower(build_batch([rec(b"k", b"x")], base_offset=5))
    for lg in (leader, follower, plain):
        lg.close()


def test_reads_and_index_lookups_land_on_the_next_batch_across_gaps(tmp_path, clock):
    log = _cleaned_log(tmp_path, clock)
    offsets = [r[0] for r in records_of(log)]
    gaps = [o for o in range(offsets[0], offsets[-1]) if o not in offsets]
    assert gaps
    for gap in gaps:
        position, got = gap, []
        while not got:  # as a consumer does: an empty batch moves it to its next offset
            batches = list(iter_batches(log.read(position, 10_000).read_bytes()))
            got = [r.offset for b in batches for r in b.records if r.offset >= gap]
            position = batches[-1].next_offset
        assert got[0] == min(o for o in offsets if o > gap)
        found = log.fetch_offset_by_timestamp(T0 + gap)
        assert found is not None and found.offset == min(o for o in offsets if o >= gap)
    for segment in log.segments[:-1]:
        segment.sanity_check()
        for n in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(n)
            hit = segment.translate_offset(entry.offset)
            assert hit is not None and hit.offset == entry.offset
    log.close()


def test_dump_log_reads_cleaned_segments(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(delete_retention_ms=5), clock=clock)
    append_all(log, [(b"a", b"1"), (b"a", None), (b"b", b"2")])
    log.roll()
    clean(log, clock.now)
    log.close()
    out = subprocess.run(
        [sys.executable, "-m", "kafkalab", "dump-log", str(tmp_path / "t-0"), "--print-data-log"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"deleteHorizonMs: {T0 + 5}" in out.stdout
    assert "isvalid: true" in out.stdout and "isvalid: false" not in out.stdout


# -- LogManager ---------------------------------------------------------------------------


def test_log_manager_tick_cleans_the_filthiest_compacted_log(tmp_path, clock):
    manager = LogManager(
        tmp_path,
        LogConfig(segment_bytes=300),
        topic_configs={"compacted": {"cleanup.policy": "compact"}},
        cleaner_backoff_ms=1000,
        clock=clock,
    )
    log = manager.get_or_create_log("compacted", 0)
    plain = manager.get_or_create_log("plain", 0)
    for lg in (log, plain):
        append_all(lg, [(b"k", b"x" * 30) for _ in range(10)])
        lg.roll()
    clock.now += 1000
    done = manager.tick()
    assert done["cleaner"] is not None and done["cleaner"].topic_partition == ("compacted", 0)
    assert [r[0] for r in records_of(log)] == [9]
    assert len(records_of(plain)) == 10
    checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint.read() == {("compacted", 0): 10}
    clock.now += 1000
    assert manager.tick()["cleaner"] is None  # nothing dirty any more
    manager.delete_log("compacted", 0)
    assert checkpoint.read() == {}
    manager.shutdown()


def test_truncation_below_the_checkpoint_makes_the_new_records_dirty(tmp_path, clock):
    log = UnifiedLog(tmp_path / "t-0", compact(), clock=clock)
    append_all(log, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    log.roll()
    assert clean(log, clock.now).end_offset == 3
    log.truncate_to(1)  # a follower drops a divergent tail...
    refetched = [rec(b"a", b"new"), rec(b"x", b"4"), rec(b"y", b"5")]  # ...and refetches
    log.append_as_follower(build_batch(refetched, base_offset=1))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    result = clean(log, clock.now)  # offsets 1-2 are new although below the checkpoint (3)
    assert result.first_dirty_offset == 1
    assert records_of(log) == [(1, b"a", b"new"), (2, b"x", b"4"), (3, b"y", b"5")]
    log.close()


def test_segment_ms_and_max_compaction_lag_roll_the_active_segment_so_it_can_be_cleaned(
    tmp_path, clock
):
    for config, reason in (
        (compact(segment_ms=1000), "segment.ms"),
        (compact(max_compaction_lag_ms=1000), "max.compaction.lag.ms"),
    ):
        log = UnifiedLog(tmp_path / f"{reason.replace('.', '_')}-0", config, clock=clock)
        log.append_as_leader(build_batch([rec(b"k", b"1", T0)]))
        log.update_high_watermark(log.log_end_offset)
        assert clean(log, clock.now) is None  # all in the active segment
        info = log.append_as_leader(build_batch([rec(b"k", b"2", T0 + 1500)]))
        assert info.rolled is not None and info.rolled.startswith(reason)
        log.append_as_leader(build_batch([rec(b"k", b"3", T0 + 1600)]))
        log.update_high_watermark(log.log_end_offset)
        assert clean(log, clock.now).end_offset == 1
        # The closed segment's k=1 is superseded only by records in the active segment,
        # which the map does not cover: it stays until they are cleaned too.
        assert [r[0] for r in records_of(log)] == [0, 1, 2]
        log.close()
