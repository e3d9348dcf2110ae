"""Produce versions as Kafka 4.0 serves them: v3-v8 (KIP-896 removed v0-v2, the
versions that carry magic 0/1 message sets). A request at v2 is not served (the
connection closes, as for any version a broker does not advertise); a magic 0/1
message set in v3+ is INVALID_RECORD, which clients do not retry, rather than
CORRUPT_MESSAGE, which they retry until they time out; v8 names refused records."""

from __future__ import annotations

import struct
import zlib

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client.network_client import BrokerConnection
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.record_batch import (
    CRC_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    CompressionType,
    compute_crc,
)
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for future in admin.create_topics([NewTopic("versions", 1, 1)]).values():
            future.result(10)
        yield b


def connect(broker) -> BrokerConnection:
    host, port = broker.bootstrap_servers.split(":")
    return BrokerConnection(host, int(port), timeout_s=10)


def produce_body(records: bytes, topic: str = "versions") -> dict:
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 5000,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "records": records}]}],
    }


def magic1_message_set(value: bytes) -> bytes:
    """One uncompressed message in the v1 format (Kafka: LegacyRecord, magic 1)."""
    body = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def partition_of(answer: dict) -> dict:
    return answer["responses"][0]["partitions"][0]


def test_api_versions_advertises_produce_3_to_12(broker):
    conn = connect(broker)
    try:
        _, body = conn._call(
            ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        produce = next(e for e in body["api_keys"] if e["api_key"] == ApiKeys.PRODUCE)
        assert (produce["min_version"], produce["max_version"]) == (3, 12)
        # the teaching client stays on transactions v1, so on Produce 8 (its cap)
        assert conn.version(ApiKeys.PRODUCE) == 8
    finally:
        conn.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_not_served(broker, version):
    conn = connect(broker)
    try:
        with pytest.raises(KafkaError) as e:
            conn._call(ApiKeys.PRODUCE, version, produce_body(magic1_message_set(b"old")))
        assert e.value.code == Errors.NETWORK_EXCEPTION  # the broker closed the connection
    finally:
        conn.close()


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8])
def test_every_served_version_appends_and_refuses_magic_1_as_invalid_record(broker, version):
    conn = connect(broker)
    try:
        _, ok = conn._call(ApiKeys.PRODUCE, version, produce_body(build_batch([b"v%d" % version])))
        assert partition_of(ok)["error_code"] == 0
        _, old = conn._call(ApiKeys.PRODUCE, version, produce_body(magic1_message_set(b"old")))
        assert partition_of(old)["error_code"] == Errors.INVALID_RECORD
    finally:
        conn.close()


@pytest.mark.parametrize(
    "version, error", [(6, Errors.UNSUPPORTED_COMPRESSION_TYPE), (7, Errors.NONE)]
)
def test_zstd_needs_produce_v7(broker, version, error):
    conn = connect(broker)
    try:
        batch = build_batch([b"z"], compression=CompressionType.ZSTD)
        _, answer = conn._call(ApiKeys.PRODUCE, version, produce_body(batch))
        assert partition_of(answer)["error_code"] == error
    finally:
        conn.close()


def test_produce_v8_names_the_refused_record(broker):
    batch = bytearray(build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")]) + b"\x00")
    struct.pack_into(">i", batch, LENGTH_OFFSET, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    conn = connect(broker)
    try:
        _, answer = conn._call(ApiKeys.PRODUCE, 8, produce_body(bytes(batch)))
        part = partition_of(answer)
        assert part["error_code"] == Errors.INVALID_RECORD
        assert [e["batch_index"] for e in part["record_errors"]] == [2]
        assert "declared batch size" in part["record_errors"][0]["batch_index_error_message"]
        assert part["error_message"]
    finally:
        conn.close()
