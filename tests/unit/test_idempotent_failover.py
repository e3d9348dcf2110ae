"""An idempotent producer's retry across leader changes is answered, not written again.

The soak's one duplicate (README, Benchmarks, soak: v-42834): the leader answered an
acks=all batch NOT_LEADER_OR_FOLLOWER as every broker was fenced, librdkafka resent
the same batch (same producer id, epoch and sequences: it rebuilds a retried batch
identically, rdkafka_msgset_writer.c), and the next leader appended it again. Kafka's
leader answers such a retry from its producer state, which every replica keeps from
the batches it appends, as leader and as follower, and rebuilds from its snapshots
and its log after a truncation or a restart.

Here three replicas (Partition and UnifiedLog, no sockets) go through the leader
changes of a fence of every broker: leadership moving to a follower, through no
leader (-1) and back to the old leader or to another, followers truncating by leader
epoch, replicas restarting cleanly or crashing, segments rolling (a producer state
snapshot at each roll). Whatever the path, a replica that leads with the batch in its
log must answer its retry as a duplicate with the first offsets; a hypothesis state
machine drives a client that retries as librdkafka does through random paths.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkalab.errors import Errors, KafkaError
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.replication.partition import Partition, Role
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.producer_state_manager import OutOfOrderSequenceError

PID, EPOCH = 4242, 0
BROKERS = (1, 2, 3)
ACKS_ALL = -1
MIN_ISR = 2


def batch(seq: int) -> bytes:
    """librdkafka's single-record batch `v-<seq>` with sequence `seq`; a retry is
    the same bytes."""
    return build_batch(
        [SimpleRecord(b"v-%d" % seq, timestamp=1_700_000_000_000 + seq)],
        producer_id=PID,
        producer_epoch=EPOCH,
        base_sequence=seq,
    )


def values(log: UnifiedLog) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in the log (a read stops at a segment's end:
    read on from where it stopped)."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 24).read_bytes()
        batches = list(iter_batches(data))
        out += [(r.offset, r.value) for b in batches for r in b.records]
        offset = batches[-1].header.next_offset
    return out


class Replicas:
    """Three replicas of one partition and a controller's leader, epoch and ISR.
    `apply(b)` is broker b acting on the metadata (make_leader, or make_follower
    and truncating by leader epoch against the leader)."""

    def __init__(self, root: Path, config: LogConfig, sync_truncation: bool = True) -> None:
        """`sync_truncation`: a new follower truncates as it applies the metadata;
        else it only notes that it must (`needs_truncation`), and the caller runs
        the rounds (as the replica fetcher does, answers arriving later)."""
        self.root, self.config = root, config
        self.sync_truncation = sync_truncation
        self.now = 0
        self.leader, self.epoch, self.partition_epoch = -1, 0, 0
        self.isr = list(BROKERS)
        self.parts = {b: self._open(b) for b in BROKERS}

    def _open(self, broker: int, **log_args) -> Partition:
        log = UnifiedLog(self.root / f"broker{broker}" / "t-0", self.config, **log_args)
        return Partition("t", 0, broker, log, replica_lag_time_max_ms=10_000)

    def set(self, leader: int, isr: list[int] | None = None) -> None:
        """The controller's next PartitionChangeRecord: a new leader (or none) in a
        new leader epoch."""
        self.leader = leader
        self.epoch += 1
        self.partition_epoch += 1
        if isr is not None:
            self.isr = sorted(isr)

    def apply(self, broker: int) -> bool:
        """Broker `broker` applies the metadata; False when it is to follow a leader
        that has not applied it yet (it asks again later)."""
        self.now += 1
        p = self.parts[broker]
        if self.leader == broker:
            if p.role != Role.LEADER or p.leader_epoch != self.epoch:
                p.make_leader(self.epoch, self.isr, list(BROKERS), self.partition_epoch, self.now)
                p.needs_truncation = False
            return True
        if p.role != Role.FOLLOWER or p.leader_epoch != self.epoch:
            p.make_follower(self.leader, self.epoch, self.isr, list(BROKERS), self.partition_epoch)
            p.needs_truncation = self.leader >= 0
        if self.sync_truncation and getattr(p, "needs_truncation", False):
            leader = self.parts[self.leader]
            if leader.role != Role.LEADER or leader.leader_epoch != self.epoch:
                return False
            p.truncate_by_rule(leader.last_offset_for_leader_epoch)
            p.needs_truncation = False
        return True

    def change_isr(self, isr: list[int]) -> None:
        """An ISR change in the same leader epoch, which the leader applies."""
        self.isr, self.partition_epoch = sorted(isr), self.partition_epoch + 1
        self.parts[self.leader].apply_isr_change(self.isr, self.partition_epoch)

    def regrow_isr(self) -> None:
        """The followers fetch until caught up and the leader takes them back into
        the ISR (AlterPartition, committed): acks=all needs min.insync.replicas."""
        for _ in range(3):
            for b in BROKERS:
                if b != self.leader:
                    self.fetch(b)
        assert self.isr == list(BROKERS), self.isr

    def elect(self, leader: int, isr: list[int] | None = None) -> None:
        """A new leader (or -1) that every broker applies at once, the leader first."""
        self.set(leader, isr)
        order = sorted(BROKERS, key=lambda b: b != leader)
        for b in order:
            assert self.apply(b)

    def fetch(self, follower: int, commit_isr: bool = True) -> bool:
        """One fetch round trip of `follower` from its leader; False if it cannot. An
        ISR expansion the leader proposes is committed (`commit_isr`), else left
        pending for the caller's controller."""
        f = self.parts[follower]
        if f.role != Role.FOLLOWER or f.leader_id < 0 or getattr(f, "needs_truncation", False):
            return False
        leader = self.parts[f.leader_id]
        if leader.role != Role.LEADER or leader.leader_epoch != f.leader_epoch:
            return False
        self.now += 1
        change = leader.update_follower_fetch_state(follower, f.log.log_end_offset, self.now)
        if change is not None and commit_isr and leader.leader_epoch == self.epoch:
            self.change_isr(change.new_isr)
        found = leader.log.read(f.log.log_end_offset, 1 << 20)
        data = found.read_bytes() if found is not None else b""
        f.append_records_to_follower(data, leader.log.high_watermark)
        return True

    def catch_up(self, follower: int) -> None:
        """Fetch until the follower has the leader's whole log (a fetch reads one
        segment at most)."""
        leader = self.parts[self.parts[follower].leader_id]
        while self.parts[follower].log.log_end_offset < leader.log.log_end_offset:
            assert self.fetch(follower)

    def produce(self, broker: int, seq: int):
        """Broker `broker` gets the batch of `seq` (acks=all)."""
        return self.parts[broker].append_records_to_leader(batch(seq), ACKS_ALL, MIN_ISR)

    def restart(self, broker: int, clean: bool) -> None:
        """Stop the broker (a clean shutdown, or a crash: the files as they are) and
        start it again; it comes back knowing no role and applies the metadata."""
        old = self.parts[broker].log
        hw, recovery = old.high_watermark, old.recovery_point
        if clean:
            old.close()
        self.parts[broker] = self._open(
            broker, high_watermark=hw, recovery_point=recovery, clean_shutdown=clean
        )

    def close(self) -> None:
        for p in self.parts.values():
            p.log.close()


CONFIGS = {
    "one segment": LogConfig(min_insync_replicas=MIN_ISR),
    "a segment a batch": LogConfig(min_insync_replicas=MIN_ISR, segment_bytes=100),
}


@pytest.fixture(params=sorted(CONFIGS))
def replicas(request, tmp_path):
    r = Replicas(tmp_path, CONFIGS[request.param])
    r.elect(1)
    for seq in range(3):  # v-0..v-2 committed on all three
        r.produce(1, seq)
        r.catch_up(2), r.catch_up(3)
    r.fetch(2), r.fetch(3)
    assert r.parts[1].log.high_watermark == 3
    yield r
    r.close()


def written_once(r: Replicas, broker: int) -> None:
    seen = [v for _, v in values(r.parts[broker].log)]
    assert len(seen) == len(set(seen)), f"broker {broker} has a value twice: {seen}"


def assert_duplicate(r: Replicas, broker: int, seq: int, offset: int) -> None:
    """The retry of `seq` on `broker` is answered with `offset` and writes nothing."""
    end = r.parts[broker].log.log_end_offset
    info = r.produce(broker, seq)
    assert info.duplicate and info.first_offset == offset
    assert r.parts[broker].log.log_end_offset == end
    written_once(r, broker)


def appended_everywhere(r: Replicas, seq: int) -> int:
    """v-<seq> appended by leader 1 and fetched by both followers, not acknowledged
    (the leader never hears that they have it); returns its offset."""
    offset = r.produce(1, seq).first_offset
    r.catch_up(2), r.catch_up(3)
    return offset


@pytest.mark.parametrize("successor", [2, 3])
def test_a_follower_that_leads_answers_the_retry(replicas, successor):
    offset = appended_everywhere(replicas, 3)
    replicas.elect(successor, isr=[2, 3])  # broker 1 fenced
    assert_duplicate(replicas, successor, 3, offset)


@pytest.mark.parametrize("successor", [1, 3])
def test_through_no_leader_and_back(replicas, successor):
    """Every broker fenced: the leadership moves along the ISR to its last member,
    then to no leader (the ISR keeps that member); the brokers come back and it
    leads. Broker 1 fenced last: the old leader leads again."""
    offset = appended_everywhere(replicas, 3)
    if successor == 3:
        replicas.elect(2, isr=[2, 3])
        replicas.elect(3, isr=[3])
    else:
        replicas.change_isr([1])  # brokers 2 and 3 fenced first: 1 still leads
    replicas.elect(-1)
    replicas.elect(successor)
    replicas.regrow_isr()  # alone in the ISR it refuses acks=all: NOT_ENOUGH_REPLICAS
    assert_duplicate(replicas, successor, 3, offset)


def test_the_old_leader_leads_again_after_following_one_that_has_the_batch(replicas):
    offset = appended_everywhere(replicas, 3)
    replicas.elect(2, isr=[2, 3])
    replicas.fetch(1)  # broker 1 follows 2: nothing to truncate
    replicas.elect(1, isr=[1, 2])
    assert_duplicate(replicas, 1, 3, offset)


def test_after_a_truncation_of_the_batches_after_it(replicas):
    """Broker 1 wrote v-3 and v-4; broker 2 got v-3 only and leads: broker 1 cuts
    v-4 (its producer state is rebuilt), leads again, and still knows v-3."""
    offset = replicas.produce(1, 3).first_offset
    replicas.fetch(2)
    replicas.produce(1, 4)
    replicas.elect(2, isr=[2])
    assert [v for _, v in values(replicas.parts[1].log)][-1] == b"v-3"  # v-4 cut
    replicas.elect(1, isr=[1, 2])
    assert_duplicate(replicas, 1, 3, offset)
    assert replicas.produce(1, 4).first_offset == offset + 1  # v-4: new to this log


@pytest.mark.parametrize("clean", [True, False], ids=["clean shutdown", "crash"])
@pytest.mark.parametrize("who", [1, 2])
def test_after_a_restart(replicas, clean, who):
    offset = appended_everywhere(replicas, 3)
    replicas.elect(-1, isr=[who])
    replicas.restart(who, clean)
    replicas.elect(who)
    replicas.regrow_isr()
    assert_duplicate(replicas, who, 3, offset)


def test_every_in_flight_batch_retried_in_order(replicas):
    """librdkafka's five in flight: all appended by the old leader, replicated,
    none acknowledged; the new leader answers all five retries from its state."""
    offsets = [replicas.produce(1, seq).first_offset for seq in range(3, 8)]
    replicas.catch_up(2), replicas.catch_up(3)
    replicas.elect(-1, isr=[3])
    replicas.elect(3)
    replicas.regrow_isr()
    for seq, offset in zip(range(3, 8), offsets, strict=True):
        assert_duplicate(replicas, 3, seq, offset)
    assert replicas.produce(3, 8).first_offset == offsets[-1] + 1


# -- random paths --------------------------------------------------------------------------


class IdempotentFailoverMachine(RuleBasedStateMachine):
    """A controller fences and unfences brokers (a fenced broker leaves the ISR unless
    it is the last member; a leader is elected from the unfenced ISR, else there is
    none), brokers apply the metadata each at their own time, followers fetch and
    truncate, brokers restart, and a client produces with librdkafka's idempotent
    retries: up to five batches in flight to the broker its metadata names as leader,
    and when one fails, every batch in flight is sent again, in order, unchanged.

    Invariants: no replica holds a value twice; an acknowledged value stays at its
    offset in the leader's log; a leader never refuses a retry as out of order."""

    @initialize(tiny_segments=st.booleans())
    def setup(self, tiny_segments):
        self.root = Path(tempfile.mkdtemp(prefix="kafkalab-idem-"))
        config = LogConfig(
            min_insync_replicas=MIN_ISR, segment_bytes=100 if tiny_segments else 1 << 30
        )
        self.r = Replicas(self.root, config, sync_truncation=False)
        self.r.elect(1)
        self.fenced: set[int] = set()
        # a truncation round in flight, by broker: (the leader asked, in which leader
        # epoch, the rounds, its answer)
        self.asking: dict[int, tuple[int, int, object, tuple[int, int] | None]] = {}
        self.next_seq = 0  # the next new value the application produces
        self.unacked: list[int] = []  # sequences not yet acknowledged, in order
        # (seq, broker, leader epoch there, the offset acks=all waits for)
        self.in_flight: list[tuple[int, int, int, int]] = []
        self.acked: dict[int, int] = {}  # seq -> offset
        self.sent_before: set[int] = set()
        self.stopped = False  # the client gave up (a fatal error)
        self.client_leader = 1  # where the client's metadata says the leader is

    def teardown(self):
        if hasattr(self, "r"):
            event(f"acknowledged: {min(len(self.acked), 20) // 5 * 5}+")
            event(f"leader epochs: {min(self.r.epoch, 12) // 4 * 4}+")
            self.r.close()
            shutil.rmtree(self.root, ignore_errors=True)

    # -- the client ----------------------------------------------------------------------

    @rule(times=st.integers(1, 5))
    def send_some(self, times):
        for _ in range(times):
            self.send()

    def send(self) -> None:
        """Send the oldest unacknowledged batch not in flight (a new message when
        there is none), at most five in flight, to the leader the client knows."""
        sent = {f[0] for f in self.in_flight}
        waiting = [s for s in self.unacked if s not in sent]
        if not waiting and len(self.unacked) < 8:
            self.unacked.append(self.next_seq)
            waiting = [self.next_seq]
            self.next_seq += 1
        broker = self.client_leader
        if not waiting or len(self.in_flight) >= 5 or broker < 0 or self.stopped:
            return
        if any(f[1] != broker for f in self.in_flight):
            return  # librdkafka waits for the old leader's answers before the new one
        seq = waiting[0]
        part = self.r.parts[broker]
        try:
            info = self.r.produce(broker, seq)
        except OutOfOrderSequenceError as e:
            # Kafka's too, for a batch older than the state keeps: a snapshot keeps
            # each producer's last batch only, so after a restart a retry of an
            # earlier one is out of order (librdkafka then bumps its epoch). It must
            # be in the log, never lost; the client stops here.
            assert b"v-%d" % seq in dict(values(part.log)).values(), e
            event("a retry refused as out of order after a restart")
            self.client_leader, self.unacked, self.in_flight = -1, [], []
            self.stopped = True
            return
        except KafkaError as e:
            assert e.code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_ENOUGH_REPLICAS), e
            self.in_flight.clear()  # librdkafka drains and retries all, in order
            self.client_leader = self.r.leader  # and asks for metadata
            return
        self.in_flight.append((seq, broker, part.leader_epoch, info.last_offset + 1))
        if seq in self.sent_before:
            event("a retry answered as a duplicate" if info.duplicate else "a retry appended")
        self.sent_before.add(seq)

    @rule()
    def responses(self) -> None:
        """The acks=all answers that are due (DelayedProduce), in order. A broker that
        stopped leading in that epoch answered NOT_LEADER_OR_FOLLOWER."""
        while self.in_flight:
            seq, broker, epoch, required = self.in_flight[0]
            part = self.r.parts[broker]
            if part.role != Role.LEADER or part.leader_epoch != epoch:
                done, error = True, Errors.NOT_LEADER_OR_FOLLOWER
            else:
                done, error = part.check_enough_replicas_reach_offset(required)
            if not done:
                return
            if error != Errors.NONE:
                self.in_flight.clear()
                self.client_leader = -1 if self.stopped else self.r.leader
                return
            self.in_flight.pop(0)
            self.acked[seq] = required - 1
            self.unacked.remove(seq)

    @rule()
    def request_timeout(self):
        """No answer within request.timeout.ms: librdkafka retries what was in flight
        (the broker may have written it)."""
        if self.in_flight:
            self.in_flight.clear()
            self.client_leader = -1 if self.stopped else self.r.leader

    @rule()
    def refresh_metadata(self):
        if not self.stopped:
            self.client_leader = self.r.leader

    # -- the cluster ---------------------------------------------------------------------

    def _elect_where_needed(self, apply_now: bool) -> None:
        """The controller's rule (QuorumController._elect_where_needed)."""
        r = self.r
        isr = [b for b in r.isr if b not in self.fenced] or r.isr[-1:]
        leader = r.leader
        if leader in self.fenced or leader not in isr:
            leader = next((b for b in BROKERS if b in isr and b not in self.fenced), -1)
        if leader == r.leader and isr == r.isr:
            return
        if leader == r.leader:  # an ISR change in the same leader epoch
            r.isr, r.partition_epoch = isr, r.partition_epoch + 1
            p = r.parts[leader] if leader >= 0 else None
            if p is not None and p.role == Role.LEADER and p.leader_epoch == r.epoch:
                p.apply_isr_change(isr, r.partition_epoch)
            return
        r.set(leader, isr)
        if apply_now:
            for b in sorted(BROKERS, key=lambda b: b != leader):
                self._apply(b)

    @rule(data=st.data())
    def fence_every_broker(self, data):
        """A newly active controller fences every broker, one after the other (their
        heartbeats went to the old one), while the brokers apply its records each
        at their own time, fetch, and take the client's requests; then their
        heartbeats arrive and it unfences them one after the other."""
        order = data.draw(st.permutations(BROKERS), label="fenced in this order")
        for broker in order:
            self.fenced.add(broker)
            self._elect_where_needed(data.draw(st.booleans(), label="applied at once"))
            self._meanwhile(data)
        for broker in data.draw(st.permutations(BROKERS), label="unfenced in this order"):
            self.fenced.discard(broker)
            self._elect_where_needed(data.draw(st.booleans(), label="applied at once"))
            self._meanwhile(data)

    @rule(broker=st.sampled_from(BROKERS), apply_now=st.booleans())
    def fence_one(self, broker, apply_now):
        """One broker fenced (its heartbeats stopped)."""
        self.fenced.add(broker)
        self._elect_where_needed(apply_now)

    @rule(apply_now=st.booleans())
    def unfence(self, apply_now):
        """Every fenced broker's heartbeats arrive again."""
        for broker in sorted(self.fenced):
            self.fenced.discard(broker)
            self._elect_where_needed(apply_now)

    def _meanwhile(self, data) -> None:
        steps = data.draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["apply", "fetch", "send", "ask", "answer"]),
                    st.sampled_from(BROKERS),
                ),
                max_size=4,
            ),
            label="meanwhile",
        )
        for what, broker in steps:
            if what == "apply":
                self.apply_metadata(broker)
            elif what == "fetch":
                self.fetch(broker, 1)
            elif what == "send":
                self.send()
            elif what == "ask":
                self.ask_where_to_truncate(broker)
            else:
                self.answer_arrives(broker)

    def _fetch(self, broker: int) -> None:
        """The replica fetcher: truncate first (asking the leader, unless a round is
        already out), then fetch."""
        if broker not in self.asking:
            self.ask_where_to_truncate(broker)
            self.answer_arrives(broker)
        self.r.fetch(broker, commit_isr=False)
        self._alter_partition()

    @rule(broker=st.sampled_from(BROKERS), times=st.integers(1, 3))
    def fetch(self, broker, times):
        for _ in range(times):
            self._fetch(broker)
        self.responses()

    @rule()
    def fetch_all(self):
        for broker in BROKERS:
            self._fetch(broker)
        self.responses()

    def _apply(self, broker: int) -> None:
        """The broker applies the metadata. A new epoch under the same leader restarts
        that leader's fetcher (a truncation round in flight is dropped); one moved to
        another leader leaves the old leader's round to finish."""
        p = self.r.parts[broker]
        before = (p.role, p.leader_id, p.leader_epoch)
        self.r.apply(broker)
        asked = self.asking.get(broker)
        if asked is not None and before != (p.role, p.leader_id, p.leader_epoch):
            if p.role == Role.FOLLOWER and p.leader_id == asked[0]:
                del self.asking[broker]

    @rule(broker=st.sampled_from(BROKERS))
    def apply_metadata(self, broker):
        self._apply(broker)
        self.responses()

    def _answer(self, leader: int, question: tuple[int, int]) -> tuple[int, int] | None:
        part = self.r.parts[leader]
        try:
            return part.last_offset_for_leader_epoch(*question)
        except KafkaError:
            return None  # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH: ask again

    @rule(broker=st.sampled_from(BROKERS))
    def ask_where_to_truncate(self, broker):
        """A follower that must truncate asks its leader (OffsetForLeaderEpoch); the
        answer comes back later (`answer_arrives`)."""
        p = self.r.parts[broker]
        if broker in self.asking or not getattr(p, "needs_truncation", False):
            return
        rounds = p.truncation()
        try:
            question = next(rounds)
        except StopIteration as done:
            p.needs_truncation = done.value is None
            return
        answer = self._answer(p.leader_id, question)
        self.asking[broker] = (p.leader_id, p.leader_epoch, rounds, answer)

    @rule(broker=st.sampled_from(BROKERS))
    def answer_arrives(self, broker):
        """The answer is used as the replica fetcher uses it: dropped if the partition
        no longer follows that leader in the epoch it asked in (Kafka's rule);
        else the rounds go on with the same leader until they end, and a truncation
        that ended clears the partition's need to truncate."""
        if broker not in self.asking:
            return
        leader, epoch, rounds, answer = self.asking.pop(broker)
        p = self.r.parts[broker]
        if p.role != Role.FOLLOWER or p.leader_id != leader or p.leader_epoch != epoch:
            event("a truncation answer after the leader moved: dropped")
            rounds.close()
            return
        try:
            while True:
                question = rounds.send(answer)
                answer = self._answer(leader, question)
        except StopIteration as done:
            if done.value is not None:
                p.needs_truncation = False

    def _alter_partition(self) -> None:
        """The controller answers a leader's pending ISR proposal: committed if it
        comes from the current leader epoch and names no fenced broker, else refused."""
        r = self.r
        for b in BROKERS:
            p = r.parts[b]
            if p.role != Role.LEADER or p.pending_isr is None:
                continue
            proposed = sorted(p.pending_isr)
            if p.leader_epoch == r.epoch and not set(proposed) & self.fenced:
                r.isr, r.partition_epoch = proposed, r.partition_epoch + 1
                p.apply_isr_change(r.isr, r.partition_epoch)
            else:
                p.reject_isr_change()

    @rule(broker=st.sampled_from(BROKERS), clean=st.booleans())
    def restart(self, broker, clean):
        """A restarted broker's connections close: what was in flight to it fails."""
        if any(f[1] == broker for f in self.in_flight):
            self.in_flight.clear()
        self.asking.pop(broker, None)  # its fetchers are gone
        self.r.restart(broker, clean)
        self._apply(broker)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def no_value_twice(self):
        if hasattr(self, "r"):
            for b in BROKERS:
                written_once(self.r, b)

    @invariant()
    def acknowledged_values_stay(self):
        if not hasattr(self, "r") or self.r.leader < 0:
            return
        leader = self.r.parts[self.r.leader]
        if leader.role != Role.LEADER or leader.leader_epoch != self.r.epoch:
            return
        log = dict(values(leader.log))
        for seq, offset in self.acked.items():
            assert log.get(offset) == b"v-%d" % seq, f"acknowledged v-{seq} is not at {offset}"


TestIdempotentFailover = IdempotentFailoverMachine.TestCase
TestIdempotentFailover.settings = settings(max_examples=100, stateful_step_count=120, deadline=None)
