"""Consumer-group benchmark on a local three-broker cluster, with librdkafka members.

1. subscribe() to the first record, for a new group: median of 5 groups, with
   group.initial.rebalance.delay.ms=0 (the labs') and 3000 (Kafka's default).
2. A rebalance of 10 members joining at once: from the first subscribe() to
   every member holding its partitions (20 partitions); median of 5 groups (it
   moves in steps of librdkafka's 3 s heartbeat: a member learns of a rebalance
   it did not start at its next heartbeat).
3. OffsetCommit: synchronous commits per second from one member (each waits
   for the acks=all write to __consumer_offsets), for 3 seconds.

    make bench          # or: .venv/bin/python benchmarks/bench_groups.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster

GROUPS = 5
REBALANCES = 5
MEMBERS = 10
PARTITIONS = 20


def create(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic(topic, partitions, 3)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bs})
    for p in range(partitions):
        producer.produce(topic, b"x" * 100, partition=p)
    producer.flush(30)


def member(bs: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    return c


def first_record_s(bs: str, topic: str, group: str) -> float:
    start = time.perf_counter()
    c = member(bs, group, topic)
    try:
        while True:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                return time.perf_counter() - start
    finally:
        c.close()


def subscribe_to_first_record(initial_delay_ms: int) -> list[float]:
    with LocalCluster(
        brokers=3, broker_props={"group.initial.rebalance.delay.ms": str(initial_delay_ms)}
    ) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "first", 4)
        first_record_s(bs, "first", "warm-up")  # creates __consumer_offsets
        return [first_record_s(bs, "first", f"g{i}") for i in range(GROUPS)]


def rebalances_of_many() -> list[float]:
    with LocalCluster(brokers=3, broker_props={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "many", PARTITIONS)
        first_record_s(bs, "many", "warm-up")
        return [rebalance_of_many(bs, f"crowd-{i}") for i in range(REBALANCES)]


def rebalance_of_many(bs: str, group: str) -> float:
    held = [0] * MEMBERS
    stop = threading.Event()
    start = time.perf_counter()
    members = [member(bs, group, "many") for _ in range(MEMBERS)]

    def poll(i: int) -> None:  # each member polls (and reads its assignment) alone
        while not stop.is_set():
            members[i].poll(0.05)
            held[i] = len(members[i].assignment())

    threads = [threading.Thread(target=poll, args=(i,), daemon=True) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    try:
        while not (sum(held) == PARTITIONS and min(held) > 0):
            time.sleep(0.01)
        return time.perf_counter() - start
    finally:
        stop.set()
        for t in threads:
            t.join()
        for c in members:
            c.close()


def commits_per_second(seconds: float = 3) -> float:
    with LocalCluster(brokers=3, broker_props={"group.initial.rebalance.delay.ms": "0"}) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "commits", 1)
        c = member(bs, "committer", "commits")
        try:
            while not c.assignment():
                c.poll(0.05)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                c.commit(offsets=[TopicPartition("commits", 0, n % 1000)], asynchronous=False)
                n += 1
            return n / (time.perf_counter() - start)
        finally:
            c.close()


def main() -> int:
    labs = subscribe_to_first_record(0)
    kafka = subscribe_to_first_record(3000)
    print(
        f"subscribe -> first record: {statistics.median(labs) * 1000:.0f} ms median with "
        f"group.initial.rebalance.delay.ms=0, {statistics.median(kafka) * 1000:.0f} ms with 3000",
        flush=True,
    )
    many = rebalances_of_many()
    print(
        f"{MEMBERS} members joining at once: all assigned after {statistics.median(many) * 1000:.0f}"
        f" ms median of {len(many)} ({', '.join(f'{m * 1000:.0f}' for m in many)})",
        flush=True,
    )
    rate = commits_per_second()
    print(f"synchronous OffsetCommit: {rate:,.0f} commits/s", flush=True)
    result = {
        "first_record_ms_delay0": statistics.median(labs) * 1000,
        "first_record_ms_delay3000": statistics.median(kafka) * 1000,
        "rebalance_10_members_ms": statistics.median(many) * 1000,
        "rebalance_10_members_ms_each": [m * 1000 for m in many],
        "first_record_ms_each": {
            "delay0": [x * 1000 for x in labs],
            "delay3000": [x * 1000 for x in kafka],
        },
        "sync_commits_per_s": rate,
    }
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "groups.json"), "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
