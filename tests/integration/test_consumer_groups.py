"""Consumer groups on the three-broker cluster, with real clients as members.

For each client: a member reads part of a topic and commits, a second member
joins (a rebalance: the partitions are split between them), both leave, and a
new member of the same group resumes exactly at the committed offsets: it reads
every record the first did not commit, and none that it did.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster

PARTITIONS = 4
RECORDS = 100
FIRST = 40  # what the first member reads and commits
JS_DIR = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path_factory.mktemp("groups"),
        broker_props={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "6",
        },
    ) as c:
        yield c


def topic_with_records(cluster, topic: str) -> set[bytes]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    values = {b"%s-%d" % (topic.encode(), i) for i in range(RECORDS)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return values


def assert_resumed_exactly(all_values: set[bytes], first: list[bytes], rest: list[bytes]):
    assert len(first) == len(set(first)) and len(rest) == len(set(rest)), "a record twice"
    assert not set(first) & set(rest), "the new member reread committed records"
    assert set(first) | set(rest) == all_values, "records missing"


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_kafka(cluster, strategy):
    topic = f"g-confluent-{strategy}"
    values = topic_with_records(cluster, topic)

    def member():
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": topic,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "partition.assignment.strategy": strategy,
                "heartbeat.interval.ms": 500,
            }
        )
        c.subscribe([topic])
        return c

    a = member()
    first: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(first) < FIRST and time.monotonic() < deadline:
        m = a.poll(0.2)
        if m is not None and m.error() is None:
            first.append(m.value())
    a.commit(asynchronous=False)
    b = member()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # rebalance: both members hold partitions
        for c in (a, b):
            m = c.poll(0.1)
            assert m is None or m.error() is not None or m.value() not in first
        split = [len(c.assignment()) for c in (a, b)]
        if sum(split) == PARTITIONS and min(split) > 0:
            break
    assert sum(split) == PARTITIONS and min(split) > 0, split
    a.close()
    b.close()
    c = member()
    rest: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(rest) < RECORDS - FIRST and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            rest.append(m.value())
    c.close()
    assert_resumed_exactly(values, first, rest)


def test_kafka_python(cluster):
    from kafka import KafkaConsumer

    topic = "g-kafka-python"
    values = topic_with_records(cluster, topic)

    def member():
        return KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=topic,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=500,
        )

    a = member()
    first: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(first) < FIRST and time.monotonic() < deadline:
        for records in a.poll(200, max_records=FIRST - len(first)).values():
            first += [r.value for r in records]
    a.commit()
    b = member()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for c in (a, b):
            for records in c.poll(100, max_records=1).values():
                assert all(r.value not in first for r in records)
        split = [len(c.assignment()) for c in (a, b)]
        if sum(split) == PARTITIONS and min(split) > 0:
            break
    assert sum(split) == PARTITIONS and min(split) > 0, split
    a.close(autocommit=False)
    b.close(autocommit=False)
    c = member()
    rest: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(rest) < RECORDS - FIRST and time.monotonic() < deadline:
        for records in c.poll(200).values():
            rest += [r.value for r in records]
    c.close(autocommit=False)
    assert_resumed_exactly(values, first, rest)


def test_aiokafka(cluster):
    from aiokafka import AIOKafkaConsumer

    topic = "g-aiokafka"
    values = topic_with_records(cluster, topic)

    async def scenario():
        def member():
            return AIOKafkaConsumer(
                topic,
                bootstrap_servers=cluster.bootstrap_servers,
                group_id=topic,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=500,
            )

        a = member()
        await a.start()
        first: list[bytes] = []
        while len(first) < FIRST:
            batch = await a.getmany(timeout_ms=200, max_records=FIRST - len(first))
            first += [r.value for records in batch.values() for r in records]
        await a.commit()
        b = member()
        await b.start()
        for _ in range(300):
            for c in (a, b):
                batch = await c.getmany(timeout_ms=100, max_records=1)
                assert all(r.value not in first for rs in batch.values() for r in rs)
            split = [len(c.assignment()) for c in (a, b)]
            if sum(split) == PARTITIONS and min(split) > 0:
                break
        assert sum(split) == PARTITIONS and min(split) > 0, split
        await a.stop()
        await b.stop()
        c = member()
        await c.start()
        rest: list[bytes] = []
        for _ in range(300):
            if len(rest) >= RECORDS - FIRST:
                break
            batch = await c.getmany(timeout_ms=200)
            rest += [r.value for records in batch.values() for r in records]
        await c.stop()
        return first, rest

    first, rest = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert_resumed_exactly(values, first, rest)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(cluster):
    topic = "g-kcat"
    values = topic_with_records(cluster, topic)

    def kcat(count: int | None) -> list[bytes]:
        args = ["kcat", "-b", cluster.bootstrap_servers, "-G", topic, topic, "-e", "-q"]
        args += ["-f", "%s\n", "-X", "auto.offset.reset=earliest"]
        if count is not None:
            args += ["-c", str(count)]
        done = subprocess.run(args, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = kcat(FIRST)  # reads FIRST records, commits them as it leaves
    rest = kcat(None)  # resumes at the group's committed offsets, to the end
    assert len(first) == FIRST
    assert_resumed_exactly(values, first, rest)


@pytest.mark.skipif(
    shutil.which("node") is None or not (JS_DIR / "node_modules").exists(),
    reason="Node.js or tests/js/node_modules is missing (make test runs npm ci)",
)
def test_kafkajs(cluster):
    topic = "g-kafkajs"
    values = topic_with_records(cluster, topic)
    script = """
const { Kafka, logLevel } = require('kafkajs')
const [brokers, topic, want] = process.argv.slice(1)
const kafka = new Kafka({ clientId: 'kjs', brokers: brokers.split(','), logLevel: logLevel.ERROR })
async function member(limit) {
  const consumer = kafka.consumer({ groupId: topic, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  let done
  const finished = new Promise(resolve => { done = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (got.length >= limit) return
      got.push(message.value.toString())
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
      if (got.length >= limit) done()
    },
  })
  const timer = setTimeout(done, 60000)
  await finished
  clearTimeout(timer)
  await consumer.disconnect()
  return got
}
async function main() {
  const got = await member(parseInt(want))
  console.log(JSON.stringify(got))
}
main().catch(e => { console.error(e); process.exit(1) })
"""

    def run(limit: int) -> list[bytes]:
        done = subprocess.run(
            ["node", "-e", script, cluster.bootstrap_servers, topic, str(limit)],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return [v.encode() for v in json.loads(done.stdout)]

    first = run(FIRST)
    rest = run(RECORDS - FIRST)
    assert_resumed_exactly(values, first, rest)


def test_dump_log_decodes_committed_offsets(cluster):
    """A commit is a record in __consumer_offsets, in Kafka's own format: dump-log
    --offsets-decoder reads it back from the coordinator's partition files."""
    import sys

    from confluent_kafka import TopicPartition

    from kafkalab.cluster.failover import current_leader
    from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, partition_for

    topic = "g-dump"
    topic_with_records(cluster, topic)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic})
    c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)  # a group of none
    c.close()
    partition = partition_for(topic, 6)
    leader = current_leader(cluster, OFFSETS_TOPIC, partition)
    path = cluster.broker_dir(leader) / f"{OFFSETS_TOPIC}-{partition}"
    done = subprocess.run(
        [sys.executable, "-m", "kafkalab", "dump-log", str(path), "--offsets-decoder"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"offset_commit::group={topic},partition={topic}-0 :: offset=7," in done.stdout


def test_kafkalab_groups_describes_resets_and_deletes(cluster):
    """`kafkalab groups`, like kafka-consumer-groups.sh: a member's partitions and
    lag, then (the member gone) offsets reset to the earliest, then the group deleted."""
    import sys

    topic = "g-cli"
    topic_with_records(cluster, topic)
    bs = cluster.bootstrap_servers

    def cli(*args):
        done = subprocess.run(
            [sys.executable, "-m", "kafkalab", "groups", "-b", bs, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    member = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    member.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 60
    while read < FIRST and time.monotonic() < deadline:
        m = member.poll(0.2)
        read += m is not None and m.error() is None
    member.commit(asynchronous=False)
    described = cli("--describe", topic)
    assert f"group {topic}: Stable, protocol range, 1 member(s)" in described
    rows = [line.split("\t") for line in described.splitlines()[2:]]
    assert len(rows) == PARTITIONS and all(r[5] != "-" for r in rows)  # one owner each
    assert {r[6] for r in rows} == {"/127.0.0.1"}  # the member's host, as Kafka writes it
    # What is left to read: the lag of committed partitions, all of the others.
    left = sum(int(r[4]) if r[4] != "-" else int(r[3]) for r in rows)
    assert left == RECORDS - FIRST, described
    assert f"{topic}\tconsumer" in cli("--list").splitlines()
    member.close()
    cli("--reset-offsets", topic, "--topic", topic, "--to-earliest", "--execute")
    rows = [line.split("\t") for line in cli("--describe", topic).splitlines()[2:]]
    assert [int(r[2]) for r in rows] == [0] * PARTITIONS
    cli("--delete", topic)
    assert f"{topic}\tconsumer" not in cli("--list").splitlines()


def test_teaching_consumer(cluster):
    """kafkalab's own KafkaConsumer: subscribe(), a rebalance with a second member,
    commit(), and a new member resuming at the committed offsets."""
    from kafkalab.client import KafkaConsumer
    from kafkalab.client.consumer_coordinator import RebalanceListener

    topic = "g-teaching"
    values = topic_with_records(cluster, topic)
    events: list[tuple[str, set]] = []

    class Recorder(RebalanceListener):
        def on_partitions_assigned(self, partitions):
            events.append(("assigned", set(partitions)))

        def on_partitions_revoked(self, partitions):
            events.append(("revoked", set(partitions)))

    def member(listener=None):
        c = KafkaConsumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": topic,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "heartbeat.interval.ms": 300,
                "session.timeout.ms": 6000,
                "max.poll.records": 10,
            }
        )
        c.subscribe([topic], listener)
        return c

    a = member(Recorder())
    first: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(first) < FIRST and time.monotonic() < deadline:
        first += [r.value for r in a.poll(200)]
    assert events[0] == ("assigned", {(topic, p) for p in range(PARTITIONS)})
    a.commit()
    # Each member polls in its own thread, as an application does: a JoinGroup
    # waits until every member has rejoined, so one thread cannot drive both.
    b = member()
    stop, reread = threading.Event(), []

    def run_b():
        while not stop.is_set():
            reread.extend(r.value for r in b.poll(100) if r.value in first)

    thread_b = threading.Thread(target=run_b)
    thread_b.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            reread.extend(r.value for r in a.poll(100) if r.value in first)
            split = [len(c.assignment()) for c in (a, b)]
            if sum(split) == PARTITIONS and min(split) > 0:
                break
    finally:
        stop.set()
        thread_b.join()
    assert sum(split) == PARTITIONS and min(split) > 0, split
    assert not reread, "a committed record was read again"
    assert ("revoked", {(topic, p) for p in range(PARTITIONS)}) in events  # eager (range)
    a.close()
    b.close()
    c = member()
    rest: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(rest) < RECORDS - FIRST and time.monotonic() < deadline:
        rest += [r.value for r in c.poll(200)]
    c.close()
    assert_resumed_exactly(values, first, rest)


def test_kafkalab_consume_in_a_group(cluster):
    """`kafkalab consume -G`: the first run reads some records and commits them as
    it leaves; the second run of the same group reads the rest."""
    import sys

    topic = "g-consume-cli"
    values = topic_with_records(cluster, topic)

    def consume(*extra):
        args = [sys.executable, "-m", "kafkalab", "consume", "-b", cluster.bootstrap_servers]
        args += ["-t", topic, "-G", topic, "-o", "beginning", "-f", "%s\\n", *extra]
        done = subprocess.run(args, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = consume("-c", str(FIRST))
    rest = consume("-e")
    assert len(first) == FIRST
    assert_resumed_exactly(values, first, rest)
