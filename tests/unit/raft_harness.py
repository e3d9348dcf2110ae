"""A simulated network of KafkaRaftClients for the raft tests: the clock and the
messages are ours, every voter is stepped by hand (no sockets, no threads).

A crashed voter loses its in-flight messages (its connections die with it) and is
rebuilt on restart from what survives a crash: its RaftLog and its
QuorumStateStore. `cut` holds the links (a, b) that drop everything; a `paused`
voter (SIGSTOP) keeps its state but neither polls nor receives (what is sent to it
is lost, as by a connection that times out)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable

from kafkalab.raft.kafka_raft_client import KafkaRaftClient, LeaderChangeMessage
from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state_store import MemoryQuorumStateStore, QuorumStateStore
from kafkalab.raft.raft_log import LogEntry, RaftLog
from kafkalab.raft.raft_message import RaftMessage
from kafkalab.raft.snapshot import decode_snapshot

# short request timeout: a dropped request is retried well before the fetch timeout
TEST_CONFIG = QuorumConfig(
    election_timeout_ms=500, fetch_timeout_ms=1000, request_timeout_ms=200, fetch_max_entries=5
)


class RaftNetwork:
    def __init__(
        self,
        voters: Iterable[int] = (1, 2, 3),
        config: QuorumConfig = TEST_CONFIG,
        seed: int = 0,
        store_factory: Callable[[int], QuorumStateStore] | None = None,
        logs: dict[int, RaftLog] | None = None,
    ) -> None:
        self.voters = sorted(voters)
        self.config = config
        self.rng = random.Random(seed)
        self.now = 0
        self.logs = logs or {v: RaftLog() for v in self.voters}
        factory = store_factory or (lambda _v: MemoryQuorumStateStore())
        self.stores = {v: factory(v) for v in self.voters}
        self.clients: dict[int, KafkaRaftClient] = {}
        self.incarnation = dict.fromkeys(self.voters, 0)
        self.down: set[int] = set()
        self.paused: set[int] = set()
        self.cut: set[frozenset[int]] = set()
        self.in_flight: list[RaftMessage] = []
        self.delivered: Counter[str] = Counter()  # message types delivered, by class name
        for v in self.voters:
            self._build(v)

    def _build(self, v: int) -> None:
        self.clients[v] = KafkaRaftClient(
            v,
            self.voters,
            self.logs[v],
            self.stores[v],
            self.config,
            random.Random(self.rng.randrange(2**32)),
            self.now,
        )

    # -- faults ------------------------------------------------------------------------------

    def crash(self, v: int) -> None:
        self.down.add(v)
        self.in_flight = [m for m in self.in_flight if m.destination_id != v and m.source_id != v]

    def restart(self, v: int) -> KafkaRaftClient:
        self.crash(v)
        self.down.discard(v)
        self.incarnation[v] += 1
        self._build(v)
        return self.clients[v]

    def isolate(self, v: int) -> None:
        self.cut |= {frozenset((v, o)) for o in self.voters if o != v}

    def heal(self) -> None:
        self.cut.clear()

    def live(self) -> list[KafkaRaftClient]:
        return [self.clients[v] for v in self.voters if v not in self.down]

    # -- stepping ----------------------------------------------------------------------------

    def poll(self, v: int) -> None:
        if v not in self.down and v not in self.paused:
            self.in_flight.extend(self.clients[v].poll(self.now))

    def deliver(self, message: RaftMessage) -> None:
        if message.destination_id in self.down | self.paused or message.source_id in self.down:
            return
        if frozenset((message.source_id, message.destination_id)) in self.cut:
            return
        self.delivered[type(message.data).__name__] += 1
        self.in_flight.extend(self.clients[message.destination_id].handle(message, self.now))

    def step(self, ms: int = 10) -> None:
        """Time passes by `ms`, every live voter polls, and every message in flight is
        delivered once (what they send in answer travels in the next step)."""
        self.now += ms
        for v in self.voters:
            self.poll(v)
        batch, self.in_flight = self.in_flight, []
        for m in batch:
            self.deliver(m)

    def run(self, ms: int, step: int = 10) -> None:
        for _ in range(ms // step):
            self.step(step)

    def run_until(self, predicate: Callable[[], bool], max_ms: int, step: int = 10) -> int:
        """Step until `predicate()`; the simulated time it took. Fails after `max_ms`."""
        start = self.now
        while not predicate():
            if self.now - start > max_ms:
                raise AssertionError(f"not reached within {max_ms} simulated ms")
            self.step(step)
        return self.now - start

    def leaders(self) -> list[KafkaRaftClient]:
        return [c for c in self.live() if c.is_leader()]

    def leader(self) -> KafkaRaftClient | None:
        """The live leader of the highest epoch, if any."""
        leaders = sorted(self.leaders(), key=lambda c: c.epoch)
        return leaders[-1] if leaders else None

    def has_stable_leader(self) -> bool:
        """One leader, and every live voter follows it in its epoch."""
        leader = self.leader()
        return leader is not None and all(
            c.epoch == leader.epoch and c.leader_id == leader.local_id for c in self.live()
        )


def check_log_matching(a: tuple[LogEntry, ...], b: tuple[LogEntry, ...]) -> None:
    for i in range(min(len(a), len(b)) - 1, -1, -1):
        if a[i].epoch == b[i].epoch:
            assert a[: i + 1] == b[: i + 1], f"logs agree on epoch at offset {i} but not before"
            return


# -- snapshots whose records are the log they replace -----------------------------------------
# A test state machine whose state is the log itself: its snapshot holds every entry below
# the snapshot's end offset, so `full_log` rebuilds a voter's whole log from its snapshot
# and its entries, and the invariants compare whole logs across snapshots.


def entry_to_record(entry: LogEntry) -> dict:
    record = entry.record
    if isinstance(record, LeaderChangeMessage):
        record = {"lc": [record.leader_id, list(record.voters), list(record.granting_voters)]}
    return {"o": entry.offset, "e": entry.epoch, "r": record}


def record_to_entry(record: dict) -> LogEntry:
    value = record["r"]
    if isinstance(value, dict) and "lc" in value:
        leader, voters, granting = value["lc"]
        value = LeaderChangeMessage(leader, tuple(voters), tuple(granting))
    return LogEntry(record["o"], record["e"], value)


def full_log(log: RaftLog) -> tuple[LogEntry, ...]:
    """The whole log from offset 0: the entries the snapshot at the log start holds,
    then the log's own entries."""
    snapshot = log.earliest_snapshot_id
    prefix: tuple[LogEntry, ...] = ()
    if snapshot is not None and snapshot.offset == log.log_start_offset:
        data = log.read_snapshot(snapshot)
        assert data is not None
        prefix = tuple(record_to_entry(r) for r in decode_snapshot(data).records)
        assert [e.offset for e in prefix] == list(range(snapshot.offset))
        assert not prefix or prefix[-1].epoch == snapshot.epoch
    return prefix + log.entries


def snapshot_state(client: KafkaRaftClient, end_offset: int):
    """Snapshot `client` at `end_offset` with the log-as-state machine's records."""
    records = [entry_to_record(e) for e in full_log(client.log)[:end_offset]]
    return client.create_snapshot(end_offset, records)
