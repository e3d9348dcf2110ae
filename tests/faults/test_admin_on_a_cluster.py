"""CreatePartitions and DeleteRecords on the three-broker cluster, through
confluent-kafka's AdminClient: after DeleteRecords every replica's log start
offset has moved (each broker asked about its own log, as a debugging tool asks:
ListOffsets with replica id -2); after CreatePartitions the new partition is led
and followed, a producer writes to it with acks=all and a consumer reads it."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from faults_helpers import wait_until

from kafkalab.client.network_client import BrokerConnection
from kafkalab.cluster import LocalCluster
from kafkalab.protocol.api_keys import ApiKeys

EARLIEST = -2
DEBUGGING_REPLICA_ID = -2  # ListOffsets from any replica, out of its own log


def own_log_start(host: str, port: int, topic: str, partition: int) -> int:
    connection = BrokerConnection(host, port)
    try:
        body = {
            "replica_id": DEBUGGING_REPLICA_ID,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": -1,
                            "timestamp": EARLIEST,
                        }
                    ],
                }
            ],
        }
        p = connection.request(ApiKeys.LIST_OFFSETS, body)["topics"][0]["partitions"][0]
        assert p["error_code"] == 0, p
        return p["offset"]
    finally:
        connection.close()


def test_delete_records_and_create_partitions_on_three_brokers(tmp_path):
    with LocalCluster(brokers=3, base_dir=tmp_path) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for future in admin.create_topics(
            [NewTopic("trimmed", 1, 3), NewTopic("grown", 1, 3)]
        ).values():
            future.result(60)
        producer = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
        for i in range(100):
            producer.produce("trimmed", value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0

        futures = admin.delete_records(
            [TopicPartition("trimmed", 0, 60)], request_timeout=60, operation_timeout=30
        )
        assert next(iter(futures.values())).result(60).low_watermark == 60
        brokers = admin.list_topics(timeout=10).brokers
        assert len(brokers) == 3
        # answered only once every live replica reported its new start: no waiting here
        assert {b: own_log_start(m.host, m.port, "trimmed", 0) for b, m in brokers.items()} == {
            b: 60 for b in brokers
        }

        for future in admin.create_partitions([NewPartitions("grown", 3)]).values():
            future.result(60)

        def led_and_replicated() -> bool:
            parts = admin.list_topics("grown", timeout=10).topics["grown"].partitions
            return len(parts) == 3 and all(
                p.leader >= 0 and len(p.replicas) == 3 and len(p.isrs) == 3 for p in parts.values()
            )

        wait_until(led_and_replicated, timeout=60)
        for i in range(10):
            producer.produce("grown", value=b"new%d" % i, partition=2)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": bs, "group.id": "reader", "auto.offset.reset": "earliest"}
        )
        consumer.assign([TopicPartition("grown", 2, 0)])
        got = []
        try:
            for _ in range(300):
                if len(got) == 10:
                    break
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert got == [b"new%d" % i for i in range(10)]
