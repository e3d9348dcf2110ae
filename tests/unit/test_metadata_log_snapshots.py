"""KafkaMetadataLog's snapshots on disk (KIP-630): `<end offset>-<epoch>.checkpoint`
files beside the segments, written through `.checkpoint.part`; the log start offset
and the segments below it; restart after a snapshot; a crash or power failure while
a snapshot is written or installed; `kafkalab dump-log` on a `.checkpoint`."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from raft_harness import TEST_CONFIG, RaftNetwork, full_log, snapshot_state

from kafkalab.raft.kafka_metadata_log import (
    METADATA_LOG_DIR,
    KafkaMetadataLog,
    cut_to_recovery_point,
)
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.quorum_state_store import FileQuorumStateStore
from kafkalab.raft.raft_log import OffsetAndEpoch, RaftLog
from kafkalab.raft.snapshot import decode_snapshot, encode_snapshot, snapshot_filename

SEGMENT_BYTES = 400  # a few entries a segment, so that a snapshot frees whole segments

ops = st.lists(
    st.one_of(
        st.tuples(st.just("leader"), st.integers(0, 2), st.integers(1, 5)),
        st.tuples(st.just("truncate"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("snapshot"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("install"), st.integers(0, 40), st.integers(0, 3)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    ),
    max_size=14,
)


def _snapshot_of(log: RaftLog, offset: int) -> OffsetAndEpoch:
    if offset == log.log_start_offset:
        return OffsetAndEpoch(offset, log.last_fetched_epoch if not log.entries else 0)
    return OffsetAndEpoch(offset, log.read(offset - 1, 1)[0].epoch)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops)
# Found by hypothesis: a snapshot inside the first segment, then a restart: the segment
# (still holding the records below the snapshot) came back with epochs the
# leader-epoch checkpoint no longer listed, and the log was emptied.
@example([("leader", 0, 1), ("leader", 1, 1), ("snapshot", 1, 0), ("reopen", 0, 0)])
def test_the_disk_log_with_snapshots_answers_as_the_memory_log(tmp_path_factory, steps):
    """Snapshots, installs, truncations and reopens: the disk log holds the same
    entries, log start, snapshots and answers as RaftLog."""
    directory = tmp_path_factory.mktemp("meta")
    model, disk = RaftLog(), KafkaMetadataLog(directory, segment_bytes=SEGMENT_BYTES)
    epoch = 0
    for kind, a, b in steps:
        if kind == "leader":
            epoch = max(epoch + a, model.last_fetched_epoch)
            records = [{"n": model.end_offset + i} for i in range(b)]
            if a > 0:
                records[0] = LeaderChangeMessage(1, (1, 2, 3), (1, 2))
            new = model.append_as_leader(records, epoch)
            if b % 2:  # as the leader writes
                disk.append_as_leader(records, epoch)
            else:  # as a follower copies the leader's entries
                disk.append_as_follower(new)
            disk.flush()
        elif kind == "truncate":
            target = max(model.log_start_offset, min(a, model.end_offset))
            model.truncate_to(target)
            disk.truncate_to(target)
        elif kind == "snapshot":
            offset = model.log_start_offset + a % (model.end_offset - model.log_start_offset + 1)
            if offset > model.log_start_offset:
                sid = _snapshot_of(model, offset)
                data = encode_snapshot(sid, [{"upto": offset}])
                for log in (model, disk):
                    log.create_snapshot(sid, data)
                    log.delete_before_snapshot(sid)
        elif kind == "install":  # a leader's snapshot, ahead of this log or within it
            sid = OffsetAndEpoch(model.log_start_offset + a, model.last_fetched_epoch + b)
            data = encode_snapshot(sid, [{"installed": a}])
            model.install_snapshot(sid, data)
            disk.install_snapshot(sid, data)
            disk.flush()
        else:
            disk.close()
            disk = KafkaMetadataLog(directory, segment_bytes=SEGMENT_BYTES)
        epoch = max(epoch, model.last_fetched_epoch)
        assert disk.entries == model.entries
        assert (disk.log_start_offset, disk.end_offset) == (
            model.log_start_offset,
            model.end_offset,
        )
        assert disk.snapshot_ids == model.snapshot_ids
        for sid in model.snapshot_ids:
            assert disk.read_snapshot(sid) == model.read_snapshot(sid)
        for e in range(epoch + 2):
            assert disk.end_offset_for_epoch(e) == model.end_offset_for_epoch(e)
            for o in range(model.end_offset + 2):
                assert disk.validate_offset_and_epoch(o, e) == model.validate_offset_and_epoch(o, e)
        files = sorted(p.name for p in (directory / METADATA_LOG_DIR).glob("*.checkpoint*"))
        assert files == [snapshot_filename(s) for s in model.snapshot_ids]
        first_segment = min(int(p.stem) for p in (directory / METADATA_LOG_DIR).glob("*.log"))
        assert first_segment <= model.log_start_offset
    disk.close()


def _filled_log(directory: Path, n: int = 30) -> KafkaMetadataLog:
    log = KafkaMetadataLog(directory, segment_bytes=SEGMENT_BYTES)
    log.append_as_leader([LeaderChangeMessage(1, (1, 2, 3), (1, 2))], 1)
    for i in range(n):
        log.append_as_leader([{"n": i}], 1)
    log.append_as_leader([{"n": "e2"}], 2)
    log.flush()
    return log


def test_a_snapshot_deletes_the_segments_below_it_and_survives_a_restart(tmp_path):
    log = _filled_log(tmp_path)
    segments_before = sorted((tmp_path / METADATA_LOG_DIR).glob("*.log"))
    assert len(segments_before) > 3
    sid = OffsetAndEpoch(25, 1)
    data = encode_snapshot(sid, [{"state": "after 25 records"}])
    log.create_snapshot(sid, data)
    log.delete_before_snapshot(sid)
    segments = sorted(int(p.stem) for p in (tmp_path / METADATA_LOG_DIR).glob("*.log"))
    assert segments[0] <= 25 < (segments[1] if len(segments) > 1 else log.end_offset + 1)
    assert len(segments) < len(segments_before)
    assert (tmp_path / METADATA_LOG_DIR / "00000000000000000025-0000000001.checkpoint").exists()
    entries = log.entries
    log.close()
    reopened = KafkaMetadataLog(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert reopened.log_start_offset == 25 and reopened.latest_snapshot_id == sid
    assert reopened.entries == entries
    assert decode_snapshot(reopened.read_snapshot(sid)).records == ({"state": "after 25 records"},)
    reopened.close()


def test_a_torn_part_file_is_ignored_and_deleted_at_start(tmp_path):
    """A crash while the snapshot was written: only `.checkpoint.part` exists, maybe
    half of it. The log starts as if no snapshot had been taken."""
    log = _filled_log(tmp_path)
    entries = log.entries
    sid = OffsetAndEpoch(20, 1)
    data = encode_snapshot(sid, [{"x": 1}] * 20)
    part = tmp_path / METADATA_LOG_DIR / (snapshot_filename(sid) + ".part")
    part.write_bytes(data[: len(data) // 2])
    log.unified_log.close()
    reopened = KafkaMetadataLog(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert not part.exists()
    assert reopened.snapshot_ids == [] and reopened.log_start_offset == 0
    assert reopened.entries == entries
    reopened.close()


def test_a_crash_between_installing_a_snapshot_and_emptying_the_log(tmp_path):
    """A follower wrote the leader's snapshot (renamed, fsynced) and died before its
    log was emptied; its log has a stale tail in another epoch. At start the log
    becomes the snapshot, as Kafka's truncateToLatestSnapshot does."""
    log = _filled_log(tmp_path, n=5)
    sid = OffsetAndEpoch(40, 3)
    log._store_snapshot(sid, encode_snapshot(sid, [{"leader": "state"}]))  # then the crash
    log.unified_log.close()
    reopened = KafkaMetadataLog(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert (reopened.log_start_offset, reopened.end_offset, reopened.entries) == (40, 40, ())
    assert reopened.end_offset_and_epoch() == sid
    reopened.append_as_follower(
        [type(e)(40 + i, 3, e.record) for i, e in enumerate(log.entries[:2])]
    )
    reopened.close()
    again = KafkaMetadataLog(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert (again.log_start_offset, again.end_offset) == (40, 42)
    again.close()


def test_a_power_failure_after_a_snapshot_keeps_the_snapshot_and_the_committed_log(tmp_path):
    log = _filled_log(tmp_path)
    sid = OffsetAndEpoch(20, 1)
    log.create_snapshot(sid, encode_snapshot(sid, [{"s": 20}]))
    log.delete_before_snapshot(sid)
    log.flush()
    durable = log.entries
    log.append_as_leader([{"lost": 1}], 2)  # never fsynced
    log.unified_log.close()
    cut_to_recovery_point(tmp_path)
    reopened = KafkaMetadataLog(tmp_path, segment_bytes=SEGMENT_BYTES)
    assert reopened.log_start_offset == 20 and reopened.entries == durable
    reopened.close()


class SnapshotDiskNetwork(RaftNetwork):
    """Three voters on disk (log and quorum-state), small segments, FetchSnapshot in
    small chunks; `reopen` is a process restart (power_failure: the log cut to its
    recovery point first)."""

    def __init__(self, root: Path, seed: int = 0) -> None:
        self.root = root
        from dataclasses import replace

        logs: dict[int, RaftLog] = {v: self._open(v) for v in (1, 2, 3)}
        super().__init__(
            store_factory=lambda v: FileQuorumStateStore.in_directory(root / f"c{v}"),
            logs=logs,
            seed=seed,
            config=replace(TEST_CONFIG, fetch_snapshot_max_bytes=128),
        )

    def _open(self, v: int) -> KafkaMetadataLog:
        return KafkaMetadataLog(self.root / f"c{v}", segment_bytes=SEGMENT_BYTES)

    def reopen(self, v: int, power_failure: bool = False):
        self.crash(v)
        log = self.logs[v]
        assert isinstance(log, KafkaMetadataLog)
        log.unified_log.close()
        if power_failure:
            cut_to_recovery_point(self.root / f"c{v}")
        self.logs[v] = self._open(v)
        self.stores[v] = FileQuorumStateStore.in_directory(self.root / f"c{v}")
        return self.restart(v)

    def close(self) -> None:
        for log in self.logs.values():
            assert isinstance(log, KafkaMetadataLog)
            log.unified_log.close()


def test_a_voter_on_disk_catches_up_by_fetch_snapshot_and_restarts_from_it(tmp_path):
    net = SnapshotDiskNetwork(tmp_path, seed=11)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    down = next(v for v in net.voters if v != leader.local_id)
    net.crash(down)
    for i in range(6):
        leader.append([{"n": i, "pad": "x" * 40}] * 5, net.now)
        net.run(100)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, 5_000)
    sid = snapshot_state(leader, leader.high_watermark)
    leader.append([{"after": 1}], net.now)
    back = net.reopen(down)
    net.run_until(lambda: back.log.end_offset == leader.log.end_offset, 10_000)
    assert back.snapshots_installed == 1 and net.delivered["FetchSnapshotRequest"] > 3
    path = tmp_path / f"c{down}" / METADATA_LOG_DIR / snapshot_filename(sid)
    assert path.read_bytes() == leader.log.read_snapshot(sid)
    whole = full_log(leader.log)
    assert full_log(back.log) == whole
    # the voter restarts (power failure: its unflushed tail goes) from its snapshot
    again = net.reopen(down, power_failure=True)
    assert again.log.log_start_offset == sid.offset
    net.run_until(lambda: again.log.end_offset == leader.log.end_offset, 10_000)
    assert full_log(again.log) == full_log(leader.log)
    # and the leader restarts from its own snapshot too
    restarted = net.reopen(leader.local_id)
    assert restarted.log.log_start_offset == sid.offset
    net.run_until(net.has_stable_leader, max_ms=20_000)
    new = net.leader()
    new.append([{"last": 1}], net.now)
    net.run_until(lambda: new.high_watermark == new.log.end_offset, 10_000)
    assert full_log(new.log)[: len(whole)] == whole
    net.close()


def test_power_failures_with_snapshots_never_lose_a_committed_record(tmp_path):
    rng = random.Random(5)
    net = SnapshotDiskNetwork(tmp_path, seed=5)
    known: tuple = ()
    n = 0
    for _round in range(8):
        net.run_until(net.has_stable_leader, max_ms=30_000)
        leader = net.leader()
        for _ in range(rng.randint(2, 6)):
            n += 1
            leader.append([{"n": n}], net.now)
            net.run(rng.choice([10, 30, 60]))
            if not leader.is_leader():
                break
        for c in net.live():
            if rng.random() < 0.5 and c.high_watermark > c.log.log_start_offset:
                snapshot_state(c, c.high_watermark)
        for c in net.live():
            prefix = full_log(c.log)[: c.high_watermark]
            k = min(len(prefix), len(known))
            assert prefix[:k] == known[:k]
            known = max(known, prefix, key=len)
        net.reopen(rng.choice((1, 2, 3)), power_failure=True)
    net.run_until(net.has_stable_leader, max_ms=30_000)
    leader = net.leader()
    leader.append([{"n": "last"}], net.now)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, 10_000)
    assert full_log(leader.log)[: len(known)] == known and len(known) > 10
    net.close()


def test_dump_log_reads_a_snapshot_file(tmp_path):
    sid = OffsetAndEpoch(17, 4)
    path = tmp_path / snapshot_filename(sid)
    path.write_bytes(encode_snapshot(sid, [{"type": "topic", "name": "orders"}]))
    out = subprocess.run(
        [sys.executable, "-m", "kafkalab", "dump-log", str(path), "--print-data-log"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Snapshot end offset: 17, epoch: 4" in out.stdout
    assert "SNAPSHOT_HEADER" in out.stdout and "SNAPSHOT_FOOTER" in out.stdout
    assert '"name": "orders"' in out.stdout
