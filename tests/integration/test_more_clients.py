"""More real clients against the broker: aiokafka, kcat (librdkafka's CLI) and kafkajs.

kafkajs consumers always join a consumer group, which the broker learns with
the group coordinator; here kafkajs creates a topic and produces idempotently,
and the records are read back with confluent-kafka.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as ATopicPartition
from confluent_kafka import Consumer, TopicPartition

from kafkalab.server.broker import BrokerThread

JS_DIR = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("more"))}) as b:
        yield b


def read_back(bs: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = []
        for _ in range(60):
            got += [m for m in consumer.consume(1000, 0.5) if m.error() is None]
            if len(got) >= expected:
                break
        return got
    finally:
        consumer.close()


def test_aiokafka(broker):
    async def scenario() -> None:
        bs = broker.bootstrap_servers
        producer = AIOKafkaProducer(
            bootstrap_servers=bs, compression_type="gzip", enable_idempotence=True
        )
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait(
                    "aio",
                    value=b"v%d" % i,
                    key=b"k%d" % i,
                    headers=[("h", b"%d" % i)],
                    timestamp_ms=5_000 + i,
                )
                for i in range(30)
            ]
        finally:
            await producer.stop()
        assert [m.offset for m in sent] == list(range(30))
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = ATopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            while len(got) < 30:
                for messages in (await consumer.getmany(timeout_ms=1000)).values():
                    got += messages
            assert [(m.offset, m.key, m.value, m.headers[0][1], m.timestamp) for m in got] == [
                (i, b"k%d" % i, b"v%d" % i, b"%d" % i, 5_000 + i) for i in range(30)
            ]
            found = await consumer.offsets_for_times({tp: 5_010})
            assert found[tp].offset == 10
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


@pytest.mark.skipif(
    shutil.which("kcat") is None,
    reason="kcat is not installed (scripts/ensure-system-deps.sh installs it)",
)
def test_kcat(broker):
    bs = broker.bootstrap_servers
    produced = subprocess.run(
        ["kcat", "-b", bs, "-P", "-t", "kc", "-K", ":", "-z", "snappy", "-H", "src=kcat"],
        input="a:1\nb:2\nc:3\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", bs, "-C", "-t", "kc", "-o", "beginning", "-e", "-f", "%o %k=%s %h\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["0 a=1 src=kcat", "1 b=2 src=kcat", "2 c=3 src=kcat"]
    listing = subprocess.run(
        ["kcat", "-b", bs, "-L", "-J"], capture_output=True, text=True, timeout=60
    )
    metadata = json.loads(listing.stdout)
    assert {t["topic"] for t in metadata["topics"]} >= {"kc"}
    assert metadata["brokers"][0]["id"] == 1


@pytest.mark.skipif(
    shutil.which("node") is None or not (JS_DIR / "node_modules").exists(),
    reason="Node.js or tests/js/node_modules is missing (make test runs npm ci)",
)
def test_kafkajs_admin_and_idempotent_producer(broker):
    script = """
const { Kafka, logLevel } = require('kafkajs')
const kafka = new Kafka({ clientId: 'kjs', brokers: [process.argv[1]], logLevel: logLevel.ERROR })
async function main() {
  const admin = kafka.admin(); await admin.connect()
  await admin.createTopics({ topics: [{ topic: 'kjs', numPartitions: 2 }] })
  await admin.disconnect()
  const producer = kafka.producer({ idempotent: true }); await producer.connect()
  const messages = []
  for (let i = 0; i < 40; i++) messages.push({ key: 'k' + i, value: 'v' + i, headers: { n: '' + i } })
  const result = await producer.send({ topic: 'kjs', messages, acks: -1 })
  await producer.disconnect()
  console.log(JSON.stringify(result))
}
main().catch(e => { console.error(e); process.exit(1) })
"""
    done = subprocess.run(
        ["node", "-e", script, broker.bootstrap_servers],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert {r["errorCode"] for r in results} == {0}
    got = read_back(broker.bootstrap_servers, "kjs", 2, 40)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(40))
    for m in got:
        assert m.key() == b"k" + m.value()[1:]
