"""kafkalab.spark's own produce across a leader change: a three-broker LocalCluster
(RF=3, acks=all, min.insync.replicas=2), the partition's leader SIGKILLed while
one task's write is under way. The sender asks Metadata again after the broken
connection and sends every batch not acknowledged, unchanged (the same producer
id and sequences), to the new leader: the idempotent producer's promise is that
librdkafka then reads every row back exactly once, in the order written.
No Spark session: the executors' produce_batches."""

from __future__ import annotations

import pytest
from spark_helpers import consume_all, create_topic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import current_leader

pytestmark = pytest.mark.integration
pa = pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")


def test_a_write_follows_the_new_leader_after_a_kill_and_writes_each_row_once(monkeypatch):
    from kafkalab.spark import kafka_io, sender
    from kafkalab.spark.options import parse_write_options

    resent = []  # what went again: (error, batches) per recovery round
    real_dispatch = sender.Sender._dispatch

    def dispatch(self, batches):
        batches = list(batches)
        if self.failed == [] and getattr(self, "_recovering", False):
            resent.append(len(batches))
        return real_dispatch(self, batches)

    real_recover = sender.Sender._recover

    def recover(self):
        self._recovering = True
        try:
            return real_recover(self)
        finally:
            self._recovering = False

    monkeypatch.setattr(sender.Sender, "_dispatch", dispatch)
    monkeypatch.setattr(sender.Sender, "_recover", recover)

    with LocalCluster(
        brokers=3, session_timeout_ms=2000, broker_props={"min.insync.replicas": "2"}
    ) as cluster:
        bs = cluster.bootstrap_servers
        create_topic(bs, "moving-write", partitions=1, rf=3)
        opts = parse_write_options(
            {
                "kafka.bootstrap.servers": bs,
                "topic": "moving-write",
                "kafkalab.producer": "kafkalab",
                "kafka.batch.size": "2000",  # many small batches, 5 requests in flight
            }
        )
        n, per_batch = 6000, 200
        killed = []

        def batches():
            for start in range(0, n, per_batch):
                if start == n // 3:  # a third written: kill the leader mid-write
                    killed.append(current_leader(cluster, "moving-write", 0))
                    cluster.kill(killed[0])
                values = [b"%05d" % i for i in range(start, start + per_batch)]
                yield pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})

        assert kafka_io.produce_batches(opts, batches()) == n
        assert current_leader(cluster, "moving-write", 0) != killed[0]
        assert resent and sum(resent) > 0  # the kill was felt: batches went again
        got = [m.value() for m in consume_all(bs, "moving-write", 1)]
        assert got == [b"%05d" % i for i in range(n)]
