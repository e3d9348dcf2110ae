"""Cluster benchmark: what replication costs, and how long a failover takes.

1. Throughput. N records of 100 bytes with a librdkafka producer into a local
   three-broker cluster: a topic with RF=3 and acks=all (idempotent) against a
   topic with RF=1 and acks=1, in the same run; median of 3; the ratio.
2. Failover. A producer (acks=all, idempotent) sends a record every 10 ms; the
   partition leader is SIGKILLed; kafkalab.cluster.failover times the kill to the
   first acknowledgement after it and reads the phases from the processes'
   events. With the labs' timeouts (broker.session.timeout.ms=500,
   broker.heartbeat.interval.ms=100) and librdkafka refreshing metadata every
   100 ms, with librdkafka's defaults, and with Kafka's default timeouts (9000
   and 2000): KAFKALAB_BENCH_KILLS kills each (default 20).

    make bench                                   # or: .venv/bin/python benchmarks/bench_cluster.py
    KAFKALAB_BENCH_RECORDS=200000 ...            # records per throughput run (default 1,000,000)
    KAFKALAB_BENCH_KILLS=20 ...                  # failovers per settings row
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import (
    KAFKA_DEFAULT_FAILOVER,
    LABS_FAILOVER,
    LABS_PRODUCER,
    PHASES,
    measure_failover,
)
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, encode_request, encode_response
from kafkalab.protocol.messages import CONTROLLER_APIS

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "1000000"))
VALUE = b"x" * 100
RUNS = 3
KILLS = int(os.environ.get("KAFKALAB_BENCH_KILLS", "20"))


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


def failover(settings: dict, producer_config: dict | None, kills: int) -> list:
    """`kills` failovers of one partition's leader in one cluster; each killed broker
    is restarted and the partition fully replicated again before the next kill."""
    timelines = []
    with LocalCluster(brokers=3, **copy.deepcopy(settings)) as cluster:
        create(cluster.bootstrap_servers, "failover", 3)
        for kill in range(kills):
            t = measure_failover(cluster, "failover", producer_config=producer_config)
            timelines.append(t)
            print(f"  kill {kill}: broker {t.killed}, {t.total_ms:.0f} ms", flush=True)
            cluster.start_broker(t.killed)
            cluster.wait_fully_replicated()
    return timelines


def heartbeat_bytes() -> int:
    """Bytes of one BrokerHeartbeat request and its response on the wire."""
    body = {
        "broker_id": 1,
        "broker_epoch": 10,
        "current_metadata_offset": 1000,
        "want_fence": False,
        "want_shut_down": False,
    }
    request = encode_request(
        RequestHeader(ApiKeys.BROKER_HEARTBEAT, 0, 1, "kafkalab-broker"), body, CONTROLLER_APIS
    )
    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "is_caught_up": True,
        "is_fenced": False,
        "should_shut_down": False,
    }
    api = CONTROLLER_APIS[ApiKeys.BROKER_HEARTBEAT]
    answer = b"".join(bytes(x) for x in encode_response(api, 0, 1, response))
    return len(request) + len(answer)


def summary(name: str, timelines: list) -> dict:
    totals = sorted(t.total_ms for t in timelines)
    phases = {
        phase: statistics.median(t.phases().set_index("phase").loc[phase, "ms"] for t in timelines)
        for phase in PHASES
    }
    row = {
        "settings": name,
        "kills": len(totals),
        "median_ms": statistics.median(totals),
        "p90_ms": totals[min(len(totals) - 1, int(0.9 * len(totals)))],
        "max_ms": totals[-1],
        "phases_median_ms": phases,
        "totals_ms": totals,  # every kill, for the distribution behind the median
    }
    print(
        f"{name}: median {row['median_ms']:.0f} ms, p90 {row['p90_ms']:.0f} ms, "
        f"max {row['max_ms']:.0f} ms; phases (median ms): "
        + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()),
        flush=True,
    )
    return row


def main() -> int:
    print(f"== throughput, {N:,} records of 100 bytes, median of {RUNS}")
    tp = throughput()
    print(
        f"RF=3 acks=all: {tp['rf3_acks_all']:,.0f} records/s; "
        f"RF=1 acks=1: {tp['rf1_acks_1']:,.0f} records/s; ratio {tp['ratio']:.2f}"
    )
    print("== failover: kill the leader, time to the first acknowledged produce")
    rows = [
        summary(
            "labs' timeouts (500/100 ms), librdkafka metadata refresh 100 ms",
            failover(LABS_FAILOVER, LABS_PRODUCER, KILLS),
        ),
        summary(
            "labs' timeouts (500/100 ms), librdkafka defaults",
            failover(LABS_FAILOVER, None, KILLS),
        ),
        summary(
            "Kafka's defaults (9000/2000 ms), librdkafka defaults",
            failover(KAFKA_DEFAULT_FAILOVER, None, KILLS),
        ),
    ]
    per_heartbeat = heartbeat_bytes()
    print(
        f"heartbeats: {per_heartbeat} bytes each (request + response); at 100 ms, "
        f"{10 * per_heartbeat} bytes/s per broker; at Kafka's 2000 ms, {per_heartbeat // 2} bytes/s"
    )
    result = {"records": N, **tp, "failover": rows, "heartbeat_bytes": per_heartbeat}
    out = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cluster.json"), "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
