"""LeaderEpochFileCache: Kafka's end-offset-for-epoch answers, truncation, the checkpoint file,
and the log keeping it as it appends, truncates, retains and recovers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.records import SimpleRecord, build_batch
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.leader_epoch_file_cache import LeaderEpochFileCache


def test_end_offset_for_follows_kafka(tmp_path):
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, start in ((0, 0), (2, 10), (5, 30)):
        assert cache.assign(epoch, start)
    assert not cache.assign(2, 40)  # an older epoch changes nothing
    leo = 45
    assert cache.end_offset_for(5, leo) == (5, 45)  # the latest epoch ends at the LEO
    assert cache.end_offset_for(2, leo) == (2, 30)
    assert cache.end_offset_for(3, leo) == (2, 30)  # unknown epoch: the largest below it
    assert cache.end_offset_for(1, leo) == (0, 10)
    assert cache.end_offset_for(6, leo) == (-1, -1)  # newer than anything known
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    assert [e.epoch for e in LeaderEpochFileCache(tmp_path).entries] == [0, 2, 5]


def test_truncation_from_both_ends(tmp_path):
    cache = LeaderEpochFileCache(tmp_path)
    for epoch, start in ((0, 0), (2, 10), (5, 30)):
        cache.assign(epoch, start)
    cache.truncate_from_end(30)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(2, 15)]
    cache.assign(7, 12)  # a start offset below an existing entry replaces it
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(7, 12)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 100)), max_size=15))
def test_entries_stay_increasing(tmp_path_factory, assignments):
    cache = LeaderEpochFileCache(tmp_path_factory.mktemp("epochs"))
    for epoch, start in sorted(assignments, key=lambda a: a[1]):
        cache.assign(epoch, start)
        epochs = [e.epoch for e in cache.entries]
        starts = [e.start_offset for e in cache.entries]
        assert epochs == sorted(set(epochs)) and starts == sorted(starts)


def test_the_log_keeps_its_epochs(tmp_path):
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for epoch, n in ((0, 3), (1, 4), (4, 5)):
        for _ in range(n):
            log.append_as_leader(build_batch([SimpleRecord(b"x" * 50)]), leader_epoch=epoch)
    cache = log.leader_epoch_cache
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (1, 3), (4, 7)]
    assert cache.end_offset_for(1, log.log_end_offset) == (1, 7)
    log.truncate_to(5)  # a follower dropping a divergent tail
    assert [(e.epoch, e.start_offset) for e in cache.entries] == [(0, 0), (1, 3)]
    follower = build_batch([SimpleRecord(b"y")], base_offset=5, partition_leader_epoch=6)
    log.append_as_follower(follower)
    assert cache.latest_epoch == 6
    log.close()
    # Reopened after a crash that lost the checkpoint: recovery learns the epochs again.
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [
        (0, 0),
        (1, 3),
        (6, 5),
    ]
    # Retention moves the first epoch's start up to the new log start offset.
    log.update_high_watermark(log.log_end_offset)
    log.config = LogConfig(segment_bytes=300, retention_bytes=200, retention_ms=-1)
    log.delete_old_segments()
    assert log.log_start_offset > 0
    assert log.leader_epoch_cache.entries[0].start_offset == log.log_start_offset
    log.close()
