"""Authorized operations through librdkafka's admin client: a broker without an
authorizer (kafkalab runs none) allows every operation a resource supports, and
says so when asked (Metadata v8+ include_topic/cluster_authorized_operations);
when not asked, the field stays Integer.MIN_VALUE and the client shows none."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from kafkalab.server.auth_helper import SUPPORTED_OPERATIONS, ResourceType
from kafkalab.server.broker import BrokerThread

# Kafka's AclEntry.supportedOperations, written out rather than read from ours
TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


@pytest.fixture(scope="module")
def admin(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in client.create_topics([NewTopic("orders", 2, 1)]).values():
            future.result(10)
        yield client


def test_describe_topics_reports_every_topic_operation(admin):
    futures = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)
    described = futures["orders"].result(10)
    assert set(described.authorized_operations) == TOPIC_OPERATIONS
    assert {int(o.value) for o in TOPIC_OPERATIONS} == set(SUPPORTED_OPERATIONS[ResourceType.TOPIC])


def test_describe_topics_without_asking_reports_none(admin):
    described = admin.describe_topics(TopicCollection(["orders"]))["orders"].result(10)
    assert described.authorized_operations is None


def test_describe_cluster_reports_every_cluster_operation(admin):
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    assert admin.describe_cluster().result(10).authorized_operations is None
