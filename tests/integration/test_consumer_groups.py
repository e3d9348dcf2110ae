"""Consumer groups on the three-broker cluster, with real clients as members.

For each client: a member reads part of a topic and commits, a second member
joins (a rebalance: the partitions are split between them), both leave, and a
new member of the same group resumes exactly at the committed offsets: it reads
every record the first did not commit, and none that it did. librdkafka also
with group.protocol=consumer (KIP-848), where a member leaving hands its
partitions to the other at its committed offsets.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
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
            "group.consumer.heartbeat.interval.ms": "500",  # KIP-848 members: 5000 in Kafka
        },
    ) as c:
        yield c


def topic_with_records(cluster, topic: str, records: int = RECORDS) -> set[bytes]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    values = {b"%s-%d" % (topic.encode(), i) for i in range(records)}
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


def test_confluent_kafka_consumer_protocol(cluster):
    """group.protocol=consumer (KIP-848): no JoinGroup or SyncGroup, the coordinator
    assigns. Two members split the partitions (ConsumerGroupDescribe agrees with
    what each holds); the second commits and leaves; the first takes over its
    partitions exactly at the second's commits, commits, and leaves; a new member
    then reads every partition exactly from the committed offset to the end."""
    from confluent_kafka import TopicPartition

    from kafkalab.client import Admin

    topic = "g-confluent-kip848"
    per_partition = 100
    topic_with_records(cluster, topic, per_partition * PARTITIONS)
    everything = {(topic, p) for p in range(PARTITIONS)}
    consumers: list[Consumer] = []
    admin = Admin(cluster.bootstrap_servers)

    def member():
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": topic,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumers.append(c)
        c.subscribe([topic])
        return c

    def held(c) -> set:
        return {(tp.topic, tp.partition) for tp in c.assignment()}

    def poll_until(done, *members, seen=None, timeout=60):
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            for c in members:
                m = c.poll(0.1)
                if m is not None and m.error() is None and seen is not None:
                    seen.setdefault((c, m.partition()), []).append(m.offset())
        assert done(), [held(c) for c in members]

    def commit(c) -> dict[int, int]:
        """Commit what `c` consumed; the group's committed offsets, as the coordinator
        answers OffsetFetch (none yet: 0, where auto.offset.reset=earliest starts)."""
        c.commit(asynchronous=False)
        asked = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: max(tp.offset, 0) for tp in c.committed(asked, timeout=30)}

    try:
        a = member()
        read: dict = {}
        poll_until(lambda: sum(len(v) for v in read.values()) >= FIRST, a, seen=read)
        assert sum(commit(a).values()) == FIRST
        b = member()
        poll_until(lambda: held(a) and held(b) and held(a) | held(b) == everything, a, b)
        assert not held(a) & held(b), "a partition assigned to both members"

        def described():
            return admin.describe_consumer_group(topic)

        poll_until(lambda: described().state == "Stable", a, b)
        group = described()
        assert group.assignor == "uniform" and group.group_epoch == group.assignment_epoch
        assert {m.member_id: set(m.partitions) for m in group.members} == {
            c.memberid(): held(c) for c in (a, b)
        }
        assert all(m.partitions == m.target for m in group.members)

        read = {}
        poll_until(lambda: any(c is b for c, _ in read), b, a, seen=read)
        b_parts = {p for _, p in held(b)}
        committed = commit(b)  # at b's member epoch
        for (c, p), offsets in read.items():
            if c is b:
                assert committed[p] == offsets[-1] + 1, (p, offsets, committed)
        b.close()
        read = {}
        poll_until(lambda: held(a) == everything, a, seen=read)
        # a takes b's partitions over exactly where the group committed them
        taken = {p for p in b_parts if committed[p] < per_partition}
        poll_until(lambda: taken <= {p for _, p in read}, a, seen=read)
        for p in taken:
            assert read[(a, p)][0] == committed[p], (p, read[(a, p)][:3], committed)
        assert len(described().members) == 1
        committed = commit(a)
        assert 0 < sum(committed.values()) < per_partition * PARTITIONS
        a.close()

        c = member()
        read = {}

        def caught_up():
            return all(
                read.get((c, p), [committed[p] - 1])[-1] == per_partition - 1
                for p in range(PARTITIONS)
            )

        poll_until(caught_up, c, seen=read)
        for p in range(PARTITIONS):
            assert read.get((c, p), []) == list(range(committed[p], per_partition)), p
        c.close()
    finally:
        admin.close()
        for c in consumers:
            try:
                c.close()
            except RuntimeError:
                pass  # already closed


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


class KcatMember:
    """A `kcat -G` process of the group, running until stopped: what it prints
    (one value a line) and the partitions of its latest assignment (kcat reports
    each rebalance on stderr: "... rebalanced (memberid ...): assigned: t [0], t [2]")."""

    def __init__(self, cluster, group: str, topic: str) -> None:
        args = ["kcat", "-b", cluster.bootstrap_servers, "-G", group, topic, "-u"]
        args += ["-f", "%s\n", "-X", "auto.offset.reset=earliest"]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.values: list[bytes] = []
        self.assigned: set[int] | None = None
        self.log: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_values, daemon=True),
            threading.Thread(target=self._read_log, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_values(self) -> None:
        for line in self.proc.stdout:
            self.values.append(line.rstrip("\n").encode())

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)
            if "assigned: " in line:
                listed = line.split("assigned: ", 1)[1]
                self.assigned = {int(p) for p in re.findall(r"\[(\d+)\]", listed)}
            elif "revoked: " in line:
                self.assigned = set()

    def stop(self) -> int:
        """SIGTERM: kcat closes its consumer, which commits what it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for t in self._threads:
            t.join(5)
        return code


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def produce(cluster, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(cluster):
    """kcat -G (librdkafka 2.0 with the eager range assignor): one member reads
    and commits; then two members split the partitions (a rebalance), read the
    records produced next between them and commit them as they stop; a new member
    reads exactly the records produced after that."""
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
    assert len(first) == FIRST
    members: list[KcatMember] = []
    try:
        a = KcatMember(cluster, topic, topic)
        members.append(a)
        wait_for(lambda: len(a.values) >= RECORDS - FIRST, "a to read the rest")
        b = KcatMember(cluster, topic, topic)
        members.append(b)

        def split() -> bool:
            held = [m.assigned or set() for m in (a, b)]
            return all(held) and not held[0] & held[1] and held[0] | held[1] == set(range(4))

        wait_for(split, "the partitions to be split between two members")
        mid = [b"%s-mid-%d" % (topic.encode(), i) for i in range(RECORDS)]
        produce(cluster, topic, mid)
        wait_for(lambda: len(a.values) + len(b.values) >= RECORDS - FIRST + len(mid), "mid")
        assert set(mid) & set(a.values) and set(mid) & set(b.values), "both members read"
        assert [m.stop() for m in members] == [0, 0]
    finally:
        for m in members:
            m.stop()
    last = [b"%s-last-%d" % (topic.encode(), i) for i in range(RECORDS)]
    produce(cluster, topic, last)
    rest = kcat(None)  # resumes at the group's committed offsets, to the end
    both = a.values + b.values
    assert_resumed_exactly(values | set(mid), first, both)
    assert sorted(rest) == sorted(last), "the new member did not start at the commits"


@pytest.mark.skipif(
    shutil.which("node") is None or not (JS_DIR / "node_modules").exists(),
    reason="Node.js or tests/js/node_modules is missing (make test runs npm ci)",
)
def test_kafkajs(cluster):
    """kafkajs: one member reads and commits; then two members in one node process
    split the partitions (a rebalance), read the records produced next between
    them, committing each; a new member reads exactly the records produced after."""
    topic = "g-kafkajs"
    values = topic_with_records(cluster, topic)
    script = """
const { Kafka, logLevel } = require('kafkajs')
const [brokers, topic, mode, want] = process.argv.slice(1)
const kafka = new Kafka({ clientId: 'kjs', brokers: brokers.split(','), logLevel: logLevel.ERROR })
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
async function until(what, condition) {
  for (let i = 0; !condition(); i++) {
    if (i > 600) throw new Error('timed out waiting for ' + what)
    await sleep(100)
  }
}
async function member(limit = Infinity) {  // reads and commits `limit` records at most
  // kafkajs heartbeats between fetches: a short fetch wait lets it see a rebalance soon
  const consumer = kafka.consumer({ groupId: topic, heartbeatInterval: 500, maxWaitTimeInMs: 500 })
  const m = { consumer, got: [], assigned: null }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    m.assigned = e.payload.memberAssignment[topic] || []
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      if (m.got.length >= limit) return
      m.got.push(message.value.toString())
      const offset = (BigInt(message.offset) + 1n).toString()
      await consumer.commitOffsets([{ topic, partition, offset }])
    },
  })
  return m
}
async function alone(limit) {  // one member: reads `limit` records, committing each
  const m = await member(limit)
  await until('records', () => m.got.length >= limit)
  await m.consumer.disconnect()
  return m.got
}
async function pair(rest, more) {  // two members, a rebalance, `more` records between them
  const a = await member()
  await until('a to read the rest', () => a.got.length >= rest)
  const b = await member()
  const split = () => {
    const [x, y] = [a.assigned || [], b.assigned || []]
    return x.length && y.length && x.length + y.length === 4 && x.every(p => !y.includes(p))
  }
  await until('a split between two members', split)
  const producer = kafka.producer()
  await producer.connect()
  const mid = Array.from({ length: more }, (_, i) => `${topic}-mid-${i}`)
  await producer.send({ topic, messages: mid.map((value, i) => ({ value, partition: i % 4 })) })
  await producer.disconnect()
  await until('mid', () => a.got.length + b.got.length >= rest + more)
  const out = { a: a.got, b: b.got, mid, assigned: [a.assigned, b.assigned] }
  await a.consumer.disconnect()
  await b.consumer.disconnect()
  return out
}
async function main() {
  const out = mode === 'pair' ? await pair(...want.split(',').map(Number)) : await alone(+want)
  console.log(JSON.stringify(out))
  process.exit(0)
}
main().catch(e => { console.error(e); process.exit(1) })
"""

    def run(mode: str, want: str):
        done = subprocess.run(
            ["node", "-e", script, cluster.bootstrap_servers, topic, mode, want],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=120,  # kills node on expiry
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = [v.encode() for v in run("alone", str(FIRST))]
    pair = run("pair", f"{RECORDS - FIRST},{RECORDS}")
    a, b = ([v.encode() for v in pair[m]] for m in ("a", "b"))
    mid = {v.encode() for v in pair["mid"]}
    assert mid & set(a) and mid & set(b), f"both members read: {pair['assigned']}"
    assert_resumed_exactly(values | mid, first, a + b)
    last = [b"%s-last-%d" % (topic.encode(), i) for i in range(RECORDS)]
    produce(cluster, topic, last)
    rest = [v.encode() for v in run("alone", str(RECORDS))]
    assert sorted(rest) == sorted(last), "the new member did not start at the commits"


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
