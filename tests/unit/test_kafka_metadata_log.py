"""KafkaMetadataLog: the quorum's log on disk (`__cluster_metadata-0`) behaves as the
in-memory RaftLog does, survives a restart with `quorum-state`, truncates after a
divergence, and after a power failure (the unflushed tail lost) keeps every committed
record."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raft_harness import RaftNetwork, check_log_matching

from kafkalab.raft.kafka_metadata_log import (
    METADATA_LOG_DIR,
    KafkaMetadataLog,
    cut_to_recovery_point,
)
from kafkalab.raft.kafka_raft_client import LeaderChangeMessage
from kafkalab.raft.quorum_state_store import QUORUM_STATE_FILE, FileQuorumStateStore
from kafkalab.raft.raft_log import LogEntry, RaftLog
from kafkalab.records import iter_batches

ops = st.lists(
    st.one_of(
        st.tuples(st.just("leader"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    ),
    max_size=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops)
def test_the_disk_log_answers_as_the_memory_log_and_reopens_the_same(tmp_path_factory, steps):
    """Same entries, leader-epoch history, end_offset_for_epoch and validation as
    RaftLog, before and after a reopen from disk."""
    directory = tmp_path_factory.mktemp("meta")
    model, disk = RaftLog(), KafkaMetadataLog(directory)
    epoch = 0
    for kind, a, b in steps:
        if kind == "leader":
            epoch += a
            records = [{"n": model.end_offset + i} for i in range(b)]
            if a > 0:
                records[0] = LeaderChangeMessage(1, (1, 2, 3), (1, 2))
            model.append_as_leader(records, epoch)
            disk.append_as_leader(records, epoch)
            disk.flush()
        elif kind == "truncate":
            target = min(a, model.end_offset)
            model.truncate_to(target)
            disk.truncate_to(target)
            epoch = model.last_fetched_epoch
        else:
            disk.close()
            disk = KafkaMetadataLog(directory)
        assert disk.entries == model.entries
        assert disk.epoch_history() == model.epoch_history()
        for e in range(epoch + 2):
            assert disk.end_offset_for_epoch(e) == model.end_offset_for_epoch(e)
            for o in range(model.end_offset + 2):
                assert disk.validate_offset_and_epoch(o, e) == model.validate_offset_and_epoch(o, e)
    disk.close()


def test_the_log_is_kafkas_record_format_with_epochs_in_the_batches(tmp_path: Path):
    log = KafkaMetadataLog(tmp_path)
    log.append_as_leader([LeaderChangeMessage(2, (1, 2, 3), (2, 3)), {"type": "topic"}], 4)
    log.flush()
    data = (tmp_path / METADATA_LOG_DIR / "00000000000000000000.log").read_bytes()
    batches = list(iter_batches(data))
    assert [(b.base_offset, b.header.partition_leader_epoch) for b in batches] == [(0, 4), (1, 4)]
    assert batches[0].header.is_control_batch and not batches[1].header.is_control_batch
    assert (tmp_path / METADATA_LOG_DIR / "leader-epoch-checkpoint").exists()
    log.close()


def test_a_power_failure_loses_the_unflushed_tail_only(tmp_path: Path):
    log = KafkaMetadataLog(tmp_path)
    log.append_as_leader([{"a": 1}, {"a": 2}], 1)
    log.flush()
    log.append_as_leader([{"a": 3}], 1)
    log.append_as_leader([{"a": 4}], 2)  # written, never fsynced
    assert (log.flushed_end_offset, log.end_offset) == (2, 4)
    durable = log.entries[:2]
    assert cut_to_recovery_point(tmp_path) > 0  # the page cache is gone
    reopened = KafkaMetadataLog(tmp_path)
    assert reopened.entries == durable
    assert reopened.epoch_history() == [(1, 0)]  # epoch 2 went with its record
    reopened.close()


# -- three voters on disk ------------------------------------------------------------------


class LazyLeaderLog(KafkaMetadataLog):
    """A leader that sometimes does not get to fsync before it dies: its flush is
    skipped at random while it leads (followers may already have fetched the records,
    as in Kafka: a leader's unflushed records are readable). A follower always
    flushes before its next Fetch, as KafkaRaftClient has it."""

    def __init__(self, directory: Path, rng: random.Random | None) -> None:
        super().__init__(directory)
        self.rng = rng
        self.leading = lambda: False

    def flush(self) -> None:
        if self.rng is not None and self.leading() and self.rng.random() < 0.5:
            return
        super().flush()


class DiskNetwork(RaftNetwork):
    """RaftNetwork whose voters keep their log and `quorum-state` in directories: a
    restart reopens both from disk, a power failure first cuts the log to its
    recovery point."""

    def __init__(self, root: Path, seed: int = 0, lazy_leader: bool = False) -> None:
        self.root = root
        self.lazy = random.Random(seed) if lazy_leader else None
        self.cut_bytes = 0
        logs: dict[int, RaftLog] = {v: self._open(v) for v in (1, 2, 3)}
        super().__init__(
            store_factory=lambda v: FileQuorumStateStore.in_directory(root / f"c{v}"),
            logs=logs,
            seed=seed,
        )
        for v in (1, 2, 3):
            self._watch(v)

    def _open(self, v: int) -> LazyLeaderLog:
        return LazyLeaderLog(self.root / f"c{v}", self.lazy)

    def _watch(self, v: int) -> None:
        log = self.logs[v]
        assert isinstance(log, LazyLeaderLog)
        log.leading = lambda: v not in self.down and self.clients[v].is_leader()

    def reopen(self, v: int, power_failure: bool = False):
        self.crash(v)
        log = self.logs[v]
        assert isinstance(log, KafkaMetadataLog)
        log.unified_log.close()  # the process is gone: no flush on the way out
        if power_failure:
            self.cut_bytes += cut_to_recovery_point(self.root / f"c{v}")
        self.logs[v] = self._open(v)
        self.stores[v] = FileQuorumStateStore.in_directory(self.root / f"c{v}")
        client = self.restart(v)
        self._watch(v)
        return client

    def close(self) -> None:
        for log in self.logs.values():
            assert isinstance(log, KafkaMetadataLog)
            log.unified_log.close()


def committed(net: RaftNetwork) -> tuple[LogEntry, ...]:
    leader = net.leader()
    assert leader is not None
    return leader.log.entries[: leader.high_watermark]


def test_a_quorum_restarted_from_disk_keeps_its_records_and_moves_to_a_higher_epoch(tmp_path):
    net = DiskNetwork(tmp_path, seed=3)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    leader.append([{"topic": "a"}, {"topic": "b"}], net.now)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, max_ms=5_000)
    before, epoch = committed(net), leader.epoch
    for v in (1, 2, 3):
        net.reopen(v)
    assert all((tmp_path / f"c{v}" / QUORUM_STATE_FILE).exists() for v in (1, 2, 3))
    assert all(net.clients[v].epoch == epoch for v in (1, 2, 3))  # quorum-state recovered
    net.run_until(net.has_stable_leader, max_ms=20_000)
    new = net.leader()
    assert new.epoch > epoch
    new.append([{"topic": "c"}], net.now)
    net.run_until(lambda: new.high_watermark == new.log.end_offset, max_ms=5_000)
    assert committed(net)[: len(before)] == before
    for c in net.live():
        net.run_until(lambda c=c: c.log.end_offset == new.log.end_offset, max_ms=5_000)
        assert c.log.entries == new.log.entries
    net.close()


def test_a_deposed_leader_truncates_its_uncommitted_tail_on_disk(tmp_path):
    """The leader is cut off, appends records nobody gets, a new leader is elected;
    back, the old leader's Fetch meets a DivergingEpoch and its file is truncated."""
    net = DiskNetwork(tmp_path, seed=5)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    old = net.leader()
    old_id = old.local_id
    net.run_until(lambda: old.high_watermark == old.log.end_offset, max_ms=5_000)
    net.isolate(old_id)
    old.append([{"lost": 1}, {"lost": 2}], net.now)
    net.run_until(
        lambda: any(c.is_leader() and c.local_id != old_id for c in net.live()), max_ms=20_000
    )
    new = next(c for c in net.live() if c.is_leader() and c.local_id != old_id)
    new.append([{"kept": 1}], net.now)
    net.heal()
    net.run_until(
        lambda: (
            net.clients[old_id].log.entries == new.log.entries
            and new.high_watermark == new.log.end_offset
        ),
        max_ms=20_000,
    )
    reopened = net.reopen(old_id)
    assert {"lost": 1} not in [e.record for e in reopened.log.entries]
    assert reopened.log.entries[: new.log.end_offset] == new.log.entries[: reopened.log.end_offset]
    net.close()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 2**32))
def test_power_failures_never_lose_a_committed_record(tmp_path_factory, seed):
    """Three voters on disk under load, the leader's fsyncs sometimes late; now and
    then one loses power (its log cut to its recovery point, its quorum-state as
    fsynced) and restarts. Every committed record stays, and the logs keep matching."""
    rng = random.Random(seed)
    net = DiskNetwork(tmp_path_factory.mktemp("q"), seed=seed, lazy_leader=True)
    known: tuple[LogEntry, ...] = ()  # the longest committed prefix seen so far

    def check() -> None:
        nonlocal known
        for c in net.live():
            prefix = c.log.entries[: c.high_watermark]
            n = min(len(prefix), len(known))
            assert prefix[:n] == known[:n], f"voter {c.local_id} changed a committed record"
            known = max(known, prefix, key=len)
            check_log_matching(c.log.entries, known)
        for c in net.leaders():
            assert c.log.entries[: len(known)] == known, f"leader {c.local_id} lost one"

    n = 0
    for _round in range(6):
        net.run_until(net.has_stable_leader, max_ms=30_000)
        leader = net.leader()
        for _ in range(rng.randint(1, 3)):
            n += 1
            leader.append([{"n": n}], net.now)
            net.run(rng.choice([10, 30, 60]))
            check()
            if not leader.is_leader():
                break
        net.reopen(rng.choice((1, 2, 3)), power_failure=True)
        check()
    net.run_until(net.has_stable_leader, max_ms=30_000)
    leader = net.leader()
    leader.append([{"n": "last"}], net.now)
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, max_ms=10_000)
    check()
    assert len(known) >= 2  # a leader change and a record at least: the run committed
    net.close()


def test_a_leader_that_loses_its_unflushed_tail_never_leads_that_epoch_again(tmp_path):
    """KAFKA-10527 on disk: the leader appends, the followers fetch, the leader loses
    power before its fsync. Its file lost the tail; it comes back Resigned (it never
    leads its old epoch again), follows the new leader and gets the records back
    from it; nothing committed was lost."""
    net = DiskNetwork(tmp_path, seed=7)
    net.run_until(net.has_stable_leader, max_ms=10_000)
    leader = net.leader()
    lid, epoch = leader.local_id, leader.epoch
    net.run_until(lambda: leader.high_watermark == leader.log.end_offset, max_ms=5_000)
    log = net.logs[lid]
    assert isinstance(log, LazyLeaderLog)
    log.rng = random.Random(0)
    log.rng.random = lambda: 0.0  # type: ignore[method-assign]  # every fsync is late
    leader.append([{"n": 1}, {"n": 2}], net.now)
    end = leader.log.end_offset
    others = [c for c in net.live() if c.local_id != lid]
    net.run_until(lambda: all(c.log.end_offset == end for c in others), max_ms=5_000)
    # committed by the two followers' fsynced copies, not by the leader's own
    net.run_until(lambda: leader.high_watermark == end, max_ms=5_000)
    assert log.flushed_end_offset < end
    restarted = net.reopen(lid, power_failure=True)
    assert net.cut_bytes > 0 and restarted.log.end_offset < end
    assert restarted.state_name.value == "resigned" and restarted.epoch == epoch
    net.run_until(net.has_stable_leader, max_ms=20_000)
    new = net.leader()
    assert new.epoch > epoch
    net.run_until(lambda: net.clients[lid].log.entries == new.log.entries, max_ms=10_000)
    assert [e.record for e in new.log.entries if isinstance(e.record, dict)] == [{"n": 1}, {"n": 2}]
    net.close()
