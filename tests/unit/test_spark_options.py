"""kafkalab.spark without Spark running: option parsing and validation, offset JSON,
partition planning (minPartitions, maxRecordsPerPartition), maxOffsetsPerTrigger's
split, and the schema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalab.spark.errors import KafkaSourceOptionError
from kafkalab.spark.offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    parse_partition_list,
    parse_partition_offsets,
    plan_ranges,
    rate_limit,
)
from kafkalab.spark.options import parse_read_options, parse_write_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def read(streaming=False, **opts):
    return parse_read_options({**BS, **opts}, streaming=streaming)


# -- options -----------------------------------------------------------------


def test_defaults_match_spark():
    batch = read(subscribe="a, b")
    assert batch.subscription.kind == "subscribe" and batch.subscription.topics == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.min_partitions is None and batch.max_offsets_per_trigger is None
    assert batch.poll_timeout_ms == 120_000
    assert batch.group_id.startswith("spark-kafka-source-")
    stream = read(streaming=True, subscribe="a")
    assert stream.starting.kind == "latest"


def test_option_names_are_case_insensitive():
    o = parse_read_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t.*", "MINPARTITIONS": "4"},
        streaming=False,
    )
    assert o.bootstrap_servers == "h:1" and o.subscription.pattern == "t.*"
    assert o.min_partitions == 4


def test_kafka_params_pass_through_without_prefix():
    o = read(
        subscribe="t", **{"kafka.isolation.level": "read_committed", "kafka.fetch.max.bytes": "1"}
    )
    assert o.kafka_params == {"isolation.level": "read_committed", "fetch.max.bytes": "1"}
    config = o.consumer_config("executor")
    assert config["isolation.level"] == "read_committed"
    assert config["bootstrap.servers"] == "127.0.0.1:9092"
    assert config["enable.auto.commit"] is False
    assert config["group.id"] == f"{o.group_id}-executor"
    # an executor fetches for throughput; a kafka.* option still wins
    assert config["fetch.max.bytes"] == "1"
    assert config["fetch.queue.backoff.ms"] == 10 and config["queued.min.messages"] == 500_000
    assert "fetch.queue.backoff.ms" not in o.consumer_config("driver")
    # Spark's default is the Java consumer's read_uncommitted, not librdkafka's read_committed
    assert read(subscribe="t").consumer_config("d")["isolation.level"] == "read_uncommitted"
    loud = read(subscribe="t", **{"kafka.isolation.level": " READ_COMMITTED "})
    assert loud.consumer_config("d")["isolation.level"] == "read_committed"
    # kafka.group.id replaces the generated one, as in Spark
    assert (
        read(subscribe="t", **{"kafka.group.id": "mine"}).consumer_config("d")["group.id"] == "mine"
    )
    assert read(subscribe="t", groupIdPrefix="pfx").group_id.startswith("pfx-")


@pytest.mark.parametrize(
    "opts, message",
    [
        ({"subscribe": "t"}, "kafka.bootstrap.servers' must be specified"),
        ({**BS}, "One of the options 'subscribe', 'subscribePattern' or 'assign'"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, "Only one of the options"),
        ({**BS, "subscribe": "t", "subscribePattern": "t.*"}, "Only one of the options"),
        ({**BS, "subscribe": " , "}, "No topics to subscribe to"),
        ({**BS, "subscribePattern": "("}, "not a valid regular expression"),
        ({**BS, "assign": "{}"}, "No topic partitions to assign"),
        ({**BS, "assign": "[0, 1]"}, "expected e.g."),
        ({**BS, "assign": '{"t": [0, "x"]}'}, "not a partition number"),
        ({**BS, "assign": "{not json"}, "is not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": "{bad"}, "is not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": "x"}}'}, "integer offset"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"zero": 1}}'}, "partition number"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "is not an offset"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "can't be 'latest' for batch"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, "can't be latest (-1)"),
        ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, "can't be 'earliest' for batch"),
        ({**BS, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, "can't be earliest (-2)"),
        ({**BS, "subscribe": "t", "minPartitions": "0"}, "'minPartitions' must be a positive"),
        ({**BS, "subscribe": "t", "minPartitions": "two"}, "'minPartitions' must be a positive"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "yes"}, "'failOnDataLoss' must be true or"),
        ({**BS, "subscribe": "t", "startingTimestamp": "noon"}, "milliseconds since the epoch"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "never commits"),
        ({**BS, "subscribe": "t", "kafka.value.deserializer": "x"}, "'value.deserializer'"),
        (
            {**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "x"},
            "'error' or 'latest'",
        ),
        ({**BS, "subscribe": "t", "minOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
        ({**BS, "subscribe": "t", "kafka.isolation.level": "committed"}, "'read_committed' (only"),
    ],
)
def test_bad_batch_options_raise_a_clear_error(opts, message):
    with pytest.raises(KafkaSourceOptionError) as info:
        parse_read_options(opts, streaming=False)
    assert message in str(info.value)


def test_the_fetcher_is_kafkalabs_own_unless_an_option_needs_librdkafka():
    """`kafkalab.fetcher`: auto (the default) reads with kafkalab's own fetch when
    numba is there and every kafka.* option is one it honours; librdkafka else."""
    plain = read(
        subscribe="t",
        **{"kafka.isolation.level": "read_committed", "kafka.fetch.max.bytes": "1000000"},
    )
    assert plain.fetcher == "auto"
    assert plain.own_fetch(compiled=True) and not plain.own_fetch(compiled=False)
    for option, value in (
        ("kafka.security.protocol", "SSL"),
        ("kafka.sasl.mechanism", "PLAIN"),
        ("kafka.socket.keepalive.enable", "true"),
    ):
        needs = read(subscribe="t", **{option: value})
        assert not needs.own_fetch(compiled=True)
        with pytest.raises(KafkaSourceOptionError, match=option.replace(".", r"\.")):
            read(subscribe="t", **{option: value, "kafkalab.fetcher": "kafkalab"})
    plaintext = read(subscribe="t", **{"kafka.security.protocol": "PLAINTEXT"})
    assert plaintext.own_fetch(compiled=True)
    forced = read(subscribe="t", **{"kafkalab.fetcher": "LibRdKafka"})
    assert not forced.own_fetch(compiled=True)
    assert read(subscribe="t", **{"kafkalab.fetcher": "kafkalab"}).own_fetch(compiled=False)
    with pytest.raises(KafkaSourceOptionError, match="'auto', 'kafkalab' or 'librdkafka'"):
        read(subscribe="t", **{"kafkalab.fetcher": "java"})


def test_streaming_rejects_ending_options_and_allows_latest():
    with pytest.raises(KafkaSourceOptionError, match="not valid in streaming queries"):
        read(streaming=True, subscribe="t", endingOffsets="latest")
    o = read(streaming=True, subscribe="t", startingOffsets='{"t": {"0": -1, "1": 5}}')
    assert o.starting.offsets == {("t", 0): -1, ("t", 1): 5}
    with pytest.raises(KafkaSourceOptionError, match="maxOffsetsPerTrigger"):
        read(streaming=True, subscribe="t", maxOffsetsPerTrigger="-5")
    assert (
        read(streaming=True, subscribe="t", maxOffsetsPerTrigger="500").max_offsets_per_trigger
        == 500
    )


def test_schema_time_parse_defers_mode_dependent_checks():
    # schema() runs before Spark says batch or stream: 'latest' may still be a stream's.
    assert read(streaming=None, subscribe="t", startingOffsets="latest").starting.kind == "latest"


def test_starting_precedence_timestamp_then_by_timestamp_then_offsets():
    o = read(
        subscribe="t",
        startingTimestamp="1000",
        startingOffsetsByTimestamp='{"t": {"0": 5}}',
        startingOffsets='{"t": {"0": 7}}',
    )
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1000
    o = read(
        subscribe="t", startingOffsetsByTimestamp='{"t": {"0": 5}}', startingOffsets="earliest"
    )
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("t", 0): 5}
    o = read(subscribe="t", endingTimestamp="2000", endingOffsets='{"t": {"0": 9}}')
    assert o.ending.kind == "timestamp" and o.ending.timestamp == 2000


def test_subscribe_pattern_is_a_full_match_and_skips_internal_topics():
    sub = read(subscribePattern="orders-.*").subscription
    assert sub.matches("orders-eu") and not sub.matches("my-orders-eu")
    assert not read(subscribePattern=".*").subscription.matches("__consumer_offsets")
    assign = read(assign='{"a": [0, 2]}').subscription
    assert assign.partitions == (("a", 0), ("a", 2)) and assign.matches("a")


def test_write_options():
    w = parse_write_options({**BS, "topic": "out", "kafka.acks": "1", "kafka.linger.ms": "5"})
    assert w.topic == "out"
    config = w.producer_config()
    assert config["acks"] == "1" and config["linger.ms"] == "5"
    defaults = parse_write_options(BS).producer_config()
    assert defaults["acks"] == "all" and defaults["enable.idempotence"] is True
    assert defaults["partitioner"] == "murmur2_random"  # the Java client's, as Spark's sink
    assert parse_write_options(BS).topic is None
    with pytest.raises(KafkaSourceOptionError, match="bootstrap.servers"):
        parse_write_options({"topic": "t"})
    with pytest.raises(KafkaSourceOptionError, match="'value.serializer'"):
        parse_write_options({**BS, "kafka.value.serializer": "x"})


def test_the_producer_is_kafkalabs_own_unless_an_option_needs_librdkafka():
    """`kafkalab.producer`: auto (the default) writes with kafkalab's own produce
    when numba is there and every kafka.* option is one it honours with the value
    given; librdkafka else (TLS, SASL, a codec level, a transactional id, acks=0...)."""
    plain = parse_write_options(
        {**BS, "kafka.acks": "all", "kafka.batch.size": "65536", "kafka.linger.ms": "5"}
    )
    assert plain.producer == "auto"
    assert plain.own_produce(compiled=True) and not plain.own_produce(compiled=False)
    for option, value in (
        ("kafka.security.protocol", "SSL"),
        ("kafka.sasl.mechanism", "PLAIN"),
        ("kafka.compression.level", "5"),
        ("kafka.compression.type", "inherit"),
        ("kafka.transactional.id", "tx-1"),
        ("kafka.acks", "0"),
        ("kafka.partitioner", "consistent_random"),
        ("kafka.queue.buffering.max.messages", "7"),
    ):
        needs = parse_write_options({**BS, option: value})
        assert not needs.own_produce(compiled=True), option
        with pytest.raises(KafkaSourceOptionError, match=option.replace(".", r"\.")):
            parse_write_options({**BS, option: value, "kafkalab.producer": "kafkalab"})
    for option, value in (
        ("kafka.security.protocol", "PLAINTEXT"),
        ("kafka.compression.type", "none"),
        ("kafka.compression.type", "zstd"),
        ("kafka.compression.codec", "snappy"),
        ("kafka.partitioner", "murmur2_random"),
    ):
        assert parse_write_options({**BS, option: value}).own_produce(compiled=True)
    forced = parse_write_options({**BS, "kafkalab.producer": "LibRdKafka"})
    assert not forced.own_produce(compiled=True)
    assert parse_write_options({**BS, "kafkalab.producer": "kafkalab"}).own_produce(False)
    with pytest.raises(KafkaSourceOptionError, match="'auto', 'kafkalab' or 'librdkafka'"):
        parse_write_options({**BS, "kafkalab.producer": "java"})


# -- offset JSON ---------------------------------------------------------------


def test_offset_json_is_sparks_form():
    offsets = {("b", 1): 7, ("a", 10): -2, ("a", 2): 23}
    doc = offsets_to_json(offsets)
    assert json.dumps(doc) == '{"a": {"2": 23, "10": -2}, "b": {"1": 7}}'
    assert offsets_from_json(json.loads(json.dumps(doc))) == offsets
    assert parse_partition_offsets('{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}') == {
        ("topicA", 0): 23,
        ("topicA", 1): -1,
        ("topicB", 0): -2,
    }
    assert parse_partition_list('{"topicA":[0,1],"topicB":[2,4]}') == [
        ("topicA", 0),
        ("topicA", 1),
        ("topicB", 2),
        ("topicB", 4),
    ]


_tp = st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 1000))


@given(st.dictionaries(_tp, st.integers(-2, 2**62), max_size=20))
def test_offset_json_round_trips(offsets):
    doc = json.loads(json.dumps(offsets_to_json(offsets)))
    assert offsets_from_json(doc) == offsets
    assert parse_partition_offsets(json.dumps(doc)) == offsets


# -- partition planning --------------------------------------------------------


def test_one_task_per_partition_by_default_and_empty_ranges_dropped():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 3, 9)]
    assert plan_ranges(ranges) == [ranges[0], ranges[2]]
    # minPartitions not above the number of ranges changes nothing
    assert plan_ranges(ranges, min_partitions=2) == [ranges[0], ranges[2]]


def test_min_partitions_splits_large_ranges_in_proportion():
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 1000, 1100)]
    planned = plan_ranges(ranges, min_partitions=10)
    by_partition = {p: [r for r in planned if r.partition == p] for p in (0, 1)}
    assert len(by_partition[0]) == 9 and len(by_partition[1]) == 1
    assert [r.size for r in by_partition[0]] == [100] * 9
    assert by_partition[1] == [ranges[1]]


def test_max_records_per_partition_caps_each_task():
    planned = plan_ranges([OffsetRange("t", 0, 10, 35)], max_records_per_partition=10)
    assert [(r.from_offset, r.until_offset) for r in planned] == [(10, 18), (18, 26), (26, 35)]


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), min_size=1, max_size=12),
    st.one_of(st.none(), st.integers(1, 200)),
    st.one_of(st.none(), st.integers(500, 10**5)),
)
def test_planning_covers_every_offset_exactly_once(spans, min_partitions, max_records):
    ranges = [OffsetRange("t", i, a, a + n) for i, (a, n) in enumerate(spans)]
    planned = plan_ranges(ranges, min_partitions, max_records)
    for r in ranges:
        pieces = sorted(
            (p.from_offset, p.until_offset) for p in planned if p.partition == r.partition
        )
        if r.size == 0:
            assert pieces == []
            continue
        assert pieces[0][0] == r.from_offset and pieces[-1][1] == r.until_offset
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
        assert all(lo < hi for lo, hi in pieces)
        if max_records is not None:
            assert all(hi - lo <= max_records for lo, hi in pieces)
    nonempty = sum(1 for r in ranges if r.size)
    if nonempty and min_partitions and min_partitions > nonempty and max_records is None:
        # approximately minPartitions (no piece is smaller than one offset, so at
        # most one piece per offset): off by at most one per range from rounding
        target = min(min_partitions, sum(r.size for r in ranges))
        assert abs(len(planned) - target) <= nonempty


# -- maxOffsetsPerTrigger --------------------------------------------------------


def test_rate_limit_splits_in_proportion_to_backlog():
    start = {("t", 0): 0, ("t", 1): 100}
    latest = {("t", 0): 300, ("t", 1): 200}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, 40) == {("t", 0): 30, ("t", 1): 110}


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), min_size=1, max_size=10),
    st.integers(1, 10**5),
)
def test_rate_limit_never_exceeds_the_limit_nor_the_latest(spans, limit):
    start = {("t", i): a for i, (a, _) in enumerate(spans)}
    latest = {("t", i): a + n for i, (a, n) in enumerate(spans)}
    end = rate_limit(start, latest, limit)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    total = sum(latest[tp] - start[tp] for tp in latest)
    taken = sum(end[tp] - start[tp] for tp in latest)
    assert taken == total if total <= limit else 0 < taken <= limit


# -- schema -----------------------------------------------------------------------


def test_schema_is_sparks_kafka_schema():
    pytest.importorskip("pyspark")
    from kafkalab.spark.schema import read_schema

    expected = (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    assert read_schema(False).simpleString() == expected
    with_headers = read_schema(True)
    assert with_headers.simpleString() == expected[:-1] + (
        ",headers:array<struct<key:string,value:binary>>>"
    )
    assert all(f.nullable for f in with_headers.fields)
