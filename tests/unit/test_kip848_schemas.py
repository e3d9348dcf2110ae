"""KIP-848 on the wire: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69), and
Metadata v10-12 with topic ids, which a KIP-848 consumer needs to name the
partitions of its assignment.

Peers: kafka-python (its message classes carry Kafka's own MetadataRequest/
Response JSON) for Metadata, and for the two KIP-848 APIs, which kafka-python
does not have, the byte layout librdkafka 2.x writes and reads
(rd_kafka_ConsumerGroupHeartbeatRequest, rd_kafka_cgrp_handle_ConsumerGroupHeartbeat,
rd_kafka_ConsumerGroupDescribeResponse_parse), built here by hand field by field.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from kafkalab.protocol.messages import (
    APIS,
    CONSUMER_GROUP_DESCRIBE_RESPONSE,
    CONSUMER_GROUP_HEARTBEAT_REQUEST,
    CONSUMER_GROUP_HEARTBEAT_RESPONSE,
    METADATA_REQUEST,
    METADATA_RESPONSE,
)
from kafkalab.protocol.types import ProtocolError, Reader

TOPIC_ID = uuid.UUID("5f3c1a2b-0d4e-4f60-8a71-92b3c4d5e6f7")


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def compact_str(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    data = s.encode()
    return uvarint(len(data) + 1) + data


def compact_array(items: list[bytes] | None) -> bytes:
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def test_the_broker_advertises_both_apis_and_metadata_with_topic_ids():
    assert (APIS[68].min_version, APIS[68].max_version) == (0, 1)  # librdkafka sends v1 only
    assert (APIS[69].min_version, APIS[69].max_version) == (0, 1)
    assert APIS[3].max_version == 12  # librdkafka asserts v12 to ask for topics by id
    assert APIS[68].request.is_flexible(0) and APIS[69].response.is_flexible(0)


def test_heartbeat_request_as_librdkafka_writes_it():
    # A joining member (epoch 0) of librdkafka 2.16: its own member id (KIP-1082),
    # no instance or rack, its subscription, no regex, no assignor, nothing owned.
    frame = (
        compact_str("g")
        + compact_str("MTIzNDU2Nzg5MDEyMzQ1Ng")
        + struct.pack(">i", 0)
        + compact_str(None)
        + compact_str(None)
        + struct.pack(">i", 300_000)
        + compact_array([compact_str("orders")])
        + compact_str(None)  # SubscribedTopicRegex (v1+)
        + compact_str(None)
        + compact_array([TOPIC_ID.bytes + compact_array([struct.pack(">i", 3)]) + NO_TAGS])
        + NO_TAGS
    )
    body = CONSUMER_GROUP_HEARTBEAT_REQUEST.decode(frame, 1)
    assert body == {
        "group_id": "g",
        "member_id": "MTIzNDU2Nzg5MDEyMzQ1Ng",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 300_000,
        "subscribed_topic_names": ["orders"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [3]}],
    }
    assert CONSUMER_GROUP_HEARTBEAT_REQUEST.encode(body, 1).getvalue() == frame
    # v0 has no regex field: the same request is one byte shorter
    assert len(CONSUMER_GROUP_HEARTBEAT_REQUEST.encode(body, 0).getvalue()) == len(frame) - 1


def read_uvarint(r: Reader) -> int:
    n = shift = 0
    while True:
        byte = r._take(1)[0]
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n


def read_compact_str(r: Reader) -> str | None:
    n = read_uvarint(r)
    return None if n == 0 else bytes(r._take(n - 1)).decode()


def read_heartbeat_response_as_librdkafka(data: bytes) -> dict:
    """librdkafka's reader: throttle, error, message, member id, epoch, interval, then
    an int8 saying whether an Assignment follows (-1: null)."""
    r = Reader(data)
    out = {
        "throttle": struct.unpack(">i", r._take(4))[0],
        "error": struct.unpack(">h", r._take(2))[0],
        "message": read_compact_str(r),
        "member_id": read_compact_str(r),
    }
    out["epoch"], out["interval"] = struct.unpack(">ii", r._take(8))
    present = struct.unpack(">b", r._take(1))[0]
    if present < 0:
        out["assignment"] = None
    else:
        topics = []
        for _ in range(read_uvarint(r) - 1):
            topic_id = uuid.UUID(bytes=bytes(r._take(16)))
            parts = [struct.unpack(">i", r._take(4))[0] for _ in range(read_uvarint(r) - 1)]
            assert read_uvarint(r) == 0  # no tagged fields
            topics.append((topic_id, parts))
        assert read_uvarint(r) == 0  # the Assignment struct's tagged fields
        out["assignment"] = topics
    assert read_uvarint(r) == 0
    assert r.remaining() == 0
    return out


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_as_librdkafka_reads_it(version):
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m-1",
        "member_epoch": 7,
        "heartbeat_interval_ms": 5000,
        "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 2]}]},
    }
    data = CONSUMER_GROUP_HEARTBEAT_RESPONSE.encode(body, version).getvalue()
    assert read_heartbeat_response_as_librdkafka(data) == {
        "throttle": 0,
        "error": 0,
        "message": None,
        "member_id": "m-1",
        "epoch": 7,
        "interval": 5000,
        "assignment": [(TOPIC_ID, [0, 2])],
    }
    assert CONSUMER_GROUP_HEARTBEAT_RESPONSE.decode(data, version) == body
    unchanged = CONSUMER_GROUP_HEARTBEAT_RESPONSE.encode({**body, "assignment": None}, version)
    assert read_heartbeat_response_as_librdkafka(unchanged.getvalue())["assignment"] is None


def test_a_null_struct_that_is_not_nullable_is_refused():
    member = {
        "member_id": "m",
        "member_epoch": 1,
        "client_id": "c",
        "client_host": "/h",
        "subscribed_topic_names": [],
        "assignment": None,  # Assignment is not nullable in ConsumerGroupDescribe
        "target_assignment": {"topic_partitions": []},
    }
    body = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "group_id": "g",
                "group_state": "Stable",
                "group_epoch": 1,
                "assignment_epoch": 1,
                "assignor_name": "uniform",
                "members": [member],
            }
        ],
    }
    with pytest.raises(ProtocolError, match="assignment"):
        CONSUMER_GROUP_DESCRIBE_RESPONSE.encode(body, 0)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_response_in_librdkafkas_field_order(version):
    assignment = {
        "topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "orders", "partitions": [1]}]
    }
    body = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "error_code": 0,
                "error_message": None,
                "group_id": "g",
                "group_state": "Stable",
                "group_epoch": 3,
                "assignment_epoch": 3,
                "assignor_name": "uniform",
                "members": [
                    {
                        "member_id": "m",
                        "instance_id": None,
                        "rack_id": None,
                        "member_epoch": 3,
                        "client_id": "rdkafka",
                        "client_host": "/127.0.0.1",
                        "subscribed_topic_names": ["orders"],
                        "subscribed_topic_regex": None,
                        "assignment": assignment,
                        "target_assignment": assignment,
                        "member_type": 1,
                    }
                ],
                "authorized_operations": -(2**31),
            }
        ],
    }
    topic_partitions = compact_array(
        [TOPIC_ID.bytes + compact_str("orders") + compact_array([struct.pack(">i", 1)]) + NO_TAGS]
    )
    member = (
        compact_str("m")
        + compact_str(None)
        + compact_str(None)
        + struct.pack(">i", 3)
        + compact_str("rdkafka")
        + compact_str("/127.0.0.1")
        + compact_array([compact_str("orders")])
        + compact_str(None)
        + topic_partitions
        + NO_TAGS  # Assignment
        + topic_partitions
        + NO_TAGS  # TargetAssignment
        + (struct.pack(">b", 1) if version >= 1 else b"")  # MemberType (KIP-1099)
        + NO_TAGS
    )
    group = (
        struct.pack(">h", 0)
        + compact_str(None)
        + compact_str("g")
        + compact_str("Stable")
        + struct.pack(">ii", 3, 3)
        + compact_str("uniform")
        + compact_array([member])
        + struct.pack(">i", -(2**31))
        + NO_TAGS
    )
    expected = struct.pack(">i", 0) + compact_array([group]) + NO_TAGS
    assert CONSUMER_GROUP_DESCRIBE_RESPONSE.encode(body, version).getvalue() == expected
    decoded = CONSUMER_GROUP_DESCRIBE_RESPONSE.decode(expected, version)
    if version == 0:
        body["groups"][0]["members"][0]["member_type"] = -1  # absent: Kafka's default
    assert decoded == body


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_request_by_topic_id_is_kafka_pythons(version):
    body = {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": "orders"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    if version == 12:  # v12: by id alone, the name null
        body["topics"].append({"topic_id": TOPIC_ID, "name": None})
    ours = METADATA_REQUEST.encode(body, version).getvalue()
    theirs = MetadataRequest.decode(ours, version=version)
    assert bytes(theirs.encode()) == ours
    assert [t.name for t in theirs.topics] == [t["name"] for t in body["topics"]]
    if version == 12:
        assert theirs.topics[1].topic_id == TOPIC_ID


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_response_with_topic_ids_is_kafka_pythons(version):
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -(2**31),
            },
            {
                "error_code": 100,  # UNKNOWN_TOPIC_ID: asked by an id no topic has
                "name": None if version >= 12 else "",
                "topic_id": uuid.UUID(int=7),
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": -(2**31),
            },
        ],
        "cluster_authorized_operations": -(2**31),
    }
    ours = METADATA_RESPONSE.encode(body, version).getvalue()
    theirs = MetadataResponse.decode(ours, version=version)
    assert bytes(theirs.encode()) == ours
    assert [(t.name, t.topic_id) for t in theirs.topics] == [
        (t["name"], t["topic_id"]) for t in body["topics"]
    ]
