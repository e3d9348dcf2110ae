"""Kafka's Java Admin (kafka-clients 4.3, the Java peer) changes and reads configs:
incrementalAlterConfigs SET/DELETE/APPEND/SUBTRACT on a topic and on this broker,
refused as Kafka refuses (InvalidConfigurationException, UnknownTopicOrPartitionException,
InvalidRequestException), validate-only changing nothing, describeConfigs showing
each value's source."""

from __future__ import annotations

import pytest
from java_peer import java_peer, require_java_peer

from kafkalab.client.admin import Admin
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    require_java_peer()
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        yield b


def alter(bs: str, kind: str, name: str, ops: str, *extra: str) -> dict:
    (result,) = java_peer(
        "admin", "incrementalAlterConfigs", "--bootstrap", bs, "--type", kind, "--name", name,
        "--ops", ops, *extra,
    )  # fmt: skip
    return result


def describe(bs: str, kind: str, name: str) -> dict:
    (configs,) = java_peer(
        "admin", "describeConfigs", "--bootstrap", bs, "--type", kind, "--names", name
    )
    return configs["entries"]


def test_java_admin_alters_and_describes_topic_configs(broker):
    bs = broker.bootstrap_servers
    with Admin(bs) as admin:
        admin.create_topic("java-configs", configs={"retention.ms": "1000"})
    ops = "retention.ms:DELETE:;cleanup.policy:APPEND:compact;segment.bytes:SET:100000"
    assert alter(bs, "topic", "java-configs", ops)["error"] is None
    entries = describe(bs, "topic", "java-configs")
    assert entries["cleanup.policy"] == {
        "value": "delete,compact",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "readOnly": False,
        "sensitive": False,
    }
    assert entries["segment.bytes"]["value"] == "100000"
    assert entries["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert alter(bs, "topic", "java-configs", "cleanup.policy:SUBTRACT:delete")["error"] is None
    assert describe(bs, "topic", "java-configs")["cleanup.policy"]["value"] == "compact"
    checked = alter(bs, "topic", "java-configs", "flush.ms:SET:5", "--validate-only", "true")
    assert checked["error"] is None
    assert describe(bs, "topic", "java-configs")["flush.ms"]["source"] == "DEFAULT_CONFIG"


@pytest.mark.parametrize(
    ("kind", "name", "ops", "error"),
    [
        ("topic", "java-refused", "no.such.config:SET:1", "InvalidConfigurationException"),
        ("topic", "java-refused", "retention.ms:APPEND:1", "InvalidConfigurationException"),
        ("topic", "java-missing", "retention.ms:SET:1", "UnknownTopicOrPartitionException"),
        ("broker", "1", "node.id:SET:2", "InvalidRequestException"),
        ("broker", "1", "log.retention.ms:SET:soon", "InvalidRequestException"),
    ],
)
def test_java_admin_is_refused_as_kafka_refuses(broker, kind, name, ops, error):
    bs = broker.bootstrap_servers
    with Admin(bs) as admin:
        if name == "java-refused" and "java-refused" not in admin.list_topics():
            admin.create_topic("java-refused")
    assert alter(bs, kind, name, ops)["error"] == error


def test_java_admin_changes_a_broker_config_the_topics_fall_back_on(broker):
    bs = broker.bootstrap_servers
    assert alter(bs, "broker", "1", "log.retention.ms:SET:90000")["error"] is None
    entries = describe(bs, "broker", "1")
    assert entries["log.retention.ms"]["value"] == "90000"
    assert entries["log.retention.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert entries["node.id"]["readOnly"] is True
    with Admin(bs) as admin:
        admin.create_topic("java-falls-back")
    topic = describe(bs, "topic", "java-falls-back")
    assert topic["retention.ms"]["value"] == "90000"
    assert topic["retention.ms"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert alter(bs, "broker", "1", "log.retention.ms:DELETE:")["error"] is None
    assert describe(bs, "topic", "java-falls-back")["retention.ms"]["source"] == "DEFAULT_CONFIG"
