"""Transactions end to end on a kafkalab broker, with the teaching client and
confluent-kafka (librdkafka) as each other's peers:

- the teaching producer's committed and aborted transactions, read by a
  confluent-kafka read_committed consumer (only the committed records) and a
  read_uncommitted one (all of them, never a marker);
- confluent-kafka's transactions read by the teaching consumer, both isolation levels;
- send_offsets_to_transaction (consume-transform-produce) with confluent-kafka and
  with the teaching producer: the group's committed offsets move only when the
  transaction commits;
- `kafkalab transactions list|describe|describe-producers` and
  `kafkalab consume --isolation read_committed` while a transaction is open.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalab.client import Admin, KafkaConsumer, KafkaProducer
from kafkalab.client.transaction_manager import ProducerFencedError, TransactionState
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("txn")),
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
        }
    ) as b:
        yield b


def new_topic(broker, partitions: int = 2) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topic(topic, partitions)
    return topic


def confluent_values(broker, topic: str, isolation: str, expected: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        c.subscribe([topic])
        got, deadline = [], time.time() + 30
        while len(got) < expected and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        # nothing more arrives: what it has is all it will see
        end = time.time() + 2
        while time.time() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


def teaching_values(broker, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    with KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    ) as c:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps)  # read_committed: the last stable offsets
        got, deadline = [], time.time() + 30
        while time.time() < deadline and any(c.position(tp) < e for tp, e in ends.items()):
            got += [r.value for r in c.poll(500)]
        return got


def test_teaching_transactions_read_by_confluent_kafka(broker):
    topic = new_topic(broker)
    with KafkaProducer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"t-{topic}"}
    ) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, b"committed-%d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(4):
            p.send(topic, b"aborted-%d" % i, partition=i % 2)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"last", partition=0)
        p.commit_transaction()
        path = [str(t) for _, t in p.transaction_manager.transitions]
        assert path[:2] == ["INITIALIZING", "READY"] and "ABORTING_TRANSACTION" in path
    committed = {b"committed-%d" % i for i in range(6)} | {b"last"}
    got = confluent_values(broker, topic, "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    everything = committed | {b"aborted-%d" % i for i in range(4)}
    got = confluent_values(broker, topic, "read_uncommitted", len(everything))
    assert sorted(got) == sorted(everything)  # and no control record among them


def test_confluent_kafka_transactions_read_by_the_teaching_consumer(broker):
    topic = new_topic(broker)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"c-{topic}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"kept-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"dropped-%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    kept = sorted(b"kept-%d" % i for i in range(5))
    assert sorted(teaching_values(broker, topic, "read_committed")) == kept
    everything = kept + [b"dropped-%d" % i for i in range(5)]
    assert sorted(teaching_values(broker, topic, "read_uncommitted")) == sorted(everything)


def committed_offsets(broker, group: str, topic: str) -> dict[int, int]:
    with Admin(broker.bootstrap_servers) as admin:
        return {p: o for (t, p), o in admin.group_offsets(group).items() if t == topic}


@pytest.mark.parametrize("producer_kind", ["confluent", "teaching"])
def test_send_offsets_commit_only_with_the_transaction(broker, producer_kind):
    source, sink = new_topic(broker, 1), new_topic(broker, 1)
    group = f"ctp-{producer_kind}-{source}"
    feeder = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        feeder.produce(source, b"in-%d" % i, partition=0)
    assert feeder.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    batch, deadline = [], time.time() + 30
    while len(batch) < 10 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            batch.append(m)
    assert len(batch) == 10
    first, second = batch[:5], batch[5:]

    def offsets_after(messages) -> list[TopicPartition]:
        return [TopicPartition(source, 0, messages[-1].offset() + 1)]

    if producer_kind == "confluent":
        p = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"x-{group}"}
        )
        p.init_transactions(30)

        def run(messages, commit: bool) -> None:
            p.begin_transaction()
            for m in messages:
                p.produce(sink, m.value().replace(b"in", b"out"), partition=0)
            p.send_offsets_to_transaction(
                offsets_after(messages), consumer.consumer_group_metadata()
            )
            (p.commit_transaction if commit else p.abort_transaction)(30)
    else:
        p = KafkaProducer(
            {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"x-{group}"}
        )
        p.init_transactions()

        def run(messages, commit: bool) -> None:
            p.begin_transaction()
            for m in messages:
                p.send(sink, m.value().replace(b"in", b"out"), partition=0)
            p.send_offsets_to_transaction({(source, 0): messages[-1].offset() + 1}, group)
            (p.commit_transaction if commit else p.abort_transaction)()

    try:
        run(first, commit=False)
        assert committed_offsets(broker, group, source).get(0, -1) == -1
        run(first, commit=True)
        assert committed_offsets(broker, group, source) == {0: 5}
        run(second, commit=False)
        assert committed_offsets(broker, group, source) == {0: 5}
        run(second, commit=True)
        assert committed_offsets(broker, group, source) == {0: 10}
    finally:
        consumer.close()
        if producer_kind == "teaching":
            p.close()
    out = sorted(confluent_values(broker, sink, "read_committed", 10))
    assert out == sorted(b"out-%d" % i for i in range(10))  # each once: aborts dropped


def kafkalab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalab", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_while_a_transaction_is_open(broker):
    bs = broker.bootstrap_servers
    topic = new_topic(broker, 1)
    txn_id = f"cli-{topic}"
    with KafkaProducer({"bootstrap.servers": bs, "transactional.id": txn_id}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"visible", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"pending", partition=0).result(30)  # written, not committed

        listed = kafkalab("transactions", "-b", bs, "list")
        assert listed.returncode == 0, listed.stderr
        header, *rows = listed.stdout.splitlines()
        assert header.split() == [
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState",
        ]
        mine = [r.split() for r in rows if r.split()[0] == txn_id]
        assert mine and mine[0][2] == str(p.producer_id) and mine[0][3] == "Ongoing"

        described = kafkalab("transactions", "-b", bs, "describe", "--transactional-id", txn_id)
        assert described.returncode == 0, described.stderr
        row = described.stdout.splitlines()[1].split()
        assert row[1:5] == [txn_id, str(p.producer_id), str(p.producer_epoch), "Ongoing"]
        assert row[-1] == f"{topic}-0"

        producers = kafkalab(
            "transactions", "-b", bs, "describe-producers", "--topic", topic, "--partition", "0"
        )
        assert producers.returncode == 0, producers.stderr
        (row,) = [r.split() for r in producers.stdout.splitlines()[1:]]
        assert row[0] == str(p.producer_id)
        assert row[-1] == "2"  # the open transaction starts after the first one's marker

        committed = kafkalab(
            "consume",
            "-b",
            bs,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "--isolation",
            "read_committed",
        )
        assert committed.returncode == 0, committed.stderr
        assert committed.stdout.split() == ["visible"]
        everything = kafkalab("consume", "-b", bs, "-t", topic, "-o", "beginning", "-e")
        assert everything.stdout.split() == ["visible", "pending"]
        p.abort_transaction()


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    topic = new_topic(broker, 1)
    bs = broker.bootstrap_servers
    with (
        KafkaProducer({"bootstrap.servers": bs, "transactional.id": f"z-{topic}"}) as zombie,
        KafkaProducer({"bootstrap.servers": bs, "transactional.id": f"z-{topic}"}) as fresh,
    ):
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).result(30)
        fresh.init_transactions()  # aborts the zombie's transaction, bumps the epoch
        assert fresh.producer_epoch > zombie.producer_epoch
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
        assert zombie.transaction_manager.state is TransactionState.FATAL_ERROR
        fresh.begin_transaction()
        fresh.send(topic, b"fresh", partition=0)
        fresh.commit_transaction()
    assert teaching_values(broker, topic, "read_committed", partitions=1) == [b"fresh"]
