"""Transactions with confluent-kafka (librdkafka) against one broker: the
transaction coordinator, __transaction_state, markers in the partitions, fencing,
and dump-log decoding the coordinator's records."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import read_all, read_final_log
from kafkalab.coordinator.group.coordinator_records import partition_for
from kafkalab.records import iter_batches
from kafkalab.records.control_record import parse_control_record
from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("txn-broker")),
            "transaction.state.log.num.partitions": "4",
            "offsets.topic.num.partitions": "4",
            "transaction.max.timeout.ms": "120000",
        }
    ) as b:
        yield b


def make_topic(bs: str, partitions: int = 2) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(10)
    return topic


def txn_producer(bs: str, tid: str, **extra) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": tid,
            "transaction.timeout.ms": 60_000,
            **extra,
        }
    )


def batches(broker, topic: str, partition: int) -> list:
    """Every batch of the partition's log, read from disk."""
    d = Path(broker.config.log_dirs[0]) / f"{topic}-{partition}"
    out = []
    for f in sorted(d.glob("*.log")):
        out += list(iter_batches(f.read_bytes()))
    return out


def completed(broker, tid: str) -> str:
    """The transaction's state once its markers are all written (EndTxn is answered
    at Prepare*, before the markers, as in Kafka): Complete*, or Empty once an
    InitProducerId has followed (Kafka's prepareIncrementProducerEpoch)."""
    coordinator = broker.broker.transaction_coordinator.coordinator
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (d,) = coordinator.describe_transactions([tid])
        if d.state.startswith("Complete") or d.state == "Empty":
            return d
        time.sleep(0.05)
    raise AssertionError(f"{tid}: markers not written in 30 s ({d.state})")


def markers(broker, topic, partition) -> list[str]:
    return [
        parse_control_record(b.records[0]).type.name
        for b in batches(broker, topic, partition)
        if b.header.is_control_batch
    ]


def test_commit_and_abort_write_markers(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs)
    p = txn_producer(bs, "tx-commit-abort")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, b"aborted-%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    d = completed(broker, "tx-commit-abort")
    assert d.state == "CompleteAbort" and d.producer_epoch == 0
    assert markers(broker, topic, 0) == ["COMMIT", "ABORT"]
    assert markers(broker, topic, 1) == ["COMMIT"]
    data = [b for b in batches(broker, topic, 0) if not b.header.is_control_batch]
    assert data and all(b.header.is_transactional for b in data)
    committed = {b"committed-%d" % i for i in range(10)}
    aborted = {b"aborted-%d" % i for i in range(4)}
    seen = read_all(broker.bootstrap_servers, topic, 2, "read_committed")
    assert sorted(seen) == sorted(committed), "read_committed sees exactly the committed records"
    everything = read_all(broker.bootstrap_servers, topic, 2, "read_uncommitted")
    assert sorted(everything) == sorted(committed | aborted)


def test_a_second_producer_fences_the_first(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs)
    first = txn_producer(bs, "tx-fence")
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(30)
    second = txn_producer(bs, "tx-fence")
    second.init_transactions(60)  # aborts the first's open transaction, then a new epoch
    second.begin_transaction()
    second.produce(topic, b"winner", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as fenced:
        first.produce(topic, b"zombie-2", partition=1)
        first.commit_transaction(30)
    assert fenced.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    d = completed(broker, "tx-fence")
    # epoch 1 fenced the first producer while its transaction was aborted; the
    # retried InitProducerId then got epoch 2
    assert (d.state, d.producer_epoch) == ("CompleteCommit", 2)
    assert markers(broker, topic, 0) == ["ABORT", "COMMIT"]


def test_send_offsets_to_transaction(broker):
    """AddOffsetsToTxn puts the group's __consumer_offsets partition in the
    transaction; its COMMIT marker makes the TxnOffsetCommit visible, its ABORT
    drops it."""
    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    group = "tx-offsets-group"
    p = txn_producer(bs, "tx-offsets")
    p.init_transactions(30)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        for offset, commit in ((1, True), (5, False)):
            p.begin_transaction()
            p.produce(topic, b"x", partition=0)
            p.send_offsets_to_transaction(
                [TopicPartition(topic, 0, offset)], c.consumer_group_metadata(), 30
            )
            coordinator = broker.broker.transaction_coordinator.coordinator
            (d,) = coordinator.describe_transactions(["tx-offsets"])
            assert ("__consumer_offsets", partition_for(group, 4)) in d.partitions
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            completed(broker, "tx-offsets")
            (tp,) = c.committed([TopicPartition(topic, 0)], 30)
            assert tp.offset == 1  # committed by the first, not moved by the aborted second
    finally:
        c.close()


def test_dump_log_decodes_the_transaction_state(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    p = txn_producer(bs, "tx-dump")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"v", partition=0)
    p.commit_transaction(30)
    completed(broker, "tx-dump")
    coordinator = broker.broker.transaction_coordinator.coordinator
    partition = coordinator.partition_for("tx-dump")
    d = Path(broker.config.log_dirs[0]) / f"__transaction_state-{partition}"
    out = subprocess.run(
        [sys.executable, "-m", "kafkalab", "dump-log", "--transaction-log-decoder", str(d)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line for line in out.splitlines() if "transactionalId=tx-dump" in line]
    states = [line.split("state=")[1].split(",")[0] for line in lines]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert f"partitions=[{topic}-0]" in lines[1]


def test_the_broken_coordinator_lets_the_zombie_commit(tmp_path):
    """kafkalab.transaction.init.epoch.rule=no-bump (the spec's
    MC_transactions_no_epoch_bump): the second instance gets the same epoch, so the
    first, a zombie, is not fenced and its commit goes through."""
    with BrokerThread(
        {
            "log.dirs": str(tmp_path),
            "transaction.state.log.num.partitions": "4",
            "kafkalab.transaction.init.epoch.rule": "no-bump",
        }
    ) as b:
        bs = b.bootstrap_servers
        topic = make_topic(bs)
        zombie = txn_producer(bs, "tx-zombie")
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(topic, b"before", partition=0)
        assert zombie.flush(30) == 0
        second = txn_producer(bs, "tx-zombie")
        second.init_transactions(60)  # aborts the open transaction, keeps the epoch
        assert (completed(b, "tx-zombie").state, completed(b, "tx-zombie").producer_epoch) == (
            "Empty",
            0,
        )
        zombie.produce(topic, b"zombie", partition=1)
        zombie.commit_transaction(30)  # with Kafka's rule: PRODUCER_FENCED
        assert completed(b, "tx-zombie").state == "CompleteCommit"
        assert markers(b, topic, 1) == ["COMMIT"]


def test_the_admin_apis_on_the_wire(broker):
    """FindCoordinator key type 1, InitProducerId's timeout cap, DescribeTransactions,
    ListTransactions and the old clients' INVALID_PRODUCER_EPOCH, as raw requests."""
    import asyncio

    from kafkalab.protocol.api_keys import ApiKeys
    from kafkalab.protocol.messages import APIS
    from kafkalab.server.inter_broker_connection import InterBrokerConnection

    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    p = txn_producer(bs, "tx-admin")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    assert p.flush(30) == 0
    host, port = bs.rsplit(":", 1)

    async def ask():
        conn = InterBrokerConnection(host, int(port), APIS)
        try:
            found = await conn.request(
                ApiKeys.FIND_COORDINATOR, 1, {"key": "tx-admin", "key_type": 1}
            )
            too_long = await conn.request(
                ApiKeys.INIT_PRODUCER_ID,
                1,
                {"transactional_id": "tx-other", "transaction_timeout_ms": 120_001},
            )
            described = await conn.request(
                ApiKeys.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx-admin", "nope"]}
            )
            listed = await conn.request(
                ApiKeys.LIST_TRANSACTIONS,
                0,
                {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": []},
            )
            d = described["transaction_states"][0]
            stale = await conn.request(
                ApiKeys.END_TXN,
                1,
                {
                    "transactional_id": "tx-admin",
                    "producer_id": d["producer_id"],
                    "producer_epoch": d["producer_epoch"] - 1,
                    "committed": True,
                },
            )
            no_producer = await conn.request(
                ApiKeys.WRITE_TXN_MARKERS,
                1,
                {
                    "markers": [
                        {
                            "producer_id": -1,
                            "producer_epoch": -1,
                            "transaction_result": True,
                            "topics": [{"name": topic, "partition_indexes": [0]}],
                            "coordinator_epoch": 0,
                        }
                    ]
                },
            )
            return found, too_long, described, listed, stale, no_producer
        finally:
            conn.close()

    found, too_long, described, listed, stale, no_producer = asyncio.run(ask())
    assert (found["error_code"], found["port"]) == (0, int(port))
    assert too_long["error_code"] == 50  # INVALID_TRANSACTION_TIMEOUT
    mine, nope = described["transaction_states"]
    assert (mine["error_code"], mine["transaction_state"]) == (0, "Ongoing")
    assert mine["topic_partitions"] == [{"name": topic, "partition_indexes": [0]}]
    assert nope["error_code"] == 105  # TRANSACTIONAL_ID_NOT_FOUND
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert "tx-admin" in [t["transactional_id"] for t in listed["transaction_states"]]
    assert all(t["transaction_state"] == "Ongoing" for t in listed["transaction_states"])
    assert stale["error_code"] == 47  # INVALID_PRODUCER_EPOCH: EndTxn v1 predates PRODUCER_FENCED
    (refused,) = no_producer["markers"][0]["topics"][0]["partitions"]
    assert refused["error_code"] == 42  # INVALID_REQUEST: no marker without a producer id
    p.abort_transaction(30)


def test_an_open_transaction_holds_read_committed_back(broker):
    """The LSO stays at the open transaction's first offset: read_committed readers
    see neither it nor what comes after it, until the commit marker is written."""
    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    plain = Producer({"bootstrap.servers": bs, "acks": "all"})
    plain.produce(topic, b"before", partition=0)
    assert plain.flush(30) == 0
    p = txn_producer(bs, "tx-open")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"in-txn", partition=0)
    assert p.flush(30) == 0
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(30) == 0
    assert read_all(bs, topic, 1, "read_committed") == [b"before"]
    assert read_all(bs, topic, 1, "read_uncommitted") == [b"before", b"in-txn", b"after"]
    p.commit_transaction(30)
    completed(broker, "tx-open")
    assert read_all(bs, topic, 1, "read_committed") == [b"before", b"in-txn", b"after"]


def test_a_hung_producers_transaction_times_out(tmp_path):
    """transaction.timeout.ms passes with the transaction open: the coordinator
    aborts it with a bumped epoch (fencing the producer), the ABORT marker moves the
    LSO on, and read_committed readers see what came after but not the hung records."""
    with BrokerThread(
        {
            "log.dirs": str(tmp_path),
            "transaction.state.log.num.partitions": "2",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        }
    ) as b:
        bs = b.bootstrap_servers
        topic = make_topic(bs, 1)
        hung = txn_producer(bs, "tx-hung", **{"transaction.timeout.ms": 1000})
        hung.init_transactions(30)
        hung.begin_transaction()
        hung.produce(topic, b"never-committed", partition=0)
        assert hung.flush(30) == 0
        plain = Producer({"bootstrap.servers": bs, "acks": "all"})
        plain.produce(topic, b"after", partition=0)
        assert plain.flush(30) == 0
        d = completed(b, "tx-hung")  # nobody ends it: the timeout does
        assert (d.state, d.producer_epoch) == ("CompleteAbort", 1)
        assert markers(b, topic, 0) == ["ABORT"]
        assert read_all(bs, topic, 1, "read_committed") == [b"after"]
        with pytest.raises(KafkaException):
            hung.commit_transaction(10)  # the producer has been fenced


def test_the_history_checker_judges_what_read_committed_readers_saw(broker):
    """A committed and an aborted transaction recorded in a History: read_final_log
    under read_committed leaves the aborted record and the markers out (and under
    read_uncommitted ends at the HW although the last offset is a marker); the
    checker passes the history, and finds the aborted read when what a
    read_uncommitted reader saw is judged as read_committed."""
    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    history = History()

    def delivered(err, m):
        assert err is None
        history.ack(topic, 0, m.value(), m.offset())

    p = txn_producer(bs, "tx-history")
    p.init_transactions(30)
    for txn, values, commit in (("t1", [b"c0", b"c1"], True), ("t2", [b"a0"], False)):
        p.begin_transaction()
        for v in values:
            history.send(topic, 0, v, txn=txn)
            p.produce(topic, v, partition=0, on_delivery=delivered)
        assert p.flush(30) == 0
        if commit:
            p.commit_transaction(30)
            history.commit(txn)
        else:
            p.abort_transaction(30)
            history.abort(txn)
    completed(broker, "tx-history")
    committed = read_final_log(bs, topic, 0, history, isolation="read_committed")
    everything = read_final_log(bs, topic, 0, history)
    assert committed == [(0, b"c0"), (1, b"c1")]
    assert everything == [(0, b"c0"), (1, b"c1"), (3, b"a0")]  # COMMIT at 2, ABORT at 4
    verdict = check(history)
    assert verdict.valid, verdict.summary()
    for offset, value in everything:
        history.read(topic, 0, offset, value, reader="misjudged", isolation="read_committed")
    verdict = check(history)
    assert [(a["value"], a["transaction"]) for a in verdict.aborted_read] == [(b"a0", "t2")]


# -- the other clients ------------------------------------------------------------------------


def assert_committed_only(bs: str, topic: str, committed: list[bytes], aborted: list[bytes]):
    assert sorted(read_all(bs, topic, 1, "read_committed")) == sorted(committed)
    assert sorted(read_all(bs, topic, 1, "read_uncommitted")) == sorted(committed + aborted)


def test_kafka_python_transactions(broker):
    from kafka import KafkaProducer

    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="tx-kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kp-committed", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-aborted", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    assert completed(broker, "tx-kafka-python").state == "CompleteAbort"
    assert_committed_only(bs, topic, [b"kp-committed"], [b"kp-aborted"])


def test_aiokafka_transactions(broker):
    """aiokafka speaks version 0 of every transactional API."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="tx-aiokafka")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-aborted", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert completed(broker, "tx-aiokafka").state == "CompleteAbort"
    assert_committed_only(bs, topic, [b"aio-committed"], [b"aio-aborted"])


JS_DIR = Path(__file__).resolve().parents[1] / "js"


@pytest.mark.skipif(
    shutil.which("node") is None or not (JS_DIR / "node_modules").exists(),
    reason="Node.js or tests/js/node_modules is missing (make test runs npm ci)",
)
def test_kafkajs_transactions(broker):
    bs = broker.bootstrap_servers
    topic = make_topic(bs, 1)
    script = """
const { Kafka, logLevel } = require('kafkajs')
const [brokers, topic] = process.argv.slice(1)
const kafka = new Kafka({ clientId: 'kjs-txn', brokers: [brokers], logLevel: logLevel.ERROR })
async function main() {
  const producer = kafka.producer({ transactionalId: 'tx-kafkajs', idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  let txn = await producer.transaction()
  await txn.send({ topic, messages: [{ value: 'kjs-committed', partition: 0 }] })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic, messages: [{ value: 'kjs-aborted', partition: 0 }] })
  await txn.abort()
  await producer.disconnect()
}
main().catch(e => { console.error(e); process.exit(1) })
"""
    done = subprocess.run(
        ["node", "-e", script, bs, topic], cwd=JS_DIR, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert completed(broker, "tx-kafkajs").state == "CompleteAbort"
    assert_committed_only(bs, topic, [b"kjs-committed"], [b"kjs-aborted"])
