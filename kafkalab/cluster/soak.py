"""A soak: many faults in a row on a live cluster, then the Jepsen-grade checker's verdict.

    report = run_soak(faults=100, seed=0)          # random kinds, chosen by the seed
    print(report.table())
    assert report.valid

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

After each fault the soak waits until the broker is back and the partition is
fully replicated again (a fault that never heals is a hang: the soak stops and
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

import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kafkalab.cluster import checker
from kafkalab.cluster.failover import LABS_FAILOVER, LABS_PRODUCER, current_leader, read_timeline
from kafkalab.cluster.history import History, Verdict, check
from kafkalab.cluster.local_cluster import LocalCluster
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.kinds import Kind


class FaultKind(Kind):
    """What a fault does (the module docstring says each); the value is the name the
    CLI takes and the report prints."""

    LEADER_KILL = "leader-kill"
    FOLLOWER_PAUSE = "follower-pause"
    POWER_FAILURE = "power-failure"
    LINK_CUT = "link-cut"
    ROLLING_RESTART = "rolling-restart"
    LEADER_PAUSE = "leader-pause"


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
ALL_KINDS = FAULT_KINDS + EXTRA_KINDS

#: Broker settings of the soak on top of LABS_FAILOVER's: a follower that cannot
#: fetch leaves the ISR after 2 s (Kafka's default, 30 s, would hold every acks=all
#: write for 30 s on each cut link).
SOAK_BROKER_PROPS = {"replica.lag.time.max.ms": "2000"}

#: librdkafka logs every refused connection (level 3) and closed one (level 4 to
#: 6); a soak kills brokers on purpose, so its clients log only critical errors.
QUIET_CLIENT = {"log_level": 2}


def parse_kinds(kinds: Sequence[str]) -> tuple[FaultKind, ...]:
    """`kinds` as FaultKinds, in order; UnknownKindError (a ValueError) names the
    valid ones for a name that is none."""
    return tuple(FaultKind.parse(k, "fault kind") for k in kinds)


def schedule(faults: int, seed: int, kinds: Sequence[str] = FAULT_KINDS) -> list[FaultKind]:
    """The kinds of the soak's faults, in order: `random.Random(seed)` choosing
    among `kinds` (the brokers each fault hits are chosen by a second generator,
    so a seed's schedule does not depend on them)."""
    choices = list(parse_kinds(kinds))
    rng = random.Random(seed)
    return [rng.choice(choices) for _ in range(faults)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100) of `values`; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class ReadAlong:
    """A thread with a librdkafka consumer assigned to one partition from offset 0,
    recording every record it reads into the history (as reader `name`)."""

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
                **(config or {}),
            }
        )
        self.consumer.assign([TopicPartition(topic, partition, 0)])
        self.read = 0
        self.last_offset = -1
        self.gaps: list[tuple[int, int]] = []  # (last offset read, next offset read)
        self.errors: Counter[str] = Counter()  # client-side errors seen (transient ones too)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

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


@dataclass
class SoakReport:
    faults: int  # asked for
    seed: int
    kinds: tuple[FaultKind, ...]
    records: list[FaultRecord] = field(default_factory=list)
    error: str | None = None  # why the soak stopped early (a hang, a failed step)
    sent: int = 0
    acknowledged: int = 0
    failed_sends: int = 0  # the client gave up (may or may not be in the log)
    unknown: int = 0  # no outcome at the end
    final_records: int = 0
    read: int = 0
    read_gaps: list[tuple[int, int]] = field(default_factory=list)
    read_errors: dict[str, int] = field(default_factory=dict)  # the read-along client's
    read_all: bool = False  # the consumer read up to the last record of the final log
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
        return [r.failover_ms for r in self.records if r.failover_ms is not None]

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
            ("failed sends / unknown", f"{self.failed_sends} / {self.unknown}"),
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
                + ")",
            ),
            (
                "failover (leader kill -> ack)",
                f"p50 {ms(percentile(fo, 50))}, p99 {ms(percentile(fo, 99))}, "
                f"max {ms(max(fo, default=None))} (n={len(fo)})",
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
    for name, process in [("controller", cluster.controller), *cluster.brokers.items()]:
        if process is None:
            continue
        warnings = [x.rstrip() for x in process.output if " WARNING " in x or " ERROR " in x]
        out += [f"  {name}: {x}" for x in warnings[-lines:]]
    return "\n".join(out)


def _log(line: str) -> None:
    print(line, flush=True)


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

    def apply(self, number: int, kind: str) -> FaultRecord:
        """Apply one fault of `kind` and wait until the partition is fully replicated."""
        kind = FaultKind.parse(kind, "fault kind")
        start = time.monotonic()
        leader = self.leader()
        target, failover_ms = self._FAULTS[kind](self, leader)
        self.cluster.wait_fully_replicated(self.recovery_timeout_s)
        return FaultRecord(
            number, kind, target, target == leader, time.monotonic() - start, failover_ms
        )

    # Each fault: given the current leader, apply it; return the broker it hit (-1:
    # every broker) and the failover time in ms where it is measured.

    def _leader_kill(self, leader: int) -> tuple[int, float | None]:
        return leader, self.kill_leader(leader)

    def _follower_pause(self, leader: int) -> tuple[int, float | None]:
        target = self.rng.choice(self.followers(leader))
        self.cluster.pause(target)
        try:
            time.sleep(self.pause_s)
        finally:
            self.cluster.resume(target)
        return target, None

    def _power_failure(self, leader: int) -> tuple[int, float | None]:
        target = self.rng.choice(sorted(self.cluster.brokers))
        self.cluster.power_failure(target)
        if target == leader:
            self.leader(not_in=[target])
        else:
            time.sleep(self.pause_s)
        self.cluster.restart(target)
        return target, None

    def _link_cut(self, leader: int) -> tuple[int, float | None]:
        target = self.rng.choice(self.followers(leader))
        self.cluster.cut_link(leader, target)
        try:
            time.sleep(self.cut_s)
        finally:
            self.cluster.heal_links()
        return target, None

    def _leader_pause(self, leader: int) -> tuple[int, float | None]:
        self.cluster.pause(leader)
        try:
            self.leader(not_in=[leader])  # fenced and replaced while it sleeps
            time.sleep(self.pause_s)
        finally:
            self.cluster.resume(leader)
        return leader, None

    def _rolling_restart(self, leader: int) -> tuple[int, float | None]:
        self.cluster.rolling_restart(self.recovery_timeout_s)
        return -1, None

    _FAULTS: dict[FaultKind, Callable[[Soak, int], tuple[int, float | None]]] = {
        FaultKind.LEADER_KILL: _leader_kill,
        FaultKind.FOLLOWER_PAUSE: _follower_pause,
        FaultKind.POWER_FAILURE: _power_failure,
        FaultKind.LINK_CUT: _link_cut,
        FaultKind.LEADER_PAUSE: _leader_pause,
        FaultKind.ROLLING_RESTART: _rolling_restart,
    }

    def kill_leader(self, leader: int) -> float:
        """SIGKILL the leader, start it again once a successor acknowledged a
        record; return the kill -> that first acknowledgement, in ms."""
        acks = self.workload.ack_times_ms
        seen = len(acks)
        killed_ms = time.time() * 1000
        self.cluster.kill(leader)
        self.leader(not_in=[leader])
        # An ack in flight at the kill came from the old leader: the first one that
        # counts comes after the successor applied its leadership (its own record).
        first = None
        deadline = time.monotonic() + self.recovery_timeout_s
        while first is None and time.monotonic() < deadline:
            time.sleep(0.1)
            later = [t for t in acks[seen:] if t > killed_ms + 50]
            if not later:
                continue
            timeline = read_timeline(self.cluster, self.topic, 0, leader, killed_ms, None)
            applied = timeline.leader_applied_ms or timeline.elected_ms or killed_ms
            first = next((t for t in later if t > applied), None)
        self.cluster.restart(leader)
        if first is None:
            raise TimeoutError(
                f"no record acknowledged within {self.recovery_timeout_s} s of killing "
                f"leader {leader}"
            )
        return first - killed_ms


def run_soak(
    faults: int = 100,
    seed: int = 0,
    kinds: Sequence[str] = FAULT_KINDS,
    topic: str = "soak",
    rate: float = 200,
    settle_s: float = 0.5,
    pause_s: float = 1.5,
    cut_s: float = 3.0,
    recovery_timeout_s: float = 120,
    base_dir=None,
    cluster_kwargs: dict | None = None,
    log: Callable[[str], None] = _log,
) -> SoakReport:
    """`faults` faults of `kinds` (in the order `schedule` gives) under load;
    `settle_s` of load between two faults. Returns the report; never raises for
    what the soak finds (a hang or a failed step is `report.error`)."""
    plan = schedule(faults, seed, kinds)
    rng = random.Random(f"targets-{seed}")
    report = SoakReport(faults=faults, seed=seed, kinds=parse_kinds(kinds))
    began = time.monotonic()
    history = History()
    settings = _cluster_settings(cluster_kwargs)
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
                "message.timeout.ms": int(recovery_timeout_s * 1000),
            },
        )
        reader = ReadAlong(
            cluster.bootstrap_servers, topic, history, config={**LABS_PRODUCER, **QUIET_CLIENT}
        )
        soak = Soak(cluster, topic, workload, rng, pause_s, cut_s, recovery_timeout_s)
        workload.start()
        reader.start()
        try:
            time.sleep(settle_s)
            _apply_faults(soak, plan, report, reader, settle_s, began, log)
        finally:
            report.unknown = workload.stop(recovery_timeout_s)
            report.sent, report.failed_sends = workload.sent, workload.failed
        _read_back(soak, history, reader, report)
    report.elapsed_s = time.monotonic() - began
    return report


def _cluster_settings(cluster_kwargs: dict | None) -> dict:
    """LocalCluster's settings: the labs' failover timeouts, the soak's broker
    properties, then the caller's."""
    settings = {**LABS_FAILOVER, **(cluster_kwargs or {})}
    settings["broker_props"] = {
        **LABS_FAILOVER["broker_props"],
        **SOAK_BROKER_PROPS,
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
    report: SoakReport,
    reader: ReadAlong,
    settle_s: float,
    began: float,
    log: Callable[[str], None],
) -> None:
    """Apply the plan's faults in order, each recorded and logged; the first that
    fails (a hang, a failed step) is `report.error` and ends the soak."""
    faults, workload = report.faults, soak.workload
    for number, kind in enumerate(plan, 1):
        try:
            record = soak.apply(number, kind)
        except Exception as e:  # a hang or a failed step ends the soak
            report.error = f"fault {number} ({kind}): {type(e).__name__}: {e}"
            log(f"[{number:>4}/{faults}] {kind}: FAILED: {report.error}")
            log(diagnose(soak.cluster, soak.topic))
            return
        report.records.append(record)
        fo = "" if record.failover_ms is None else f", failover {record.failover_ms:,.0f} ms"
        where = "all" if record.target < 0 else f"broker {record.target}"
        role = " (leader)" if record.was_leader else ""
        log(
            f"[{number:>4}/{faults}] {kind:<15} {where}{role}: healed in "
            f"{record.seconds:.1f} s{fo}; acknowledged {workload.acked:,}, "
            f"read {reader.read:,}, {time.monotonic() - began:,.0f} s"
        )
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
