"""Kafka's Java client 4.3 negotiates transactions v2 (KIP-890 part 2) against a
broker that finalizes `transaction.version` 2, and stays on version 1 against
one that finalizes 1.

Under version 2 the client sends no AddPartitionsToTxn (the leader adds each
partition: the coordinator's Ongoing record says client transaction version 2)
and takes the epoch EndTxn v5 answers for the next transaction: in
__transaction_state every Prepare* has the epoch one above the last, the
partition's producer state (DescribeProducers) ends at the last one, and
read_committed sees exactly the committed records. Under version 1 the epoch of
every record is the one InitProducerId gave.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from java_peer import java_peer, require_java_peer
from test_java_client import create_topic, of_kind

from kafkalab.client.network_client import BrokerConnection
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.timeout(300)
STATE_PARTITIONS = 2
PATTERN = "ccac"  # commit, commit, abort, commit
TRANSACTIONS = len(PATTERN)
PER_TXN = 3


def start(tmp_path_factory, level: int) -> BrokerThread:
    require_java_peer()
    return BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp(f"java-tv{level}")),
            "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
            "transaction.version": str(level),
        }
    ).start()


def transaction_log(
    bs: str, transactional_id: str, state_partitions: int = STATE_PARTITIONS
) -> list[tlog.TransactionLogValue]:
    """The __transaction_state records of one id, in log order."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    partition = tlog.partition_for(transactional_id, state_partitions)
    c.assign([TopicPartition(tlog.TRANSACTION_STATE_TOPIC, partition, 0)])
    values = []
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 3:
        m = c.poll(0.5)
        if m is None or m.error() is not None:
            continue
        idle_since = time.monotonic()
        if m.value() is not None and tlog.read_key(m.key()) == transactional_id:
            values.append(tlog.read_value(m.value()))
    c.close()
    return values


def producer_epoch(bs: str, topic: str) -> dict[int, int]:
    """DescribeProducers at `bs` (the partition's leader): producer id -> epoch."""
    host, port = bs.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout_s=30)
    try:
        body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
        (p,) = conn._call(ApiKeys.DESCRIBE_PRODUCERS, 0, body)[1]["topics"][0]["partitions"]
    finally:
        conn.close()
    return {s["producer_id"]: s["producer_epoch"] for s in p["active_producers"]}


def run_transactions(
    bs: str, topic: str, tid: str, create: bool = True
) -> tuple[set[str], set[str]]:
    """The Java client's transactions (PATTERN) on partition 0 of `topic`, checked
    against read_committed: (committed values, aborted values)."""
    if create:
        create_topic(bs, topic, 1)
    txns = of_kind(
        java_peer(
            "transactions", "--bootstrap", bs, "--topic", topic, "--transactional-id", tid,
            "--transactions", str(TRANSACTIONS), "--records-per-txn", str(PER_TXN),
            "--pattern", PATTERN,
        ),
        "txn",
    )  # fmt: skip
    assert [t["outcome"] for t in txns] == ["commit", "commit", "abort", "commit"]
    committed = {r["value"] for t in txns if t["outcome"] == "commit" for r in t["records"]}
    aborted = {r["value"] for t in txns if t["outcome"] == "abort" for r in t["records"]}
    read = of_kind(
        java_peer(
            "consume", "--bootstrap", bs, "--topic", topic, "--to-end", "true",
            "--isolation", "read_committed",
        ),
        "record",
    )  # fmt: skip
    assert sorted(r["value"] for r in read) == sorted(committed)
    return committed, aborted


def prepared(values: list[tlog.TransactionLogValue]) -> list[tlog.TransactionLogValue]:
    return [v for v in values if v.state.is_prepared]


def test_java_client_speaks_version_2_an_epoch_per_transaction(tmp_path_factory):
    b = start(tmp_path_factory, 2)
    try:
        bs, topic, tid = b.bootstrap_servers, "java-tv2", "java-tv2-tx"
        committed, aborted = run_transactions(bs, topic, tid)
        assert len(committed) == 3 * PER_TXN and len(aborted) == PER_TXN
        values = transaction_log(bs, tid)
        (init,) = [v for v in values if v.state == "Empty"]
        pid, first = init.producer_id, init.producer_epoch
        ends = prepared(values)
        assert [v.state for v in ends] == [
            "PrepareCommit",
            "PrepareCommit",
            "PrepareAbort",
            "PrepareCommit",
        ]
        # one epoch more at every EndTxn: the client took each one from EndTxn v5
        assert [(v.producer_id, v.producer_epoch) for v in ends] == [
            (pid, first + n) for n in range(1, TRANSACTIONS + 1)
        ]
        assert all(v.client_transaction_version == 2 for v in ends)
        # the partitions were added by the leader (a version 2 add), not the client
        ongoing = [v for v in values if v.state == "Ongoing"]
        assert ongoing and all(v.client_transaction_version == 2 for v in ongoing)
        assert {v.producer_epoch for v in ongoing} == {first + n for n in range(TRANSACTIONS)}
        # the last marker left the partition's producer state at the last epoch
        assert producer_epoch(bs, topic) == {pid: first + TRANSACTIONS}
    finally:
        b.stop()


def test_java_client_stays_on_version_1_when_1_is_finalized(tmp_path_factory):
    b = start(tmp_path_factory, 1)
    try:
        bs, topic, tid = b.bootstrap_servers, "java-tv1", "java-tv1-tx"
        run_transactions(bs, topic, tid)
        values = transaction_log(bs, tid)
        ends = prepared(values)
        assert len(ends) == TRANSACTIONS
        (init,) = [v for v in values if v.state == "Empty"]
        assert {(v.producer_id, v.producer_epoch) for v in values} == {
            (init.producer_id, init.producer_epoch)
        }
        assert all(v.client_transaction_version == 0 for v in values)
        assert producer_epoch(bs, topic) == {init.producer_id: init.producer_epoch}
    finally:
        b.stop()


def committed_offset(bs: str, group: str, topic: str) -> int:
    """OffsetFetch (require_stable): the group's committed offset of partition 0."""
    host, port = bs.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout_s=30)
    try:
        body = {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": True,
        }
        deadline = time.monotonic() + 20
        while True:
            answer = conn._call(ApiKeys.OFFSET_FETCH, 7, body)[1]
            (p,) = answer["topics"][0]["partitions"]
            if p["error_code"] == 0 or time.monotonic() > deadline:
                return p["committed_offset"]
            time.sleep(0.1)  # UNSTABLE_OFFSET_COMMIT: a marker is on its way
    finally:
        conn.close()


def test_java_send_offsets_to_transaction_under_version_2(tmp_path_factory):
    """sendOffsetsToTransaction of version 2: no AddOffsetsToTxn, a TxnOffsetCommit
    v5 whose broker adds the group's __consumer_offsets partition; the offsets of the
    committed transactions count, the aborted one's do not."""
    b = start(tmp_path_factory, 2)
    try:
        bs, topic, tid, group = b.bootstrap_servers, "java-tv2-offsets", "java-tv2-eos", "eos"
        create_topic(bs, topic, 1)
        txns = of_kind(
            java_peer(
                "transactions", "--bootstrap", bs, "--topic", topic, "--transactional-id", tid,
                "--transactions", "3", "--records-per-txn", "1", "--pattern", "cca",
                "--offsets-group", group,
            ),
            "txn",
        )  # fmt: skip
        assert [t["outcome"] for t in txns] == ["commit", "commit", "abort"]
        # transaction 1 committed offset 2; transaction 2's offset 3 was aborted
        assert committed_offset(bs, group, topic) == 2
        values = transaction_log(bs, tid)
        with_offsets = [
            v
            for v in values
            if v.state == "Ongoing" and any(t == "__consumer_offsets" for t, _ in v.partitions)
        ]
        assert with_offsets and all(v.client_transaction_version == 2 for v in with_offsets)
        assert [v.producer_epoch for v in prepared(values)] == [1, 2, 3]
    finally:
        b.stop()
