"""Partition scale: many partitions of RF=3 on the three-broker cluster, then idle.

For each size and each pair of timeouts, on a fresh LocalCluster(3):

1. create the partitions (topics of --per-topic partitions, RF=3, ten topics a
   CreateTopics request) and wait until every partition has a leader and a
   full ISR in the brokers' metadata: the time to create them;
2. a produce/consume pass across them: --records records to every partition
   (librdkafka, acks=all; records whose delivery failed are counted by error
   code), then one consumer reads them all back;
3. idle for --idle-s seconds, no client connected: each broker's CPU (from
   /proc, user+system) and, at the end, its RSS (anonymous and file-backed
   apart), per hosted partition over the RSS of the same broker before the
   topics were created;
4. fences: FenceBrokerRecords the controller wrote (its events.jsonl) from the
   first topic to the end of the idle time (the target is 0);
5. with --fence-cycle, what one fence costs: broker 2 is paused past its session
   and resumed; the time until every partition is fully replicated again, each
   broker's CPU seconds meanwhile, and whether other brokers got fenced (a storm).

Timeouts: "labs" is the labs' broker.session.timeout.ms=500 with heartbeats every
100 ms (kafkalab.cluster.failover.LABS_FAILOVER); "kafka" is Kafka's defaults,
9000 and 2000.

    .venv/bin/python benchmarks/bench_partition_scale.py                       # 1000 and 3000, both
    .venv/bin/python benchmarks/bench_partition_scale.py --sizes 300 --settings labs --idle-s 20

Raw results go to benchmarks/results/partition-scale-<commit>-<time>.json, with the
machine's load average before and after each run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import KAFKA_DEFAULT_FAILOVER, LABS_FAILOVER
from kafkalab.server.events import read_events

SETTINGS = {"labs": LABS_FAILOVER, "kafka": KAFKA_DEFAULT_FAILOVER}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_kb(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0])
    return out


def fences(cluster: LocalCluster) -> list[dict]:
    return [e for e in read_events(cluster.base_dir / "controller") if e["event"] == "fenced"]


def wait_all_replicated(admin: AdminClient, topics: set[str], timeout_s: float) -> None:
    """Until every partition of `topics` has a leader and 3 in-sync replicas."""
    deadline = time.monotonic() + timeout_s
    while True:
        md = admin.list_topics(timeout=30).topics
        missing = [
            t
            for t in topics
            if t not in md
            or not md[t].partitions
            or any(p.leader < 0 or len(p.isrs) < 3 for p in md[t].partitions.values())
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} topics not fully replicated, e.g. {missing[:3]}")
        time.sleep(0.5)


def fence_cycle(cluster: LocalCluster, pids: dict[int, int], topics: set[str], settings: str):
    """What one fence and unfence costs: broker 2 is paused (SIGSTOP) until the
    controller fences it and for four session timeouts more, then resumed; the
    time until every partition is fully replicated again, each broker's CPU
    seconds meanwhile, and the fences of other brokers it caused (target: 0)."""
    session_s = SETTINGS[settings]["session_timeout_ms"] / 1000
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    before = len(fences(cluster))
    cpu0 = {b: cpu_s(pid) for b, pid in pids.items()}
    start = time.monotonic()
    cluster.pause(2)
    while len(fences(cluster)) == before:
        time.sleep(0.05)
    fenced_s = time.monotonic() - start
    time.sleep(4 * session_s)
    cluster.resume(2)
    resumed = time.monotonic()
    wait_all_replicated(admin, topics, 900)
    back_s = time.monotonic() - resumed
    time.sleep(max(2 * session_s, 5))  # would a storm follow?
    cycle = fences(cluster)[before:]
    return {
        "paused_broker": 2,
        "fenced_after_s": round(fenced_s, 2),
        "fully_replicated_after_resume_s": round(back_s, 2),
        "cpu_s_per_broker": {b: round(cpu_s(pid) - cpu0[b], 2) for b, pid in pids.items()},
        "fences": [e["broker"] for e in cycle],
        "other_brokers_fenced": sum(e["broker"] != 2 for e in cycle),
    }


def run_one(partitions: int, settings: str, args: argparse.Namespace) -> dict:
    per_topic = args.per_topic
    topics = [f"scale-{i}" for i in range((partitions + per_topic - 1) // per_topic)]
    load_before = os.getloadavg()
    with LocalCluster(3, **SETTINGS[settings]) as cluster:
        pids = {b: p.process.pid for b, p in cluster.brokers.items()}
        controller_pid = cluster.controller.process.pid
        base_rss = {b: memory_kb(pid) for b, pid in pids.items()}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        fenced_before = len(fences(cluster))

        start = time.monotonic()
        for i in range(0, len(topics), 10):
            batch = [NewTopic(t, per_topic, 3) for t in topics[i : i + 10]]
            for future in admin.create_topics(batch, request_timeout=120).values():
                future.result(180)
        created_s = time.monotonic() - start
        wait_all_replicated(admin, set(topics), 600)
        replicated_s = time.monotonic() - start

        start = time.monotonic()
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "linger.ms": 20,
                "queue.buffering.max.messages": 10_000_000,
            }
        )
        value = b"x" * 100
        delivery_errors: dict[str, int] = {}  # error name -> records not acknowledged

        def delivered(err, _msg) -> None:
            if err is not None:
                delivery_errors[err.name()] = delivery_errors.get(err.name(), 0) + 1

        for t in topics:
            for p in range(per_topic):
                for _ in range(args.records):
                    producer.produce(t, value, partition=p, on_delivery=delivered)
            producer.poll(0)
        left = producer.flush(300)
        produced_s = time.monotonic() - start

        start = time.monotonic()
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "bench-partition-scale",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(per_topic)])
        want, got = len(topics) * per_topic * args.records, 0
        deadline = time.monotonic() + 600
        while got < want and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                if m.error() is None:
                    got += 1
        consumer.close()
        consumed_s = time.monotonic() - start

        # Idle: no client connected.
        del producer, consumer, admin
        time.sleep(2)
        cpu0 = {b: cpu_s(pid) for b, pid in pids.items()}
        ccpu0 = cpu_s(controller_pid)
        fenced_mid = len(fences(cluster))
        t0 = time.monotonic()
        time.sleep(args.idle_s)
        idle = time.monotonic() - t0
        idle_cpu = {b: (cpu_s(pid) - cpu0[b]) / idle for b, pid in pids.items()}
        controller_cpu = (cpu_s(controller_pid) - ccpu0) / idle
        rss = {b: memory_kb(pid) for b, pid in pids.items()}
        all_fences = fences(cluster)[fenced_before:]
        cycle = fence_cycle(cluster, pids, set(topics), settings) if args.fence_cycle else None
        load_after = os.getloadavg()
    hosted = len(topics) * per_topic  # RF=3 on 3 brokers: every broker hosts every partition
    return {
        "partitions": len(topics) * per_topic,
        "topics": len(topics),
        "settings": settings,
        "session_timeout_ms": SETTINGS[settings]["session_timeout_ms"],
        "heartbeat_interval_ms": int(
            SETTINGS[settings]["broker_props"]["broker.heartbeat.interval.ms"]
        ),
        "fences": len(all_fences),
        "fences_during_create_and_load": fenced_mid - fenced_before,
        "fences_during_idle": len(all_fences) - (fenced_mid - fenced_before),
        "fenced": all_fences,
        "create_s": round(created_s, 2),
        "create_until_fully_replicated_s": round(replicated_s, 2),
        "records_per_partition": args.records,
        "produce_s": round(produced_s, 2),
        "produce_unflushed": left,
        "produce_delivery_errors": sum(delivery_errors.values()),
        "produce_delivery_errors_by_code": delivery_errors,
        "consume_s": round(consumed_s, 2),
        "consumed": got,
        "expected": want,
        "idle_s": round(idle, 1),
        "idle_cpu_per_broker": {b: round(v, 4) for b, v in idle_cpu.items()},
        "idle_cpu_controller": round(controller_cpu, 4),
        "rss_kb_before": base_rss,
        "rss_kb_idle": rss,
        "rss_kb_per_partition": {
            b: {
                k: round((rss[b][k] - base_rss[b][k]) / hosted, 1)
                for k in ("VmRSS", "RssAnon", "RssFile")
            }
            for b in pids
        },
        "fence_cycle": cycle,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument(
        "--settings", nargs="+", choices=sorted(SETTINGS), default=["labs", "kafka"]
    )
    parser.add_argument("--per-topic", type=int, default=10, help="partitions a topic")
    parser.add_argument("--records", type=int, default=20, help="records a partition")
    parser.add_argument("--idle-s", type=float, default=60)
    parser.add_argument(
        "--fence-cycle",
        action="store_true",
        help="after the idle time, fence broker 2 once (SIGSTOP) and measure its way back",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"partition-scale-{commit}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    doc = {
        "benchmark": "bench_partition_scale",
        "commit": commit,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "results": [],
    }
    for size in args.sizes:
        for settings in args.settings:
            print(f"{size} partitions, {settings} timeouts ...", flush=True)
            r = run_one(size, settings, args)
            doc["results"].append(r)
            path.write_text(json.dumps(doc, indent=2) + "\n")  # after every run
            print(
                f"  fences {r['fences']}, created in {r['create_s']} s "
                f"(fully replicated {r['create_until_fully_replicated_s']} s), produce "
                f"{r['produce_s']} s ({r['produce_delivery_errors']} not acknowledged "
                f"{r['produce_delivery_errors_by_code']}, {r['produce_unflushed']} unflushed), consume {r['consume_s']} s ({r['consumed']}/{r['expected']}), "
                f"idle CPU {r['idle_cpu_per_broker']}, RSS/partition kB "
                f"{r['rss_kb_per_partition']}, fence cycle {r['fence_cycle']}, "
                f"load {r['loadavg_before']} -> {r['loadavg_after']}",
                flush=True,
            )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
