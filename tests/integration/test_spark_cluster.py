"""kafkalab.spark against a three-broker LocalCluster (RF=3, acks=all,
min.insync.replicas=2): a batch round trip checked partition by partition, and a
streaming read that survives a SIGKILLed partition leader and a restart from its
checkpoint, judged by the history checker. One SparkSession for the module."""

from __future__ import annotations

import time
import zlib

import pytest
from spark_helpers import consume_all, create_topic, spark_session

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import ProducerWorkload

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(
        brokers=3, session_timeout_ms=2000, broker_props={"min.insync.replicas": "2"}
    ) as c:
        yield c


@pytest.fixture(scope="module")
def spark(request):
    session = spark_session("test_spark_cluster")
    request.addfinalizer(session.stop)
    return session


def test_batch_round_trip_through_three_replicas(spark, cluster):
    bs = cluster.bootstrap_servers
    create_topic(bs, "orders", partitions=4, rf=3)
    n = 20_000
    source = spark.range(n).selectExpr(
        "CAST(id % 97 AS STRING) AS key", "CONCAT('order-', id, '-', repeat('x', 80)) AS value"
    )
    source.write.format("kafkalab").option("kafka.bootstrap.servers", bs).option(
        "topic", "orders"
    ).option("kafka.compression.type", "lz4").mode("append").save()

    back = (
        spark.read.format("kafkalab")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "orders")
        .option("minPartitions", "8")
        .load()
    )
    assert back.count() == n
    assert back.select("value").distinct().count() == n
    # Per partition: count and an order-independent checksum, against librdkafka.
    spark_sums = {
        r.partition: (r["count"], r.checksum)
        for r in back.groupBy("partition")
        .agg({"*": "count", "value": "collect_list"})
        .withColumnRenamed("count(1)", "count")
        .selectExpr(
            "partition",
            "count",
            "aggregate(transform(`collect_list(value)`, v -> "
            "CAST(crc32(v) AS DECIMAL(38,0))), CAST(0 AS DECIMAL(38,0)), (a, b) -> a + b)"
            " AS checksum",
        )  # fmt: skip
        .collect()
    }
    direct: dict[int, list[int]] = {}
    for m in consume_all(bs, "orders", 4):
        direct.setdefault(m.partition(), []).append(zlib.crc32(m.value()))
    assert spark_sums == {p: (len(c), sum(c)) for p, c in direct.items()}
    # Every replica holds every record.
    deadline = time.monotonic() + 30
    while True:
        df = cluster.describe("orders")
        if len(df) == 12 and (df.groupby("partition").LEO.nunique() == 1).all():
            break
        assert time.monotonic() < deadline, df
        time.sleep(0.2)
    assert int(df.groupby("partition").LEO.first().sum()) == n


def leader_of(cluster, topic: str, partition: int) -> int:
    df = cluster.describe(topic)
    rows = df[(df.partition == partition) & (df.role == "leader") & (df.status == "running")]
    return int(rows.sort_values("leader epoch").broker.iloc[-1])


def test_stream_survives_a_leader_kill_and_a_restart(spark, cluster, tmp_path):
    bs = cluster.bootstrap_servers
    create_topic(bs, "events", partitions=1, rf=3)
    out, cp = tmp_path / "out", tmp_path / "cp"

    def start():
        return (
            spark.readStream.format("kafkalab")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "500")
            .load()
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(cp))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    history = History()
    query = start()
    try:
        with ProducerWorkload(bs, "events", history, acks="all", rate=300):
            time.sleep(2)
            leader = leader_of(cluster, "events", 0)
            cluster.kill(leader)
            time.sleep(4)
            cluster.restart(leader)
            time.sleep(1)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    first_run = spark.read.parquet(str(out)).count()

    # Restart from the checkpoint: exactly the records written since, nothing twice.
    with ProducerWorkload(cluster.bootstrap_servers, "events", history, acks="all", prefix="w"):
        time.sleep(1)
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).select("offset", "value").collect()
    history.final_log("events", 0, sorted((r.offset, r.value) for r in rows))
    verdict = check(history)
    assert verdict.valid, verdict.summary()
    acked = sum(op.kind == "ack" for op in history.ops)
    assert acked > 0 and first_run < len(rows)
    assert len(rows) == len({r.offset for r in rows})  # every offset once
