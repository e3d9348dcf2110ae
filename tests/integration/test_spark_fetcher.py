"""kafkalab.spark's own fetch (kafkalab.spark.fetcher) against a real kafkalab broker,
beside the librdkafka read it replaces by default: the same columns for records
librdkafka produced with every codec, read_committed with an aborted and an open
transaction, offsets gone (failOnDataLoss), offsets that never come
(kafkaConsumer.pollTimeoutMs), the last two with both readers. No Spark session:
the executors' read_range itself."""

from __future__ import annotations

import time

import pytest
from spark_helpers import create_topic, produce

from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.integration
pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")
pytest.importorskip("pyspark", reason="pyspark is in the labs extra (the source's schema)")

from kafkalab.spark import kafka_io  # noqa: E402
from kafkalab.spark.errors import KafkaDataLossError  # noqa: E402
from kafkalab.spark.offsets import OffsetRange  # noqa: E402
from kafkalab.spark.options import Fetcher, parse_read_options  # noqa: E402
from kafkalab.spark.schema import read_schema  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("spark-fetch-broker")),
            "log.retention.check.interval.ms": "200",
            "transaction.state.log.num.partitions": "4",
        }
    ) as b:
        yield b


def options(bs: str, topic: str, fetcher: str, **extra):
    opts = parse_read_options(
        {"kafka.bootstrap.servers": bs, "subscribe": topic, "kafkalab.fetcher": fetcher, **extra},
        streaming=False,
    )
    assert opts.fetcher == Fetcher(fetcher)
    return opts


def read(opts, topic: str, partition: int, start: int, until: int, headers: bool = False):
    """Every row of one range, as Python dicts (and how many Arrow batches held them)."""
    r = OffsetRange(topic, partition, start, until)
    batches = list(kafka_io.read_range(opts, r, read_schema(headers)))
    for b in batches:
        b.validate(full=True)
    return [row for b in batches for row in b.to_pylist()]


def test_own_fetch_gives_librdkafkas_columns_for_every_codec(broker):
    from confluent_kafka import Producer

    bs = broker.bootstrap_servers
    create_topic(bs, "codecs", partitions=2)
    sent, now = 0, int(time.time() * 1000)  # not older than retention.ms: the log keeps them
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 20})
        for i in range(400):
            headers = [("h", b"%d" % i), ("codec", codec.encode())] if i % 3 == 0 else None
            if i % 7 == 0:
                headers = [("null-value", None)]
            p.produce(
                "codecs",
                b"%s-%d" % (codec.encode(), i) * (1 + i % 5),
                None if i % 4 == 0 else b"k%d" % i,
                partition=i % 2,
                timestamp=now - 1000 + i,
                headers=headers,
            )
        assert p.flush(30) == 0
        sent += 400
    own = options(bs, "codecs", "kafkalab", includeHeaders="true")
    lib = options(bs, "codecs", "librdkafka", includeHeaders="true")
    total, theirs_by_partition = 0, {}
    for partition in (0, 1):
        mine = read(own, "codecs", partition, 0, 1000, headers=True)
        theirs = read(lib, "codecs", partition, 0, 1000, headers=True)
        assert len(mine) == 1000
        assert mine == theirs
        theirs_by_partition[partition] = theirs
        total += len(mine)
        # A range that starts and ends inside batches.
        inner = read(own, "codecs", partition, 123, 877, headers=True)
        assert inner == theirs[123:877]
    assert total == sent
    # Without includeHeaders: the same rows less the column.
    plain = read(options(bs, "codecs", "kafkalab"), "codecs", 0, 0, 1000)
    assert plain == [
        {k: v for k, v in row.items() if k != "headers"} for row in theirs_by_partition[0]
    ]


def test_read_committed_drops_aborted_transactions_and_stops_at_the_open_one(broker):
    from confluent_kafka import Producer

    bs = broker.bootstrap_servers
    create_topic(bs, "fetch-txn", partitions=1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "fetch-txn", "linger.ms": 5})
    p.init_transactions(30)
    for prefix, keep in (("c", True), ("a", False), ("d", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce("fetch-txn", b"%s-%d" % (prefix.encode(), i))
        assert p.flush(30) == 0
        p.commit_transaction(30) if keep else p.abort_transaction(30)
    produce(bs, "fetch-txn", [(None, b"plain", None, None)])  # offset 18
    p.begin_transaction()  # open while we read: the last stable offset stays at 19
    p.produce("fetch-txn", b"open")
    assert p.flush(30) == 0
    try:
        committed = {
            "kafka.isolation.level": "read_committed",
            "kafkaConsumer.pollTimeoutMs": "3000",
        }
        mine = read(options(bs, "fetch-txn", "kafkalab", **committed), "fetch-txn", 0, 0, 19)
        theirs = read(options(bs, "fetch-txn", "librdkafka", **committed), "fetch-txn", 0, 0, 19)
        assert [r["value"] for r in mine] == [b"c-%d" % i for i in range(5)] + [
            b"d-%d" % i for i in range(5)
        ] + [b"plain"]
        assert [r["offset"] for r in mine] == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16, 18]
        assert mine == theirs
        everything = read(options(bs, "fetch-txn", "kafkalab"), "fetch-txn", 0, 0, 20)
        assert len(everything) == 17  # 3 x 5 records, plain, open: no markers
        assert everything[-1]["value"] == b"open"
        # read_committed never reads past the open transaction: offset 19 does not come.
        with pytest.raises(KafkaDataLossError, match="pollTimeoutMs"):
            read(options(bs, "fetch-txn", "kafkalab", **committed), "fetch-txn", 0, 0, 20)
    finally:
        p.abort_transaction(30)


@pytest.mark.parametrize("fetcher", ["kafkalab", "librdkafka"])
def test_offsets_gone_after_retention_follow_fail_on_data_loss(broker, fetcher):
    """Both readers say the same: the same error, or the same records after a warning."""
    from confluent_kafka import Consumer, TopicPartition

    bs = broker.bootstrap_servers
    topic = f"aged-{fetcher}"
    create_topic(
        bs, topic, partitions=1, config={"segment.bytes": "2000", "retention.bytes": "2000"}
    )
    produce(bs, topic, [(None, b"%04d" % i + b"." * 96, 0, None) for i in range(200)], **{
        "linger.ms": 0, "batch.num.messages": 1
    })  # fmt: skip
    c = Consumer({"bootstrap.servers": bs, "group.id": "w"})
    try:
        deadline = time.monotonic() + 30
        while (low := c.get_watermark_offsets(TopicPartition(topic, 0), 10)[0]) == 0:
            assert time.monotonic() < deadline, "retention never deleted a segment"
            time.sleep(0.2)
    finally:
        c.close()
    with pytest.raises(KafkaDataLossError, match="out of range"):
        read(options(bs, topic, fetcher), topic, 0, 0, 200)
    with pytest.warns(UserWarning, match="failOnDataLoss=false"):
        rest = read(options(bs, topic, fetcher, failOnDataLoss="false"), topic, 0, 0, 200)
    offsets = [r["offset"] for r in rest]
    assert offsets[0] >= low and offsets == list(range(offsets[0], 200))


@pytest.mark.parametrize("fetcher", ["kafkalab", "librdkafka"])
def test_records_that_never_come_wait_poll_timeout_then_are_data_loss(broker, fetcher):
    bs = broker.bootstrap_servers
    topic = f"short-{fetcher}"
    create_topic(bs, topic, partitions=1)
    produce(bs, topic, [(None, b"%d" % i, 0, None) for i in range(10)])
    quick = {"kafkaConsumer.pollTimeoutMs": "1000"}
    with pytest.raises(KafkaDataLossError, match="did not become readable"):
        read(options(bs, topic, fetcher, **quick), topic, 0, 5, 15)
    with pytest.warns(UserWarning, match="failOnDataLoss=false"):
        got = read(options(bs, topic, fetcher, failOnDataLoss="false", **quick), topic, 0, 5, 15)
    assert [r["value"] for r in got] == [b"%d" % i for i in range(5, 10)]


def test_auto_takes_the_own_fetch_unless_an_option_needs_librdkafka(broker):
    """`auto` reads with kafkalab's fetch, and with librdkafka when a kafka.* option
    only librdkafka knows is set (here a harmless socket setting)."""
    bs = broker.bootstrap_servers
    create_topic(bs, "fetch-auto", partitions=1)
    produce(bs, "fetch-auto", [(b"k", b"v%d" % i, 0, None) for i in range(20)])
    kafka_io._close_idle_consumers()
    stream = parse_read_options(
        {"kafka.bootstrap.servers": bs, "subscribe": "fetch-auto"}, streaming=True
    )
    rows = list(
        kafka_io.read_range(stream, OffsetRange("fetch-auto", 0, 0, 20), read_schema(False), True)
    )
    from kafkalab.client.consumer import KafkaConsumer

    [idle] = kafka_io._IDLE_CONSUMERS.values()
    assert isinstance(idle, KafkaConsumer)  # kafkalab's client was used and kept
    kafka_io._close_idle_consumers()
    lib = parse_read_options(
        {
            "kafka.bootstrap.servers": bs,
            "subscribe": "fetch-auto",
            "kafka.socket.keepalive.enable": "true",
        },
        streaming=True,
    )
    rows_lib = list(
        kafka_io.read_range(lib, OffsetRange("fetch-auto", 0, 0, 20), read_schema(False), True)
    )
    [idle] = kafka_io._IDLE_CONSUMERS.values()
    assert not isinstance(idle, KafkaConsumer)  # a librdkafka consumer
    kafka_io._close_idle_consumers()
    assert [r for b in rows for r in b.to_pylist()] == [r for b in rows_lib for r in b.to_pylist()]
