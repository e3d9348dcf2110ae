"""Broker benchmark: produce and consume N records of 100 bytes against one kafkalab
broker (a separate process), acks=1, with librdkafka (confluent-kafka) and with the
teaching client. Median of 3 runs; broker CPU seconds beside each.

    make bench                                  # or: .venv/bin/python benchmarks/bench_broker.py
    KAFKALAB_BENCH_RECORDS=200000 ...           # records per run (default 1,000,000)
    KAFKALAB_BENCH_RUNS=7 ...                   # runs per row (default 3)
    KAFKALAB_BENCH_PHASES=produce ...           # produce, consume or both (default)
    KAFKALAB_BENCH_CLIENTS=librdkafka ...       # librdkafka, teaching or both (default)
    KAFKALAB_BENCH_RESULT=broker-x.json ...     # file under benchmarks/results (default broker.json)

The question it answers: is the broker the bottleneck at about a million
100-byte records a second in ~1 MB batches? Compare the broker's CPU seconds
with the wall time: a broker that is not the bottleneck uses well under one
core-second per second.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalab.client import KafkaConsumer, KafkaProducer
from kafkalab.server.broker import BrokerProcess

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "1000000"))
VALUE = b"x" * 100
RUNS = int(os.environ.get("KAFKALAB_BENCH_RUNS", "3"))
PHASES = os.environ.get("KAFKALAB_BENCH_PHASES", "produce,consume").split(",")
CLIENTS = os.environ.get("KAFKALAB_BENCH_CLIENTS", "librdkafka,teaching").split(",")
RESULT = os.environ.get("KAFKALAB_BENCH_RESULT", "broker.json")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rd_produce(bs: str, topic: str, n: int) -> None:
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": "1",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "enable.idempotence": False,
            "compression.type": "none",
        }
    )
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def rd_consume(bs: str, topic: str, n: int) -> None:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50_000_000,
            "max.partition.fetch.bytes": 10_000_000,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    while seen < n:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                seen += 1
    c.close()


def teach_produce(bs: str, topic: str, n: int) -> None:
    with KafkaProducer(
        {
            "bootstrap.servers": bs,
            "acks": "1",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "enable.idempotence": False,
        }
    ) as p:
        for _ in range(n):
            p.send(topic, VALUE, partition=0)
        p.flush(300)


def teach_consume(bs: str, topic: str, n: int) -> None:
    with KafkaConsumer(
        {
            "bootstrap.servers": bs,
            "auto.offset.reset": "earliest",
            "max.poll.records": 100_000,
            "max.partition.fetch.bytes": 10_000_000,
        }
    ) as c:
        c.assign([(topic, 0)])
        seen = 0
        while seen < n:
            seen += len(c.poll(1000))


def measure(broker: BrokerProcess, fn, topic: str, n: int) -> tuple[float, float]:
    pid = broker.process.pid
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    fn(broker.bootstrap_servers, topic, n)
    return time.perf_counter() - t0, cpu_seconds(pid) - cpu0


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="kafkalab-bench-broker-") as tmp:
        with BrokerProcess({"log.dirs": tmp, "num.partitions": "1"}) as broker:
            for client, produce, consume, n in (
                ("librdkafka (confluent-kafka)", rd_produce, rd_consume, N),
                ("kafkalab teaching client", teach_produce, teach_consume, N),
            ):
                if not any(c in client for c in CLIENTS):
                    continue
                for phase, fn in (("produce", produce), ("consume", consume)):
                    if phase not in PHASES:
                        continue
                    runs = []
                    for run in range(RUNS):
                        topic = f"bench-{client[:4]}-{run}"
                        if phase == "consume":
                            produce(broker.bootstrap_servers, topic + "-c", n)
                            topic += "-c"
                        runs.append(measure(broker, fn, topic, n))
                        print(
                            f"{client} {phase} run {run}: {n / runs[-1][0]:,.0f} records/s",
                            file=sys.stderr,
                        )
                    wall = statistics.median(r[0] for r in runs)
                    cpu = statistics.median(r[1] for r in runs)
                    rows.append(
                        {
                            "client": client,
                            "phase": phase,
                            "records": n,
                            "records_s": n / wall,
                            "mb_s": n * len(VALUE) / wall / 1e6,
                            "broker_cpu_s": cpu,
                            "wall_s": wall,
                            "runs": [{"wall_s": w, "broker_cpu_s": c} for w, c in runs],
                        }
                    )
    print(table(rows))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / RESULT).write_text(json.dumps(rows, indent=2))
    return 0


def table(rows: list[dict]) -> str:
    lines = [
        f"Broker, {os.cpu_count()} cores, acks=1, 100-byte records, median of {RUNS} runs:",
        "",
        "| client | phase | records | records/s | MB/s (values) | broker CPU s | wall s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['client']} | {r['phase']} | {r['records']:,} | {r['records_s']:,.0f} | "
            f"{r['mb_s']:.1f} | {r['broker_cpu_s']:.2f} | {r['wall_s']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
