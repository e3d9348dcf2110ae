"""Transactions v2 (KIP-890 part 2) on one broker, with raw requests.

The broker finalizes `transaction.version` 2 (ApiVersions v3+, read here by
kafka-python's describe_features, an independent decoder). A producer of version
2 never sends AddPartitionsToTxn: its Produce v12 makes the leader add the
partition to the transaction; its EndTxn v5 bumps the epoch and answers the
next one; the marker is written with the bumped epoch, so a write of the ended
transaction that arrives late (KAFKA-17754's delayed request) is fenced by the
partition instead of landing in the next transaction. TxnOffsetCommit v5 adds
the group's offsets partition without AddOffsetsToTxn. A broker with
`transaction.version=1` finalizes 1.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer
from kafka.admin import KafkaAdminClient
from test_transaction_verification_broker import (
    connect,
    end_offset,
    ended,
    make_topic,
    until_done,
)

from kafkalab.client.network_client import BrokerConnection, NetworkClient
from kafkalab.cluster.delayed_end_txn import HandBuiltProducer
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api_versions import read_features
from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.timeout(180)


def start(tmp_path_factory, **extra: str) -> BrokerThread:
    return BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("txn-v2")),
            "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "inter.broker.listener.name": "BROKER",
            "transaction.state.log.num.partitions": "2",
            "offsets.topic.num.partitions": "2",
            **extra,
        }
    ).start()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = start(tmp_path_factory)  # transaction.version: the default, 2
    yield b
    b.stop()


def producer_epochs(conn: BrokerConnection, topic: str) -> dict[int, int]:
    """DescribeProducers: producer id -> epoch, as partition 0's leader has them."""
    body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
    (p,) = conn._call(ApiKeys.DESCRIBE_PRODUCERS, 0, body)[1]["topics"][0]["partitions"]
    return {s["producer_id"]: s["producer_epoch"] for s in p["active_producers"]}


def read_committed(bs: str, topic: str, expected: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    c.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(seen) <= expected:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
        elif m is None and len(seen) == expected:
            break
    c.close()
    return seen


def test_the_broker_finalizes_transaction_version_2(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        features = admin.describe_features()
    finally:
        admin.close()
    assert features["transaction.version"]["finalized"] == (2, 2)
    assert features["transaction.version"]["finalized_epoch"] == 0
    assert features["transaction.version"]["supported"] == (0, 2)
    assert features["group.version"]["finalized"] == (1, 1)


def test_api_versions_v3_leaves_out_features_that_start_at_0(broker):
    conn = connect(broker.bootstrap_servers)
    try:
        v3 = conn._call(ApiKeys.API_VERSIONS, 3, {})[1]
        v4 = conn._call(ApiKeys.API_VERSIONS, 4, {})[1]
    finally:
        conn.close()
    supported3, epoch3, finalized3 = read_features(v3)
    supported4, _, finalized4 = read_features(v4)
    assert "transaction.version" not in supported3  # its minimum is 0 (KAFKA-17011)
    assert supported4["transaction.version"] == (0, 2)
    assert supported3["metadata.version"] == supported4["metadata.version"] == (7, 25)
    assert finalized3 == finalized4 and finalized3["transaction.version"] == 2
    assert epoch3 == 0


def test_each_transaction_bumps_the_epoch_and_adds_its_partition_itself(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs)
    conn = connect(bs)
    client = NetworkClient(bs)
    try:
        p = HandBuiltProducer(client, topic, version=2)
        pid, first = p.pid, p.epoch
        epochs = []
        for n, commit in enumerate([True, False, True, True]):
            assert p.produce(0, b"v%d" % n)["error_code"] == 0
            d = p.describe()
            assert d["transaction_state"] == "Ongoing"  # the leader added the partition
            assert d["topic_partitions"] == [{"name": topic, "partition_indexes": [0]}]
            before = p.epoch
            answer = ended(p, commit)
            assert (answer["producer_id"], answer["producer_epoch"]) == (pid, before + 1)
            # the marker carries the bumped epoch: the partition's producer state has it
            deadline = time.monotonic() + 10
            while producer_epochs(conn, topic).get(pid) != before + 1:
                assert time.monotonic() < deadline, producer_epochs(conn, topic)
                time.sleep(0.05)
            epochs.append(answer["producer_epoch"])
        assert epochs == [first + 1, first + 2, first + 3, first + 4]
        assert read_committed(bs, topic, 3) == [b"v0", b"v2", b"v3"]
    finally:
        conn.close()
        client.close()


def test_a_late_write_of_an_ended_transaction_is_fenced(broker):
    """KAFKA-17754's delayed Produce: sent in one transaction, arriving after its
    EndTxn, while the next transaction is open. Under version 2 it carries the old
    epoch and the partition refuses it; nothing reaches the next transaction."""
    bs = broker.bootstrap_servers
    topic = make_topic(bs)
    conn = connect(bs)
    client = NetworkClient(bs)
    try:
        p = HandBuiltProducer(client, topic, version=2)
        old_epoch = p.epoch
        assert p.produce(0, b"first")["error_code"] == 0
        ended(p, False)  # aborted
        assert p.produce(0, b"second")["error_code"] == 0  # the next transaction is open
        hw = end_offset(conn, topic, 0)
        late = p.produce(0, b"late", epoch=old_epoch, sequence=1)
        assert late["error_code"] in (Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED), late
        assert end_offset(conn, topic, 0) == hw, "the late write reached the log"
        ended(p, True)
        assert read_committed(bs, topic, 1) == [b"second"]
    finally:
        conn.close()
        client.close()


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs)
    group = f"g-{uuid.uuid4().hex[:8]}"
    conn = connect(bs)
    client = NetworkClient(bs)
    try:
        until_done(
            lambda: conn._call(ApiKeys.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})[1]
        )
        p = HandBuiltProducer(client, topic, version=2)
        assert p.produce(0, b"consumed-and-produced")["error_code"] == 0
        body = {
            "transactional_id": p.tid,
            "group_id": group,
            "producer_id": p.pid,
            "producer_epoch": p.epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 42,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        }

        def commit():
            answer = conn._call(ApiKeys.TXN_OFFSET_COMMIT, 5, body)[1]
            return answer["topics"][0]["partitions"][0]

        answer = until_done(
            commit,
            lambda r: (
                Errors.CONCURRENT_TRANSACTIONS
                if r["error_code"] == Errors.COORDINATOR_LOAD_IN_PROGRESS
                else r["error_code"]
            ),
        )
        assert answer["error_code"] == 0, answer
        partitions = {
            (t["name"], i) for t in p.describe()["topic_partitions"] for i in t["partition_indexes"]
        }
        assert (topic, 0) in partitions
        assert any(t == OFFSETS_TOPIC for t, _ in partitions), partitions
        ended(p, True)
        fetch = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
        deadline = time.monotonic() + 10
        while True:
            (o,) = conn._call(ApiKeys.OFFSET_FETCH, 1, fetch)[1]["topics"][0]["partitions"]
            if o["committed_offset"] == 42 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert o["committed_offset"] == 42
    finally:
        conn.close()
        client.close()


def test_transaction_version_1_is_finalized_when_chosen(tmp_path_factory):
    b = start(tmp_path_factory, **{"transaction.version": "1"})
    try:
        conn = connect(b.bootstrap_servers)
        try:
            _, epoch, finalized = read_features(conn._call(ApiKeys.API_VERSIONS, 4, {})[1])
        finally:
            conn.close()
    finally:
        b.stop()
    assert (epoch, finalized["transaction.version"]) == (0, 1)
