"""KRaft under hypothesis: 3 or 5 voters on a network that drops, delays, reorders and
duplicates messages, with crashes, restarts (rebuilt from the quorum-state store and
the log) and time moving. After every step:

    ElectionSafety    at most one leader per epoch, over the whole run (KIP-595)
    LogMatching       two logs with an entry of the same offset and epoch agree on
                      every entry up to it
    committed stays   every voter's log below its high watermark agrees with one
                      committed sequence that only grows, and every leader's log holds
                      all of it (no committed record is lost or changed: KAFKA-12619's
                      rule is what keeps this true after elections)
    HW monotonic      a voter's high watermark never goes back while it runs

Liveness (a leader is eventually elected) is not an invariant: it is the example
test_liveness_smoke_* in test_raft_client.py, on a healthy network.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings, target
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from raft_harness import TEST_CONFIG, RaftNetwork, check_log_matching

from kafkalab.raft.raft_log import LogEntry

# one entry a Fetch: followers hold every length of a leader's tail, not only all of it
CONFIG = replace(TEST_CONFIG, fetch_max_entries=1)


class KRaftQuorum(RuleBasedStateMachine):
    @initialize(size=st.sampled_from([3, 3, 5]), seed=st.integers(0, 2**16))
    def start(self, size: int, seed: int) -> None:
        self.net = RaftNetwork(voters=range(1, size + 1), config=CONFIG, seed=seed)
        self.leader_of_epoch: dict[int, int] = {}
        self.committed: tuple[LogEntry, ...] = ()
        self.hw_seen: dict[tuple[int, int], int] = {}
        self.appended = 0

    # -- time and messages ------------------------------------------------------------------

    @rule(ms=st.integers(1, 1200), everyone=st.booleans())
    def time_passes(self, ms: int, everyone: bool) -> None:
        """The clock moves; every voter polls, or none (then each when hypothesis says)."""
        self.net.now += ms
        if everyone:
            for v in self.net.voters:
                self.net.poll(v)

    @rule(data=st.data())
    def voter_polls(self, data: st.DataObject) -> None:
        """One voter runs its timers: elections start where hypothesis chooses."""
        self.net.poll(data.draw(st.sampled_from(self.net.voters)))

    @precondition(lambda self: self.net.in_flight)
    @rule(index=st.integers(0, 10**6), duplicate=st.booleans())
    def deliver_one(self, index: int, duplicate: bool) -> None:
        """Any message in flight, not only the oldest (delay, reorder); maybe twice."""
        m = self.net.in_flight.pop(index % len(self.net.in_flight))
        if duplicate:
            self.net.in_flight.append(m)
        self.net.deliver(m)

    @precondition(lambda self: self.net.in_flight)
    @rule(index=st.integers(0, 10**6))
    def drop_one(self, index: int) -> None:
        self.net.in_flight.pop(index % len(self.net.in_flight))

    @rule(ms=st.integers(20, 3000), load=st.booleans())
    def network_works_for_a_while(self, ms: int, load: bool) -> None:
        """For `ms`, every 20 ms, everything in flight arrives (except on cut links),
        and under load the leader appends a record each time: elections and fetches
        finish between the faults, and followers lag behind a growing log."""
        for _ in range(ms // 20):
            if load:
                self.append_on_leader(1)
            self.net.step(20)

    @rule(a=st.integers(1, 5), b=st.integers(1, 5))
    def cut_link(self, a: int, b: int) -> None:
        if a != b:
            self.net.cut.add(frozenset((a, b)))

    @rule()
    def heal_links(self) -> None:
        self.net.heal()

    # -- voters -----------------------------------------------------------------------------

    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        self.net.crash(data.draw(st.sampled_from(self.net.voters)))

    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        self.net.restart(data.draw(st.sampled_from(self.net.voters)))

    @rule(count=st.integers(1, 3))
    def append_on_leader(self, count: int) -> None:
        leader = self.net.leader()
        if leader is not None:
            records = [f"r{self.appended + i}" for i in range(count)]
            self.appended += count
            leader.append(records, self.net.now)

    @rule()
    def leader_resigns(self) -> None:
        leader = self.net.leader()
        if leader is not None:
            self.net.in_flight.extend(leader.resign(self.net.now))

    def teardown(self) -> None:
        # steer the search to runs with many elections and much committed, where the
        # safety rules have something to guard
        target(float(len(self.leader_of_epoch)), label="epochs with a leader")
        target(float(len(self.committed)), label="records committed")

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def election_safety(self) -> None:
        for c in self.net.leaders():
            first = self.leader_of_epoch.setdefault(c.epoch, c.local_id)
            assert first == c.local_id, f"two leaders in epoch {c.epoch}: {first}, {c.local_id}"

    @invariant()
    def log_matching(self) -> None:
        logs = [self.net.logs[v].entries for v in self.net.voters]
        for i, a in enumerate(logs):
            for b in logs[i + 1 :]:
                check_log_matching(a, b)

    @invariant()
    def committed_records_are_never_lost(self) -> None:
        for c in self.net.live():
            prefix = c.log.entries[: c.high_watermark]
            n = min(len(prefix), len(self.committed))
            assert prefix[:n] == self.committed[:n], (
                f"voter {c.local_id} changed a committed record"
            )
            if len(prefix) > len(self.committed):
                self.committed = prefix
        for c in self.net.leaders():
            held = c.log.entries[: len(self.committed)]
            assert held == self.committed, f"leader {c.local_id} lacks committed records"

    @invariant()
    def high_watermark_never_goes_back(self) -> None:
        for c in self.net.live():
            key = (c.local_id, self.net.incarnation[c.local_id])
            assert c.high_watermark >= self.hw_seen.get(key, 0)
            self.hw_seen[key] = c.high_watermark


KRaftQuorum.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_kraft_quorum = KRaftQuorum.TestCase
