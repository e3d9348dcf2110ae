"""A failover, timed and taken apart: where the time goes after a leader dies.

    timeline = measure_failover(cluster, "orders")   # SIGKILL the leader under load
    timeline.phases()                                # a DataFrame of the phases below
    timeline.total_ms                                # kill -> first acknowledged record

The phases come from the processes' own records (each one's `events.jsonl`,
kafkalab.server.events) and from the producer's acknowledgements:

    session timeout   the kill -> the controller fences the silent broker
                      (broker.session.timeout.ms, checked every tenth of it)
    election          the fence -> the new leader's PartitionChangeRecord committed
    leader applies    the record -> the new leader applied it (metadata long poll)
    followers follow  -> every follower in the new ISR had its first fetch from the
                         new leader answered (after truncating by its rule)
    client            -> the producer's first record acknowledged by the new leader
                         (librdkafka refreshing its metadata, retrying; acks=all also
                         waits for the followers' next fetch). librdkafka gets no
                         NOT_LEADER_OR_FOLLOWER from a dead broker: it asks for
                         metadata again on its own timers (see LABS_PRODUCER)

A phase may overlap the next (the client can be acknowledged before the last
follower's first fetch is recorded): each starts where the previous ended, and
the last one ends at the acknowledgement.

`LABS_FAILOVER` holds the settings the labs use to make failovers fast:
broker.session.timeout.ms=500 and broker.heartbeat.interval.ms=100 (10
heartbeats a second per broker, about 60 bytes each way: the price of noticing
a dead broker within half a second). Kafka's defaults are 9000 and 2000.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kafkalab.cluster.local_cluster import ProcessState
from kafkalab.server.events import read_events

#: LocalCluster keyword arguments for fast failovers (the labs' timeouts).
LABS_FAILOVER = {
    "session_timeout_ms": 500,
    "broker_props": {"broker.heartbeat.interval.ms": "100"},
}
#: A KRaft quorum's timeouts in the labs, the quorum tests and the soak (the labs' row
#: of the controller failover figures); Kafka's defaults are 1000, 2000 and 2000.
LABS_QUORUM = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.request.timeout.ms": "800",
}
#: A broker's session on a KRaft quorum (LocalCluster's `session_timeout_ms`): it must
#: outlast a controller failover. A broker finds the new active controller only after
#: the old one resigned (check-quorum, about controller.quorum.fetch.timeout.ms) and
#: the others elected a leader (an election timeout more), and a newly active
#: controller fences every broker it has not heard from within
#: broker.session.timeout.ms of its activation. With LABS_FAILOVER's 500 ms the soak
#: found a quorum partition of the active controller fencing every broker at once:
#: Metadata answers then list no broker, and librdkafka drops every broker it knows,
#: its bootstrap servers too, until metadata.recovery.rebootstrap.trigger.ms (5
#: minutes). Kafka's own defaults keep the same order: 9000 against 2000 + 1000.
LABS_QUORUM_SESSION_MS = 3000
#: librdkafka learns of a dead leader's successor from metadata. Told nothing by
#: the dead broker, it asks again on its own timers: about once a second (its
#: topic scan) by default; `topic.metadata.refresh.interval.ms=100` makes it ask
#: ten times a second (one small Metadata request each).
LABS_PRODUCER = {"topic.metadata.refresh.interval.ms": 100}
#: The broker side with Kafka's defaults, for comparison.
KAFKA_DEFAULT_FAILOVER = {
    "session_timeout_ms": 9000,
    "broker_props": {"broker.heartbeat.interval.ms": "2000"},
}

PHASES = ("session timeout", "election", "leader applies", "followers follow", "client")


@dataclass
class FailoverTimeline:
    topic: str
    partition: int
    killed: int
    killed_ms: float
    first_ack_ms: float | None
    new_leader: int = -1
    leader_epoch: int = -1
    fenced_ms: float | None = None
    elected_ms: float | None = None
    leader_applied_ms: float | None = None
    followers_fetching_ms: dict[int, float] = field(default_factory=dict)

    @property
    def total_ms(self) -> float | None:
        return None if self.first_ack_ms is None else self.first_ack_ms - self.killed_ms

    def phase_ends(self) -> dict[str, float | None]:
        """Each phase's end, in ms after the kill."""
        follow = max(self.followers_fetching_ms.values(), default=None)
        ends = {
            "session timeout": self.fenced_ms,
            "election": self.elected_ms,
            "leader applies": self.leader_applied_ms,
            "followers follow": follow,
            "client": self.first_ack_ms,
        }
        return {k: None if v is None else v - self.killed_ms for k, v in ends.items()}

    def phases(self):
        """A DataFrame: phase, start and end (ms after the kill), duration."""
        import pandas as pd

        rows, start = [], 0.0
        for name, end in self.phase_ends().items():
            if end is None:
                rows.append({"phase": name, "start ms": start, "end ms": None, "ms": None})
                continue
            end = max(end, start)
            rows.append({"phase": name, "start ms": start, "end ms": end, "ms": end - start})
            start = end
        return pd.DataFrame(rows)


def read_timeline(
    cluster,
    topic: str,
    partition: int,
    killed: int,
    killed_ms: float,
    first_ack_ms: float | None,
) -> FailoverTimeline:
    """Rebuild a failover's timeline from the controller's and brokers' events."""
    t = FailoverTimeline(topic, partition, killed, killed_ms, first_ack_ms)
    after = [e for e in read_events(cluster.base_dir / "controller") if e["time_ms"] >= killed_ms]
    t.fenced_ms = next(
        (e["time_ms"] for e in after if e["event"] == "fenced" and e["broker"] == killed), None
    )
    election = next(
        (
            e
            for e in after
            if e["event"] == "partition_change"
            and (e["topic"], e["partition"]) == (topic, partition)
            and e["leader"] not in (killed, -1)
        ),
        None,
    )
    if election is None:
        return t
    t.elected_ms, t.new_leader, t.leader_epoch = (
        election["time_ms"],
        election["leader"],
        election["leader_epoch"],
    )
    for broker in cluster.brokers:
        if broker == killed:
            continue
        for e in read_events(cluster.broker_dir(broker)):
            # (events of no one partition, such as "fetch_session", have no topic)
            if e["time_ms"] < killed_ms or (e.get("topic"), e.get("partition")) != (
                topic,
                partition,
            ):
                continue
            if e["event"] == "leader" and e["leader_epoch"] == t.leader_epoch:
                t.leader_applied_ms = e["time_ms"]
            elif (
                e["event"] == "fetching"
                and e["leader"] == t.new_leader
                and broker in election["isr"]
                and broker not in t.followers_fetching_ms
            ):
                t.followers_fetching_ms[broker] = e["time_ms"]
    return t


def current_leader(cluster, topic: str, partition: int = 0, timeout_s: float = 30) -> int:
    """The running broker that leads the partition in the newest epoch."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        df = cluster.describe(topic)
        df = df[
            (df.partition == partition)
            & (df.role == "leader")
            & (df.status == ProcessState.RUNNING)
        ]
        if not df.empty:
            return int(df.sort_values("leader epoch").broker.iloc[-1])
        time.sleep(0.05)
    raise TimeoutError(f"{topic}-{partition} has no running leader after {timeout_s} s")


def measure_failover(
    cluster,
    topic: str,
    partition: int = 0,
    warmup_s: float = 1.0,
    send_interval_s: float = 0.01,
    timeout_s: float = 120,
    producer_config: dict | None = None,
) -> FailoverTimeline:
    """SIGKILL the partition's leader while a librdkafka producer (acks=all,
    idempotent, `producer_config` on top) sends a record every `send_interval_s`; time the kill to the first
    acknowledgement after it, and read the phases from the processes' events. The
    killed broker stays down: restart it (and wait for it to rejoin) yourself."""
    from confluent_kafka import Producer

    leader = current_leader(cluster, topic, partition)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": int(timeout_s * 1000),
            **(producer_config or {}),
        }
    )
    acked: list[tuple[float, float]] = []  # (produced, acknowledged), ms
    stop = threading.Event()

    def on_delivery(produced_ms: float, err) -> None:
        if err is None:
            acked.append((produced_ms, time.time() * 1000))

    def run() -> None:
        n = 0
        while not stop.is_set():
            produced_ms = time.time() * 1000
            producer.produce(
                topic,
                b"%d" % n,
                partition=partition,
                on_delivery=lambda err, msg, at=produced_ms: on_delivery(at, err),
            )
            producer.poll(0)
            n += 1
            time.sleep(send_interval_s)

    sender = threading.Thread(target=run, daemon=True)
    sender.start()
    try:
        time.sleep(warmup_s)
        killed_ms = time.time() * 1000
        cluster.kill(leader)  # returns once the process is gone
        dead_ms = time.time() * 1000
        deadline = time.monotonic() + timeout_s
        first = None
        while time.monotonic() < deadline and first is None:
            # Only a record produced after the old leader died was surely written by
            # the new one: an acknowledgement the old leader sent just before the
            # kill can reach the callback well after it on a loaded machine.
            first = next((ack for produced, ack in acked if produced >= dead_ms), None)
            time.sleep(0.005)
    finally:
        stop.set()
        sender.join()
        producer.flush(timeout_s)
    time.sleep(0.2)  # the last events reach their files
    return read_timeline(cluster, topic, partition, leader, killed_ms, first)
