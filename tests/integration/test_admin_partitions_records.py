"""CreatePartitions (37) and DeleteRecords (21) through confluent-kafka's AdminClient
(and kafka-python's, the teaching Admin and the CLI), against one broker: a topic grows and its new partition is written and read; records
below an offset go (the log start offset moves, ListOffsets earliest answers it,
segments wholly below it are deleted, and a restarted broker still starts there);
and every error Kafka answers for them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import InvalidPartitionsError

from kafkalab.client.admin import Admin
from kafkalab.errors import Errors
from kafkalab.errors import KafkaError as KafkaLabError
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("broker")


@pytest.fixture(scope="module")
def broker(log_dir):
    props = {"log.dirs": str(log_dir), "log.retention.check.interval.ms": "100"}
    with BrokerThread(props) as b:
        yield b


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(broker, topic: str, partitions: int = 1, **config: str) -> None:
    client = admin(broker)  # kept: a destroyed client fails its futures
    futures = client.create_topics([NewTopic(topic, partitions, 1, config=config)])
    for future in futures.values():
        future.result(15)


def grow(broker, topic: str, count: int, assignment=None, validate_only=False):
    client = admin(broker)
    new = NewPartitions(
        topic, count, **({} if assignment is None else {"replica_assignment": assignment})
    )
    futures = client.create_partitions(
        [new],
        validate_only=validate_only,
        request_timeout=15,
    )
    return futures[topic].result(15)


def error_of(call) -> int:
    with pytest.raises(KafkaException) as info:
        call()
    return info.value.args[0].code()


def produce(broker, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
        if i % 10 == 9:
            assert producer.flush(15) == 0  # one batch a flush: several segments
    assert producer.flush(15) == 0


def consume(broker, topic: str, partition: int, n: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{topic}-{partition}",
            "auto.offset.reset": "earliest",  # below the log start offset: from there
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    got = []
    try:
        for _ in range(200):
            if len(got) >= n:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def watermarks(broker, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def partition_count(broker, topic: str) -> int:
    return len(admin(broker).list_topics(topic, timeout=10).topics[topic].partitions)


def delete(broker, topic: str, offset: int, partition: int = 0):
    client = admin(broker)
    futures = client.delete_records(
        [TopicPartition(topic, partition, offset)], request_timeout=15, operation_timeout=10
    )
    return next(iter(futures.values())).result(15)


# -- CreatePartitions ------------------------------------------------------------------------


def test_create_partitions_grows_a_topic_whose_new_partition_is_written_and_read(broker):
    create(broker, "grown", 1)
    grow(broker, "grown", 3)
    assert partition_count(broker, "grown") == 3
    produce(broker, "grown", 5, partition=2)
    assert consume(broker, "grown", 2, 5) == [(i, b"v%d" % i) for i in range(5)]


def test_create_partitions_takes_an_assignment_naming_this_broker(broker):
    create(broker, "assigned", 1)
    grow(broker, "assigned", 2, assignment=[[broker.config.node_id]])
    assert partition_count(broker, "assigned") == 2


def test_create_partitions_validate_only_changes_nothing(broker):
    create(broker, "validated", 2)
    grow(broker, "validated", 4, validate_only=True)
    assert partition_count(broker, "validated") == 2


def test_create_partitions_errors(broker):
    create(broker, "fixed", 3)
    assert error_of(lambda: grow(broker, "fixed", 2)) == KafkaError.INVALID_PARTITIONS
    assert error_of(lambda: grow(broker, "fixed", 3)) == KafkaError.INVALID_PARTITIONS
    assert error_of(lambda: grow(broker, "no-such-topic", 3)) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert (
        error_of(lambda: grow(broker, "fixed", 4, assignment=[[99]]))
        == KafkaError.INVALID_REPLICA_ASSIGNMENT
    )
    assert partition_count(broker, "fixed") == 3


# -- DeleteRecords ---------------------------------------------------------------------------


def test_delete_records_moves_the_log_start_and_deletes_the_segments_below(broker, log_dir):
    create(broker, "trimmed", 1, **{"segment.bytes": "1024"})
    produce(broker, "trimmed", 200)
    directory = log_dir / "trimmed-0"
    segments_before = sorted(directory.glob("*.log"))
    assert len(segments_before) > 3
    assert delete(broker, "trimmed", 120).low_watermark == 120
    assert watermarks(broker, "trimmed") == (120, 200)
    assert consume(broker, "trimmed", 0, 1)[0] == (120, b"v120")

    # the next retention pass deletes every segment wholly below offset 120
    def below_gone() -> bool:  # the segments go one by one: wait for all of them
        bases = sorted(int(p.stem) for p in directory.glob("*.log"))
        return bases[0] <= 120 and (len(bases) == 1 or bases[1] > 120)

    for _ in range(100):
        if below_gone():
            break
        time.sleep(0.1)
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    assert bases[0] <= 120 and (len(bases) == 1 or bases[1] > 120), bases
    assert len(bases) < len(segments_before)


def test_delete_records_to_the_high_watermark_with_minus_one(broker):
    create(broker, "emptied", 1)
    produce(broker, "emptied", 10)
    assert delete(broker, "emptied", -1).low_watermark == 10
    assert watermarks(broker, "emptied") == (10, 10)


def test_delete_records_errors(broker):
    create(broker, "kept", 1)
    produce(broker, "kept", 10)
    assert error_of(lambda: delete(broker, "kept", 11)) == KafkaError.OFFSET_OUT_OF_RANGE
    # librdkafka finds no leader for an unknown topic and refuses it itself (_NOENT);
    # the broker's own answer is checked with the teaching Admin below
    assert error_of(lambda: delete(broker, "no-such-topic", 1)) == KafkaError._NOENT
    create(broker, "compacted", 1, **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("compacted", key=b"k", value=b"v")
    assert producer.flush(15) == 0
    assert error_of(lambda: delete(broker, "compacted", 1)) == KafkaError.POLICY_VIOLATION
    assert watermarks(broker, "kept") == (0, 10)


def test_the_log_start_offset_survives_a_restart(tmp_path):
    props = {"log.dirs": str(tmp_path)}
    with BrokerThread(props) as first:
        create(first, "durable", 1)
        produce(first, "durable", 30)
        assert delete(first, "durable", 17).low_watermark == 17
    with BrokerThread(props) as again:
        assert watermarks(again, "durable") == (17, 30)
        checkpoint = (tmp_path / "log-start-offset-checkpoint").read_text().split("\n")
        assert "durable 0 17" in checkpoint


# -- the teaching Admin and the CLI ----------------------------------------------------------


def test_the_teaching_admin_gets_the_brokers_answers(broker):
    with Admin(broker.bootstrap_servers) as a:
        a.create_topic("taught", 1)
        a.create_partitions("taught", 2)
        assert a.list_topics()["taught"] == 2
        with pytest.raises(KafkaLabError) as info:
            a.create_partitions("taught", 1)
        assert info.value.code == Errors.INVALID_PARTITIONS
        with pytest.raises(KafkaLabError) as info:
            a.create_partitions("never-created", 4)
        assert info.value.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    produce(broker, "taught", 10)
    with Admin(broker.bootstrap_servers) as a:
        results = a.delete_records({("taught", 0): 4, ("taught", 1): 0, ("never-created", 0): 1})
        assert results[("taught", 0)] == 4
        assert results[("taught", 1)] == 0
        assert results[("never-created", 0)].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert a.end_offsets([("taught", 0)], earliest=True) == {("taught", 0): 4}
        internal = a.delete_records({("__consumer_offsets", 0): 0})[("__consumer_offsets", 0)]
        assert internal.code == Errors.INVALID_TOPIC_EXCEPTION  # Kafka: Topic.isInternal


def kafkalab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalab", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_topics_alter_adds_partitions(broker):
    bs = broker.bootstrap_servers
    assert kafkalab("topics", "-b", bs, "--create", "cli-grown").returncode == 0
    grown = kafkalab("topics", "-b", bs, "--alter", "--topic", "cli-grown", "--partitions", "3")
    assert grown.returncode == 0, grown.stderr
    assert partition_count(broker, "cli-grown") == 3
    fewer = kafkalab("topics", "-b", bs, "--alter", "--topic", "cli-grown", "--partitions", "2")
    assert fewer.returncode == 1
    assert "INVALID_PARTITIONS" in fewer.stderr and "would not be an increase" in fewer.stderr
    node = str(broker.config.node_id)
    assigned = kafkalab(
        "topics", "-b", bs, "--alter", "--topic", "cli-grown", "--partitions", "4",
        "--replica-assignment", node,
    )  # fmt: skip
    assert assigned.returncode == 0, assigned.stderr
    assert partition_count(broker, "cli-grown") == 4


def test_cli_delete_records_reads_kafkas_json(broker, tmp_path):
    bs = broker.bootstrap_servers
    create(broker, "cli-trimmed", 2)
    produce(broker, "cli-trimmed", 20, partition=0)
    produce(broker, "cli-trimmed", 5, partition=1)
    spec = tmp_path / "offsets.json"
    spec.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "cli-trimmed", "partition": 0, "offset": 12},
                    {"topic": "cli-trimmed", "partition": 1, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    done = kafkalab("delete-records", "-b", bs, "--offset-json-file", str(spec))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: cli-trimmed-0\tlow_watermark: 12",
        "partition: cli-trimmed-1\tlow_watermark: 5",
    ]
    assert watermarks(broker, "cli-trimmed", 0) == (12, 20)
    assert watermarks(broker, "cli-trimmed", 1) == (5, 5)
    spec.write_text(json.dumps({"partitions": [{"topic": "cli-trimmed", "partition": 0,
                                               "offset": 99}], "version": 1}))  # fmt: skip
    refused = kafkalab("delete-records", "-b", bs, "--offset-json-file", str(spec))
    assert refused.returncode == 1
    assert "partition: cli-trimmed-0\terror: OFFSET_OUT_OF_RANGE" in refused.stdout


def test_kafka_pythons_admin_grows_and_trims(broker):
    create(broker, "kp", 1)
    produce(broker, "kp", 8)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        client.create_partitions({"kp": 2})
        assert partition_count(broker, "kp") == 2
        with pytest.raises(InvalidPartitionsError):
            client.create_partitions({"kp": 1})
        deleted = client.delete_records({KTopicPartition("kp", 0): 5})
        assert deleted[KTopicPartition("kp", 0)]["low_watermark"] == 5
    finally:
        client.close()
    assert watermarks(broker, "kp") == (5, 8)
