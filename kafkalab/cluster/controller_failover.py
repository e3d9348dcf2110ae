"""A controller failover, timed and taken apart: where the time goes after the active
controller of a KRaft quorum dies (failover.py does the same for a partition's leader).

    timeline = measure_controller_failover(cluster, "after")  # SIGKILL the active controller
    timeline.phases()        # a DataFrame of the phases below
    timeline.transitions()   # every Raft transition of the surviving voters, in order
    timeline.total_ms        # kill -> the first record acknowledged in a new topic

The phases come from the processes' own records (each one's `events.jsonl`,
kafkalab.server.events: the voters' Raft transitions, the new leader's LeaderChange
committed, its activation, the brokers' first heartbeats to it) and from a client
that needs the new controller:

    fetch timeout            the kill -> the voter that will win turns Prospective: it
                             heard nothing from its leader for
                             controller.quorum.fetch.timeout.ms
    pre-vote                 -> it won a majority of pre-votes (KIP-996) and became
                             Candidate in epoch + 1 (its vote for itself fsynced)
    vote                     -> a majority voted for it: Leader
    LeaderChange committed   -> its LeaderChange record (the first of its epoch) is
                             committed by a majority: its high watermark is known
    activation               -> the QuorumController on it applied everything committed
                             and activated (every broker's session timer restarts)
    brokers on the new leader -> every running broker's heartbeat reached it (brokers go
                             to the leader the controllers name in their metadata Fetch
                             answers; before one is named they try the controllers in
                             turn: controller_channel.py)
    topic created            -> a CreateTopics sent through a broker from the moment of
                             the kill, retried, succeeded (the new controller wrote and
                             committed the topic)
    first record             -> the first acks=all record to that new topic is
                             acknowledged (the brokers applied the topic's partitions)

The first five phases are one voter's chain, each starting where the previous
ended. The last three run side by side from the activation (`AFTER` names the
phase each starts from): the brokers' heartbeats find the new leader on their own
timers (broker.heartbeat.interval.ms), while a CreateTopics that a broker forwards
goes at once to the leader it knows (or tries every controller), so the topic and its first record can come before
the last broker's heartbeat. The picture draws them as overlapping bars.

The partitions of existing topics keep their leaders through all of it: an acks=all
producer to them does not wait for the controller (`load_acked_during` counts its
acknowledgements between the kill and the activation).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from kafkalab.server.events import read_events

PHASES = (
    "fetch timeout",
    "pre-vote",
    "vote",
    "LeaderChange committed",
    "activation",
    "brokers on the new leader",
    "topic created",
    "first record",
)


#: the phase whose end each phase starts from (None: the kill)
AFTER = {
    "fetch timeout": None,
    "pre-vote": "fetch timeout",
    "vote": "pre-vote",
    "LeaderChange committed": "vote",
    "activation": "LeaderChange committed",
    "brokers on the new leader": "activation",
    "topic created": "activation",
    "first record": "topic created",
}


@dataclass
class ControllerFailoverTimeline:
    killed: int
    old_epoch: int
    killed_ms: float
    new_leader: int = -1
    epoch: int = -1
    prospective_ms: float | None = None
    candidate_ms: float | None = None
    leader_ms: float | None = None
    committed_ms: float | None = None
    activated_ms: float | None = None
    brokers_ms: dict[int, float] = field(default_factory=dict)
    brokers_expected: tuple[int, ...] = ()
    topic_created_ms: float | None = None
    first_ack_ms: float | None = None
    load_acked_during: int | None = None
    events: list[dict] = field(default_factory=list)  # the survivors' Raft transitions

    @property
    def total_ms(self) -> float | None:
        return None if self.first_ack_ms is None else self.first_ack_ms - self.killed_ms

    def phase_ends(self) -> dict[str, float | None]:
        """Each phase's end, in ms after the kill (None: not seen)."""
        brokers = None
        if self.brokers_expected and set(self.brokers_expected) <= set(self.brokers_ms):
            brokers = max(self.brokers_ms[b] for b in self.brokers_expected)
        ends = dict(
            zip(
                PHASES,
                (
                    self.prospective_ms,
                    self.candidate_ms,
                    self.leader_ms,
                    self.committed_ms,
                    self.activated_ms,
                    brokers,
                    self.topic_created_ms,
                    self.first_ack_ms,
                ),
                strict=True,
            )
        )
        return {k: None if v is None else v - self.killed_ms for k, v in ends.items()}

    def phases(self):
        """A DataFrame: phase, start and end (ms after the kill), duration. A phase
        starts where the one it comes after (`AFTER`) ended; one that ended before
        it started (recorded late) lasts 0 ms."""
        import pandas as pd

        rows, ends = [], self.phase_ends()
        seen: dict[str, float | None] = {}
        for name, end in ends.items():
            before = AFTER[name]
            start = 0.0 if before is None else seen[before]
            if start is None or end is None:
                rows.append({"phase": name, "start ms": start, "end ms": None, "ms": None})
                seen[name] = None
                continue
            end = max(end, start)
            rows.append({"phase": name, "start ms": start, "end ms": end, "ms": end - start})
            seen[name] = end
        return pd.DataFrame(rows)

    def transitions(self):
        """The surviving voters' Raft transitions after the kill: ms after it, voter,
        from, to, epoch, leader."""
        import pandas as pd

        rows = [
            {
                "ms": e["time_ms"] - self.killed_ms,
                "voter": e["voter"],
                "from": f"{e['from']} ({e['from_epoch']})",
                "to": e["state"],
                "epoch": e["epoch"],
                "leader": e["leader"],
            }
            for e in self.events
        ]
        return pd.DataFrame(rows, columns=["ms", "voter", "from", "to", "epoch", "leader"])


def _first(events, **match) -> dict | None:
    return next((e for e in events if all(e.get(k) == v for k, v in match.items())), None)


def read_controller_timeline(
    cluster,
    killed: int,
    old_epoch: int,
    killed_ms: float,
    topic_created_ms: float | None = None,
    first_ack_ms: float | None = None,
) -> ControllerFailoverTimeline:
    """Rebuild a controller failover's timeline from the surviving voters' events
    (the quorum of `cluster`, a LocalCluster with controllers > 1)."""
    t = ControllerFailoverTimeline(killed, old_epoch, killed_ms)
    t.topic_created_ms, t.first_ack_ms = topic_created_ms, first_ack_ms
    t.brokers_expected = tuple(
        b
        for b, p in sorted(cluster.brokers.items())
        if p.process is not None and p.process.poll() is None
    )
    after: dict[int, list[dict]] = {}
    for voter, process in sorted(cluster.controllers.items()):
        if voter == killed:
            continue
        after[voter] = [e for e in read_events(process.dir) if e["time_ms"] >= killed_ms]
        for e in after[voter]:
            if e["event"] == "quorum_state":
                t.events.append({**e, "voter": voter})
    t.events.sort(key=lambda e: e["time_ms"])
    won = next((e for e in t.events if e["state"] == "leader" and e["epoch"] > old_epoch), None)
    if won is None:
        return t
    t.new_leader, t.epoch, t.leader_ms = won["voter"], won["epoch"], won["time_ms"]
    mine = after[t.new_leader]
    candidate = _first(mine, event="quorum_state", state="candidate", epoch=t.epoch)
    t.candidate_ms = candidate and candidate["time_ms"]
    prospective = _first(mine, event="quorum_state", state="prospective")
    t.prospective_ms = prospective and prospective["time_ms"]
    committed = _first(mine, event="leader_change_committed", epoch=t.epoch)
    t.committed_ms = committed and committed["time_ms"]
    activated = _first(mine, event="controller_activated", epoch=t.epoch)
    t.activated_ms = activated and activated["time_ms"]
    for e in mine:
        if e["event"] == "broker_heartbeat" and e["epoch"] == t.epoch:
            t.brokers_ms.setdefault(e["broker"], e["time_ms"])
    return t


def measure_controller_failover(
    cluster,
    new_topic: str,
    load_topic: str | None = None,
    warmup_s: float = 1.0,
    timeout_s: float = 120,
    producer_config: dict | None = None,
) -> ControllerFailoverTimeline:
    """SIGKILL the active controller of `cluster` (a LocalCluster with a quorum) and
    take the failover apart. From the moment of the kill a client creates `new_topic`
    through the brokers (retrying while no controller answers), then sends one
    acks=all record to it and waits for its acknowledgement: the first record that
    needed the new controller. With `load_topic`, a librdkafka producer (acks=all,
    idempotent) also sends a record every 10 ms to that existing topic from
    `warmup_s` before the kill, to show it is not held up. The killed controller
    stays down: restart it yourself."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    quorum = cluster.describe_quorum(20)
    old, old_epoch = quorum.leader_id, quorum.leader_epoch
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "message.timeout.ms": int(timeout_s * 1000),
        "topic.metadata.refresh.interval.ms": 100,
        **(producer_config or {}),
    }
    load_acks: list[float] = []
    stop = threading.Event()

    def load() -> None:
        producer = Producer(config)
        n = 0
        while not stop.is_set():
            producer.produce(
                load_topic,
                b"%d" % n,
                on_delivery=lambda err, msg: err or load_acks.append(time.time() * 1000),
            )
            producer.poll(0)
            n += 1
            time.sleep(0.01)
        producer.flush(timeout_s)

    sender = threading.Thread(target=load, daemon=True)
    if load_topic is not None:
        sender.start()
        time.sleep(warmup_s)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    replicas = min(3, len(cluster.brokers))
    try:
        killed_ms = time.time() * 1000
        cluster.kill(old)
        deadline = time.monotonic() + timeout_s
        created_ms = None
        while created_ms is None:
            try:
                futures = admin.create_topics(
                    [NewTopic(new_topic, 1, replicas)], request_timeout=5, operation_timeout=5
                )
                for f in futures.values():
                    f.result(10)
                created_ms = time.time() * 1000
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):  # an earlier try went through
                    created_ms = time.time() * 1000
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"no controller created {new_topic} in {timeout_s} s") from e
                else:
                    time.sleep(0.02)
        acked: list[float] = []
        producer = Producer(config)
        producer.produce(
            new_topic,
            b"first",
            on_delivery=lambda err, msg: err or acked.append(time.time() * 1000),
        )
        producer.flush(timeout_s)
        del producer
    finally:
        stop.set()
        if sender.is_alive():
            sender.join()
    time.sleep(0.2)  # the last events reach their files
    t = read_controller_timeline(
        cluster, old, old_epoch, killed_ms, created_ms, acked[0] if acked else None
    )
    if load_topic is not None and t.activated_ms is not None:
        t.load_acked_during = sum(killed_ms <= a <= t.activated_ms for a in load_acks)
    return t
