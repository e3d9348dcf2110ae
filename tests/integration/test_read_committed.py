"""read_committed on a real broker: transactional batches produced over the wire, COMMIT and
ABORT markers written through ReplicaManager.append_records as the transaction
coordinator writes them, and librdkafka (confluent-kafka) consumers reading with
isolation.level read_committed and read_uncommitted (and kafka-python's and
aiokafka's read_committed consumers). Also ListOffsets with
isolation_level 1 (the LSO) and DescribeProducers, over the wire."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as ATopicPartition
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from kafkalab.client.network_client import BrokerConnection
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.server.broker import BrokerThread
from kafkalab.storage.unified_log import AppendOrigin

TOPIC = "txn-reads"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("broker"))}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        yield b


def on_broker(b: BrokerThread, fn):
    """Run `fn()` on the broker's event loop (the ReplicaManager is not thread-safe)."""

    async def call():
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), b._loop).result(10)


def produce(conn: BrokerConnection, batch: bytes) -> int:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "records": batch}]}],
    }
    part = conn.request(ApiKeys.PRODUCE, body)["responses"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["base_offset"]


def txn_records(pid: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch(
        [SimpleRecord(v) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def write_marker(b: BrokerThread, pid: int, kind: ControlRecordType) -> int:
    batch = build_end_txn_marker_batch(pid, 0, kind, coordinator_epoch=1)
    rm = b.broker.replica_manager
    result = on_broker(
        b,
        lambda: rm.append_records(
            TOPIC, 0, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR
        ),
    )
    assert result.error == Errors.NONE, result
    return result.base_offset


def consume(bs: str, isolation: str, until: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record returned below offset `until` (waits for the
    consumer's position to reach it; None when it stops short after 20 s)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{isolation}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.time() + 20
        while time.time() < deadline:
            m = consumer.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
            position = consumer.position([TopicPartition(TOPIC, 0)])[0].offset
            if position >= until:
                return got
        return got
    finally:
        consumer.close()


async def aiokafka_read_committed(bs: str, until: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tp = ATopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.time() + 20
        while await consumer.position(tp) < until and time.time() < deadline:
            for messages in (await consumer.getmany(timeout_ms=300)).values():
                values += [m.value for m in messages]
        return values
    finally:
        await consumer.stop()


def list_offset(conn: BrokerConnection, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    part = conn.request(ApiKeys.LIST_OFFSETS, body)["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    return part["offset"]


def test_read_committed_skips_aborted_and_stops_at_the_lso(broker):
    bs = broker.bootstrap_servers
    host, port = bs.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        produce(conn, build_batch([b"plain-0"]))  # 0
        produce(conn, txn_records(1000, 0, [b"aborted-1", b"aborted-2"]))  # 1-2
        produce(conn, txn_records(2000, 0, [b"committed-3"]))  # 3
        produce(conn, build_batch([b"plain-4"]))  # 4
        produce(conn, txn_records(1000, 2, [b"aborted-5"]))  # 5
        assert write_marker(broker, 1000, ControlRecordType.ABORT) == 6
        assert write_marker(broker, 2000, ControlRecordType.COMMIT) == 7
        produce(conn, build_batch([b"plain-8"]))  # 8
        produce(conn, txn_records(3000, 0, [b"open-9"]))  # 9: stays open
        produce(conn, build_batch([b"plain-10"]))  # 10: behind the open transaction
        assert list_offset(conn, 0) == 11  # the HW
        assert list_offset(conn, 1) == 9  # the LSO: the open transaction's first offset

        described = conn.request(
            ApiKeys.DESCRIBE_PRODUCERS, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        )["topics"][0]["partitions"][0]
        assert described["error_code"] == 0
        producers = {p["producer_id"]: p for p in described["active_producers"]}
        assert producers[3000]["current_txn_start_offset"] == 9
        assert producers[1000]["current_txn_start_offset"] == -1
        assert producers[1000]["coordinator_epoch"] == 1
        assert producers[1000]["last_sequence"] == 2

        committed = consume(bs, "read_committed", until=9)
        assert [v for _, v in committed] == [b"plain-0", b"committed-3", b"plain-4", b"plain-8"]
        uncommitted = consume(bs, "read_uncommitted", until=11)
        assert [o for o, _ in uncommitted] == [0, 1, 2, 3, 4, 5, 8, 9, 10]

        # A read_committed consumer waiting at the LSO gets nothing while the
        # transaction is open, and the rest once it commits.
        waiting = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "waiting",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            waiting.assign([TopicPartition(TOPIC, 0, 9)])
            assert all(waiting.poll(0.3) is None for _ in range(5))  # held at the LSO
            assert write_marker(broker, 3000, ControlRecordType.COMMIT) == 11
            assert list_offset(conn, 1) == 12
            late, deadline = [], time.time() + 20
            while len(late) < 2 and time.time() < deadline:
                m = waiting.poll(0.3)
                if m is not None:
                    assert m.error() is None, m.error()
                    late.append(m.value())
            assert late == [b"open-9", b"plain-10"]
        finally:
            waiting.close()
        everything = consume(bs, "read_committed", until=12)
        assert [v for _, v in everything] == [
            b"plain-0", b"committed-3", b"plain-4", b"plain-8", b"open-9", b"plain-10",
        ]  # fmt: skip

        # kafka-python's and aiokafka's read_committed consumers drop them too.
        kp = KafkaConsumer(
            bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False,
            consumer_timeout_ms=3000,
        )  # fmt: skip
        try:
            kp.assign([KTopicPartition(TOPIC, 0)])
            kp.seek(KTopicPartition(TOPIC, 0), 0)
            values = [m.value for m in kp]
        finally:
            kp.close()
        assert values == [v for _, v in everything]
        assert asyncio.run(aiokafka_read_committed(bs, 12)) == values

        # Clients cannot write markers themselves.
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10_000,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "records": build_end_txn_marker_batch(
                                4000, 0, ControlRecordType.COMMIT, 0
                            ),
                        }
                    ],
                }
            ],
        }
        part = conn.request(ApiKeys.PRODUCE, body)["responses"][0]["partitions"][0]
        assert part["error_code"] == Errors.INVALID_RECORD
    finally:
        conn.close()
