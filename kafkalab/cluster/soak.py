"""A soak: many faults in a row on a live cluster, then the Jepsen-grade checker's verdict.

    report = run_soak(faults=100, seed=0)          # random kinds, chosen by the seed
    print(report.table())
    assert report.valid

    kafkalab soak --faults 100 --seed 0 [--controllers 3] [--overlap] [--kinds KIND...]

A three-broker cluster (RF=3, min.insync.replicas=2, the labs' fast failover
timeouts) takes a steady idempotent acks=all librdkafka load (ProducerWorkload)
while a consumer reads along from offset 0. One fault at a time, each kind
chosen with `random.Random(seed)` (`schedule`):

    leader-kill      SIGKILL the partition's leader; timed: the kill -> the
                     first record acknowledged by its successor (the failover
                     time); then the broker is started again
    follower-pause   SIGSTOP a follower for `pause_s`, then SIGCONT (the
                     controller fences it meanwhile, the ISR shrinks and grows)
    power-failure    SIGKILL a broker (any one, the leader too) and cut its logs
                     back to their recovery points: unflushed data is gone
    link-cut         cut the replication link between the leader and a follower
                     both ways for `cut_s` (longer than replica.lag.time.max.ms:
                     the follower leaves the ISR), then heal it
    rolling-restart  SIGTERM every broker in turn (a controlled shutdown each),
                     each once nothing is under-replicated

and, only when asked for (EXTRA_KINDS):

    leader-pause     SIGSTOP the leader until a successor leads, SIGCONT it
                     `pause_s` later: a zombie leader that wakes up believing it
                     still leads, with producers' requests in its sockets

With a KRaft quorum of controllers (`run_soak(controllers=3)`, `benchmarks/soak.py
--controllers 3`; the quorum's timeouts LABS_QUORUM, and a broker session that
outlasts a controller failover, LABS_QUORUM_SESSION_MS) the default mix adds
its faults (CONTROLLER_KINDS), each watched through DescribeQuorum:

    controller-kill           SIGKILL the active controller; timed: the kill -> a
                              successor leads in a higher epoch -> the next acks=all
                              record acknowledged; then it is started again
    controller-pause          SIGSTOP the active controller until the others elect
                              a successor (past the fetch timeout), SIGCONT: it must
                              come back a follower, caught up with the new leader
    controller-power-failure  SIGKILL a controller (the active one or a standby,
                              chosen by the seed) and cut its metadata log back to
                              its recovery point; the active one is succeeded
    quorum-partition          cut the active controller from both other voters,
                              both ways: they elect a successor and it resigns
                              (check-quorum: no fetch from a majority); healed,
                              it follows

The nemeses' faults and lazyfs's power failures (NEMESIS_KINDS; asked for by
name, `kinds=`, not in the default mix). A partition is a Jepsen topology over
hosts (kafkalab.cluster.nemesis: host i is broker i and, with controllers=3,
controller 300i too, so a partition cuts replication, Raft and broker<->controller
traffic alike), in refuse or drop mode chosen by the seed, held for `cut_s` (past
the brokers' session timeout and replica.lag.time.max.ms), then healed:

    partition-one         one host cut off from the others, both ways (any host,
                          the leader's too)
    partition-leader      the partition's leader's host cut off alone (Jepsen's
                          `primaries`): with a quorum it is fenced and a follower
                          leads; with the single controller (on no host, it hears
                          everyone) it keeps leading with an ISR of itself
    partition-ring        majorities-ring: each host hears a majority, no two the
                          same (one-way cuts in a ring)
    clients-cut           the leader deaf to its clients (the soak's producer and
                          read-along consumer), drop mode: their requests are never
                          answered and they wait out their request timeout; the
                          idempotent producer's retries must not duplicate
    clock-step            a node's (broker's, or a voter's) wall clock stepped by
                          an hour, forward or back, for `cut_s`, then the real
                          clock again (it stamps, rolls and retains by it; its
                          timers are monotonic)
    lazyfs-power-failure  a node (a broker; with a quorum a voter too) loses power
                          as lazyfs has it: every file back to its last fsync,
                          renames and new files undone, a log file possibly torn
                          (seeded); then restarted. The soak's cluster keeps the
                          durability ledger (`kafkalab.lazyfs.enable`) when this
                          kind is in the mix

Why none of them may lose an acknowledged record (RF=3, min.insync.replicas=2,
acks=all, an idempotent producer): a record is acknowledged only once every
replica of the ISR has it and the ISR has at least two members. A partition
takes at most one host away from the others (the ring cuts no host from a
majority): a leader cut off from its followers acknowledges nothing more
(acks=all waits for every ISR member, and an ISR shrunk to the leader alone is
below min.insync.replicas: NOT_ENOUGH_REPLICAS), and a leader fenced while cut
off had acknowledged nothing the followers of its ISR lack, one of which leads
next. A client cut is no fault of replication at all: what was
written was written, a dropped request never reaches the log, and a retry of
one that did carries the same producer id, epoch and sequence (a duplicate is
answered, not appended). A clock step moves no timer the protocol relies on.
A power failure of one node loses only what that node had not fsynced: every
acknowledged record is on at least one other member of the ISR, the node
comes back fenced, as a follower, truncates to its leader and catches up.

With `overlap=True` (`--overlap`) some neighbouring faults of the schedule run
one inside the other: the second starts while the first is in force, and the
first is healed after it (`overlaps(plan, seed)` picks them; OVERLAPS lists the
pairs and why: at most one broker out of the ISR and at most one controller out
at a time, so both the partition, RF=3 with min.insync.replicas=2, and a quorum
of three keep a majority that makes progress).

After each fault the soak waits until the broker is back and the partition is
fully replicated again and settled (every replica fetched past the heal, the
ISR whole in every replica's view, no ISR change pending: `Soak.healed`; with a
quorum, every voter caught up too) (a fault that never heals is a hang: the soak stops and
says where). At the end the load stops, the healed partition is read back and
every replica's batches below the high watermark are compared byte for byte
(`kafkalab.cluster.history.check`). The whole history (every send with its
outcome: ok, or unknown when the client gave up; every record the consumer
read; the final read) is judged by the Jepsen-grade checker
(`kafkalab.cluster.checker`, see `judge`): no lost write, no duplicate, nothing
acknowledged unseen at the end, no poll-skip or nonmonotonic-poll of the
read-along consumer, no anomaly outside the allowed set. `SoakReport.valid`
needs that verdict valid AND byte-identical replicas; its table counts each
anomaly (per process for poll-skip and nonmonotonic-poll).
"""

from __future__ import annotations

import argparse
import bisect
import logging
import math
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.cluster import checker
from kafkalab.cluster.failover import (
    LABS_FAILOVER,
    LABS_PRODUCER,
    LABS_QUORUM,
    LABS_QUORUM_SESSION_MS,
    current_leader,
    read_timeline,
)
from kafkalab.cluster.history import History, Verdict, check
from kafkalab.cluster.local_cluster import SINGLE_CONTROLLER_ID, LocalCluster
from kafkalab.cluster.metadata_quorum import describe_quorum
from kafkalab.cluster.nemesis import (
    ClientsCut,
    ClockStep,
    Nemesis,
    expand,
    hosts,
    isolate_one,
    isolate_primaries,
    majorities_ring,
)
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.errors import KafkaError
from kafkalab.kinds import Kind
from kafkalab.server.link_faults import CutMode, uncut
from kafkalab.server.replica_state import read_replica_state


class FaultKind(Kind):
    """What a fault does (the module docstring says each); the value is the name the
    CLI takes and the report prints."""

    LEADER_KILL = "leader-kill"
    FOLLOWER_PAUSE = "follower-pause"
    POWER_FAILURE = "power-failure"
    LINK_CUT = "link-cut"
    ROLLING_RESTART = "rolling-restart"
    LEADER_PAUSE = "leader-pause"
    # A controller quorum's faults (run_soak(controllers=3)); the target is a
    # controller's node id.
    CONTROLLER_KILL = "controller-kill"
    CONTROLLER_PAUSE = "controller-pause"
    CONTROLLER_POWER_FAILURE = "controller-power-failure"
    QUORUM_PARTITION = "quorum-partition"
    # The nemeses (kafkalab.cluster.nemesis) and lazyfs's power failure: asked for
    # by name (NEMESIS_KINDS), on either kind of controller.
    PARTITION_ONE = "partition-one"
    PARTITION_LEADER = "partition-leader"
    PARTITION_RING = "partition-ring"
    CLIENTS_CUT = "clients-cut"
    CLOCK_STEP = "clock-step"
    LAZYFS_POWER_FAILURE = "lazyfs-power-failure"


#: The default mix.
FAULT_KINDS = (
    FaultKind.LEADER_KILL,
    FaultKind.FOLLOWER_PAUSE,
    FaultKind.POWER_FAILURE,
    FaultKind.LINK_CUT,
    FaultKind.ROLLING_RESTART,
)
#: Kinds a soak applies only when asked for (`kinds=`): not in the default mix.
EXTRA_KINDS = (FaultKind.LEADER_PAUSE,)
#: Every fault of brokers.
BROKER_KINDS = FAULT_KINDS + EXTRA_KINDS
#: The faults of a controller quorum: in the default mix with controllers=3.
CONTROLLER_KINDS = (
    FaultKind.CONTROLLER_KILL,
    FaultKind.CONTROLLER_PAUSE,
    FaultKind.CONTROLLER_POWER_FAILURE,
    FaultKind.QUORUM_PARTITION,
)
#: The nemeses' faults and lazyfs's power failure (not in the default mix).
NEMESIS_KINDS = (
    FaultKind.PARTITION_ONE,
    FaultKind.PARTITION_LEADER,
    FaultKind.PARTITION_RING,
    FaultKind.CLIENTS_CUT,
    FaultKind.CLOCK_STEP,
    FaultKind.LAZYFS_POWER_FAILURE,
)
ALL_KINDS = BROKER_KINDS + CONTROLLER_KINDS + NEMESIS_KINDS

#: The pairs (outer, inner) that may overlap (`run_soak(overlap=True)`): the inner
#: fault starts while the outer is in force. With RF=3 and min.insync.replicas=2 a
#: partition makes progress with two brokers in its ISR, and a quorum of three with
#: two voters; so a pair may take at most one broker and at most one controller out:
#:   - a follower paused or cut from the leader, while any controller fault runs:
#:     one broker out of the ISR, one voter (or the active controller) out;
#:   - any controller fault in force (the killed, paused, powered-off or
#:     partitioned voter stays so) while a broker fault runs (a leader kill, a
#:     follower pause, a power failure, a link cut): partitions elect and shrink
#:     their ISR through the new active controller;
#:   - a link cut between the leader and a follower while the leader is killed:
#:     the cut follower may still be in the ISR (an ISR member has everything
#:     acknowledged, so it may lead), whoever leads next has a link to the third
#:     broker, and the killed leader comes back as a follower.
#:   - a clock step with any fault but a rolling restart or a leader pause, either
#:     one inside the other: it takes no broker and no voter out (timers are
#:     monotonic), so the other fault's majority is untouched;
#:   - the clients cut off from the leader inside a controller fault, or inside a
#:     follower paused or cut off (one broker out of the ISR): replication and
#:     the quorum are untouched by it, only the clients wait.
#: Not paired: a partition or a lazyfs power failure with anything but a clock
#: step (each takes a host, broker and voter, out: with a second fault a
#: partition or the quorum would be left without a majority); two broker faults that take two brokers out of the ISR at once (two
#: pauses, a pause and a power failure: acks=all would stop, not progress), two
#: controller faults (a quorum of three loses its majority), a rolling restart or
#: a leader pause (each already moves leaders and takes brokers out in turn).
_ONE_BROKER_OUT = (FaultKind.FOLLOWER_PAUSE, FaultKind.LINK_CUT)
_UNDER_A_CONTROLLER_FAULT = (
    FaultKind.LEADER_KILL,
    FaultKind.FOLLOWER_PAUSE,
    FaultKind.POWER_FAILURE,
    FaultKind.LINK_CUT,
)
_BESIDE_A_CLOCK_STEP = (
    FAULT_KINDS[:-1]  # not a rolling restart
    + CONTROLLER_KINDS
    + tuple(k for k in NEMESIS_KINDS if k != FaultKind.CLOCK_STEP)
)
OVERLAPS = frozenset(
    [(outer, inner) for outer in _ONE_BROKER_OUT for inner in CONTROLLER_KINDS]
    + [(outer, inner) for outer in CONTROLLER_KINDS for inner in _UNDER_A_CONTROLLER_FAULT]
    + [(FaultKind.LINK_CUT, FaultKind.LEADER_KILL)]
    + [(FaultKind.CLOCK_STEP, other) for other in _BESIDE_A_CLOCK_STEP]
    + [(other, FaultKind.CLOCK_STEP) for other in _BESIDE_A_CLOCK_STEP]
    + [(outer, FaultKind.CLIENTS_CUT) for outer in CONTROLLER_KINDS + _ONE_BROKER_OUT]
)

#: Broker settings of the soak on top of LABS_FAILOVER's: a follower that cannot
#: fetch leaves the ISR after 2 s (Kafka's default, 30 s, would hold every acks=all
#: write for 30 s on each cut link).
SOAK_BROKER_PROPS = {"replica.lag.time.max.ms": "2000"}


#: With the nemeses in the mix: a follower gives up on a fetch no one answers (a
#: partition in drop mode) after 5 s, not Kafka's 30 s, and so fetches again soon
#: after the heal.
SOAK_NEMESIS_BROKER_PROPS = {"replica.socket.timeout.ms": "5000"}
#: ... and the soak's clients give up on an unanswered request (clients cut off in
#: drop mode) after 5 s, not librdkafka's 30 s (60 s for a consumer's socket).
SOAK_NEMESIS_CLIENT = {"socket.timeout.ms": 5000}
SOAK_NEMESIS_PRODUCER = {**SOAK_NEMESIS_CLIENT, "request.timeout.ms": 5000}
#: What a node keeps for lazyfs's power failures (kafkalab.storage.durability_ledger).
LAZYFS = {"kafkalab.lazyfs.enable": "true"}
#: A leader kill's detail when the leader was its ISR's only member: unavailable, by
#: Kafka's rule, until it restarted (no failover measured).
ISR_OF_ONE = "ISR of the leader alone: unavailable until it restarted"
#: A clock step, in seconds (forward or back, chosen by the seed).
CLOCK_STEP_S = 3600.0

#: librdkafka logs every refused connection (level 3) and closed one (level 4 to
#: 6); a soak kills brokers on purpose, so its clients log only critical errors.
QUIET_CLIENT = {"log_level": 2}
#: librdkafka's debug contexts the producer and the read-along consumer log with
#: `client_log`: what they asked whom (protocol), their connections (broker),
#: leaders (topic), messages (msg), idempotence (eos: producer id, epoch, sequence)
#: and fetching (fetch: each partition's fetch state, offset validation)
CLIENT_DEBUG = "eos,msg,broker,topic,protocol,fetch"


def parse_kinds(kinds: Sequence[str]) -> tuple[FaultKind, ...]:
    """`kinds` as FaultKinds, in order; UnknownKindError (a ValueError) names the
    valid ones for a name that is none."""
    return tuple(FaultKind.parse(k, "fault kind") for k in kinds)


def default_kinds(controllers: int = 1) -> tuple[FaultKind, ...]:
    """The default mix: with a controller quorum, its faults too."""
    return FAULT_KINDS + (CONTROLLER_KINDS if controllers > 1 else ())


def schedule(faults: int, seed: int, kinds: Sequence[str] = FAULT_KINDS) -> list[FaultKind]:
    """The kinds of the soak's faults, in order: `random.Random(seed)` choosing
    among `kinds` (the brokers each fault hits are chosen by a second generator,
    so a seed's schedule does not depend on them)."""
    choices = list(parse_kinds(kinds))
    rng = random.Random(seed)
    return [rng.choice(choices) for _ in range(faults)]


def overlaps(plan: Sequence[str], seed: int) -> list[int]:
    """Where a plan's faults overlap: each index i where fault i + 1 starts while
    fault i is in force. Wherever two neighbours form a pair of OVERLAPS (and
    neither already overlaps another), a third generator of the seed decides,
    heads or tails; so the plan itself does not depend on it."""
    kinds = parse_kinds(plan)
    rng = random.Random(f"overlaps-{seed}")
    out, i = [], 0
    while i < len(kinds) - 1:
        if (kinds[i], kinds[i + 1]) in OVERLAPS and rng.random() < 0.5:
            out.append(i)
            i += 2
        else:
            i += 1
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class ReadAlong:
    """A thread with a librdkafka consumer assigned to one partition from offset 0,
    recording every record it reads into the history (as reader `name`). From
    librdkafka's statistics (every 2 s) it keeps the partition's fetch state and
    leader as the client saw them last: where a consumer that stopped reading
    stopped (offset-query, validate-epoch-wait, active...)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        history: History,
        partition: int = 0,
        name: str = "read-along",
        config: dict | None = None,
    ) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.topic, self.partition, self.history, self.name = topic, partition, history, name
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"kafkalab-{name}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "statistics.interval.ms": 2000,
                "stats_cb": self._on_stats,
                **(config or {}),
            }
        )
        self.consumer.assign([TopicPartition(topic, partition, 0)])
        #: librdkafka's last word on the partition: "<fetch_state>, leader <id>"
        self.fetch_state = ""
        self.read = 0
        self.last_offset = -1
        self.gaps: list[tuple[int, int]] = []  # (last offset read, next offset read)
        self.errors: Counter[str] = Counter()  # client-side errors seen (transient ones too)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def _on_stats(self, stats: str) -> None:
        import json

        p = json.loads(stats).get("topics", {}).get(self.topic, {}).get("partitions", {})
        p = p.get(str(self.partition))
        if p:
            self.fetch_state = f"{p.get('fetch_state')}, leader {p.get('leader')}"

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.consumer.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                self.errors[m.error().name()] += 1
                continue
            offset = m.offset()
            self.history.read(self.topic, m.partition(), offset, m.value(), reader=self.name)
            # The soak's records are contiguous: no transactions, no compaction.
            if offset > self.last_offset + 1:
                self.gaps.append((self.last_offset, offset))
            self.last_offset = max(self.last_offset, offset)
            self.read += 1

    def start(self) -> ReadAlong:
        self._thread.start()
        return self

    def wait_for(self, offset: int, timeout_s: float = 60) -> bool:
        """Wait until the consumer has read `offset`; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self.last_offset < offset and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.last_offset >= offset

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close()


@dataclass
class FaultRecord:
    number: int
    kind: FaultKind
    target: int  # the broker it hit (-1: every broker, a rolling restart)
    was_leader: bool
    seconds: float  # the fault applied -> fully replicated again
    failover_ms: float | None = None
    #: the number of the fault in force while this one ran (an overlap), if any
    during: int | None = None
    #: what a nemesis did (its cuts and mode, the clock step), if it says
    detail: str = ""


@dataclass
class SoakReport:
    faults: int  # asked for
    seed: int
    kinds: tuple[FaultKind, ...]
    controllers: int = 1
    records: list[FaultRecord] = field(default_factory=list)
    error: str | None = None  # why the soak stopped early (a hang, a failed step)
    sent: int = 0
    acknowledged: int = 0
    failed_sends: int = 0  # the client gave up (may or may not be in the log)
    failed_by_error: dict[str, int] = field(default_factory=dict)  # librdkafka's names
    unknown: int = 0  # no outcome at the end
    final_records: int = 0
    read: int = 0
    read_gaps: list[tuple[int, int]] = field(default_factory=list)
    read_errors: dict[str, int] = field(default_factory=dict)  # the read-along client's
    read_all: bool = False  # the consumer read up to the last record of the final log
    read_fetch_state: str = ""  # the read-along client's own, at the end (librdkafka's stats)
    high_watermark: int = 0
    replicas_compared: int = 0
    batches_compared: int = 0
    #: the Jepsen-grade checker's verdict on every op of the history
    verdict: checker.Verdict | None = None
    #: kafkalab.cluster.history's verdict: its replica comparison, byte for byte
    final_log: Verdict | None = None
    elapsed_s: float = 0.0

    @property
    def survived(self) -> int:
        return len(self.records)

    @property
    def by_kind(self) -> dict[FaultKind, int]:
        counts = Counter(r.kind for r in self.records)
        return {k: counts[k] for k in self.kinds if counts[k]}

    @property
    def failovers_ms(self) -> list[float]:
        """Leader kill -> the first record its successor acknowledged, each."""
        return [
            r.failover_ms
            for r in self.records
            if r.kind == FaultKind.LEADER_KILL and r.failover_ms is not None
        ]

    @property
    def unavailable(self) -> list[int]:
        """The faults that killed a leader alone in its ISR (no successor may lead)."""
        return [r.number for r in self.records if r.detail == ISR_OF_ONE]

    @property
    def controller_failovers_ms(self) -> list[float]:
        """Active controller killed -> a successor leads in a higher epoch and the
        next acks=all record is acknowledged, each."""
        return [
            r.failover_ms
            for r in self.records
            if r.kind == FaultKind.CONTROLLER_KILL and r.failover_ms is not None
        ]

    @property
    def overlapped(self) -> list[tuple[FaultKind, FaultKind]]:
        """(outer, inner) of each overlap applied."""
        kinds = {r.number: r.kind for r in self.records}
        return [(kinds[r.during], r.kind) for r in self.records if r.during is not None]

    @property
    def byte_identical(self) -> bool:
        return (
            self.final_log is not None
            and not self.final_log.diverged
            and self.replicas_compared > 1
            and self.batches_compared > 0
        )

    @property
    def valid(self) -> bool:
        return (
            self.error is None
            and self.survived == self.faults
            and self.verdict is not None
            and self.verdict.valid  # the checker's: every anomaly found is allowed
            and self.acknowledged > 0
            and self.failed_sends == 0  # a send the client gave up on is a failure too
            and self.byte_identical
            and not self.read_gaps
            and self.read_all
        )

    def anomalies(self, name: str) -> list[dict]:
        """The checker's cases of anomaly `name` (none before it judged)."""
        return [] if self.verdict is None else self.verdict.anomalies.get(name, [])

    def per_process(self, name: str) -> dict[str, int]:
        """How many cases of a per-process anomaly (poll-skip, nonmonotonic-poll)
        each process had."""
        return dict(Counter(case["process"] for case in self.anomalies(name)))

    def rows(self) -> list[tuple[str, str]]:
        v = self.verdict
        fo = self.failovers_ms

        def ms(x: float | None) -> str:
            return "-" if x is None else f"{x:,.0f} ms"

        def count(name: str) -> str:
            return "-" if v is None else str(len(self.anomalies(name)))

        def by_process(name: str) -> str:
            counts = self.per_process(name)
            return ", ".join(f"{p} {n}" for p, n in sorted(counts.items())) or "0"

        kinds = ", ".join(f"{k} {n}" for k, n in self.by_kind.items()) or "-"
        shown = {"lost-write", "duplicate", "unseen", "poll-skip", "nonmonotonic-poll"}
        others = "-"
        if v is not None:
            rest = {n: len(c) for n, c in v.anomalies.items() if n not in shown}
            others = ", ".join(f"{n} {c}" for n, c in sorted(rest.items())) or "none"
        unseen = sum(case["count"] for case in self.anomalies("unseen"))
        return [
            ("faults survived", f"{self.survived} of {self.faults} (seed {self.seed})"),
            ("by kind", kinds),
            ("records sent", f"{self.sent:,}"),
            ("acknowledged", f"{self.acknowledged:,}"),
            (
                "failed sends / unknown",
                f"{self.failed_sends} / {self.unknown}"
                + "".join(f", {e} x{n}" for e, n in sorted(self.failed_by_error.items())),
            ),
            ("lost (lost-write)", count("lost-write")),
            ("duplicated", count("duplicate")),
            ("unseen at the end", "-" if v is None else str(unseen)),
            ("poll-skip", "-" if v is None else by_process("poll-skip")),
            ("nonmonotonic-poll", "-" if v is None else by_process("nonmonotonic-poll")),
            ("other anomalies", others),
            (
                "read along",
                f"{self.read:,} ({len(self.read_gaps)} gaps"
                + "".join(f", {name} x{n}" for name, n in sorted(self.read_errors.items()))
                + ")"
                + ("" if self.read_all else f"; not all: fetch state {self.read_fetch_state}"),
            ),
            (
                "failover (leader kill -> ack)",
                f"p50 {ms(percentile(fo, 50))}, p99 {ms(percentile(fo, 99))}, "
                f"max {ms(max(fo, default=None))} (n={len(fo)})"
                + (
                    f"; {len(self.unavailable)} leader(s) killed alone in the ISR: "
                    f"unavailable until restarted (faults {self.unavailable})"
                    if self.unavailable
                    else ""
                ),
            ),
            *(
                [
                    (
                        "controller failover (kill -> new epoch -> ack)",
                        f"p50 {ms(percentile(cfo, 50))}, p99 {ms(percentile(cfo, 99))}, "
                        f"max {ms(max(cfo, default=None))} (n={len(cfo)})",
                    )
                ]
                if (cfo := self.controller_failovers_ms)
                else []
            ),
            (
                "overlapping",
                ", ".join(
                    f"{inner} during {outer} x{n}"
                    for (outer, inner), n in sorted(Counter(self.overlapped).items())
                )
                or "none",
            ),
            (
                "replicas below the HW",
                f"{'byte-identical' if self.byte_identical else 'DIFFER'}: "
                f"{self.replicas_compared} replicas, {self.batches_compared:,} batches each, "
                f"HW {self.high_watermark:,}",
            ),
            ("elapsed", f"{self.elapsed_s:,.0f} s"),
            ("checker", "-" if v is None else ("valid" if v.valid else "INVALID")),
            (
                "verdict",
                ("valid" if self.valid else "INVALID") + (f": {self.error}" if self.error else ""),
            ),
        ]

    def table(self) -> str:
        rows = self.rows()
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        if self.verdict is not None and not self.verdict.valid:
            lines.append(self.verdict.summary())
        if self.final_log is not None and not self.final_log.valid:
            lines.append("history.check (final log, replicas): " + self.final_log.summary())
        return "\n".join(lines)


def diagnose(cluster: LocalCluster, topic: str, lines: int = 3) -> str:
    """What to look at when a fault did not heal: every replica as its broker
    last reported it, and each process's last warnings."""
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", None):
        out = [str(cluster.describe(topic))]
    processes = [*cluster.controllers.items()] or [("controller", cluster.controller)]
    for name, process in [*processes, *cluster.brokers.items()]:
        if process is None:
            continue
        warnings = [x.rstrip() for x in process.output if " WARNING " in x or " ERROR " in x]
        out += [f"  {name}: {x}" for x in warnings[-lines:]]
    return "\n".join(out)


def _log(line: str) -> None:
    print(line, flush=True)


class Applied:
    """A fault in force: the node it hit (-1: every broker), whether that node led
    (the partition, or the quorum for a controller fault), and its failover time
    in ms where one is measured."""

    def __init__(
        self, target: int, was_leader: bool, failover_ms: float | None = None, detail: str = ""
    ):
        self.target, self.was_leader, self.failover_ms = target, was_leader, failover_ms
        self.detail = detail


#: A fault: given the partition's current leader, a generator that applies the fault,
#: yields once while it is in force, and heals it when resumed.
Fault = Callable[["Soak", int], Iterator[Applied]]


class Soak:
    """The soak's steps on one cluster, topic and load (see `run_soak`)."""

    def __init__(
        self,
        cluster: LocalCluster,
        topic: str,
        workload: ProducerWorkload,
        rng: random.Random,
        pause_s: float = 1.5,
        cut_s: float = 3.0,
        recovery_timeout_s: float = 120,
    ) -> None:
        self.cluster, self.topic, self.workload, self.rng = cluster, topic, workload, rng
        self.pause_s, self.cut_s, self.recovery_timeout_s = pause_s, cut_s, recovery_timeout_s
        #: controllers SIGSTOPped now (asked nothing: they would never answer)
        self.paused: set[int] = set()

    def leader(self, not_in: Sequence[int] = ()) -> int:
        deadline = time.monotonic() + self.recovery_timeout_s
        while True:
            leader = current_leader(self.cluster, self.topic, 0, self.recovery_timeout_s)
            if leader not in not_in:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}-0 still led by {leader}")
            time.sleep(0.05)

    def followers(self, leader: int) -> list[int]:
        return [b for b in sorted(self.cluster.brokers) if b != leader]

    def apply(self, number: int, kind: str, inner: str | None = None) -> list[FaultRecord]:
        """Apply one fault of `kind` and wait until the partition is fully replicated
        (and a quorum whole: every voter caught up). With `inner`, fault number + 1 of
        kind `inner` runs while this one is in force (an overlap: OVERLAPS says which
        pairs may); this one is healed after it. Returns the faults' records."""
        kind = FaultKind.parse(kind, "fault kind")
        start = time.monotonic()
        outer = self._FAULTS[kind](self, self.leader())
        applied = next(outer)
        try:
            if inner is not None:
                inner = FaultKind.parse(inner, "fault kind")
                if (kind, inner) not in OVERLAPS:
                    raise ValueError(f"{inner} does not overlap {kind} (see OVERLAPS)")
                inner_start = time.monotonic()
                run = self._FAULTS[inner](self, self.leader())
                inner_applied = next(run)
                _finish(run)
        except BaseException:
            outer.close()  # what is in a finally (a SIGCONT, a healed link) runs
            raise
        _finish(outer)
        self.healed()
        now = time.monotonic()
        records = [
            FaultRecord(
                number,
                kind,
                applied.target,
                applied.was_leader,
                now - start,
                applied.failover_ms,
                detail=applied.detail,
            )
        ]
        if inner is not None:
            records.append(
                FaultRecord(
                    number + 1,
                    inner,
                    inner_applied.target,
                    inner_applied.was_leader,
                    now - inner_start,
                    inner_applied.failover_ms,
                    during=number,
                    detail=inner_applied.detail,
                )
            )
        return records

    def healed(self) -> None:
        """Every broker back and the partition fully replicated; with a quorum, every
        voter caught up with an active controller that runs.

        Fully replicated means settled, not only the leader's word: every running
        replica past the leader's log end offset as of the heal (so each follower
        fetched after it), the ISR whole in every replica's view (the followers'
        is the committed one, from the metadata), and no ISR change pending at the
        leader. Found by the soak: a follower still waiting out a dropped fetch
        after a heal fell behind, the leader's shrink of the ISR to itself was
        committed after the leader had reported a whole ISR, and the next fault
        killed that sole ISR member: no clean leader, for good."""
        mark = self._leader_log_end()
        self._until(
            "the partition's replicas are not caught up and in the ISR",
            lambda: self._settled(mark),
        )
        self.cluster.wait_fully_replicated(self.recovery_timeout_s)
        if self.cluster.controllers:
            self.quorum_whole()

    def _replica_states(self) -> dict[int, dict]:
        """The partition as each running broker last reported it (replica-state.json)."""
        out = {}
        for b, process in self.cluster.brokers.items():
            if process.process is None or process.process.poll() is not None:
                continue
            report = read_replica_state(self.cluster.broker_dir(b)) or {"partitions": []}
            for p in report["partitions"]:
                if p["topic"] == self.topic and p["partition"] == 0:
                    out[b] = p
        return out

    def _leader_log_end(self) -> int:
        leaders = [s for s in self._replica_states().values() if s["role"] == "leader"]
        if not leaders:
            return 0
        return max(leaders, key=lambda s: s["leader_epoch"])["log_end_offset"]

    def _settled(self, mark: int) -> bool:
        states = self._replica_states()
        replicas = sorted(self.cluster.brokers)
        leaders = [s for s in states.values() if s["role"] == "leader"]
        if sorted(states) != replicas or not leaders:
            return False
        leader = max(leaders, key=lambda s: s["leader_epoch"])
        return (
            leader.get("pending_isr") is None
            and all(sorted(s["isr"]) == replicas for s in states.values())
            and all(s["log_end_offset"] >= mark for s in states.values())
        )

    # Each fault: given the current leader, apply it, yield an Applied while it is in
    # force, heal it when resumed. What must be undone even when the soak fails (a
    # SIGSTOP, a cut link) is undone in a finally.

    def _leader_kill(self, leader: int) -> Iterator[Applied]:
        failover_ms = self.kill_leader(leader)
        if failover_ms is None:
            # The ISR had shrunk to the leader alone (after the last heal: a follower
            # still waiting out a dropped fetch, or fenced meanwhile). With no unclean
            # election no other replica may lead (Kafka's rule): the partition is
            # unavailable, nothing is lost, until the killed broker is back, as a
            # supervisor brings it back. No failover to time.
            self.cluster.restart(leader)
            self.leader()
            yield Applied(leader, True, None, ISR_OF_ONE)
            return
        yield Applied(leader, True, failover_ms)
        self.cluster.restart(leader)

    def _follower_pause(self, leader: int) -> Iterator[Applied]:
        target = self.rng.choice(self.followers(leader))
        self.cluster.pause(target)
        try:
            time.sleep(self.pause_s)
            yield Applied(target, False)
        finally:
            self.cluster.resume(target)

    def _power_failure(self, leader: int) -> Iterator[Applied]:
        target = self.rng.choice(sorted(self.cluster.brokers))
        self.cluster.power_failure(target)
        if target == leader:
            self.leader(not_in=[target])
        else:
            time.sleep(self.pause_s)
        yield Applied(target, target == leader)
        self.cluster.restart(target)

    def _link_cut(self, leader: int) -> Iterator[Applied]:
        target = self.rng.choice(self.followers(leader))
        self.cluster.cut_link(leader, target)
        try:
            time.sleep(self.cut_s)
            yield Applied(target, False)
        finally:
            self.heal_link(leader, target)

    def _leader_pause(self, leader: int) -> Iterator[Applied]:
        self.cluster.pause(leader)
        try:
            self.leader(not_in=[leader])  # fenced and replaced while it sleeps
            time.sleep(self.pause_s)
            yield Applied(leader, True)
        finally:
            self.cluster.resume(leader)

    def _rolling_restart(self, leader: int) -> Iterator[Applied]:
        self.cluster.rolling_restart(self.recovery_timeout_s)
        yield Applied(-1, False)

    # Controller faults (a quorum): the target is a controller's node id.

    def _controller_kill(self, leader: int) -> Iterator[Applied]:
        active, epoch = self.active_controller()
        killed_ms = time.time() * 1000
        self.cluster.kill(active)
        self.successor(active, epoch)
        first = self.first_ack_after(time.time() * 1000, f"controller {active} was killed")
        yield Applied(active, True, first - killed_ms)
        self.cluster.restart(active)

    def _controller_pause(self, leader: int) -> Iterator[Applied]:
        active, epoch = self.active_controller()
        self.cluster.pause(active)
        self.paused.add(active)
        try:
            # Past the fetch timeout the other voters elect one of them.
            successor = self.successor(active, epoch)
            yield Applied(active, True)
        finally:
            self.cluster.resume(active)
            self.paused.discard(active)
        self.follows(active, successor.leader_epoch)

    def _controller_power_failure(self, leader: int) -> Iterator[Applied]:
        active, epoch = self.active_controller()
        target = self.rng.choice(self.cluster.controller_ids)
        self.cluster.power_failure(target)
        if target == active:
            self.successor(active, epoch)
        else:
            time.sleep(self.pause_s)
        yield Applied(target, target == active)
        self.cluster.restart(target)

    def _quorum_partition(self, leader: int) -> Iterator[Applied]:
        active, epoch = self.active_controller()
        others = [c for c in self.cluster.controller_ids if c != active]
        for other in others:
            self.cluster.cut_link(active, other)
        try:
            successor = self.successor(active, epoch)
            self.resigned(active)  # check-quorum: it heard no fetch from a majority
            yield Applied(active, True)
        finally:
            for other in others:
                self.heal_link(active, other)
        self.follows(active, successor.leader_epoch)

    # The nemeses (kafkalab.cluster.nemesis): each heals only what it cut.

    def _hold(self, nemesis, target: int, was_leader: bool) -> Iterator[Applied]:
        """Apply a nemesis, hold it for `cut_s`, yield; heal it (in a finally)."""
        nemesis.apply(self.cluster)
        try:
            time.sleep(self.cut_s)
            yield Applied(target, was_leader, detail=nemesis.describe())
        finally:
            nemesis.heal(self.cluster)

    def _partition(self, name: str, pairs) -> Nemesis:
        mode = self.rng.choice([CutMode.REFUSE, CutMode.DROP])
        return Nemesis(name, expand(pairs, hosts(self.cluster)), mode)

    def _partition_one(self, leader: int) -> Iterator[Applied]:
        nodes = sorted(hosts(self.cluster))
        target = self.rng.choice(nodes)
        nemesis = self._partition("one", isolate_one(nodes, target))
        yield from self._hold(nemesis, target, target == leader)

    def _partition_leader(self, leader: int) -> Iterator[Applied]:
        nodes = sorted(hosts(self.cluster))
        nemesis = self._partition("primaries", isolate_primaries(nodes, {leader}))
        yield from self._hold(nemesis, leader, True)

    def _partition_ring(self, leader: int) -> Iterator[Applied]:
        nodes = sorted(hosts(self.cluster))
        nemesis = self._partition("majorities-ring", majorities_ring(nodes, self.rng))
        yield from self._hold(nemesis, -1, False)

    def _clients_cut(self, leader: int) -> Iterator[Applied]:
        yield from self._hold(ClientsCut(leader, CutMode.DROP), leader, True)

    def _clock_step(self, leader: int) -> Iterator[Applied]:
        controllers = self.cluster.controller_ids or [SINGLE_CONTROLLER_ID]
        target = self.rng.choice([*sorted(self.cluster.brokers), *controllers])
        seconds = self.rng.choice([CLOCK_STEP_S, -CLOCK_STEP_S])
        yield from self._hold(ClockStep(target, seconds), target, target == leader)

    def _lazyfs_power_failure(self, leader: int) -> Iterator[Applied]:
        # a broker, or a quorum's voter (the single controller is not restarted here)
        target = self.rng.choice([*sorted(self.cluster.brokers), *self.cluster.controller_ids])
        seed = self.rng.randrange(2**32)
        active = epoch = None
        if target in self.cluster.controllers:
            active, epoch = self.active_controller()
        lost = self.cluster.power_failure(target, lose_unsynced=True, seed=seed)
        if target == leader:
            self.leader(not_in=[target])
        elif target == active:
            self.successor(active, epoch)
        else:
            time.sleep(self.pause_s)
        report = self.cluster.last_power_failure
        torn = 0 if report is None else len(report.torn)
        detail = f"seed {seed}: {sum(lost.values()):,} bytes lost in {len(lost)} files"
        yield Applied(target, target in (leader, active), detail=detail + f", {torn} torn")
        self.cluster.restart(target)

    _FAULTS: dict[FaultKind, Fault] = {
        FaultKind.LEADER_KILL: _leader_kill,
        FaultKind.FOLLOWER_PAUSE: _follower_pause,
        FaultKind.POWER_FAILURE: _power_failure,
        FaultKind.LINK_CUT: _link_cut,
        FaultKind.LEADER_PAUSE: _leader_pause,
        FaultKind.ROLLING_RESTART: _rolling_restart,
        FaultKind.CONTROLLER_KILL: _controller_kill,
        FaultKind.CONTROLLER_PAUSE: _controller_pause,
        FaultKind.CONTROLLER_POWER_FAILURE: _controller_power_failure,
        FaultKind.QUORUM_PARTITION: _quorum_partition,
        FaultKind.PARTITION_ONE: _partition_one,
        FaultKind.PARTITION_LEADER: _partition_leader,
        FaultKind.PARTITION_RING: _partition_ring,
        FaultKind.CLIENTS_CUT: _clients_cut,
        FaultKind.CLOCK_STEP: _clock_step,
        FaultKind.LAZYFS_POWER_FAILURE: _lazyfs_power_failure,
    }

    def kill_leader(self, leader: int) -> float | None:
        """SIGKILL the leader and wait until a successor acknowledged a record;
        return the kill -> that first acknowledgement, in ms (the caller starts the
        broker again), or None when the surviving replicas' metadata shows an ISR of
        the killed leader alone: no successor may lead."""
        acks = self.workload.ack_times_ms
        seen = len(acks)
        killed_ms = time.time() * 1000
        self.cluster.kill(leader)
        # An ack in flight at the kill came from the old leader: the first one that
        # counts comes after the successor applied its leadership (its own record).
        deadline = time.monotonic() + self.recovery_timeout_s
        while time.monotonic() < deadline:
            time.sleep(0.1)
            # the running brokers' metadata (none running: no successor either)
            if all(s["isr"] == [leader] for s in self._replica_states().values()):
                return None
            later = [t for t in acks[seen:] if t > killed_ms + 50]
            if not later:
                continue
            timeline = read_timeline(self.cluster, self.topic, 0, leader, killed_ms, None)
            applied = timeline.leader_applied_ms or timeline.elected_ms or killed_ms
            first = next((t for t in later if t > applied), None)
            if first is not None:
                return first - killed_ms
        raise TimeoutError(
            f"no record acknowledged within {self.recovery_timeout_s} s of killing leader {leader}"
        )

    def heal_link(self, a: int, b: int) -> None:
        """Undo `cluster.cut_link(a, b)` (both ways), and only that cut: another
        fault's cut stays (LocalCluster.heal_links heals every link)."""
        for sender, receiver in ((a, b), (b, a)):
            uncut(self.cluster.node_dir(receiver), {sender})

    # The quorum, asked with DescribeQuorum (never a paused voter: it would not answer)

    def quorum(self, voters: Sequence[int] | None = None, timeout_s: float | None = None):
        """The leader's DescribeQuorum answer, asking `voters` (default: every voter
        not paused); KafkaError when none leads within `timeout_s`."""
        ids = [c for c in self.cluster.controller_ids if c not in self.paused]
        addresses = [_address(self.cluster, c) for c in (ids if voters is None else voters)]
        return describe_quorum(
            addresses, self.recovery_timeout_s if timeout_s is None else timeout_s
        )

    def active_controller(self) -> tuple[int, int]:
        q = self.quorum()
        return q.leader_id, q.leader_epoch

    def _until(self, what: str, condition: Callable[[], object]):
        deadline = time.monotonic() + self.recovery_timeout_s
        while True:
            try:
                got = condition()
            except KafkaError:
                got = None
            if got:
                return got
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} within {self.recovery_timeout_s} s")
            time.sleep(0.05)

    def successor(self, old: int, epoch: int):
        """Wait until a controller other than `old` leads in an epoch above `epoch`."""
        return self._until(
            f"no controller but {old} leads in an epoch above {epoch}",
            lambda: (q := self.quorum()).leader_id != old and q.leader_epoch > epoch and q,
        )

    def leads(self, node: int) -> bool:
        """Does `node` itself answer DescribeQuorum as the leader?"""
        try:
            return self.quorum([node], timeout_s=0.3).leader_id == node
        except KafkaError:
            return False

    def resigned(self, node: int) -> None:
        self._until(f"controller {node} still leads", lambda: not self.leads(node))

    def quorum_whole(self):
        """Wait until an active controller leads and every voter's log reaches the
        high watermark; return the leader's DescribeQuorum answer."""

        def whole():
            q = self.quorum()
            voters = {r.replica_id: r for r in q.current_voters}
            return (
                set(voters) == set(self.cluster.controller_ids)
                and all(r.log_end_offset >= q.high_watermark for r in voters.values())
                and q
            )

        return self._until("the quorum is not whole again", whole)

    def follows(self, node: int, epoch: int) -> None:
        """Wait until `node` is a follower again: caught up with a leader other than
        itself in `epoch` (or with whoever won a later election) and not leading."""

        def following():
            q = self.quorum_whole()
            return (q.leader_id != node or q.leader_epoch > epoch) and (
                q.leader_id == node or not self.leads(node)
            )

        self._until(f"controller {node} does not follow", following)

    def first_ack_after(self, after_ms: float, since: str) -> float:
        """The first acknowledgement of the load later than `after_ms` (wall clock)."""
        acks = self.workload.ack_times_ms  # appended in order, by the wall clock

        def first():
            i = bisect.bisect_right(acks, after_ms)
            return acks[i] if i < len(acks) else None

        return self._until(f"no record acknowledged after {since}", first)


def _finish(run: Iterator[Applied]) -> None:
    """Resume a fault past its one yield: it heals."""
    for _ in run:
        raise RuntimeError("a fault yields once")


def _address(cluster: LocalCluster, controller: int) -> tuple[str, int]:
    listener = cluster.controllers[controller].props["listeners"].split("//", 1)[1]
    host, port = listener.rsplit(":", 1)
    return host, int(port)


def run_soak(
    faults: int = 100,
    seed: int = 0,
    kinds: Sequence[str] | None = None,
    topic: str = "soak",
    rate: float = 200,
    settle_s: float = 0.5,
    pause_s: float = 1.5,
    cut_s: float = 3.0,
    recovery_timeout_s: float = 120,
    base_dir=None,
    cluster_kwargs: dict | None = None,
    log: Callable[[str], None] = _log,
    controllers: int = 1,
    overlap: bool = False,
    client_log: str | Path | None = None,
) -> SoakReport:
    """`faults` faults of `kinds` (in the order `schedule` gives; default
    `default_kinds(controllers)`) under load; `settle_s` of load between two
    faults. `controllers=3` runs a KRaft quorum (with LABS_QUORUM) and
    allows its fault kinds; `overlap` lets the pairs `overlaps` picks run one
    inside the other; `client_log`: a file for the librdkafka debug log
    (CLIENT_DEBUG) of the producer and the read-along consumer (each line names
    its client, `rdkafka#producer-1`, `rdkafka#consumer-2`), the clients' side of a
    stall. Returns the report; never
    raises for what the soak finds (a hang or a failed step is `report.error`);
    ValueError for a controller fault kind without a quorum."""
    kinds = parse_kinds(default_kinds(controllers) if kinds is None else kinds)
    if controllers < 2 and set(kinds) & set(CONTROLLER_KINDS):
        raise ValueError("controller fault kinds need a quorum: controllers=3")
    plan = schedule(faults, seed, kinds)
    inner_at = set(overlaps(plan, seed)) if overlap else set()
    rng = random.Random(f"targets-{seed}")
    report = SoakReport(faults=faults, seed=seed, kinds=kinds, controllers=controllers)
    began = time.monotonic()
    history = History()
    settings = _cluster_settings(cluster_kwargs, controllers, kinds)
    nemeses = set(kinds) & set(NEMESIS_KINDS)
    debug = _client_debug(client_log) if client_log else {}
    with LocalCluster(brokers=3, base_dir=base_dir, **settings) as cluster:
        _create_topic(cluster, topic)
        workload = ProducerWorkload(
            cluster.bootstrap_servers,
            topic,
            history,
            acks="all",
            rate=rate,
            config={
                **LABS_PRODUCER,
                **QUIET_CLIENT,
                **(SOAK_NEMESIS_PRODUCER if nemeses else {}),
                "message.timeout.ms": int(recovery_timeout_s * 1000),
                **debug,
            },
        )
        reader = ReadAlong(
            cluster.bootstrap_servers,
            topic,
            history,
            config={
                **LABS_PRODUCER,
                **QUIET_CLIENT,
                **(SOAK_NEMESIS_CLIENT if nemeses else {}),
                **debug,
            },
        )
        soak = Soak(cluster, topic, workload, rng, pause_s, cut_s, recovery_timeout_s)
        workload.start()
        reader.start()
        try:
            time.sleep(settle_s)
            _apply_faults(soak, plan, inner_at, report, reader, settle_s, began, log)
        finally:
            report.unknown = workload.stop(recovery_timeout_s)
            report.sent, report.failed_sends = workload.sent, workload.failed
            report.failed_by_error = dict(workload.failed_by_error)
        _read_back(soak, history, reader, report)
    report.elapsed_s = time.monotonic() - began
    return report


def _client_debug(path: str | Path) -> dict:
    """librdkafka settings that send the clients' debug log (CLIENT_DEBUG) to `path`."""
    logger = logging.getLogger(f"kafkalab.soak.client.{path}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    for old in list(logger.handlers):  # a second soak with the same path: one handler
        logger.removeHandler(old)
        old.close()
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return {"debug": CLIENT_DEBUG, "log_level": 7, "logger": logger}


def _cluster_settings(
    cluster_kwargs: dict | None, controllers: int = 1, kinds: Sequence[str] = ()
) -> dict:
    """LocalCluster's settings: the labs' failover timeouts, the soak's broker
    properties (and, with a quorum, its controller properties and a broker session
    that outlasts a controller failover, LABS_QUORUM_SESSION_MS; with the nemeses,
    theirs; with lazyfs power failures, the durability ledger on every node), then
    the caller's."""
    kinds = set(parse_kinds(kinds))
    lazyfs = LAZYFS if FaultKind.LAZYFS_POWER_FAILURE in kinds else {}
    quorum = {"session_timeout_ms": LABS_QUORUM_SESSION_MS} if controllers > 1 else {}
    settings = {**LABS_FAILOVER, **quorum, **(cluster_kwargs or {})}
    if controllers > 1:
        settings["controllers"] = controllers
    controller_props = {
        **(LABS_QUORUM if controllers > 1 else {}),
        **lazyfs,
        **(cluster_kwargs or {}).get("controller_props", {}),
    }
    if controller_props:
        settings["controller_props"] = controller_props
    settings["broker_props"] = {
        **LABS_FAILOVER["broker_props"],
        **SOAK_BROKER_PROPS,
        **(SOAK_NEMESIS_BROKER_PROPS if kinds & set(NEMESIS_KINDS) else {}),
        **lazyfs,
        **(cluster_kwargs or {}).get("broker_props", {}),
    }
    return settings


def _create_topic(cluster: LocalCluster, topic: str) -> None:
    """One partition, three replicas, min.insync.replicas=2; returns once in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})
    for future in admin.create_topics([new]).values():
        future.result(30)
    del admin  # it would keep dialling the bootstrap brokers the faults restart
    wait_for_replicas_in_sync(cluster, topic)


def _apply_faults(
    soak: Soak,
    plan: list[FaultKind],
    outer_at: set[int],
    report: SoakReport,
    reader: ReadAlong,
    settle_s: float,
    began: float,
    log: Callable[[str], None],
) -> None:
    """Apply the plan's faults in order (fault i + 1 inside fault i for each i in
    `outer_at`), each recorded and logged; the first that fails (a hang, a failed
    step) is `report.error` and ends the soak."""
    faults, workload = report.faults, soak.workload
    i = 0
    while i < len(plan):
        number, kind = i + 1, plan[i]
        inner = plan[i + 1] if i in outer_at else None
        name = kind if inner is None else f"{kind} + {inner}"
        try:
            records = soak.apply(number, kind, inner)
        except Exception as e:  # a hang or a failed step ends the soak
            report.error = f"fault {number} ({name}): {type(e).__name__}: {e}"
            log(f"[{number:>4}/{faults}] {name}: FAILED: {report.error}")
            log(diagnose(soak.cluster, soak.topic))
            return
        report.records.extend(records)
        for record in records:
            fo = "" if record.failover_ms is None else f", failover {record.failover_ms:,.0f} ms"
            where = (
                "all"
                if record.target < 0
                else f"controller {record.target}"
                if record.target in soak.cluster.controllers
                else f"broker {record.target}"
            )
            role = " (leader)" if record.was_leader else ""
            during = "" if record.during is None else f" (during {record.during})"
            detail = f" [{record.detail}]" if record.detail else ""
            log(
                f"[{record.number:>4}/{faults}] {record.kind:<15} {where}{role}{during}{detail}: "
                f"healed in {record.seconds:.1f} s{fo}; acknowledged {workload.acked:,}, "
                f"read {reader.read:,}, {time.monotonic() - began:,.0f} s"
            )
        i += len(records)
        time.sleep(settle_s)


def _read_back(soak: Soak, history: History, reader: ReadAlong, report: SoakReport) -> None:
    """Once the load stopped: the healed partition read back, the replicas recorded
    for comparison, the read-along consumer caught up, and the history judged."""
    cluster, topic, timeout = soak.cluster, soak.topic, soak.recovery_timeout_s
    try:
        rows = wait_for_replicas_in_sync(cluster, topic, timeout=timeout)
        final = read_final_log(cluster.bootstrap_servers, topic, 0, history)
        report.final_records = len(final)
        report.read_all = reader.wait_for(final[-1][0] if final else -1, timeout)
        record_replicas(cluster, topic, 0, history)
        report.high_watermark = int(rows.HW.min())
    except Exception as e:
        report.error = report.error or f"final read: {type(e).__name__}: {e}"
    finally:
        reader.stop()
    report.read, report.read_gaps = reader.read, list(reader.gaps)
    report.read_errors = dict(reader.errors)
    report.read_fetch_state = reader.fetch_state
    replicas = history.replicas.get((topic, 0), {})
    report.replicas_compared = len(replicas)
    report.batches_compared = min((len(b) for b in replicas.values()), default=0)
    report.final_log = check(history)
    report.verdict, report.acknowledged = judge(history)


def judge(history: History) -> tuple[checker.Verdict, int]:
    """The Jepsen-grade checker's verdict on a soak's history, and how many sends
    were acknowledged. The history is converted by `checker.from_history`: every
    acknowledged send an ok op of the producer, every send the client gave up on
    an unknown one, every record the read-along consumer read an ok poll of its
    own, the final read one more. It is judged strictly (`Settings()`, not the
    adapter's poll-skip allowance): the read-along consumer is assigned its
    partition from offset 0 and never seeks, so a skip or a step back in what it
    reads is an anomaly, as is anything unseen at the end."""
    ops, _ = checker.from_history(history)
    acknowledged = sum(
        1 for op in ops.ops if op.type == checker.OK and op.process == checker.PRODUCER
    )
    return checker.check(ops, checker.Settings()), acknowledged


def _main(args: argparse.Namespace) -> int:
    try:
        kinds = parse_kinds(args.kinds) if args.kinds else default_kinds(args.controllers)
        report = run_soak(
            faults=args.faults,
            seed=args.seed,
            kinds=kinds,
            rate=args.rate,
            controllers=args.controllers,
            overlap=args.overlap,
            client_log=args.client_log,
            base_dir=args.base_dir,
        )
    except ValueError as e:  # an unknown kind, a controller kind without a quorum
        print(f"kafkalab soak: {e}", file=sys.stderr)
        return 2
    print(report.table())
    return 0 if report.valid else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A soak's options: `kafkalab soak`'s and benchmarks/soak.py's."""
    parser.add_argument("--faults", type=int, default=100, help="how many faults (100)")
    parser.add_argument("--seed", type=int, default=0, help="chooses the faults (0)")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=[k.value for k in ALL_KINDS],  # the strings, so --help and errors show them
        metavar="KIND",
        help="fault kinds (default: all but leader-pause and the nemeses' kinds, and the "
        f"controller kinds with --controllers 3): {', '.join(k.value for k in ALL_KINDS)}",
    )
    parser.add_argument("--rate", type=float, default=200, help="records per second (200)")
    parser.add_argument(
        "--controllers", type=int, default=1, help="1 (the default) or 3: a KRaft quorum"
    )
    parser.add_argument(
        "--overlap", action="store_true", help="some faults inside another (OVERLAPS)"
    )
    parser.add_argument(
        "--client-log", metavar="PATH", help="write the clients' librdkafka debug log here"
    )
    parser.add_argument(
        "--base-dir",
        metavar="DIR",
        help="run the cluster in DIR and keep it (logs, segments, events) for a post-mortem",
    )


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "soak",
        help="many faults in a row on a local cluster under load, then the checker's verdict",
        description="A soak (kafkalab.cluster.soak): faults chosen by a seed on a "
        "three-broker cluster under an acks=all load; prints one line a fault and the "
        "report; exits 1 when the verdict is not valid. benchmarks/soak.py runs the "
        "same and keeps the results.",
    )
    add_arguments(parser)
    parser.set_defaults(func=_main)
