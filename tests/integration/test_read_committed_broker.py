"""read_committed against the broker's real read path (LSO, aborted transactions,
markers on disk), with the teaching consumer and confluent-kafka side by side.

Transactional batches are produced over the wire as a transactional producer sends
them; the COMMIT/ABORT markers are written in-process as the transaction
coordinator's WriteTxnMarkers does (ReplicaManager.append_records, origin
COORDINATOR), so the consumers are checked against the partition side alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid

from confluent_kafka import Consumer

from kafkalab.client import Admin, KafkaConsumer
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.server.broker import BrokerThread
from kafkalab.storage.unified_log import AppendOrigin


class TransactionalWriter:
    """Produce requests of a transactional producer, by hand."""

    def __init__(self, admin: Admin, topic: str) -> None:
        self.admin, self.topic = admin, topic
        r = admin.client.any_connection().request(
            ApiKeys.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60_000}
        )
        self.producer_id = r["producer_id"]
        self.sequence = 0

    def send(self, values: list[bytes], transactional: bool = True) -> None:
        batch = build_batch(
            [SimpleRecord(v) for v in values],
            producer_id=self.producer_id if transactional else -1,
            producer_epoch=0 if transactional else -1,
            base_sequence=self.sequence if transactional else -1,
            is_transactional=transactional,
        )
        if transactional:
            self.sequence += len(values)
        r = self.admin.client.connection(self.admin.client.leader_for(self.topic, 0)).request(
            ApiKeys.PRODUCE,
            {
                "transactional_id": "by-hand" if transactional else None,
                "acks": -1,
                "timeout_ms": 10_000,
                "topics": [
                    {"name": self.topic, "partitions": [{"partition_index": 0, "records": batch}]}
                ],
            },
        )
        assert r["responses"][0]["partitions"][0]["error_code"] == 0


def write_marker(broker: BrokerThread, topic: str, producer_id: int, committed: bool) -> None:
    async def append():
        marker = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        result = broker.broker.replica_manager.append_records(
            topic,
            0,
            build_end_txn_marker_batch(producer_id, 0, marker, 0),
            required_acks=-1,
            origin=AppendOrigin.COORDINATOR,
        )
        assert result.error == Errors.NONE

    asyncio.run_coroutine_threadsafe(append(), broker._loop).result(timeout=30)


def teaching(bs: str, topic: str, isolation: str) -> tuple[list[bytes], int]:
    with KafkaConsumer(
        {"bootstrap.servers": bs, "auto.offset.reset": "earliest", "isolation.level": isolation}
    ) as c:
        tp = (topic, 0)
        c.assign([tp])
        end = c.end_offsets([tp])[tp]
        got, deadline = [], time.time() + 30
        while c.position(tp) < end and time.time() < deadline:
            got += [r.value for r in c.poll(300)]
        return got, end


def confluent(bs: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"rc-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        c.subscribe([topic])
        got, deadline = [], time.time() + 30
        while time.time() < deadline and len(got) < expected:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
        quiet = time.time() + 1.5  # and nothing beyond what it should see
        while time.time() < quiet:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def test_aborted_and_open_transactions_are_invisible_to_read_committed(tmp_path):
    with (
        BrokerThread(
            {
                "log.dirs": str(tmp_path),
                "group.initial.rebalance.delay.ms": "0",
                # the batches below are written by hand with no coordinator transaction
                # behind them (markers appended in-process); verification refuses them
                "transaction.partition.verification.enable": "false",
            }
        ) as b,
        Admin(b.bootstrap_servers) as admin,
    ):
        bs, topic = b.bootstrap_servers, "rc"
        admin.create_topic(topic, 1)
        w = TransactionalWriter(admin, topic)
        w.send([b"plain-1"], transactional=False)
        w.send([b"aborted-1", b"aborted-2"])
        write_marker(b, topic, w.producer_id, committed=False)
        w.send([b"committed-1"])
        write_marker(b, topic, w.producer_id, committed=True)
        w.send([b"open-1"])  # holds the LSO back
        w.send([b"plain-2"], transactional=False)

        got, lso = teaching(bs, topic, "read_committed")
        assert (got, lso) == ([b"plain-1", b"committed-1"], 6)  # the LSO: open-1's offset
        everything = [b"plain-1", b"aborted-1", b"aborted-2", b"committed-1", b"open-1", b"plain-2"]
        got, hw = teaching(bs, topic, "read_uncommitted")
        assert (got, hw) == (everything, 8)
        assert confluent(bs, topic, "read_committed", 2) == [b"plain-1", b"committed-1"]

        out = subprocess.run(
            [sys.executable, "-m", "kafkalab", "transactions", "-b", bs, "describe-producers"]
            + ["--topic", topic, "--partition", "0"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.splitlines()
        assert out[0].split() == [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ]
        (row,) = [line.split() for line in out[1:]]
        assert (row[0], row[1], row[3], row[5]) == (str(w.producer_id), "0", "3", "6")

        write_marker(b, topic, w.producer_id, committed=False)  # the open one aborts
        committed = [b"plain-1", b"committed-1", b"plain-2"]
        got, lso = teaching(bs, topic, "read_committed")
        assert (got, lso) == (committed, 9)  # all stable: past the last marker
        assert confluent(bs, topic, "read_committed", 3) == committed
        assert confluent(bs, topic, "read_uncommitted", 6) == everything
