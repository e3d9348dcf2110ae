"""AlterConfigs, IncrementalAlterConfigs and DescribeConfigs on one broker, through
confluent-kafka's AdminClient, kafka-python's KafkaAdminClient, the teaching
Admin and `kafkalab configs`: a change acts at once (min.insync.replicas turns an
acks=all producer's sends into NOT_ENOUGH_REPLICAS and back; a lower retention.ms
deletes old segments and moves the earliest offset), is described with its
source, survives a restart, and a bad one is refused per resource as Kafka
refuses it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType

from kafkalab.client.admin import Admin
from kafkalab.client.network_client import BrokerConnection
from kafkalab.errors import Errors
from kafkalab.errors import KafkaError as LabError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread

SET, DELETE, APPEND, SUBTRACT = (
    AlterConfigOpType.SET,
    AlterConfigOpType.DELETE,
    AlterConfigOpType.APPEND,
    AlterConfigOpType.SUBTRACT,
)


def broker_props(directory: Path) -> dict[str, str]:
    return {"log.dirs": str(directory), "log.retention.check.interval.ms": "100"}


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(broker_props(tmp_path / "broker")) as b:
        yield b


def create(bs: str, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})]).values():
        future.result(15)


_ADMINS: dict[str, AdminClient] = {}


def admin_for(bs: str) -> AdminClient:
    """One AdminClient a broker, kept: a future outlives the call that made it."""
    if bs not in _ADMINS:
        _ADMINS[bs] = AdminClient({"bootstrap.servers": bs})
    return _ADMINS[bs]


@pytest.fixture(autouse=True)
def _forget_admins():
    """Drop the test's AdminClients before its broker goes, so none keeps reconnecting."""
    yield
    _ADMINS.clear()


def incremental(bs: str, resource_type, name: str, *entries, validate_only: bool = False):
    admin = admin_for(bs)
    resource = ConfigResource(
        resource_type,
        name,
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, op, v in entries],
    )
    return admin.incremental_alter_configs([resource], validate_only=validate_only)[resource]


def describe(bs: str, resource_type, name: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource])[resource].result(15)


def send(bs: str, topic: str, n: int = 1) -> list:
    """acks=all sends, no retries: each delivery's error (None when written)."""
    errors = []
    producer = Producer(
        {"bootstrap.servers": bs, "acks": "all", "retries": 0, "message.timeout.ms": 10_000}
    )
    for i in range(n):  # a batch each
        producer.produce(topic, b"v%d" % i * 20, on_delivery=lambda e, m: errors.append(e))
        assert producer.flush(15) == 0
    return errors


def test_incremental_alter_configs_set_delete_append_subtract(broker):
    bs = broker.bootstrap_servers
    create(bs, "inc", {"retention.ms": "1000"})
    ops = [
        ("retention.ms", DELETE, None),
        ("cleanup.policy", APPEND, "compact"),
        ("segment.bytes", SET, "100000"),
    ]
    assert incremental(bs, ConfigResource.Type.TOPIC, "inc", *ops).result(15) is None
    entries = describe(bs, ConfigResource.Type.TOPIC, "inc")
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["segment.bytes"].value == "100000"
    assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    ops = [("cleanup.policy", SUBTRACT, "delete")]
    incremental(bs, ConfigResource.Type.TOPIC, "inc", *ops).result(15)
    assert describe(bs, ConfigResource.Type.TOPIC, "inc")["cleanup.policy"].value == "compact"


def test_legacy_alter_configs_replaces_every_override(broker):
    bs = broker.bootstrap_servers
    create(bs, "legacy", {"retention.ms": "1000", "segment.bytes": "100000"})
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "legacy", set_config={"flush.ms": "10"})
    with pytest.warns(DeprecationWarning):
        futures = admin.alter_configs([resource])
    futures[resource].result(15)
    entries = describe(bs, ConfigResource.Type.TOPIC, "legacy")
    dynamic = {n for n, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert dynamic == {"flush.ms"}


@pytest.mark.parametrize(
    ("name", "entry", "code"),
    [
        ("bad", ("no.such.config", SET, "1"), "INVALID_CONFIG"),
        ("bad", ("retention.ms", SET, "soon"), "INVALID_CONFIG"),
        ("bad", ("max.message.bytes", APPEND, "1"), "INVALID_CONFIG"),
        ("bad", ("remote.storage.enable", SET, "true"), "INVALID_CONFIG"),
        ("no-such-topic", ("retention.ms", SET, "1"), "UNKNOWN_TOPIC_OR_PART"),
    ],
)
def test_bad_topic_changes_are_refused_as_kafka_refuses_them(broker, name, entry, code):
    bs = broker.bootstrap_servers
    if name == "bad":
        create(bs, "bad")
    with pytest.raises(KafkaException) as e:
        incremental(bs, ConfigResource.Type.TOPIC, name, entry).result(15)
    assert e.value.args[0].name() == code


def test_each_resource_is_answered_alone_and_validate_only_changes_nothing(broker):
    bs = broker.bootstrap_servers
    create(bs, "good")
    admin = AdminClient({"bootstrap.servers": bs})
    good = ConfigResource(
        ConfigResource.Type.TOPIC,
        "good",
        incremental_configs=[ConfigEntry("retention.ms", "5000", incremental_operation=SET)],
    )
    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "missing",
        incremental_configs=[ConfigEntry("retention.ms", "5000", incremental_operation=SET)],
    )
    futures = admin.incremental_alter_configs([good, bad], validate_only=True)
    assert futures[good].result(15) is None
    with pytest.raises(KafkaException):
        futures[bad].result(15)
    assert describe(bs, ConfigResource.Type.TOPIC, "good")["retention.ms"].value != "5000"
    futures = admin.incremental_alter_configs([good, bad])
    assert futures[good].result(15) is None
    with pytest.raises(KafkaException):
        futures[bad].result(15)
    assert describe(bs, ConfigResource.Type.TOPIC, "good")["retention.ms"].value == "5000"


def test_broker_configs_dynamic_static_and_refused(tmp_path):
    props = {**broker_props(tmp_path), "log.retention.hours": "48", "num.io.threads": "4"}
    with BrokerThread(props) as b:
        bs = b.bootstrap_servers
        entries = describe(bs, ConfigResource.Type.BROKER, "1")
        assert entries["num.io.threads"].value == "4"
        assert entries["num.io.threads"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert entries["log.retention.ms"].value == str(48 * 3600 * 1000)
        assert entries["node.id"].is_read_only
        assert not entries["log.retention.ms"].is_read_only
        assert entries["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        ops = [("log.retention.ms", SET, "60000"), ("min.insync.replicas", SET, "2")]
        incremental(bs, ConfigResource.Type.BROKER, "1", *ops).result(15)
        entries = describe(bs, ConfigResource.Type.BROKER, "1")
        assert entries["log.retention.ms"].value == "60000"
        assert entries["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        # a topic without an override falls back on it, and says so
        create(bs, "falls-back")
        topic = describe(bs, ConfigResource.Type.TOPIC, "falls-back")
        assert topic["retention.ms"].value == "60000"
        assert topic["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert topic["min.insync.replicas"].value == "2"
        for entry, code in [
            (("node.id", SET, "7"), "INVALID_REQUEST"),  # not dynamic
            (("log.retention.ms", SET, "soon"), "INVALID_REQUEST"),  # KAFKA-13609
            (("log.retention.ms", APPEND, "1"), "INVALID_CONFIG"),
        ]:
            with pytest.raises(KafkaException) as e:
                incremental(bs, ConfigResource.Type.BROKER, "1", entry).result(15)
            assert e.value.args[0].name() == code, entry
        with Admin(bs) as admin:  # DescribeConfigs v3+: documentation when asked
            documented = admin.describe_configs("brokers", "1", ["log.retention.ms"], True)
            assert documented["log.retention.ms"].documentation
            assert documented["log.retention.ms"].synonyms[0] == (
                "log.retention.ms",
                "60000",
                "DYNAMIC_BROKER_CONFIG",
            )
            assert admin.describe_configs("brokers", "1")["node.id"].documentation is None
            with pytest.raises(LabError) as e:  # the Admin asks a broker about itself only
                admin.describe_configs("brokers", "2")
            assert e.value.code == Errors.BROKER_NOT_AVAILABLE
        host, port = bs.rsplit(":", 1)
        connection = BrokerConnection(host, int(port))
        try:  # ...and a broker asked about another answers as Kafka's does
            body = {
                "resources": [
                    {"resource_type": 4, "resource_name": "2", "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            }
            (result,) = connection.request(ApiKeys.DESCRIBE_CONFIGS, body)["results"]
            assert result["error_code"] == Errors.INVALID_REQUEST
            assert result["error_message"] == (
                "Unexpected broker id, expected 1 or empty string, but received 2"
            )
        finally:
            connection.close()
        # another broker's configs are that broker's to change (it is not here)
        with Admin(bs) as admin, pytest.raises(LabError) as e:
            admin.incremental_alter_configs("brokers", "", [("log.dirs", "SET", "/x")])
        assert e.value.code == Errors.INVALID_REQUEST


def test_min_insync_replicas_starts_and_stops_not_enough_replicas(broker):
    bs = broker.bootstrap_servers
    create(bs, "isr")
    assert send(bs, "isr") == [None]
    incremental(bs, ConfigResource.Type.TOPIC, "isr", ("min.insync.replicas", SET, "2")).result(15)
    (error,) = send(bs, "isr")
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    # the cluster-wide broker default does the same for a topic without its own
    incremental(bs, ConfigResource.Type.TOPIC, "isr", ("min.insync.replicas", DELETE, None)).result(
        15
    )
    assert send(bs, "isr") == [None]
    with Admin(bs) as admin:
        admin.incremental_alter_configs("brokers", "", [("min.insync.replicas", "SET", "2")])
        assert admin.describe_configs("brokers", "")["min.insync.replicas"].source == (
            "DYNAMIC_DEFAULT_BROKER_CONFIG"
        )
        (error,) = send(bs, "isr")
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS
        admin.incremental_alter_configs("brokers", "", [("min.insync.replicas", "DELETE", None)])
    assert send(bs, "isr") == [None]


def low_watermark(bs: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        consumer.close()


def wait_until(condition, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_a_lower_retention_ms_deletes_old_segments(broker):
    bs = broker.bootstrap_servers
    create(bs, "retained", {"segment.bytes": "1000"})
    assert send(bs, "retained", 60) == [None] * 60
    directory = Path(broker.config.log_dirs[0]) / "retained-0"
    segments = len(list(directory.glob("*.log")))
    assert segments > 2
    assert low_watermark(bs, "retained") == 0
    incremental(bs, ConfigResource.Type.TOPIC, "retained", ("retention.ms", SET, "1")).result(15)
    assert wait_until(lambda: low_watermark(bs, "retained") > 0), "retention did not run"
    assert len(list(directory.glob("*.log"))) < segments


def test_configs_survive_a_restart_of_a_standalone_broker(tmp_path):
    props = broker_props(tmp_path)
    with BrokerThread(props) as b:
        create(b.bootstrap_servers, "kept", {"retention.ms": "1000"})
        incremental(
            b.bootstrap_servers,
            ConfigResource.Type.TOPIC,
            "kept",
            ("min.insync.replicas", SET, "2"),
        ).result(15)
        incremental(
            b.bootstrap_servers, ConfigResource.Type.BROKER, "1", ("log.segment.bytes", SET, "5000")
        ).result(15)
    with BrokerThread(props) as b:
        topic = describe(b.bootstrap_servers, ConfigResource.Type.TOPIC, "kept")
        assert (topic["retention.ms"].value, topic["min.insync.replicas"].value) == ("1000", "2")
        assert topic["segment.bytes"].value == "5000"
        (error,) = send(b.bootstrap_servers, "kept")
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS


def test_kafka_python_alters_and_describes(broker):
    bs = broker.bootstrap_servers
    create(bs, "kp")
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        result = admin.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "kp", {"retention.ms": "12345"})]
        )
        assert result == {"topic": {"kp": "OK"}}  # IncrementalAlterConfigs, which we advertise
        legacy = admin.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "kp", {"flush.ms": "777"})],
            incremental=False,
        )  # AlterConfigs; kafka-python adds the overrides it found, as the call replaces all
        assert legacy == {"topic": {"kp": "OK"}}
        described = admin.describe_configs(
            [KConfigResource(ConfigResourceType.BROKER, "1")], config_filter="dynamic"
        )
        modified = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp")])
    finally:
        admin.close()
    assert describe(bs, ConfigResource.Type.TOPIC, "kp")["retention.ms"].value == "12345"
    assert "log.retention.ms" in described["broker"]["1"]  # dynamic: may be altered
    assert "node.id" not in described["broker"]["1"]  # read-only
    assert modified["topic"]["kp"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert set(modified["topic"]["kp"]) == {"retention.ms", "flush.ms"}


def kafkalab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalab", "configs", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kafkalab_configs_describes_and_alters(broker):
    bs = broker.bootstrap_servers
    create(bs, "cli")
    out = kafkalab(
        "--bootstrap-server",
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--add-config",
        "retention.ms=60000,cleanup.policy=[compact,delete]",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating config for topic cli."
    out = kafkalab("-b", bs, "--describe", "--entity-type", "topics", "--entity-name", "cli")
    lines = out.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cli are:"
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms=")
    assert lines[2].startswith("  retention.ms=60000 ")
    assert len(lines) == 3
    out = kafkalab("-b", bs, "--alter", "--topic", "cli", "--delete-config", "retention.ms")
    assert out.returncode == 0, out.stderr
    out = kafkalab("-b", bs, "--describe", "--topic", "cli", "--all")
    assert out.stdout.splitlines()[0] == "All configs for topic cli are:"
    assert "  retention.ms=604800000 sensitive=false synonyms={DEFAULT_CONFIG:" in out.stdout
    out = kafkalab(
        "-b", bs, "--alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.retention.ms=70000",
    )  # fmt: skip
    assert out.stdout.strip() == "Completed updating default config for brokers in the cluster."
    out = kafkalab("-b", bs, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert "  log.retention.ms=70000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in (
        out.stdout
    )
    out = kafkalab("-b", bs, "--alter", "--topic", "cli", "--add-config", "retention.ms=soon")
    assert out.returncode == 1 and "INVALID_CONFIG" in out.stderr


def test_other_topic_configs_act_on_the_next_append(broker):
    """max.message.bytes, compression.type, message.timestamp.type, segment.bytes
    changed on a live topic: the next produce follows them."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    from kafkalab.records.record_batch import CompressionType, iter_headers

    bs = broker.bootstrap_servers
    create(bs, "live")
    directory = Path(broker.config.log_dirs[0]) / "live-0"

    def produce_one(value: bytes):
        errors = []
        producer = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
        producer.produce("live", value, on_delivery=lambda e, m: errors.append(e))
        assert producer.flush(15) == 0
        return errors[0]

    def last_batch():
        data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
        return list(iter_headers(data))[-1][1]

    assert produce_one(b"x" * 500) is None
    incremental(bs, ConfigResource.Type.TOPIC, "live", ("max.message.bytes", SET, "200")).result(15)
    error = produce_one(b"x" * 500)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(b"small") is None

    assert last_batch().compression_type == CompressionType.NONE
    ops = [("compression.type", SET, "gzip"), ("message.timestamp.type", SET, "LogAppendTime")]
    incremental(bs, ConfigResource.Type.TOPIC, "live", *ops).result(15)
    assert produce_one(b"now") is None
    assert last_batch().compression_type == CompressionType.GZIP

    segments = len(list(directory.glob("*.log")))
    incremental(bs, ConfigResource.Type.TOPIC, "live", ("segment.bytes", SET, "100")).result(15)
    assert produce_one(b"rolls") is None
    assert produce_one(b"again") is None
    assert len(list(directory.glob("*.log"))) > segments

    consumer = Consumer({"bootstrap.servers": bs, "group.id": "live", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("live", 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
    finally:
        consumer.close()
    kinds = [m.timestamp()[0] for m in got]
    assert [m.value() for m in got] == [b"x" * 500, b"small", b"now", b"rolls", b"again"]
    assert kinds == [TIMESTAMP_CREATE_TIME] * 2 + [TIMESTAMP_LOG_APPEND_TIME] * 3


def test_a_topic_created_again_does_not_inherit_the_deleted_ones_configs(broker):
    bs = broker.bootstrap_servers
    create(bs, "again", {"retention.ms": "1000"})
    incremental(bs, ConfigResource.Type.TOPIC, "again", ("min.insync.replicas", SET, "2")).result(
        15
    )
    with Admin(bs) as admin:
        admin.delete_topic("again")
        admin.create_topic("again")
    topic = describe(bs, ConfigResource.Type.TOPIC, "again")
    assert topic["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert topic["min.insync.replicas"].value == "1"
    assert send(bs, "again") == [None]
