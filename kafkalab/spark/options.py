"""The options of Spark's Kafka source and sink: parsed and checked before any job runs.

Names, defaults and rules follow Spark's Kafka integration guide. Option names
are case-insensitive (Spark lower-cases them); `kafkalab.fetcher` says what reads
on the executors (kafkalab's own Fetch or librdkafka) and `kafkalab.producer` what
writes (kafkalab's own Produce or librdkafka); every `kafka.`-prefixed option
goes to librdkafka without its prefix (`kafka.isolation.level` ->
`isolation.level`), except the Kafka settings Spark itself refuses.
`kafka.isolation.level=read_committed` makes a read see only committed
transactions' records, and its `latest` offsets are the last stable offsets.

    opts = parse_read_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}, streaming=False)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from kafkalab.spark.errors import KafkaSourceOptionError
from kafkalab.spark.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartition,
    parse_partition_list,
    parse_partition_offsets,
)

# Kafka settings Spark's source and sink refuse, and what to do instead.
_REFUSED_KAFKA_PARAMS = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' to "
    "say where to start; offsets are tracked by the query, not by the Kafka consumer",
    "key.deserializer": "keys are always read as bytes; use DataFrame operations "
    "(e.g. CAST(key AS STRING)) to deserialize them",
    "value.deserializer": "values are always read as bytes; use DataFrame operations "
    "(e.g. CAST(value AS STRING)) to deserialize them",
    "key.serializer": "keys are always written as bytes or strings; use DataFrame operations "
    "to serialize them into either",
    "value.serializer": "values are always written as bytes or strings; use DataFrame "
    "operations to serialize them into either",
    "enable.auto.commit": "the source never commits offsets to Kafka; the query's checkpoint "
    "holds them",
    "interceptor.classes": "the source always reads keys and values as bytes; interceptors "
    "are not supported",
}

# The kinds of the options: StrEnums, so they print and compare as the option values
# they come from. Not kafkalab.kinds.Kind: the options import nothing else of kafkalab
# (a Spark driver parses them before any executor reads), and a bad value is a
# KafkaSourceOptionError in Spark's words.


class IsolationLevel(StrEnum):
    """`kafka.isolation.level`: the value goes to librdkafka as it is."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


ISOLATION_LEVELS = tuple(level.value for level in IsolationLevel)


class SubscriptionKind(StrEnum):
    """Which of Spark's three subscription options a read uses (its name as Spark spells it)."""

    SUBSCRIBE = "subscribe"
    SUBSCRIBE_PATTERN = "subscribePattern"
    ASSIGN = "assign"


class OffsetSpecKind(StrEnum):
    """Where a read starts or ends (see OffsetSpec)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSETS = "offsets"  # per partition, from startingOffsets / endingOffsets JSON
    TIMESTAMP = "timestamp"  # one for all partitions
    TIMESTAMPS = "timestamps"  # one per partition


class TimestampStrategy(StrEnum):
    """`startingOffsetsByTimestampStrategy`: what a partition with no offset at or
    after the starting timestamp does: fail the query, or start at its latest offset."""

    ERROR = "error"
    LATEST = "latest"


# The subscription options by their lower-cased names (Spark lower-cases option names).
_SUBSCRIPTIONS = {k.value.lower(): k for k in SubscriptionKind}
_UNSUPPORTED = {
    "minoffsetspertrigger": "kafkalab.spark does not implement minOffsetsPerTrigger / "
    "maxTriggerDelay yet; use a processing-time trigger instead",
    "maxtriggerdelay": "kafkalab.spark does not implement minOffsetsPerTrigger / "
    "maxTriggerDelay yet; use a processing-time trigger instead",
}


@dataclass(frozen=True)
class Subscription:
    """Exactly one of: a topic list, a topic pattern (full match, internal topics
    excluded), or fixed partitions."""

    kind: SubscriptionKind
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == SubscriptionKind.SUBSCRIBE:
            return topic in self.topics
        if self.kind == SubscriptionKind.SUBSCRIBE_PATTERN:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.partitions)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: `earliest`, `latest`, per-partition offsets
    (-2 earliest, -1 latest), one timestamp for all partitions, or a timestamp
    per partition (the first offset whose timestamp is >= it)."""

    kind: OffsetSpecKind
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int = 0


# librdkafka settings for an executor's consumer, for throughput (a `kafka.*` option
# overrides each). librdkafka's defaults stop fetching a partition for a second
# (fetch.queue.backoff.ms 1000) once 100,000 messages wait in its queue
# (queued.min.messages): a task reading millions of records then idles. Here a
# full queue pauses fetching for 10 ms, a queue holds 500,000 records or 128 MB
# before it counts as full, and one fetch carries up to 8 MB of a partition (64 MB
# in all).
EXECUTOR_FETCH: dict[str, str | int | bool] = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 500_000,
    "queued.max.messages.kbytes": 131_072,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
}


class Fetcher(StrEnum):
    """`kafkalab.fetcher`: what reads records on the executors. `kafkalab` sends
    kafkalab's own Fetch requests and decodes whole batches into Arrow columns
    (kafkalab.spark.fetcher); `librdkafka` reads through a confluent-kafka
    consumer; `auto` (the default) takes kafkalab's unless a `kafka.*` option
    asks for what only librdkafka does (TLS, SASL, any setting kafkalab's fetch
    does not know) or numba is missing. Not a `kafka.` option: those go to the
    Kafka client, and Spark's own Kafka source ignores this one."""

    AUTO = "auto"
    KAFKALAB = "kafkalab"
    LIBRDKAFKA = "librdkafka"


# The `kafka.*` settings kafkalab's own fetch honours (or, for librdkafka's queue
# tuning and client names, may ignore): any other one needs librdkafka.
OWN_FETCH_PARAMS = frozenset(
    {
        "isolation.level",
        "group.id",
        "client.id",
        "check.crcs",  # kafkalab's fetch always checks them
        "fetch.min.bytes",
        "fetch.wait.max.ms",  # librdkafka's name
        "fetch.max.wait.ms",  # Java's name
        *EXECUTOR_FETCH,
    }
)


def librdkafka_only(kafka_params: Mapping[str, str]) -> list[str]:
    """The `kafka.*` options only librdkafka can honour: kafkalab's fetch speaks
    plaintext Kafka and knows the settings of OWN_FETCH_PARAMS."""
    return sorted(
        f"kafka.{name}"
        for name, value in kafka_params.items()
        if name not in OWN_FETCH_PARAMS
        and not (name == "security.protocol" and str(value).strip().lower() == "plaintext")
    )


class Producer(StrEnum):
    """`kafkalab.producer`: what writes records on the executors. `kafkalab` encodes
    Arrow batches into RecordBatches in compiled code and sends them with
    kafkalab's own idempotent Produce requests (kafkalab.spark.sender);
    `librdkafka` hands every row to a confluent-kafka producer; `auto` (the
    default) takes kafkalab's unless numba is missing or an option needs
    librdkafka. Not a `kafka.*` option: it is not a Kafka setting, not sent to
    a client, and Spark's own Kafka sink ignores this one."""

    AUTO = "auto"
    KAFKALAB = "kafkalab"
    LIBRDKAFKA = "librdkafka"


# The `kafka.*` settings kafkalab's own produce honours (or, for lingering and
# client names, may ignore: it sends each Arrow batch as it comes); any other one
# (librdkafka's local queue settings too), and these with the values
# _OWN_PRODUCE_VALUES refuses, needs librdkafka.
OWN_PRODUCE_PARAMS = frozenset(
    {
        "acks",
        "enable.idempotence",
        "partitioner",
        "batch.size",
        "linger.ms",
        "queue.buffering.max.ms",
        "client.id",
        "request.timeout.ms",
        "delivery.timeout.ms",
        "message.timeout.ms",
        "retry.backoff.ms",
        "max.in.flight.requests.per.connection",
        "max.in.flight",
        "compression.type",
        "compression.codec",
        "security.protocol",
    }
)
#: The codecs kafkalab's own produce writes (kafkalab.records.compression).
OWN_PRODUCE_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: The values of OWN_PRODUCE_PARAMS that still need librdkafka: acks=0 (no answers
#: to wait for), another partitioner than Java's (murmur2 of the key), a codec
#: kafkalab does not write, and any security protocol but plaintext.
_OWN_PRODUCE_VALUES = {
    "acks": lambda v: v != "0",
    "partitioner": lambda v: v == "murmur2_random",
    "compression.type": lambda v: v in OWN_PRODUCE_CODECS,
    "compression.codec": lambda v: v in OWN_PRODUCE_CODECS,
    "security.protocol": lambda v: v == "plaintext",
}


def librdkafka_only_produce(kafka_params: Mapping[str, str]) -> list[str]:
    """The `kafka.*` options only librdkafka's producer can honour: kafkalab's own
    produce speaks plaintext Kafka, writes non-transactional batches (uncompressed
    or with one of OWN_PRODUCE_CODECS, at the codec's default level) with acks all
    or 1, and knows the settings of OWN_PRODUCE_PARAMS."""
    return sorted(
        f"kafka.{name}"
        for name, value in kafka_params.items()
        if name not in OWN_PRODUCE_PARAMS
        or not _OWN_PRODUCE_VALUES.get(name, lambda v: True)(str(value).strip().lower())
    )


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    starting_by_timestamp_strategy: TimestampStrategy = TimestampStrategy.ERROR
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    group_id: str = ""
    kafka_params: dict[str, str] = field(default_factory=dict)
    fetcher: Fetcher = Fetcher.AUTO

    def own_fetch(self, compiled: bool) -> bool:
        """Whether executors read with kafkalab's own fetch (`compiled`: numba is there)."""
        return _takes_own(self.fetcher, compiled, lambda: librdkafka_only(self.kafka_params))

    def consumer_config(self, role: str) -> dict[str, str | int | bool]:
        """librdkafka settings for a consumer on the driver or an executor.
        `isolation.level` is read_uncommitted unless `kafka.isolation.level` says
        otherwise: the Java consumer's default, so Spark's, where librdkafka's own
        default is read_committed."""
        return {
            "isolation.level": IsolationLevel.READ_UNCOMMITTED.value,
            **(EXECUTOR_FETCH if role == "executor" else {}),
            **self.kafka_params,
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.kafka_params.get("group.id", f"{self.group_id}-{role}"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    kafka_params: dict[str, str] = field(default_factory=dict)
    producer: Producer = Producer.AUTO

    def own_produce(self, compiled: bool) -> bool:
        """Whether executors write with kafkalab's own produce (`compiled`: numba is there)."""
        return _takes_own(
            self.producer, compiled, lambda: librdkafka_only_produce(self.kafka_params)
        )

    def producer_config(self) -> dict[str, str | int | bool]:
        """Idempotent and acks=all unless the user says otherwise (Kafka's own
        producer defaults since 3.0), and the Java client's partitioner (murmur2 of
        the key), so a key lands on the partition Spark's own Kafka sink would pick."""
        return {
            "acks": "all",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            **self.kafka_params,
            "bootstrap.servers": self.bootstrap_servers,
            # Only failures come back to Python: no Python call per delivered record.
            "delivery.report.only.error": True,
        }


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _kafka_params(opts: dict[str, str]) -> dict[str, str]:
    if not opts.get("kafka.bootstrap.servers", "").strip():
        raise KafkaSourceOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring the Kafka "
            "client, e.g. .option('kafka.bootstrap.servers', 'host1:9092,host2:9092')"
        )
    params = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in _REFUSED_KAFKA_PARAMS:
            raise KafkaSourceOptionError(
                f"Kafka option '{name}' is not supported: {_REFUSED_KAFKA_PARAMS[name]}."
            )
        if name == "isolation.level":
            try:
                value = IsolationLevel(value.strip().lower()).value
            except ValueError:
                raise KafkaSourceOptionError(
                    f"Option 'kafka.isolation.level' must be 'read_committed' (only records of "
                    f"committed transactions, up to the last stable offset) or "
                    f"'read_uncommitted' (every record, up to the high watermark), got {value!r}"
                ) from None
        if name != "bootstrap.servers":
            params[name] = value
    return params


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise KafkaSourceOptionError(f"Option '{name}' must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise KafkaSourceOptionError(f"Option '{name}' must be a positive integer, got {raw!r}")
    return value


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in _SUBSCRIPTIONS if k in opts]
    if not given:
        raise KafkaSourceOptionError(
            "One of the options 'subscribe', 'subscribePattern' or 'assign' must be specified "
            "for the Kafka source, e.g. .option('subscribe', 'topic1,topic2')"
        )
    if len(given) > 1:
        both = ", ".join(f"'{_SUBSCRIPTIONS[k]}'" for k in given)
        raise KafkaSourceOptionError(
            f"Only one of the options 'subscribe', 'subscribePattern' or 'assign' can be "
            f"specified for the Kafka source; got {both}. Keep one."
        )
    kind = _SUBSCRIPTIONS[given[0]]
    value = opts[given[0]]
    if kind == SubscriptionKind.SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaSourceOptionError(
                f"No topics to subscribe to: option 'subscribe' is {value!r}; give a "
                "comma-separated list of topics"
            )
        return Subscription(kind, topics=topics)
    if kind == SubscriptionKind.SUBSCRIBE_PATTERN:
        if not value.strip():
            raise KafkaSourceOptionError(
                f"Pattern to subscribe is empty: option 'subscribePattern' is {value!r}"
            )
        try:
            re.compile(value)
        except re.error as e:
            raise KafkaSourceOptionError(
                f"Option 'subscribePattern' is not a valid regular expression ({e}): {value!r}"
            ) from None
        return Subscription(kind, pattern=value)
    return Subscription(kind, partitions=tuple(parse_partition_list(value, "assign")))


def _timestamp(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise KafkaSourceOptionError(
            f"Option '{name}' must be a timestamp in milliseconds since the epoch, got {raw!r}"
        ) from None


def _by_timestamp(raw: str, name: str) -> PartitionOffsets:
    stamps = parse_partition_offsets(raw, name)
    for tp, ts in stamps.items():
        if ts < 0:
            raise KafkaSourceOptionError(
                f"Option '{name}': timestamp {ts} for {tp[0]}-{tp[1]} must not be negative"
            )
    return stamps


def _starting(opts: dict[str, str], streaming: bool | None) -> OffsetSpec:
    # Precedence, as Spark: startingTimestamp > startingOffsetsByTimestamp > startingOffsets.
    if "startingtimestamp" in opts:
        ts = _timestamp(opts["startingtimestamp"], "startingTimestamp")
        return OffsetSpec(OffsetSpecKind.TIMESTAMP, timestamp=ts)
    if "startingoffsetsbytimestamp" in opts:
        stamps = _by_timestamp(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
        return OffsetSpec(OffsetSpecKind.TIMESTAMPS, offsets=stamps)
    raw = opts.get("startingoffsets", "latest" if streaming else "earliest").strip()
    if raw.lower() == "earliest":
        return OffsetSpec(OffsetSpecKind.EARLIEST)
    if raw.lower() == "latest":
        if streaming is False:
            raise KafkaSourceOptionError(
                "Starting offset can't be 'latest' for batch queries on Kafka: a batch read "
                "would be empty. Use startingOffsets 'earliest' or per-partition offsets."
            )
        return OffsetSpec(OffsetSpecKind.LATEST)
    offsets = parse_partition_offsets(raw, "startingOffsets")
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise KafkaSourceOptionError(
                f"Option 'startingOffsets': offset {off} for {tp[0]}-{tp[1]} is not an offset "
                "(use -2 for earliest, -1 for latest, or 0 and up)"
            )
        if off == LATEST and streaming is False:
            raise KafkaSourceOptionError(
                f"Starting offset for {tp[0]}-{tp[1]} can't be latest (-1) for batch queries "
                "on Kafka."
            )
    return OffsetSpec(OffsetSpecKind.OFFSETS, offsets=offsets)


def _ending(opts: dict[str, str], streaming: bool | None) -> OffsetSpec:
    given = [
        k for k in ("endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets") if k in opts
    ]
    if streaming:
        if given:
            raise KafkaSourceOptionError(
                f"Option '{given[0]}' is not valid in streaming queries: a stream has no end. "
                "Use a batch read (spark.read) to stop at an offset."
            )
        return OffsetSpec(OffsetSpecKind.LATEST)
    if "endingtimestamp" in opts:
        return OffsetSpec(
            OffsetSpecKind.TIMESTAMP,
            timestamp=_timestamp(opts["endingtimestamp"], "endingTimestamp"),
        )
    if "endingoffsetsbytimestamp" in opts:
        stamps = _by_timestamp(opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
        return OffsetSpec(OffsetSpecKind.TIMESTAMPS, offsets=stamps)
    raw = opts.get("endingoffsets", "latest").strip()
    if raw.lower() == "latest":
        return OffsetSpec(OffsetSpecKind.LATEST)
    if raw.lower() == "earliest":
        raise KafkaSourceOptionError(
            "Ending offset can't be 'earliest' for batch queries on Kafka: the read would be "
            "empty. Use endingOffsets 'latest' or per-partition offsets."
        )
    offsets = parse_partition_offsets(raw, "endingOffsets")
    for tp, off in offsets.items():
        if off == EARLIEST:
            raise KafkaSourceOptionError(
                f"Ending offset for {tp[0]}-{tp[1]} can't be earliest (-2) for batch queries "
                "on Kafka."
            )
        if off < LATEST:
            raise KafkaSourceOptionError(
                f"Option 'endingOffsets': offset {off} for {tp[0]}-{tp[1]} is not an offset "
                "(use -1 for latest, or 0 and up)"
            )
    return OffsetSpec(OffsetSpecKind.OFFSETS, offsets=offsets)


def parse_read_options(options: Mapping[str, str], streaming: bool | None) -> ReadOptions:
    """Check every source option; raise KafkaSourceOptionError naming the first bad one.
    `streaming=None`: not known yet (the schema is asked for before Spark says whether
    the read is a batch or a stream); the checks that depend on it wait."""
    opts = _lower(options)
    params = _kafka_params(opts)
    for key, why in _UNSUPPORTED.items():
        if key in opts:
            raise KafkaSourceOptionError(why)
    subscription = _subscription(opts)
    raw_strategy = opts.get("startingoffsetsbytimestampstrategy", "error")
    try:
        strategy = TimestampStrategy(raw_strategy.strip().lower())
    except ValueError:
        raise KafkaSourceOptionError(
            f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
            f"{raw_strategy!r}"
        ) from None
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    fetcher = _fetcher(opts, params)
    prefix = opts.get("groupidprefix", "spark-kafka-source")
    return ReadOptions(
        bootstrap_servers=opts["kafka.bootstrap.servers"],
        subscription=subscription,
        starting=_starting(opts, streaming),
        ending=_ending(opts, streaming),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        max_offsets_per_trigger=max_per_trigger,
        include_headers=_bool(opts, "includeHeaders", False),
        starting_by_timestamp_strategy=strategy,
        poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_num_retries=_positive_int(opts, "fetchOffset.numRetries") or 3,
        fetch_offset_retry_interval_ms=_positive_int(opts, "fetchOffset.retryIntervalMs") or 10,
        group_id=f"{prefix}-{uuid.uuid4()}",
        kafka_params=params,
        fetcher=fetcher,
    )


def _fetcher(opts: dict[str, str], params: dict[str, str]) -> Fetcher:
    return _choice(
        Fetcher,
        opts,
        "kafkalab.fetcher",
        librdkafka_only(params),
        "kafkalab's own fetch speaks plaintext Kafka and knows "
        f"{', '.join(sorted(OWN_FETCH_PARAMS))}",
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _lower(options)
    params = _kafka_params(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise KafkaSourceOptionError("Option 'topic' is empty; name the topic to write to")
    return WriteOptions(opts["kafka.bootstrap.servers"], topic, params, _producer(opts, params))


def _producer(opts: dict[str, str], params: dict[str, str]) -> Producer:
    return _choice(
        Producer,
        opts,
        "kafkalab.producer",
        librdkafka_only_produce(params),
        "kafkalab's own produce speaks plaintext Kafka, writes non-transactional batches "
        "with acks all or 1, Java's murmur2 partitioner and the codecs "
        f"{', '.join(OWN_PRODUCE_CODECS)}, and knows {', '.join(sorted(OWN_PRODUCE_PARAMS))}",
    )


def _choice(kind, opts: dict[str, str], option: str, needs_librdkafka: list[str], own: str):
    """`kafkalab.fetcher` or `kafkalab.producer` (`kind`: Fetcher or Producer) from the
    options; 'kafkalab' is refused when `needs_librdkafka` names options (`own`: what
    kafkalab's own path does, for the message)."""
    raw = opts.get(option, "auto")
    try:
        choice = kind(raw.strip().lower())
    except ValueError:
        raise KafkaSourceOptionError(
            f"Option '{option}' must be 'auto', 'kafkalab' or 'librdkafka', got {raw!r}"
        ) from None
    if choice == kind.KAFKALAB and needs_librdkafka:
        raise KafkaSourceOptionError(
            f"Option '{option}' is 'kafkalab', but {', '.join(needs_librdkafka)} need "
            f"librdkafka ({own}). Set '{option}' to 'auto' or 'librdkafka'."
        )
    return choice


def _takes_own(choice: str, compiled: bool, needs_librdkafka: Callable[[], list[str]]) -> bool:
    """Whether kafkalab's own path runs for this `kafkalab.fetcher`/`kafkalab.producer`
    choice: 'kafkalab', or 'auto' when numba is there (`compiled`) and no option
    needs librdkafka."""
    if choice == "auto":
        return compiled and not needs_librdkafka()
    return choice == "kafkalab"
