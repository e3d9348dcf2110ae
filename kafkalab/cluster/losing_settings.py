"""Settings known to lose, run on a real cluster and recorded for the Jepsen-grade
checker (kafkalab.cluster.checker): each client a process, each send and poll an op
with its outcome, so the verdict names the anomaly the setting explains, with its
evidence.

    acks_1_leader_kill    acks=1: the leader acknowledges records only it has, then
                          dies; a follower leads, and the next writes take their
                          offsets. lost-write (acknowledged, below what a poll read,
                          never read), inconsistent-offsets (two values at one
                          offset: the acknowledgement's and the poll's), unseen.
    unclean_election      unclean.leader.election.enable=true: the ISR is down to the
                          leader, which dies; an out-of-sync replica leads. The same
                          three anomalies, acks=all or not.
    auto_commit_crash     enable.auto.commit=true: the consumer's poll hands it a
                          batch, the client commits its position in the background,
                          the consumer crashes before it has processed the batch; its
                          successor resumes from the committed offset, past the
                          batch. lost-write (a later poll read past records no ok poll
                          read: the crashed poll is `info`, and a crash makes a new
                          process, as in Jepsen) and unseen. The log still has them:
                          a read from the start (`with_final_read`) finds no anomaly.

    with LocalCluster(**LOSING_CLUSTER, base_dir=d) as cluster:
        run = acks_1_leader_kill(cluster)
        verdict = run.verdict()
        print(verdict.summary())          # lost-write, inconsistent-offsets, unseen
        run.at_risk                       # the values the setting put at risk

Each run uses its own topic, so one cluster can run all three in turn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace

from kafkalab.cluster.checker import (
    INFO,
    OK,
    Assign,
    History,
    Op,
    Poll,
    Send,
    Settings,
    Subscribe,
    Verdict,
    check,
)
from kafkalab.cluster.workload import wait_for_replicas_in_sync

#: The cluster these runs expect: three brokers; a follower that stops fetching
#: stays in the ISR for 6 s (long enough for acks=1 to acknowledge what only the
#: leader has), and a group's first rebalance does not wait.
LOSING_CLUSTER = {
    "brokers": 3,
    "session_timeout_ms": 2000,
    "broker_props": {
        "replica.lag.time.max.ms": "6000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
    },
}


@dataclass
class Run:
    """One bad setting's run: its history, the settings it is judged with, the
    anomalies the setting explains and the values it put at risk."""

    name: str
    topic: str
    history: History
    settings: Settings
    expected: frozenset[str]
    at_risk: list[bytes] = field(default_factory=list)

    def verdict(self) -> Verdict:
        return check(self.history, self.settings)

    def with_final_read(self, bootstrap_servers: str) -> History:
        """The same history plus a read of the whole partition from its start by a
        fresh process (Jepsen's final polls): what the log itself still holds."""
        out = History()
        for op in self.history.ops:
            out.add(replace(op))
        _read_all(bootstrap_servers, "final read", out, self.topic)
        return out


# -- recording clients -----------------------------------------------------------------


class _Producer:
    """A librdkafka producer as one process: each send an op, ok with its offset
    when acknowledged, info (it may or may not be in the log) when not."""

    def __init__(self, bs: str, process: str, history: History, topic: str, **config) -> None:
        from confluent_kafka import Producer

        self.process, self.history, self.topic = process, history, topic
        self.producer = Producer(
            # a broker killed on purpose closes connections: no log line for each
            {"bootstrap.servers": bs, "linger.ms": 5, "log.connection.close": False, **config}
        )

    def send(self, values: list[bytes]) -> None:
        for value in values:
            invoke = time.monotonic()

            def delivered(err, msg, value=value, invoke=invoke):
                key = (self.topic, msg.partition())
                if err is None:
                    mop, kind = Send(key, value, msg.offset()), OK
                else:
                    mop, kind = Send(key, value), INFO
                self.history.add(Op(self.process, kind, [mop], invoke, time.monotonic()))

            self.producer.produce(self.topic, value, partition=0, on_delivery=delivered)
        if self.producer.flush(30):
            raise TimeoutError(f"{self.process}: sends still without an outcome after 30 s")


def _read_all(bs: str, process: str, history: History, topic: str, group: str = "") -> None:
    """An assign-mode consumer as one process: an assign op, then one ok op per
    non-empty poll, until the high watermark. With `group`, it starts from the
    group's committed offset (the group's offsets, no group membership)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, Consumer, TopicPartition

    key = (topic, 0)
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group or f"kafkalab-{process}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        start = OFFSET_INVALID if group else OFFSET_BEGINNING  # INVALID: the committed one
        history.add(Op(process, OK, [Assign((key,))], time.monotonic(), time.monotonic()))
        consumer.assign([TopicPartition(topic, 0, start)])
        high = _high_watermark(consumer, topic)
        position = -1
        deadline = time.monotonic() + 60
        while position + 1 < high:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{process}: {topic} not read to {high} in 60 s")
            invoke = time.monotonic()
            got = [m for m in consumer.consume(50, 0.5) if m.error() is None]
            if got:
                pairs = [(m.offset(), m.value()) for m in got]
                history.add(Op(process, OK, [Poll({key: pairs})], invoke, time.monotonic()))
                position = got[-1].offset()
    finally:
        consumer.close()


def _high_watermark(consumer, topic: str) -> int:
    from confluent_kafka import KafkaException, TopicPartition

    deadline = time.monotonic() + 60
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -- the cluster ------------------------------------------------------------------------


def _create(cluster, topic: str, configs: dict | None = None) -> None:
    """One partition on brokers 1, 2, 3 (1 its preferred leader), fully in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]], config=configs or {})
    for future in admin.create_topics([new]).values():
        future.result(10)
    wait_for_replicas_in_sync(cluster, topic, log_end_offset=0)
    _wait(lambda: _leader(cluster, topic) == 1, "broker 1 leads")


def _leader(cluster, topic: str, not_in=()) -> int | None:
    df = cluster.describe(topic)
    rows = df[(df.role == "leader") & (df.status == "running") & ~df.broker.isin(list(not_in))]
    if rows.empty:
        return None
    return int(rows.sort_values("leader epoch").broker.iloc[-1])


def _isr(cluster, topic: str, broker: int) -> list[int]:
    df = cluster.describe(topic)
    return sorted(df[df.broker == broker].ISR.iloc[0])


def _wait(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached in {timeout} s: {what}")
        time.sleep(0.2)


def _values(prefix: str, numbers) -> list[bytes]:
    return [b"%s-%d" % (prefix.encode(), n) for n in numbers]


# -- the runs ----------------------------------------------------------------------------


def acks_1_leader_kill(cluster, topic: str = "acks-1") -> Run:
    """acks=1, and the leader dies holding records no follower has: producer p0
    sends v-0..49 (replicated), then v-50..99 while the leader's answers no longer
    reach its followers (they stay in the ISR for replica.lag.time.max.ms);
    the leader is SIGKILLed, a follower leads, the old leader comes back and
    truncates; producer p1 writes w-0..19, which take offsets 50..69; consumer c0
    reads the partition."""
    _create(cluster, topic)
    history = History()
    bs = cluster.bootstrap_servers
    p0 = _Producer(bs, "p0", history, topic, acks="1", **{"enable.idempotence": False})
    p0.send(_values("v", range(50)))
    wait_for_replicas_in_sync(cluster, topic, log_end_offset=50)
    cluster.cut_link(1, 2, both_ways=False)  # 2 and 3 still fetch; the answers are lost
    cluster.cut_link(1, 3, both_ways=False)
    time.sleep(0.5)  # brokers re-read their link faults every 100 ms
    p0.send(_values("v", range(50, 100)))
    cluster.kill(1)
    cluster.heal_links()
    _wait(lambda: _leader(cluster, topic, not_in=[1]) is not None, "a follower leads")
    cluster.restart(1)
    wait_for_replicas_in_sync(cluster, topic, log_end_offset=50)  # the new leader's log: v-0..49
    p1 = _Producer(bs, "p1", history, topic, acks="1", **{"enable.idempotence": False})
    p1.send(_values("w", range(20)))
    # acks=1 answers before the followers have them: wait for the high watermark,
    # which is where a consumer's reads end
    wait_for_replicas_in_sync(cluster, topic, log_end_offset=70)
    _read_all(bs, "c0", history, topic)
    return Run(
        "acks=1, leader killed",
        topic,
        history,
        Settings(idempotent=False),
        frozenset({"lost-write", "inconsistent-offsets", "unseen"}),
        _values("v", range(50, 100)),
    )


def unclean_election(cluster, topic: str = "unclean") -> Run:
    """unclean.leader.election.enable=true: the leader's links to both followers are
    cut until the ISR is the leader alone (min.insync.replicas=1); producer p0
    (acks=all) writes v-0..19, committed with that ISR; the leader is SIGKILLed and
    the links healed; an out-of-sync follower is elected (uncleanly) with none of
    them; producer p1 writes w-0..9 at offsets 0..9; consumer c0 reads."""
    _create(cluster, topic, {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    history = History()
    bs = cluster.bootstrap_servers
    cluster.cut_link(1, 2)
    cluster.cut_link(1, 3)
    _wait(lambda: _isr(cluster, topic, 1) == [1], "the ISR shrinks to the leader")
    p0 = _Producer(bs, "p0", history, topic, acks="all", **{"enable.idempotence": True})
    p0.send(_values("v", range(20)))
    cluster.kill(1)
    cluster.heal_links()
    _wait(lambda: _leader(cluster, topic, not_in=[1]) is not None, "an unclean election")
    p1 = _Producer(bs, "p1", history, topic, acks="all", **{"enable.idempotence": True})
    p1.send(_values("w", range(10)))
    cluster.restart(1)  # comes back, truncates to the new leader's log
    wait_for_replicas_in_sync(cluster, topic, log_end_offset=10)
    _read_all(bs, "c0", history, topic)
    return Run(
        "unclean leader election",
        topic,
        history,
        Settings(),
        frozenset({"lost-write", "inconsistent-offsets", "unseen"}),
        _values("v", range(20)),
    )


#: The consumer that crashes: a process of its own (SIGKILL is the crash), with
#: auto-commit every 100 ms. It prints each batch its polls hand it, one JSON line
#: a poll, and after the last one works on it until it is killed.
_AUTO_COMMIT_CONSUMER = """
import json, sys, time
from confluent_kafka import Consumer
bs, topic, group, size, polls = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:6])
c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": True,
              "auto.commit.interval.ms": 100, "auto.offset.reset": "earliest"})
c.subscribe([topic])
for _ in range(polls):
    got = []
    while not got:
        got = [m for m in c.consume(size, 1.0) if m.error() is None]
    print(json.dumps([[m.offset(), m.value().hex()] for m in got]), flush=True)
while True:
    time.sleep(0.1)
"""


def auto_commit_crash(cluster, topic: str = "auto-commit", processed: int = 3) -> Run:
    """enable.auto.commit=true and a crash: producer p0 writes v-0..99 (acks=all);
    consumer c0 (subscribed, auto-commit) processes `processed` polls, then takes
    one more batch and is SIGKILLed once the client has committed past it; c1,
    started after the crash, reads on from the group's committed offset."""
    _create(cluster, topic)
    history = History()
    bs = cluster.bootstrap_servers
    key = (topic, 0)
    _Producer(bs, "p0", history, topic, acks="all").send(_values("v", range(100)))
    group = f"{topic}-app"
    history.add(Op("c0", OK, [Subscribe((key,))], time.monotonic(), time.monotonic()))
    child = subprocess.Popen(
        [sys.executable, "-c", _AUTO_COMMIT_CONSUMER, bs, topic, group, "10", str(processed + 1)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        crashed: list[tuple[int, bytes]] = []
        for n in range(processed + 1):
            invoke = time.monotonic()
            line = child.stdout.readline()
            if not line:
                raise RuntimeError(f"the consumer ended before poll {n}: {child.wait()}")
            pairs = [(offset, bytes.fromhex(value)) for offset, value in json.loads(line)]
            if n < processed:
                history.add(Op("c0", OK, [Poll({key: pairs})], invoke, time.monotonic()))
            else:
                crashed = pairs
        end = crashed[-1][0] + 1
        _wait(lambda: _committed(bs, group, topic) >= end, "auto-commit past the batch")
    finally:
        child.kill()
        child.wait()
    # The batch was handed over; its processing never finished: unknown.
    history.add(Op("c0", INFO, [Poll({key: crashed})], invoke, time.monotonic()))
    _read_all(bs, "c1", history, topic, group=group)
    return Run(
        "auto-commit, consumer crash",
        topic,
        history,
        Settings(subscribe=True),
        frozenset({"lost-write", "unseen"}),
        [value for _, value in crashed],
    )


def _committed(bs: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], 10)[0].offset
    finally:
        c.close()


RUNS = {
    "acks=1": acks_1_leader_kill,
    "unclean election": unclean_election,
    "auto-commit crash": auto_commit_crash,
}

__all__ = [
    "LOSING_CLUSTER",
    "RUNS",
    "Run",
    "acks_1_leader_kill",
    "auto_commit_crash",
    "unclean_election",
]
