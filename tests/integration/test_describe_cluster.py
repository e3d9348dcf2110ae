"""DescribeCluster (60) v0-v2 on a broker, through real admin clients and raw requests.

kafka-python's KafkaAdminClient.describe_cluster sends DescribeCluster (v2) when the
broker advertises it (before, it fell back to Metadata); librdkafka's
AdminClient.describe_cluster asks Metadata with include_cluster_authorized_operations
(it has no DescribeCluster request), so both paths are checked to agree. Without an
authorizer every cluster operation is reported (Kafka's AclEntry.supportedOperations
for CLUSTER, written out here rather than read from ours).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclOperation, AdminClient
from kafka import KafkaAdminClient

from kafkalab.client.network_client import BrokerConnection
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread

CLUSTER_ID = "describe-me"
NODE_ID = 3
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}
CLUSTER_BITS = sum(1 << int(op.value) for op in CLUSTER_OPERATIONS)
OMITTED = -(2**31)  # Integer.MIN_VALUE: the operations were not asked for


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
            "cluster.id": CLUSTER_ID,
            "node.id": str(NODE_ID),
        }
    ) as running:
        yield running


def address(broker) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def test_librdkafka_describes_the_cluster(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert cluster.cluster_id == CLUSTER_ID
    assert cluster.controller.id == NODE_ID
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(NODE_ID, *address(broker))]
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS


def test_kafka_python_describes_the_cluster_with_describe_cluster(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    host, port = address(broker)
    assert cluster["cluster_id"] == CLUSTER_ID
    assert cluster["controller_id"] == NODE_ID
    # is_fenced: the answer came from DescribeCluster v2, not the Metadata fallback
    assert cluster["brokers"] == [
        {"broker_id": NODE_ID, "host": host, "port": port, "rack": None, "is_fenced": False}
    ]
    assert set(cluster["authorized_operations"]) == {op.name for op in CLUSTER_OPERATIONS}


@pytest.mark.parametrize("version", range(3))
@pytest.mark.parametrize("with_operations", [True, False])
def test_every_version_on_the_wire(broker, version, with_operations):
    conn = BrokerConnection(*address(broker))
    try:
        body = {
            "include_cluster_authorized_operations": with_operations,
            "endpoint_type": 1,
            "include_fenced_brokers": True,
        }
        _, answer = conn._call(ApiKeys.DESCRIBE_CLUSTER, version, body)
    finally:
        conn.close()
    host, port = address(broker)
    assert answer["error_code"] == Errors.NONE and answer["error_message"] is None
    assert answer["cluster_id"] == CLUSTER_ID
    assert answer["controller_id"] == NODE_ID
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in answer["brokers"]] == [
        (NODE_ID, host, port, None)
    ]
    assert answer["brokers"][0]["is_fenced"] is False  # v0-v1: the schema's default
    assert answer["cluster_authorized_operations"] == (CLUSTER_BITS if with_operations else OMITTED)


@pytest.mark.parametrize(
    "endpoint_type, error",
    [(2, Errors.MISMATCHED_ENDPOINT_TYPE), (9, Errors.UNSUPPORTED_ENDPOINT_TYPE)],
)
def test_a_broker_describes_only_brokers(broker, endpoint_type, error):
    conn = BrokerConnection(*address(broker))
    try:
        body = {"include_cluster_authorized_operations": True, "endpoint_type": endpoint_type}
        _, answer = conn._call(ApiKeys.DESCRIBE_CLUSTER, 1, body)
    finally:
        conn.close()
    assert answer["error_code"] == error
    assert answer["error_message"]
    assert answer["brokers"] == [] and answer["controller_id"] == -1
