"""The durability ledger (lazyfs's power failure) against a model, and recovery
from what it leaves: fsynced batches kept, torn batches cut."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR, KafkaMetadataLog
from kafkalab.raft.quorum_state_store import QUORUM_STATE_FILE, ElectionState, FileQuorumStateStore
from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.storage import durability_ledger
from kafkalab.storage.checkpoint_file import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.unified_log import UnifiedLog


@pytest.fixture(autouse=True)
def _no_ledger_left():
    yield
    durability_ledger.uninstall()


# -- the ledger against a model of the page cache ------------------------------------------


@dataclass
class Inode:
    content: bytes = b""
    durable: bytes | None = None  # at the last fsync; None: never fsynced


NAMES = ["a", "b", "c", "a.tmp"]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(NAMES)),
        st.tuples(st.just("append"), st.sampled_from(NAMES), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("rewrite"), st.sampled_from(NAMES), st.binary(max_size=8)),
        st.tuples(st.just("fsync"), st.sampled_from(NAMES), st.booleans()),
        st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
        st.tuples(st.just("unlink"), st.sampled_from(NAMES)),
        st.tuples(st.just("fsync_dir")),
    ),
    max_size=30,
)


def _apply(root: Path, op: tuple, current: dict[str, Inode], listing: dict[str, Inode]) -> None:
    """One operation, on the real files (through the hooks the storage layer calls)
    and on the model."""
    kind = op[0]
    if kind == "fsync_dir":
        fsync_dir(root)
        listing.clear()
        listing.update(current)
        return
    name = op[1]
    path = root / name
    if kind == "create":
        if name not in current:
            path.touch()
            current[name] = Inode()
        return
    if name not in current:
        return
    inode = current[name]
    if kind == "append":
        with open(path, "ab") as f:
            f.write(op[2])
        inode.content += op[2]
    elif kind == "rewrite":  # in place: truncate and write, the same inode
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(op[2])
            durability_ledger.file_rewritten(f.fileno())  # as FileRecords.truncate_to says
        inode.content = op[2]
    elif kind == "fsync":
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            # append_only: only the bytes since the last record are copied (a segment)
            durability_ledger.file_synced(path, fd, append_only=op[2])
        finally:
            os.close(fd)
        inode.durable = inode.content
    elif kind == "rename":
        target = op[2]
        if target != name:
            os.replace(path, root / target)
            current[target] = current.pop(name)
    elif kind == "unlink":
        path.unlink()
        del current[name]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=ops, after=ops)
@example(  # a segment's incremental copy, voided by a truncation
    before=[("create", "a")],
    after=[
        ("append", "a", b"x"),
        ("fsync", "a", True),
        ("rewrite", "a", b"yy"),
        ("fsync", "a", True),
    ],
)
def test_a_power_failure_leaves_exactly_what_was_fsynced(before, after):
    """Files made before the ledger count as durable; from then on a file keeps its
    content at its last fsync (keyed by inode: an fsync before a rename counts for
    the new name), a name its state at the last directory fsync (a rename not made
    durable is undone, a new file never named durably is gone); removals stick."""
    base = Path(tempfile.mkdtemp(prefix="ledger-"))
    try:
        root = base / "data"
        root.mkdir()
        current: dict[str, Inode] = {}
        listing: dict[str, Inode] = {}
        for op in before:  # before the ledger: all of it durable
            _apply(root, op, current, listing)
        for inode in current.values():
            inode.durable = inode.content
        listing = dict(current)
        durability_ledger.install(base / "ledger", [root])
        for op in after:
            _apply(root, op, current, listing)
        durability_ledger.uninstall()

        report = durability_ledger.power_failure(base / "ledger")

        expected = {
            name: inode.durable or b"" for name, inode in listing.items() if name in current
        }
        found = {p.name: p.read_bytes() for p in root.iterdir()}
        assert found == expected
        assert report.torn == {}
    finally:
        shutil.rmtree(base)


def test_a_checkpoint_renamed_without_a_directory_fsync_is_undone(tmp_path):
    """write-temp-fsync-rename without the directory's fsync: after the crash the name
    holds the old file; with it, the new one."""
    root = tmp_path / "data"
    root.mkdir()
    checkpoint = OffsetCheckpointFile(root / RECOVERY_POINT_OFFSET_CHECKPOINT)
    checkpoint.write({("t", 0): 5})  # before the ledger
    durability_ledger.install(tmp_path / "ledger", [root])
    tmp = root / "recovery-point-offset-checkpoint.tmp"
    tmp.write_text("0\n1\nt 0 9\n")
    fd = os.open(tmp, os.O_RDONLY)
    os.fsync(fd)
    durability_ledger.file_synced(tmp, fd)
    os.close(fd)
    os.replace(tmp, checkpoint.path)
    assert checkpoint.read() == {("t", 0): 9}
    durability_ledger.power_failure(tmp_path / "ledger")
    assert checkpoint.read() == {("t", 0): 5}

    checkpoint.write({("t", 0): 9})  # fsyncs the file and the directory
    durability_ledger.power_failure(tmp_path / "ledger")
    assert checkpoint.read() == {("t", 0): 9}


def test_a_new_partition_directory_and_segment_survive_once_flushed(tmp_path):
    """UnifiedLog fsyncs the parent of a partition directory it creates, and the
    partition directory when it flushes a new segment (Kafka: LocalLog.flush):
    without, the whole log would be gone after the crash. What was appended after
    the flush is gone."""
    root = tmp_path / "data"
    root.mkdir()
    durability_ledger.install(tmp_path / "ledger", [root])
    log = UnifiedLog(root / "t-0", LogConfig())
    log.append_as_leader(bytearray(_batch(0, 3)))
    log.flush()
    log.append_as_leader(bytearray(_batch(1, 2)))
    assert log.log_end_offset == 5
    for segment in log.segments:  # a SIGKILL: nothing more is written or closed
        segment.log.close()
    durability_ledger.power_failure(tmp_path / "ledger")
    reopened = UnifiedLog(root / "t-0", LogConfig(), recovery_point=3)
    try:
        assert [v for _, v in _read_all(reopened)] == [b"0-0" * 3, b"0-1" * 3, b"0-2" * 3]
    finally:
        reopened.close()


# -- torn writes: recovery keeps every fsynced batch, no torn one ----------------------------


def _batch(tag: int, n: int) -> bytes:
    return build_batch(
        [SimpleRecord(f"{tag}-{i}".encode() * 3, timestamp=1_700_000_000_000 + i) for i in range(n)]
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=25),
    flush_after=st.sets(st.integers(0, 24)),
    segment_bytes=st.sampled_from([300, 700, 1 << 20]),
    seed=st.integers(0, 2**32 - 1),
)
# segments rolled, then one flush: their names are durable only by the directory's fsync
@example(sizes=[2] * 8, flush_after={7}, segment_bytes=300, seed=1)
def test_recovery_after_a_torn_write_keeps_every_fsynced_batch(
    sizes, flush_after, segment_bytes, seed
):
    """Batches appended with flushes at random points, then lazyfs's power failure
    with torn writes (a `.log` keeps part of its unfsynced tail, cut inside a batch):
    the log reopened from the checkpointed recovery point holds every batch flushed,
    a prefix of what was written (nothing after a torn batch), and indexes that find
    every offset it holds."""
    base = Path(tempfile.mkdtemp(prefix="torn-"))
    try:
        root = base / "data"
        root.mkdir()
        durability_ledger.install(base / "ledger", [root])
        config = LogConfig(segment_bytes=segment_bytes, segment_index_bytes=4096)
        checkpoint = OffsetCheckpointFile(root / RECOVERY_POINT_OFFSET_CHECKPOINT)
        log = UnifiedLog(root / "t-0", config)
        written: list[tuple[int, bytes]] = []
        for i, n in enumerate(sizes):
            log.append_as_leader(bytearray(_batch(i, n)))
            written += [(len(written) + j, f"{i}-{j}".encode() * 3) for j in range(n)]
            if i in flush_after:
                log.flush()
                checkpoint.write({("t", 0): log.recovery_point})
        flushed = log.recovery_point
        for segment in log.segments:  # a SIGKILL: nothing more is written or closed
            segment.log.close()
        durability_ledger.uninstall()

        report = durability_ledger.power_failure(base / "ledger", seed=seed, tear_probability=1.0)

        point = checkpoint.read().get(("t", 0), 0)
        assert point == flushed
        reopened = UnifiedLog(root / "t-0", config, recovery_point=point)
        try:
            held = _read_all(reopened)
            assert held == written[: len(held)]  # a prefix: nothing after a torn batch
            assert len(held) >= flushed  # every fsynced batch
            assert reopened.log_end_offset == len(held)
            for offset, value in held:  # the rebuilt indexes find each offset
                got = _records(reopened.read(offset, 1).read_bytes())
                assert (offset, value) in got
            # nothing torn is left in the files: a batch appended now reads back
            reopened.append_as_leader(bytearray(_batch(99, 2)))
            again = _read_all(reopened)
            assert again[: len(held)] == held
            assert [v for _, v in again[len(held) :]] == [b"99-0" * 3, b"99-1" * 3]
            if report.torn:  # a torn write was kept; recovery cut it or it ended on a batch
                assert reopened.recovered or len(held) > flushed
        finally:
            reopened.close()
    finally:
        shutil.rmtree(base)


def _records(data: bytes) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in iter_batches(data) for r in b.records]


def _read_all(log: UnifiedLog) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = _records(log.read(offset, 1 << 20).read_bytes())
        assert got, f"no progress reading at {offset}"
        out += [(o, v) for o, v in got if o >= offset]
        offset = got[-1][0] + 1
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.integers(1, 3), min_size=1, max_size=12),
    flush_after=st.sets(st.integers(0, 11)),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_kraft_log_keeps_every_flushed_entry_after_lazyfs_power_failure(
    batches, flush_after, seed
):
    """`__cluster_metadata-0` with its recovery-point checkpoint and `quorum-state`:
    after lazyfs's power failure with torn writes, the reopened KafkaMetadataLog holds
    every entry it had flushed (what a voter counted toward the high watermark), and
    a prefix of what it had written; quorum-state is the one last written."""
    base = Path(tempfile.mkdtemp(prefix="kraft-"))
    try:
        root = base / "controller"
        durability_ledger.install(base / "ledger", [root])
        log = KafkaMetadataLog(root)
        store = FileQuorumStateStore(root / METADATA_LOG_DIR / QUORUM_STATE_FILE)
        written = []
        for i, n in enumerate(batches):
            records = [{"n": len(written) + j} for j in range(n)]
            log.append_as_leader(records, epoch=1 + i // 4)
            written += records
            if i in flush_after:
                log.flush()
                store.write_election_state(ElectionState(1 + i // 4, 1, voters=frozenset({1})))
        flushed = log.flushed_end_offset
        last_state = store.read_election_state()
        for segment in log.unified_log.segments:  # a SIGKILL
            segment.log.close()
        durability_ledger.uninstall()

        durability_ledger.power_failure(base / "ledger", seed=seed, tear_probability=1.0)

        reopened = KafkaMetadataLog(root)
        try:
            held = [e.record for e in reopened.entries]
            assert held == written[: len(held)]
            assert len(held) >= flushed
        finally:
            reopened.close()
        assert (
            FileQuorumStateStore(root / METADATA_LOG_DIR / QUORUM_STATE_FILE).read_election_state()
            == last_state
        )
    finally:
        shutil.rmtree(base)


def test_segments_the_cleaner_process_wrote_survive_a_power_failure_after_the_swap(tmp_path):
    """The LogCleaner writes and fsyncs `.cleaned` segments in a process of its own
    (spawned): it records them in the broker's ledger too, so that once the swap is
    durable (renames, directory fsyncs) a power failure keeps the compacted log."""
    logs = tmp_path / "logs"
    durability_ledger.install(tmp_path / "ledger", [logs])
    manager = LogManager(
        logs,
        LogConfig(segment_bytes=4000),
        topic_configs={"compacted": {"cleanup.policy": "compact"}},
        cleaner_backoff_ms=0,
        cleaner_threads=1,
    )
    try:
        log = manager.get_or_create_log("compacted", 0)
        for r in range(40):  # never flushed: only the cleaner's files are fsynced
            records = [SimpleRecord(b"v%d" % r, key=b"k%d" % k) for k in range(10)]
            log.append_as_leader(build_batch(records))
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        deadline = time.monotonic() + 120
        while "cleaned" not in (done := manager.tick()):
            assert time.monotonic() < deadline, "the cleaner did not clean"
            time.sleep(0.05)
        (result,) = done["cleaned"]
        compacted = [
            (r.offset, r.key, r.value)
            for s in log.segments
            for b in iter_batches(s.log.read())
            for r in b.records
        ]
        assert len(compacted) < 400
        for thread in manager.cleaner.threads:  # a SIGKILL of the broker and its cleaner
            thread.kill()
        for segment in log.segments:
            segment.log.close()
    finally:
        durability_ledger.uninstall()

    durability_ledger.power_failure(tmp_path / "ledger")

    config = LogConfig.from_properties({"segment.bytes": "4000", "cleanup.policy": "compact"})
    reopened = UnifiedLog(logs / "compacted-0", config)
    try:
        after = [
            (r.offset, r.key, r.value)
            for s in reopened.segments
            for b in iter_batches(s.log.read())
            for r in b.records
        ]
        assert after == compacted[: len(after)]
        # every record of the cleaned segments (fsynced by the cleaner) is there
        assert len(after) >= len([c for c in compacted if c[0] < result.end_offset]) > 0
    finally:
        reopened.close()


def test_the_harness_files_in_a_data_directory_are_left_alone():
    """The files kafkalab.server keeps for the harness (faults it is told about, the
    events it reports) are not the node's data: a power failure leaves them."""
    from kafkalab.server.clock import CLOCK_FILE
    from kafkalab.server.events import EVENTS_FILE
    from kafkalab.server.link_faults import LINK_FAULTS_FILE
    from kafkalab.server.replica_state import REPLICA_STATE_FILE

    for name in (CLOCK_FILE, EVENTS_FILE, LINK_FAULTS_FILE, REPLICA_STATE_FILE):
        assert name in durability_ledger.FILES_NOT_GOVERNED
