"""The teaching client against a kafkalab broker, and its partitioner against
kafka-python's (which copies Java's)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafkalab.client import Admin, KafkaConsumer, KafkaProducer
from kafkalab.client.partitioner import murmur2, partition_for_key
from kafkalab.errors import Errors, KafkaError
from kafkalab.server.broker import BrokerThread


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(1, 100))
def test_murmur2_partitions_like_the_java_client(key, partitions):
    # Java's murmur2 returns a signed int32, kafka-python's the same 32 bits unsigned.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF
    assert (
        partition_for_key(key, partitions) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread({"log.dirs": str(tmp_path_factory.mktemp("tc"))}) as b:
        yield b


def consume_all(bs, topic, partitions, expected, **config):
    with KafkaConsumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", **config}) as c:
        c.assign([(topic, p) for p in range(partitions)])
        got, deadline = [], time.time() + 30
        while len(got) < expected and time.time() < deadline:
            got += c.poll(500)
        return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_every_record(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"teach-{codec}"
    with Admin(bs) as admin:
        admin.create_topic(topic, 3)
    with KafkaProducer(
        {"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 2, "batch.size": 4096}
    ) as producer:
        futures = [
            producer.send(
                topic,
                value=b"value-%d" % i,
                key=b"key-%d" % (i % 7) if i % 2 else None,
                headers=[("i", b"%d" % i)],
                timestamp_ms=1_000 + i,
            )
            for i in range(2000)
        ]
        producer.flush(30)
        metadata = [f.result(10) for f in futures]
    assert len({(m.partition, m.offset) for m in metadata}) == 2000
    got = consume_all(bs, topic, 3, 2000)
    by_position = {(r.partition, r.offset): r for r in got}
    assert len(by_position) == 2000
    for i, m in enumerate(metadata):
        r = by_position[(m.partition, m.offset)]
        assert (r.value, r.timestamp, r.headers[0].value) == (b"value-%d" % i, 1_000 + i, b"%d" % i)
        if i % 2:
            assert m.partition == partition_for_key(b"key-%d" % (i % 7), 3)


def test_delivery_callbacks(broker):
    delivered = []
    done = threading.Event()

    def on_delivery(metadata, error):
        delivered.append((metadata, error))
        if len(delivered) == 3:
            done.set()

    with KafkaProducer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for i in range(3):
            producer.send("callbacks", value=b"%d" % i, callback=on_delivery)
        assert done.wait(30)
    assert [(m.offset, e) for m, e in delivered] == [(0, None), (1, None), (2, None)]


def test_unkeyed_records_stick_to_a_partition_per_batch(broker):
    bs = broker.bootstrap_servers
    with Admin(bs) as admin:
        admin.create_topic("sticky", 4)
    with KafkaProducer({"bootstrap.servers": bs, "linger.ms": 50, "batch.size": 100_000}) as p:
        futures = [p.send("sticky", value=b"x") for _ in range(100)]
        p.flush(30)
        partitions = {f.result(10).partition for f in futures}
    assert len(partitions) == 1  # one open batch: all records went to its partition


def test_buffer_memory_blocks_send_until_space_frees(broker):
    bs = broker.bootstrap_servers
    producer = KafkaProducer(
        {
            "bootstrap.servers": bs,
            "buffer.memory": 2000,
            "max.block.ms": 200,
            "linger.ms": 60_000,
            "batch.size": 10**6,
        }
    )
    try:
        producer.send("blocked", value=b"a" * 1500)
        started = time.monotonic()
        with pytest.raises(KafkaError) as err:
            producer.send("blocked", value=b"b" * 1500)  # no room, and nothing is sent
        assert err.value.code == Errors.REQUEST_TIMED_OUT
        assert time.monotonic() - started >= 0.19  # it did block for max.block.ms
        releaser = threading.Timer(0.1, producer.flush)
        releaser.start()
        producer.send("blocked", value=b"c" * 1500)  # unblocked when the flush frees space
        releaser.join()
    finally:
        producer.close()


def test_consumer_seek_reset_and_offsets_for_times(broker):
    bs = broker.bootstrap_servers
    with KafkaProducer({"bootstrap.servers": bs}) as producer:
        for i in range(50):
            producer.send("seek", value=b"%d" % i, timestamp_ms=10_000 + 100 * i)
        producer.flush(30)
    with KafkaConsumer({"bootstrap.servers": bs, "auto.offset.reset": "latest"}) as c:
        c.assign([("seek", 0)])
        assert c.position(("seek", 0)) == 50  # latest
        assert c.poll(200) == []
        c.seek(("seek", 0), 45)
        got = []
        while len(got) < 5:
            got += c.poll(1000)
        assert [r.value for r in got] == [b"45", b"46", b"47", b"48", b"49"]
        found = c.offsets_for_times({("seek", 0): 10_000 + 100 * 20 - 50})
        assert found[("seek", 0)] == (20, 12_000)
        c.seek(("seek", 0), 10_000)  # out of range: auto.offset.reset (latest) applies
        c.poll(1000)
        c.poll(500)
        assert c.position(("seek", 0)) == 50
    with KafkaConsumer({"bootstrap.servers": bs, "auto.offset.reset": "none"}) as c:
        c.assign([("seek", 0)])
        with pytest.raises(KafkaError, match="auto.offset.reset=none"):
            c.poll(100)


def test_cli_round_trip(broker):
    bs = broker.bootstrap_servers
    run = [sys.executable, "-m", "kafkalab"]
    created = subprocess.run(
        run + ["topics", "-b", bs, "--create", "cli", "--partitions", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    again = subprocess.run(
        run + ["topics", "-b", bs, "--create", "cli"], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    produced = subprocess.run(
        run + ["produce", "-b", bs, "-t", "cli", "-K", ":", "-H", "a=b"],
        input="k1:one\nk2:two\nk1:three\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        run + ["consume", "-b", bs, "-t", "cli", "-o", "beginning", "-e", "-f", "%k=%s %h\\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == ["k1=one a=b", "k1=three a=b", "k2=two a=b"]
    listed = subprocess.run(
        run + ["topics", "-b", bs, "--list"], capture_output=True, text=True, timeout=60
    )
    assert "cli\tpartitions=2" in listed.stdout


def test_producer_retries_across_a_broker_restart(tmp_path):
    """A batch that cannot be delivered while the broker is down is retried with
    backoff and lands once the broker is back on the same address."""
    from kafkalab.server.broker import BrokerProcess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    props = {"log.dirs": str(tmp_path), "listeners": f"PLAINTEXT://127.0.0.1:{port}"}
    first = BrokerProcess(props).start()
    producer = KafkaProducer(
        {"bootstrap.servers": first.bootstrap_servers, "retry.backoff.ms": 200, "linger.ms": 0}
    )
    second = None
    try:
        assert producer.send("retry", value=b"before").result(30).offset == 0
        first.kill()
        future = producer.send("retry", value=b"during")
        time.sleep(0.5)  # a few attempts fail while nothing listens
        assert not future.done()
        second = BrokerProcess(props).start()
        assert future.result(30).offset == 1
    finally:
        producer.close()
        first.kill()
        if second is not None:
            second.stop()
