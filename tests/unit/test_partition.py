"""The Partition state machine, stepped by hand: HW over the ISR, ISR shrink and
expand through proposals, min.insync.replicas, and the follower truncation rules on
KIP-101's first scenario (a committed record lost by high-watermark truncation)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkalab.errors import Errors, KafkaError
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.replication.partition import Partition
from kafkalab.storage import UnifiedLog


def new_partition(tmp_path, broker_id, rule="fenced-leader-epoch", lag_ms=1000):
    log = UnifiedLog(tmp_path / f"broker{broker_id}" / "t-0")
    return Partition("t", 0, broker_id, log, replica_lag_time_max_ms=lag_ms, truncation_rule=rule)


def replicate(leader: Partition, follower: Partition, now_ms: int) -> None:
    """One fetch round trip: the follower fetches from its LEO, appends what the
    leader returns, and learns the leader's HW; the leader learns the follower's LEO
    from the *next* fetch offset, as in Kafka."""
    leader.update_follower_fetch_state(
        follower.local_broker_id, follower.log.log_end_offset, now_ms
    )
    data = leader.log.read(follower.log.log_end_offset, 1 << 20).read_bytes()
    follower.append_records_to_follower(data, leader.log.high_watermark)


def values(log: UnifiedLog) -> list[bytes]:
    data = log.read(log.log_start_offset, 1 << 20).read_bytes() if log.log_end_offset else b""
    return [r.value for b in iter_batches(data) for r in b.records]


def record(v: bytes) -> bytes:
    return build_batch([SimpleRecord(v)])


def test_high_watermark_is_the_minimum_leo_of_the_isr(tmp_path):
    a, b = new_partition(tmp_path, 1), new_partition(tmp_path, 2)
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    a.append_records_to_leader(record(b"m1"), -1, 2)
    assert a.log.high_watermark == 0  # B does not have it yet
    replicate(a, b, 10)  # B fetches from 0 and gets m1
    assert a.log.high_watermark == 0 and b.log.log_end_offset == 1
    replicate(a, b, 20)  # B fetches from 1: the leader learns B has m1, and answers HW 1
    assert a.log.high_watermark == 1 and b.log.high_watermark == 1


def test_isr_shrinks_after_the_lag_time_and_expands_when_caught_up(tmp_path):
    a, b = new_partition(tmp_path, 1), new_partition(tmp_path, 2)
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    a.append_records_to_leader(record(b"m1"), 1, 2)
    assert a.maybe_shrink_isr(500) is None
    rejected = a.maybe_shrink_isr(1500)  # B has not caught up for 1.5 s > 1 s
    a.reject_isr_change()  # the controller refused (say, a stale partition epoch)...
    assert rejected.new_isr == [1] and a.pending_isr is None and a.isr == [1, 2]
    change = a.maybe_shrink_isr(1500)  # ...so the leader proposes again
    assert change.new_isr == [1] and a.pending_isr == [1]
    assert a.log.high_watermark == 0  # the HW still waits for B until the change commits
    a.apply_isr_change(change.new_isr, partition_epoch=1)
    assert a.isr == [1] and a.log.high_watermark == 1
    with pytest.raises(KafkaError) as err:
        a.append_records_to_leader(record(b"m2"), -1, 2)
    assert err.value.code == Errors.NOT_ENOUGH_REPLICAS
    a.append_records_to_leader(record(b"m2"), 1, 2)  # acks=1 still works
    replicate(a, b, 1600)  # B fetches m1, m2: caught up to the HW and the epoch start
    expand = a.update_follower_fetch_state(2, b.log.log_end_offset, 1700)
    assert expand is not None and expand.new_isr == [1, 2]
    a.apply_isr_change(expand.new_isr, 2)
    assert a.isr == [1, 2]


def test_a_fenced_follower_is_not_proposed_into_the_isr_until_it_is_unfenced(tmp_path):
    """Kafka's isReplicaIsrEligible: a caught-up follower on a fenced broker keeps
    fetching, but its leader does not propose it (the controller would refuse it at
    every fetch); once the metadata shows it unfenced, its next fetch does."""
    a, b = new_partition(tmp_path, 1), new_partition(tmp_path, 2)
    fenced = {2}
    a.isr_eligible = lambda broker_id: broker_id not in fenced
    a.make_leader(1, [1], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1], [1, 2], 0)
    a.append_records_to_leader(record(b"m1"), 1, 2)
    replicate(a, b, 10)
    assert a.update_follower_fetch_state(2, b.log.log_end_offset, 20) is None
    assert a.pending_isr is None and a.isr == [1]
    fenced.clear()
    change = a.update_follower_fetch_state(2, b.log.log_end_offset, 30)
    assert change is not None and change.new_isr == [1, 2]


def test_an_alter_partition_answer_older_than_the_metadata_is_ignored(tmp_path):
    """The leader proposed adding broker 3; the controller committed {1,2,3} in
    partition epoch 1, then fenced broker 3 (a controlled shutdown): {1,2} in epoch 2.
    The metadata log brought epoch 2 first; the AlterPartition answer (epoch 1) comes
    after it and must not put the fenced broker back into the ISR, where acks=all
    would wait for it until replica.lag.time.max.ms."""
    a = new_partition(tmp_path, 1)
    a.make_leader(1, [1, 2], [1, 2, 3], 0, 0)
    assert a.apply_isr_change([1, 2], partition_epoch=2)  # from the metadata log
    assert not a.apply_isr_change([1, 2, 3], partition_epoch=1)  # the late answer
    assert a.isr == [1, 2] and a.partition_epoch == 2
    a.append_records_to_leader(record(b"m"), -1, 0)
    a.update_follower_fetch_state(2, 1, 10)
    assert a.log.high_watermark == 1  # broker 3 is not waited for


@pytest.mark.parametrize(
    "rule, survives",
    [
        ("high-watermark", False),
        ("leader-epoch", True),
        ("fenced-leader-epoch", True),
    ],
)
def test_kip101_scenario_one(tmp_path, rule, survives):
    """A leads, B follows; both have m1 and m2 and the leader's HW is 2, but B's HW
    is still 1. B restarts and truncates by its rule; then A dies and B leads. With
    high-watermark truncation, m2 — committed — is lost."""
    a, b = new_partition(tmp_path, 1, rule), new_partition(tmp_path, 2, rule)
    a.make_leader(1, [1, 2], [1, 2], 0, now_ms=0)
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    a.append_records_to_leader(record(b"m1"), -1, 1)
    replicate(a, b, 1)
    replicate(a, b, 2)  # both know HW 1
    a.append_records_to_leader(record(b"m2"), -1, 1)
    replicate(a, b, 3)  # B has m2 (HW still 1 in that response)
    a.update_follower_fetch_state(2, b.log.log_end_offset, 4)  # B's next fetch arrives...
    assert a.log.high_watermark == 2  # ...m2 is committed...
    assert b.log.high_watermark == 1  # ...but B crashes before the response tells it.
    # B restarts: it becomes a follower again and truncates by its rule.
    b.make_follower(1, 1, [1, 2], [1, 2], 0)
    b.truncate_by_rule(
        lambda epoch, _current: a.log.leader_epoch_cache.end_offset_for(epoch, a.log.log_end_offset)
    )
    # A dies; the controller elects B (it is in the ISR) with a new epoch.
    b.make_leader(2, [2], [1, 2], 1, now_ms=10)
    assert (b"m2" in values(b.log)) is survives


class ReplicationMachine(RuleBasedStateMachine):
    """A leader and two followers exchanging fetches in any order; the leader's
    HW never goes back, never passes an ISR member's LEO, and everything below it
    is on every ISR member."""

    @initialize(tmp=st.just(None))
    def setup(self, tmp):
        import tempfile
        from pathlib import Path

        self.dir = Path(tempfile.mkdtemp(prefix="kafkalab-part-"))
        self.now = 0
        self.leader = new_partition(self.dir, 1, lag_ms=50)
        self.followers = {b: new_partition(self.dir, b) for b in (2, 3)}
        self.leader.make_leader(1, [1, 2, 3], [1, 2, 3], 0, now_ms=0)
        for f in self.followers.values():
            f.make_follower(1, 1, [1, 2, 3], [1, 2, 3], 0)
        self.last_hw = 0
        self.written = 0

    @rule(n=st.integers(1, 3))
    def produce(self, n):
        for _ in range(n):
            self.leader.append_records_to_leader(record(b"%d" % self.written), 1, 1)
            self.written += 1

    @rule(broker=st.sampled_from([2, 3]))
    def fetch(self, broker):
        self.now += 10
        replicate(self.leader, self.followers[broker], self.now)

    @rule()
    def tick(self):
        self.now += 30
        change = self.leader.maybe_shrink_isr(self.now) if self.leader.pending_isr is None else None
        if change is not None:
            self.leader.apply_isr_change(change.new_isr, self.leader.partition_epoch + 1)

    @rule(broker=st.sampled_from([2, 3]))
    def expand(self, broker):
        f = self.followers[broker]
        change = self.leader.update_follower_fetch_state(broker, f.log.log_end_offset, self.now)
        if change is not None:
            self.leader.apply_isr_change(change.new_isr, self.leader.partition_epoch + 1)

    @invariant()
    def hw_is_safe(self):
        if not hasattr(self, "leader"):
            return
        hw = self.leader.log.high_watermark
        assert hw >= self.last_hw
        self.last_hw = hw
        committed = values(self.leader.log)[:hw]
        for b in self.leader.isr:
            if b == 1:
                continue
            f = self.followers[b]
            assert f.log.high_watermark <= hw
            # An ISR member that the leader counted has every committed record.
            if self.leader.remote[b].log_end_offset >= hw:
                assert values(f.log)[:hw] == committed

    def teardown(self):
        import shutil

        if hasattr(self, "leader"):
            for p in [self.leader, *self.followers.values()]:
                p.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


TestReplicationMachine = ReplicationMachine.TestCase
TestReplicationMachine.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_kip279_truncation_asks_again_when_the_leader_never_had_our_epoch(tmp_path):
    """Found by the TLA+ spec (specs/replication): the follower's epochs are 0 and 2,
    the leader's 1 and 3, and they disagree from offset 0. The leader answers for
    epoch 2 with (1, 1): epoch 1 was never ours, so we cut where our epoch 0
    ends (1) and ask again for epoch 0; the leader answers (0, 0): cut at 0."""
    a = Partition("t", 0, 1, UnifiedLog(tmp_path / "a" / "t-0"))
    b = Partition("t", 0, 2, UnifiedLog(tmp_path / "b" / "t-0"))
    a.make_leader(0, [1, 2], [1, 2], 0, now_ms=0)
    a.append_records_to_leader(record(b"r1"), 1, 1)  # offset 0, epoch 0: only on A
    b.make_leader(1, [1, 2], [1, 2], 1, now_ms=0)
    b.append_records_to_leader(record(b"r2"), 1, 1)  # offset 0, epoch 1: only on B
    a.make_leader(2, [1, 2], [1, 2], 2, now_ms=0)  # A leads epoch 2, writes nothing
    b.make_leader(3, [1, 2], [1, 2], 3, now_ms=0)  # B leads epoch 3
    a.make_follower(2, 3, [1, 2], [1, 2], 3)
    rounds = a.truncate_by_rule(
        lambda epoch, _current: b.log.leader_epoch_cache.end_offset_for(epoch, b.log.log_end_offset)
    )
    assert [r["asked"][0] for r in rounds] == [2, 0]
    assert [r["truncated to"] for r in rounds] == [1, 0]
    assert a.log.log_end_offset == 0  # r1 is gone: A will copy r2 from B
