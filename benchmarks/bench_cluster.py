"""Cluster benchmark: what replication costs, and how long a failover takes.

1. Throughput. N records of 100 bytes with a librdkafka producer into a local
   three-broker cluster: a topic with RF=3 and acks=all (idempotent) against a
   topic with RF=1 and acks=1, in the same run; median of 3; the ratio.
2. Failover. A producer (acks=all) sends a record every 10 ms; the partition
   leader is SIGKILLed; we time from the kill to the first acknowledgement of a
   record sent after it. Once with Kafka's default timeouts
   (broker.session.timeout.ms=9000, broker.heartbeat.interval.ms=2000) and once
   with the labs' (2000 and 250). Median of 3 kills each.

    make bench                                   # or: .venv/bin/python benchmarks/bench_cluster.py
    KAFKALAB_BENCH_RECORDS=200000 ...            # records per throughput run (default 1,000,000)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "1000000"))
VALUE = b"x" * 100
RUNS = 3


def create(bs: str, topic: str, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 1, rf)]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every replica has joined the ISR
        p = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if p is not None and p.leader >= 0 and len(p.isrs) == rf:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: ISR never reached {rf}")


def produce(bs: str, topic: str, n: int, acks: str) -> float:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": acks,
            "enable.idempotence": acks == "all",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0
    return n / (time.perf_counter() - start)


def throughput() -> dict:
    with LocalCluster(brokers=3) as cluster:
        bs = cluster.bootstrap_servers
        rates: dict[str, list[float]] = {"rf3_acks_all": [], "rf1_acks_1": []}
        for run in range(RUNS):
            for name, rf, acks in (("rf3_acks_all", 3, "all"), ("rf1_acks_1", 1, "1")):
                topic = f"{name.replace('_', '-')}-{run}"
                create(bs, topic, rf)
                rates[name].append(produce(bs, topic, N, acks))
                print(f"  run {run}: {name} {rates[name][-1]:,.0f} records/s", flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        return {**med, "ratio": med["rf3_acks_all"] / med["rf1_acks_1"]}


def leader_of(bs: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader


def time_one_failover(cluster: LocalCluster, topic: str) -> float:
    """Seconds from SIGKILLing the leader to the first ack of a record sent after it."""
    create(cluster.bootstrap_servers, topic, 3)
    acked_at: list[float] = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "message.timeout.ms": 120000,
        }
    )
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked_at.append(time.monotonic())

    def run():
        while not stop.is_set():
            p.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
            p.poll(0)
            time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        time.sleep(1)
        leader = leader_of(cluster.bootstrap_servers, topic)
        killed_at = time.monotonic()
        cluster.kill(leader)
        deadline = killed_at + 120
        while time.monotonic() < deadline and not any(t > killed_at + 0.05 for t in acked_at):
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    p.flush(60)
    cluster.restart(leader)
    return min(t for t in acked_at if t > killed_at + 0.05) - killed_at


def failover(session_ms: int, heartbeat_ms: int) -> list[float]:
    times = []
    with LocalCluster(
        brokers=3,
        session_timeout_ms=session_ms,
        broker_props={"broker.heartbeat.interval.ms": str(heartbeat_ms)},
    ) as cluster:
        for kill in range(RUNS):
            times.append(time_one_failover(cluster, f"failover-{kill}"))
            print(f"  kill {kill}: {times[-1]:.2f} s (session {session_ms} ms)", flush=True)
    return times


def main() -> int:
    print(f"== throughput, {N:,} records of 100 bytes, median of {RUNS}")
    tp = throughput()
    print(
        f"RF=3 acks=all: {tp['rf3_acks_all']:,.0f} records/s; "
        f"RF=1 acks=1: {tp['rf1_acks_1']:,.0f} records/s; ratio {tp['ratio']:.2f}"
    )
    print("== failover: kill the leader, time to the first acknowledged produce")
    default = failover(9000, 2000)
    lab = failover(2000, 250)
    print(
        f"default timeouts: {statistics.median(default):.2f} s; "
        f"lab timeouts: {statistics.median(lab):.2f} s"
    )
    result = {
        "records": N,
        **tp,
        "failover_default_s": statistics.median(default),
        "failover_lab_s": statistics.median(lab),
    }
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cluster.json"), "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
