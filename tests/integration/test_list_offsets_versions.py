"""ListOffsets v0-v10 and the special timestamps: MAX_TIMESTAMP (-3) answers the
offset of the record with the largest timestamp, not its batch's last offset
(Kafka 3.8+, KAFKA-16310), through librdkafka's list_offsets and through a raw
request at every version (a Kafka broker answers it whatever the version: the
client chooses one that has it); -4 (earliest local) is the log start offset
and -5 (latest tiered) is -1, as a Kafka broker without tiered storage answers."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafkalab.client.network_client import BrokerConnection
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.server.broker import BrokerThread

T0 = int(time.time() * 1000) - 60_000
# one batch: the largest timestamp is the second record's, offset 1
TIMESTAMPS = [T0, T0 + 500, T0 + 100]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        topics = [
            NewTopic("maxts", 1, 1),
            NewTopic("maxts-append", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(10)
        for topic in ("maxts", "maxts-append"):
            produce_one_batch(b, topic)
        yield b


def produce_one_batch(broker, topic: str) -> None:
    """The three records as one RecordBatch, written by hand: a client's linger
    does not promise one batch (librdkafka split them under load)."""
    batch = build_batch([SimpleRecord(b"r%d" % i, timestamp=ts) for i, ts in enumerate(TIMESTAMPS)])
    host, port = broker.bootstrap_servers.split(":")
    conn = BrokerConnection(host, int(port), timeout_s=10)
    try:
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": batch}]}],
        }
        _, answer = conn._call(ApiKeys.PRODUCE, conn.version(ApiKeys.PRODUCE), body)
        assert answer["responses"][0]["partitions"][0]["error_code"] == 0
    finally:
        conn.close()


def test_librdkafka_list_offsets_max_timestamp_is_the_record_not_the_batch(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.list_offsets({TopicPartition("maxts", 0): OffsetSpec.max_timestamp()})
    info = futures[TopicPartition("maxts", 0)].result(10)
    assert (info.offset, info.timestamp) == (1, T0 + 500)


def test_under_log_append_time_it_is_the_first_record_of_the_latest_batch(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.list_offsets({TopicPartition("maxts-append", 0): OffsetSpec.max_timestamp()})
    info = futures[TopicPartition("maxts-append", 0)].result(10)
    assert info.offset == 0  # all three in one batch, stamped with one append time
    assert info.timestamp > TIMESTAMPS[1]


def list_offsets(broker, version: int, timestamp: int) -> dict:
    host, port = broker.bootstrap_servers.split(":")
    conn = BrokerConnection(host, int(port), timeout_s=10)
    try:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": "maxts",
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
            "timeout_ms": 1000,
        }
        _, answer = conn._call(ApiKeys.LIST_OFFSETS, version, body)
        return answer["topics"][0]["partitions"][0]
    finally:
        conn.close()


def test_api_versions_advertises_list_offsets_0_to_10(broker):
    host, port = broker.bootstrap_servers.split(":")
    conn = BrokerConnection(host, int(port), timeout_s=10)
    try:
        assert conn.version(ApiKeys.LIST_OFFSETS) == 10
    finally:
        conn.close()


@pytest.mark.parametrize("version", range(11))
def test_max_timestamp_at_every_version(broker, version):
    part = list_offsets(broker, version, -3)
    assert part["error_code"] == 0
    if version == 0:
        assert part["old_style_offsets"] == [1]
    else:
        assert (part["offset"], part["timestamp"]) == (1, T0 + 500)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_earliest_local_is_the_log_start_offset(broker, version):
    part = list_offsets(broker, version, -4)
    assert (part["error_code"], part["offset"]) == (0, 0)


@pytest.mark.parametrize("version", [9, 10])
def test_latest_tiered_is_minus_one_without_tiered_storage(broker, version):
    part = list_offsets(broker, version, -5)
    assert (part["error_code"], part["offset"], part["timestamp"]) == (0, -1, -1)


def test_a_timestamp_lookup_still_finds_the_first_record_at_or_after_it(broker):
    part = list_offsets(broker, 10, T0 + 50)
    assert part["offset"] == 1  # the first record with a timestamp >= T0 + 50
