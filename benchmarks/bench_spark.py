"""Spark benchmark: N records of 100 bytes written by one Spark job through
kafkalab.spark into a local three-broker cluster (RF=3, acks=all, idempotent,
min.insync.replicas=2) and read back by another, on this machine.

A 200,000-record write and read run first to warm the JVM and the Python
workers. Reports records/s and MB/s each way, wall time, the brokers' CPU seconds and
Spark's (the JVM, its Python workers and the driver), and the ratio to
librdkafka alone producing and consuming the same records into the same cluster
from one Python process (bench_cluster.py's method).

    make bench                                            # or:
    .venv/bin/python benchmarks/bench_spark.py            # 10,000,000 records
    KAFKALAB_BENCH_RECORDS=1000000 KAFKALAB_BENCH_PARTITIONS=4 .venv/bin/python benchmarks/bench_spark.py
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.spark import build_local_spark
from kafkalab.spark.options import EXECUTOR_FETCH, WriteOptions

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "10000000"))
PARTITIONS = int(os.environ.get("KAFKALAB_BENCH_PARTITIONS", "4"))
CORES = int(os.environ.get("KAFKALAB_BENCH_SPARK_CORES", "2"))
VALUE_BYTES = 100
TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and every descendant alive now, plus what the
    children it already reaped used (cutime/cstime)."""
    total = 0.0
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(d.name))
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / TICK
        stack.extend(children.get(p, []))
    return total


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def create(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ps = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(ps) == PARTITIONS and all(p.leader >= 0 and len(p.isrs) == 3 for p in ps.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: ISR never reached 3")


class Meter:
    """Wall time and CPU seconds of the brokers and of Spark over one phase."""

    def __init__(self, cluster: LocalCluster, jvm_pid: int | None) -> None:
        self.brokers = [b.process.pid for b in cluster.brokers.values()]
        self.jvm_pid = jvm_pid

    def _cpu(self) -> tuple[float, float]:
        brokers = sum(tree_cpu(p) for p in self.brokers)
        spark = (tree_cpu(self.jvm_pid) if self.jvm_pid else 0.0) + self_cpu()
        return brokers, spark

    def __enter__(self) -> Meter:
        self.b0, self.s0 = self._cpu()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        b1, s1 = self._cpu()
        self.broker_cpu, self.client_cpu = b1 - self.b0, s1 - self.s0


def row(name: str, phase: str, m: Meter, n: int) -> dict:
    r = {
        "client": name,
        "phase": phase,
        "records": n,
        "records_per_s": n / m.wall,
        "mb_per_s": n * VALUE_BYTES / m.wall / 1e6,
        "broker_cpu_s": m.broker_cpu,
        "client_cpu_s": m.client_cpu,
        "wall_s": m.wall,
    }
    print(
        f"  {name:<28} {phase:<8} {r['records_per_s']:>12,.0f} records/s "
        f"{r['mb_per_s']:>6.1f} MB/s  broker CPU {m.broker_cpu:6.1f} s  "
        f"client CPU {m.client_cpu:6.1f} s  wall {m.wall:6.1f} s",
        flush=True,
    )
    return r


def librdkafka_alone(cluster: LocalCluster, topic: str) -> list[dict]:
    bs = cluster.bootstrap_servers
    value = b"x" * VALUE_BYTES
    # The same client settings as kafkalab.spark's executors, so that the ratio
    # compares the Spark layer and nothing else.
    p = Producer(WriteOptions(bs, topic).producer_config())
    with Meter(cluster, None) as w:
        for _ in range(N):
            try:
                p.produce(topic, value)
            except BufferError:
                p.poll(0.05)
                p.produce(topic, value)
        assert p.flush(600) == 0
    c = Consumer(
        {
            **EXECUTOR_FETCH,
            "isolation.level": "read_uncommitted",
            "bootstrap.servers": bs,
            "group.id": "bench",
            "enable.auto.commit": False,
        }
    )
    with Meter(cluster, None) as r:
        c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
        got = 0
        while got < N:
            msgs = c.consume(20_000, timeout=1)
            got += sum(len(m.value()) > 0 for m in msgs)
    c.close()
    return [row("librdkafka alone", "write", w, N), row("librdkafka alone", "read", r, N)]


def main() -> int:
    print(f"== {N:,} records of {VALUE_BYTES} B, {PARTITIONS} partitions, RF=3, acks=all")
    load_before = os.getloadavg()
    print(f"load average {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}")
    results = []
    with LocalCluster(brokers=3, broker_props={"min.insync.replicas": "2"}) as cluster:
        bs = cluster.bootstrap_servers
        spark = build_local_spark(cores=CORES, app_name="bench_spark")
        try:
            jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
            create(bs, "bench-spark")
            create(bs, "bench-warmup")
            # Warm up the JVM (JIT) and the Python workers on a small job first:
            # the table is about the steady state, not Spark's start-up.
            spark.range(200_000).selectExpr("CAST(id AS STRING) AS value").write.format(
                "kafkalab"
            ).option("kafka.bootstrap.servers", bs).option("topic", "bench-warmup").mode(
                "append"
            ).save()
            spark.read.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
                "subscribe", "bench-warmup"
            ).load().selectExpr("count(*)").collect()
            source = spark.range(N, numPartitions=CORES * 2).selectExpr(
                f"lpad(CAST(id AS STRING), {VALUE_BYTES}, 'x') AS value"
            )
            with Meter(cluster, jvm_pid) as w:
                source.write.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
                    "topic", "bench-spark"
                ).mode("append").save()
            results.append(row("Spark + kafkalab.spark", "write", w, N))
            df = (
                spark.read.format("kafkalab")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", "bench-spark")
                .option("minPartitions", str(CORES * 2))
                .load()
            )
            with Meter(cluster, jvm_pid) as r:
                got = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]
            assert got.n == N and got.bytes == N * VALUE_BYTES, got
            results.append(row("Spark + kafkalab.spark", "read", r, N))
        finally:
            spark.stop()
        create(bs, "bench-rdkafka")
        results.extend(librdkafka_alone(cluster, "bench-rdkafka"))
    alone = {r["phase"]: r["records_per_s"] for r in results if r["client"] == "librdkafka alone"}
    for r in results:
        r["ratio_to_librdkafka"] = r["records_per_s"] / alone[r["phase"]]
    for phase in ("write", "read"):
        spark_rate = next(r for r in results if r["phase"] == phase)["records_per_s"]
        print(f"{phase}: Spark / librdkafka alone = {spark_rate / alone[phase]:.2f}")
    load_after = os.getloadavg()
    print(f"load average {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
    ).stdout.strip()
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"spark-{commit or 'nogit'}-{N}.json"
    path.write_text(
        json.dumps(
            {
                "records": N,
                "partitions": PARTITIONS,
                "commit": commit,
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": load_after,
                "results": results,
            },
            indent=2,
        )
    )
    print(f"raw results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
