"""A client that claims to be a follower, or a broker, is refused (issue 22).

A follower's Fetch (replica id >= 0) tells the leader how far the follower got,
which moves the high watermark: a client that could send one would make the
leader acknowledge acks=all writes the real follower does not have. The leader
serves it only on the inter-broker listener (Kafka: the principal needs
CLUSTER_ACTION, else TOPIC_AUTHORIZATION_FAILED) and only from a broker
registered with the controller in the broker epoch the request names (KIP-903,
else NOT_LEADER_OR_FOLLOWER); WriteTxnMarkers only on the inter-broker listener
(else CLUSTER_AUTHORIZATION_FAILED). A raw socket plays the impostor: nothing it
sends moves the HW or writes a marker."""

from __future__ import annotations

import re
import socket
import struct

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import APIS
from kafkalab.server.broker import BrokerThread
from kafkalab.server.inter_broker_connection import broker_client_id, replica_fetch_request

pytestmark = pytest.mark.integration


def call(address: str, api_key: ApiKeys, version: int, body: dict, client_id: str) -> dict:
    """One request on a fresh connection, as any program can send it."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(encode_request(RequestHeader(api_key, version, 7, client_id), body, APIS))
        f = s.makefile("rb")
        (size,) = struct.unpack(">i", f.read(4))
        _, response = decode_response(APIS[api_key], version, f.read(size))
    return response


def fetch_as(address: str, replica_id: int, offset: int, leader_epoch: int, client_id: str):
    """A Fetch v11 from `replica_id` at `offset` of t-0: (error, HW, record bytes)."""
    body = replica_fetch_request(replica_id, [("t", 0, offset, leader_epoch)], 0, 1)
    (p,) = call(address, ApiKeys.FETCH, 11, body, client_id)["responses"][0]["partitions"]
    return Errors(p["error_code"]), p["high_watermark"], bytes(p["records"] or b"")


def high_watermark(address: str) -> int:
    _, hw, _ = fetch_as(address, -1, 0, -1, "consumer")
    return hw


def listener(cluster: LocalCluster, broker_id: int, name: str) -> str:
    """host:port of a broker's listener, from the line it logs at start."""
    out = "".join(cluster.brokers[broker_id].output)
    return re.search(rf"listener {name} on (\S+)", out)[1]


def broker_epoch(cluster: LocalCluster, broker_id: int) -> int:
    out = "".join(cluster.brokers[broker_id].output)
    return int(re.search(r"registered and unfenced \(broker epoch (\d+)\)", out)[1])


def test_a_client_claiming_to_be_the_follower_does_not_move_the_hw(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=60_000,  # the paused follower stays in the ISR meanwhile
        broker_props={"replica.lag.time.max.ms": "60000"},
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("t", 1, 2)]).values():
            future.result(30)
        address = cluster.bootstrap_servers.split(",")[0]
        meta = call(
            address,
            ApiKeys.METADATA,
            8,
            {
                "topics": [{"name": "t"}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
            "test",
        )
        (part,) = meta["topics"][0]["partitions"]
        leader, epoch = part["leader_id"], part["leader_epoch"]
        (follower,) = [r for r in part["replica_nodes"] if r != leader]
        (outsider,) = {1, 2, 3} - set(part["replica_nodes"])
        clients = listener(cluster, leader, "PLAINTEXT")
        brokers = listener(cluster, leader, "BROKER")

        producer = Producer({"bootstrap.servers": clients, "acks": "all"})
        for i in range(5):
            producer.produce("t", b"committed-%d" % i, partition=0)
        assert producer.flush(30) == 0
        assert high_watermark(clients) == 5, "acks=all: both replicas have the 5 records"

        cluster.pause(follower)  # it fetches no more: the HW must stay at 5
        try:
            producer = Producer({"bootstrap.servers": clients, "acks": "1"})
            for i in range(3):
                producer.produce("t", b"uncommitted-%d" % i, partition=0)
            assert producer.flush(30) == 0
            leo = 8
            assert high_watermark(clients) == 5, "the follower has not fetched records 5-7"

            # 1. On the clients' listener: Kafka's answer to a follower fetch without
            #    CLUSTER_ACTION, and nothing read past the HW.
            error, _, records = fetch_as(clients, follower, leo, epoch, "impostor")
            assert error == Errors.TOPIC_AUTHORIZATION_FAILED and records == b""
            # 2. On the brokers' listener, but naming no broker epoch, or not its own.
            wrong = broker_client_id(follower, broker_epoch(cluster, follower) + 1)
            for client_id in ("impostor", wrong):
                error, _, records = fetch_as(brokers, follower, leo, epoch, client_id)
                assert error == Errors.NOT_LEADER_OR_FOLLOWER and records == b"", client_id
            assert high_watermark(clients) == 5, "a refused fetch moved the HW"

            # 3. A registered broker in its epoch, but not a replica of t-0.
            who = broker_client_id(outsider, broker_epoch(cluster, outsider))
            error, _, _ = fetch_as(brokers, outsider, leo, epoch, who)
            assert error == Errors.UNKNOWN_LEADER_EPOCH

            # 4. WriteTxnMarkers from the clients' listener writes no marker.
            markers = call(
                clients,
                ApiKeys.WRITE_TXN_MARKERS,
                1,
                {
                    "markers": [
                        {
                            "producer_id": 1,
                            "producer_epoch": 0,
                            "transaction_result": True,
                            "topics": [{"name": "t", "partition_indexes": [0]}],
                            "coordinator_epoch": 0,
                        }
                    ]
                },
                "impostor",
            )
            (answer,) = markers["markers"][0]["topics"][0]["partitions"]
            assert answer["error_code"] == Errors.CLUSTER_AUTHORIZATION_FAILED
            assert high_watermark(clients) == 5

            # The check tells brokers apart, it does not refuse everyone: the follower's
            # own identity, on the brokers' listener, is served and moves the HW. It
            # reads nothing at offset 8: no marker was appended there.
            me = broker_client_id(follower, broker_epoch(cluster, follower))
            error, _, records = fetch_as(brokers, follower, leo, epoch, me)
            assert error == Errors.NONE and records == b"", "a marker was written at 8"
            assert high_watermark(clients) == leo
        finally:
            cluster.resume(follower)


def test_a_standalone_broker_has_no_followers(tmp_path):
    """No controller, no registered broker: a fetch with a replica id is refused and
    reads nothing (before, it read to the log end offset, past the HW)."""
    with BrokerThread({"log.dirs": str(tmp_path)}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        producer.produce("t", b"x", partition=0)
        assert producer.flush(30) == 0
        error, _, records = fetch_as(b.bootstrap_servers, 2, 0, -1, broker_client_id(2, 0))
        assert error == Errors.NOT_LEADER_OR_FOLLOWER and records == b""
        error, hw, records = fetch_as(b.bootstrap_servers, -1, 0, -1, "consumer")
        assert error == Errors.NONE and hw == 1 and records
