"""kafkalab.spark's own fetch across a leader change: a three-broker LocalCluster
(RF=3, acks=all, min.insync.replicas=2), the partition's leader SIGKILLed while
one range is being read. The read follows the new leader (Metadata again after
the broken connection or NOT_LEADER_OR_FOLLOWER) and gives every record of the
range exactly once, in offset order. No Spark session: the executors' read_range."""

from __future__ import annotations

import pytest
from spark_helpers import create_topic, produce

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader

pytestmark = pytest.mark.integration
pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")
pytest.importorskip("pyspark", reason="pyspark is in the labs extra (the source's schema)")


def test_a_read_follows_the_new_leader_after_a_kill():
    from kafkalab.spark import kafka_io
    from kafkalab.spark.offsets import OffsetRange
    from kafkalab.spark.options import parse_read_options
    from kafkalab.spark.schema import read_schema

    with LocalCluster(
        brokers=3, session_timeout_ms=2000, broker_props={"min.insync.replicas": "2"}
    ) as cluster:
        bs = cluster.bootstrap_servers
        create_topic(bs, "moving", partitions=1, rf=3)
        n = 3000
        produce(bs, "moving", [(None, b"%05d" % i, 0, None) for i in range(n)], **{
            "batch.num.messages": 100
        })  # fmt: skip
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": bs,
                "subscribe": "moving",
                "kafkalab.fetcher": "kafkalab",
                # small fetches: many of them, so the kill lands mid-range
                "kafka.max.partition.fetch.bytes": "4096",
                "kafkaConsumer.pollTimeoutMs": "60000",
            },
            streaming=False,
        )
        batches = kafka_io.read_range(opts, OffsetRange("moving", 0, 0, n), read_schema(False))
        first = next(batches)
        assert 0 < first.num_rows < n
        old = current_leader(cluster, "moving", 0)
        cluster.kill(old)
        rest = list(batches)
        offsets = first.column("offset").to_pylist() + [
            o for b in rest for o in b.column("offset").to_pylist()
        ]
        values = first.column("value").to_pylist() + [
            v for b in rest for v in b.column("value").to_pylist()
        ]
        assert offsets == list(range(n))
        assert values == [b"%05d" % i for i in range(n)]
        assert current_leader(cluster, "moving", 0) != old
