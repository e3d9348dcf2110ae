"""Spark benchmark: N records of 100 bytes written by one Spark job through
kafkalab.spark into a local three-broker cluster (RF=3, acks=all, idempotent,
min.insync.replicas=2) and read back by another, on this machine.

A 200,000-record write and read run first (once) to warm the JVM and the Python
workers. Every phase then runs KAFKALAB_BENCH_RUNS times (default 3), each write
into a fresh topic that its read reads back and that is deleted afterwards;
the table is the median run of each phase, and the raw JSON keeps every run
("runs") beside the medians ("results"). Reports records/s and MB/s each way,
wall time, the brokers' CPU seconds and Spark's (the JVM, its Python workers
and the driver), and the ratio to librdkafka alone producing and consuming the
same records into the same cluster from one Python process (bench_cluster.py's
method).

The Spark-only floor ("Spark floor" rows): the same two jobs with no Kafka at
all. Its write sends the very DataFrame the real write sends to a Python data
source whose Arrow writer discards every batch it is given; its read runs the
real read's query (count and total value length) over a Python data source
with the real read's number of input partitions, whose reader yields one
prebuilt Arrow batch of kafkalab's schema and shape (key, value of 100 B,
topic, partition, offset, timestamp, timestampType; MESSAGES_PER_CONSUME rows)
again and again. What Spark CPU the floor uses per record is what Spark itself
costs; the rest of the real job's is kafkalab's Python and librdkafka. The
"Spark source only" row splits the write's floor: the same DataFrame written
to Spark's built-in `noop` sink, so only making its rows (in the JVM) is
measured, no Arrow batches and no Python worker.

    make bench                                            # or:
    .venv/bin/python benchmarks/bench_spark.py            # 10,000,000 records, 3 runs
    KAFKALAB_BENCH_RECORDS=1000000 KAFKALAB_BENCH_RUNS=1 .venv/bin/python benchmarks/bench_spark.py
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from kafkalab.cluster import LocalCluster
from kafkalab.spark import build_local_spark
from kafkalab.spark.offsets import OffsetRange, plan_ranges
from kafkalab.spark.options import EXECUTOR_FETCH, WriteOptions

N = int(os.environ.get("KAFKALAB_BENCH_RECORDS", "10000000"))
RUNS = int(os.environ.get("KAFKALAB_BENCH_RUNS", "3"))
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


def row(name: str, phase: str, m: Meter, n: int, run: int) -> dict:
    r = {
        "client": name,
        "phase": phase,
        "run": run,
        "records": n,
        "records_per_s": n / m.wall,
        "mb_per_s": n * VALUE_BYTES / m.wall / 1e6,
        "broker_cpu_s": m.broker_cpu,
        "client_cpu_s": m.client_cpu,
        "wall_s": m.wall,
    }
    print(
        f"  {name:<28} {phase:<6} run {run}  {r['records_per_s']:>12,.0f} records/s "
        f"{r['mb_per_s']:>6.1f} MB/s  broker CPU {m.broker_cpu:6.1f} s  "
        f"client CPU {m.client_cpu:6.1f} s  wall {m.wall:6.1f} s",
        flush=True,
    )
    return r


def delete(bs: str, topic: str) -> None:
    """Drop a measured topic once read, so the runs do not fill the disk."""
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_topics([topic]).values():
        f.result(60)


def librdkafka_alone(cluster: LocalCluster, topic: str, run: int) -> list[dict]:
    bs = cluster.bootstrap_servers
    value = b"x" * VALUE_BYTES
    # The same client settings as kafkalab.spark's executors, so that the ratio
    # compares the Spark layer and nothing else.
    p = Producer(WriteOptions(bs, topic).producer_config())
    with Meter(cluster, None) as w:
        for _ in range(N):
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:  # librdkafka's queue is full: wait for room
                    p.poll(0.05)
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
    return [
        row("librdkafka alone", "write", w, N, run),
        row("librdkafka alone", "read", r, N, run),
    ]


# The Spark-only floor: Python data sources with no Kafka behind them. Defined
# in this script (__main__), so Spark pickles them by value to its Python workers.


class FloorPartition(InputPartition):
    def __init__(self, index: int, records: int) -> None:
        super().__init__(index)
        self.records = records


class FloorReader(DataSourceReader):
    """Yields one prebuilt Arrow batch of the kafkalab source's schema, over and over."""

    def __init__(self, records: int, partitions: int) -> None:
        self.records, self.parts = records, partitions

    def partitions(self) -> list[InputPartition]:
        n, k = self.records, self.parts
        return [FloorPartition(i, n * (i + 1) // k - n * i // k) for i in range(k)]

    def read(self, partition):
        import numpy as np
        import pyarrow as pa

        from kafkalab.spark.kafka_io import MESSAGES_PER_CONSUME
        from kafkalab.spark.schema import arrow_schema, read_schema

        schema = arrow_schema(read_schema(False))
        rows = MESSAGES_PER_CONSUME
        batch = pa.RecordBatch.from_arrays(
            [
                pa.nulls(rows, pa.binary()),  # the benchmark writes no keys
                pa.array(
                    [f"{i}".rjust(VALUE_BYTES, "x").encode() for i in range(rows)], pa.binary()
                ),
                pa.repeat(pa.scalar("bench-spark", pa.string()), rows),
                pa.repeat(pa.scalar(partition.value, pa.int32()), rows),
                pa.array(np.arange(rows, dtype=np.int64)),
                pa.array(np.full(rows, int(time.time() * 1e6), np.int64), schema.field(5).type),
                pa.array(np.zeros(rows, np.int32)),
            ],
            schema=schema,
        )
        left = partition.records
        while left > 0:
            yield batch if left >= rows else batch.slice(0, left)
            left -= rows


@dataclass
class FloorCommit(WriterCommitMessage):
    records: int


class DiscardWriter(DataSourceArrowWriter):
    """Takes every Arrow batch Spark gives it and drops it."""

    def __init__(self, expected: int) -> None:
        self.expected = expected

    def write(self, iterator) -> FloorCommit:
        return FloorCommit(sum(batch.num_rows for batch in iterator))

    def commit(self, messages) -> None:
        got = sum(m.records for m in messages)
        assert got == self.expected, (got, self.expected)


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_floor"

    def schema(self):
        from kafkalab.spark.schema import read_schema

        return read_schema(False)

    def reader(self, schema) -> FloorReader:
        return FloorReader(int(self.options["records"]), int(self.options["partitions"]))

    def writer(self, schema, overwrite: bool) -> DiscardWriter:
        return DiscardWriter(int(self.options["records"]))


def median_runs(runs: list[dict]) -> list[dict]:
    """The median run of each (client, phase) by records/s, every run's rate beside it."""
    out = []
    for key in dict.fromkeys((r["client"], r["phase"]) for r in runs):
        mine = sorted((r for r in runs if (r["client"], r["phase"]) == key), key=_rate)
        rate = statistics.median_low([r["records_per_s"] for r in mine])
        med = dict(next(r for r in mine if r["records_per_s"] == rate))
        med["runs_records_per_s"] = [r["records_per_s"] for r in mine]
        out.append(med)
    return out


def _rate(r: dict) -> float:
    return r["records_per_s"]


def main() -> int:
    print(
        f"== {N:,} records of {VALUE_BYTES} B, {PARTITIONS} partitions, RF=3, acks=all, "
        f"{RUNS} run(s) a phase"
    )
    load_before = os.getloadavg()
    print(f"load average {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f}")
    runs = []
    read_tasks = len(
        plan_ranges(
            [OffsetRange("t", p, 0, N // PARTITIONS) for p in range(PARTITIONS)], CORES * 2, None
        )
    )
    with LocalCluster(brokers=3, broker_props={"min.insync.replicas": "2"}) as cluster:
        bs = cluster.bootstrap_servers
        spark = build_local_spark(cores=CORES, app_name="bench_spark")
        spark.dataSource.register(FloorSource)
        try:
            jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
            create(bs, "bench-warmup")
            # Warm up the JVM (JIT) and the Python workers on a small job first:
            # the table is about the steady state, not Spark's start-up.
            warm = spark.range(200_000).selectExpr("CAST(id AS STRING) AS value")
            warm.write.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
                "topic", "bench-warmup"
            ).mode("append").save()
            spark.read.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
                "subscribe", "bench-warmup"
            ).load().selectExpr("count(*)").collect()
            warm.write.format("bench_floor").option("records", 200_000).mode("append").save()
            warm.write.format("noop").mode("overwrite").save()
            spark.read.format("bench_floor").option("records", 200_000).option(
                "partitions", read_tasks
            ).load().selectExpr("count(*)").collect()
            source = spark.range(N, numPartitions=CORES * 2).selectExpr(
                f"lpad(CAST(id AS STRING), {VALUE_BYTES}, 'x') AS value"
            )
            query = ("count(*) AS n", "sum(length(value)) AS bytes")
            for run in range(RUNS):
                topic = f"bench-spark-{run}"
                create(bs, topic)
                with Meter(cluster, jvm_pid) as w:
                    source.write.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
                        "topic", topic
                    ).mode("append").save()
                runs.append(row("Spark + kafkalab.spark", "write", w, N, run))
                df = (
                    spark.read.format("kafkalab")
                    .option("kafka.bootstrap.servers", bs)
                    .option("subscribe", topic)
                    .option("minPartitions", str(CORES * 2))
                    .load()
                )
                with Meter(cluster, jvm_pid) as r:
                    got = df.selectExpr(*query).collect()[0]
                assert got.n == N and got.bytes == N * VALUE_BYTES, got
                runs.append(row("Spark + kafkalab.spark", "read", r, N, run))
                delete(bs, topic)
                with Meter(cluster, jvm_pid) as w:
                    source.write.format("bench_floor").option("records", N).mode("append").save()
                runs.append(row("Spark floor (no Kafka)", "write", w, N, run))
                with Meter(cluster, jvm_pid) as w:
                    source.write.format("noop").mode("overwrite").save()
                runs.append(row("Spark source only (noop)", "write", w, N, run))
                floor = (
                    spark.read.format("bench_floor")
                    .option("records", N)
                    .option("partitions", read_tasks)
                    .load()
                )
                with Meter(cluster, jvm_pid) as r:
                    got = floor.selectExpr(*query).collect()[0]
                assert got.n == N and got.bytes == N * VALUE_BYTES, got
                runs.append(row("Spark floor (no Kafka)", "read", r, N, run))
        finally:
            spark.stop()
        for run in range(RUNS):
            topic = f"bench-rdkafka-{run}"
            create(bs, topic)
            runs.extend(librdkafka_alone(cluster, topic, run))
            delete(bs, topic)
    results = median_runs(runs)
    alone = {r["phase"]: r["records_per_s"] for r in results if r["client"] == "librdkafka alone"}
    for r in results:
        r["ratio_to_librdkafka"] = r["records_per_s"] / alone[r["phase"]]
    print(f"median of {RUNS} run(s):")
    for r in results:
        print(
            f"  {r['client']:<28} {r['phase']:<6} {r['records_per_s']:>12,.0f} records/s  "
            f"broker CPU {r['broker_cpu_s']:6.1f} s  client CPU {r['client_cpu_s']:6.1f} s  "
            f"{r['client_cpu_s'] / N * 1e6:5.2f} µs/record  "
            f"ratio to librdkafka alone {r['ratio_to_librdkafka']:.2f}"
        )
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
                "runs_per_phase": RUNS,
                "commit": commit,
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpus": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": load_after,
                "results": results,
                "runs": runs,
            },
            indent=2,
        )
    )
    print(f"raw results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
