"""librdkafka (confluent-kafka) on both sides of a Spark query.

Driver: which partitions a subscription covers, and their earliest, latest and
by-timestamp offsets. Executors: read one offset range into Arrow record batches,
and produce Arrow record batches. A batch of messages at a time, never a Spark
row per record; the per-record work left is the attribute reads confluent-kafka's
Message API requires. Reads go through kafkalab's own Fetch instead
(kafkalab.spark.fetcher) unless an option needs librdkafka (`kafkalab.fetcher`), and
writes through kafkalab's own Produce (kafkalab.spark.sender) unless an option
needs librdkafka (`kafkalab.producer`).
"""

from __future__ import annotations

import atexit
import gc
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import chain, repeat
from operator import length_hint

from kafkalab.spark.errors import KafkaDataLossError, KafkaSourceOptionError, KafkaWriteError
from kafkalab.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
)
from kafkalab.spark.options import (
    OffsetSpec,
    OffsetSpecKind,
    ReadOptions,
    Subscription,
    SubscriptionKind,
    TimestampStrategy,
    WriteOptions,
)

MESSAGES_PER_CONSUME = 20_000
METADATA_TIMEOUT_S = 10.0  # per attempt; fetchOffset.numRetries more

_DATA_LOSS_HINT = (
    "Some data may have been lost because it is no longer available in Kafka: aged out by "
    "retention, truncated after an unclean leader election, or the topic was deleted before "
    "the query read it. If you do not want the query to fail in such cases, set the source "
    "option 'failOnDataLoss' to 'false'."
)


class DriverOffsets:
    """A librdkafka consumer the driver uses only for metadata and offset lookups
    (it never subscribes or fetches). Not picklable: create it where it is used."""

    def __init__(self, opts: ReadOptions) -> None:
        from confluent_kafka import Consumer

        self.opts = opts
        self.consumer = Consumer(opts.consumer_config("driver"))
        self.timeout = METADATA_TIMEOUT_S

    def close(self) -> None:
        self.consumer.close()

    def _retry(self, what: str, fn):
        opts = self.opts
        for attempt in range(opts.fetch_offset_num_retries + 1):
            try:
                return fn()
            except Exception as e:
                if attempt == opts.fetch_offset_num_retries:
                    raise RuntimeError(
                        f"{what} failed after {attempt + 1} attempts against "
                        f"{opts.bootstrap_servers}: {e}"
                    ) from e
                time.sleep(opts.fetch_offset_retry_interval_ms / 1000)

    def partitions(self, subscription: Subscription | None = None) -> list[TopicPartition]:
        """The topic partitions the subscription covers now. `assign` names
        partitions that must exist."""
        sub = subscription or self.opts.subscription
        if sub.kind == SubscriptionKind.SUBSCRIBE and len(sub.topics) == 1:
            md = self._retry(
                "Metadata", lambda: self.consumer.list_topics(sub.topics[0], timeout=self.timeout)
            )
        else:
            md = self._retry("Metadata", lambda: self.consumer.list_topics(timeout=self.timeout))
        found = {
            (name, p)
            for name, topic in md.topics.items()
            if topic.error is None and sub.matches(name)
            for p in topic.partitions
        }
        if sub.kind == SubscriptionKind.ASSIGN:
            missing = [tp for tp in sub.partitions if tp not in found]
            if missing:
                have = {}
                for name, p in found:
                    have.setdefault(name, []).append(p)
                detail = "; ".join(
                    f"{t}-{p} (topic {t} has "
                    + (f"partitions 0..{max(have[t])}" if t in have else "no partitions: unknown")
                    + ")"
                    for t, p in missing
                )
                raise KafkaSourceOptionError(
                    f"Option 'assign' names partitions that do not exist: {detail}. Assign only "
                    "existing partitions, or create them first."
                )
            return sorted(sub.partitions)
        return sorted(found)

    def watermarks(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """(earliest, latest) of each partition; latest is the high watermark (the
        last stable offset with kafka.isolation.level=read_committed)."""
        from confluent_kafka import TopicPartition as TP

        out = {}
        for t, p in tps:
            out[(t, p)] = self._retry(
                f"ListOffsets for {t}-{p}",
                lambda t=t, p=p: self.consumer.get_watermark_offsets(
                    TP(t, p), timeout=self.timeout, cached=False
                ),
            )
        return out

    def for_times(self, stamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset whose timestamp is >= the given one, or -1 if there is none."""
        from confluent_kafka import TopicPartition as TP

        if not stamps:
            return {}
        result = self._retry(
            "ListOffsets by timestamp",
            lambda: self.consumer.offsets_for_times(
                [TP(t, p, ts) for (t, p), ts in stamps.items()], timeout=self.timeout
            ),
        )
        return {(r.topic, r.partition): r.offset for r in result}

    def resolve(
        self,
        spec: OffsetSpec,
        tps: list[TopicPartition],
        marks: dict[TopicPartition, tuple[int, int]],
        *,
        starting: bool,
        option: str,
    ) -> PartitionOffsets:
        """Concrete offsets for `spec` on `tps`, given their (earliest, latest)."""
        if spec.kind == OffsetSpecKind.EARLIEST:
            return {tp: marks[tp][0] for tp in tps}
        if spec.kind == OffsetSpecKind.LATEST:
            return {tp: marks[tp][1] for tp in tps}
        if spec.kind == OffsetSpecKind.OFFSETS:
            if set(spec.offsets) != set(tps):
                raise KafkaSourceOptionError(
                    f"Option '{option}' must give an offset for every partition the query "
                    f"reads (-2 for earliest, -1 for latest). Given: {_names(spec.offsets)}; "
                    f"the query reads: {_names(tps)}"
                )
            out = {}
            for tp, off in spec.offsets.items():
                out[tp] = (
                    marks[tp][0] if off == EARLIEST else marks[tp][1] if off == LATEST else off
                )
            return out
        stamps = (
            {tp: spec.timestamp for tp in tps}
            if spec.kind == OffsetSpecKind.TIMESTAMP
            else dict(spec.offsets)
        )
        if spec.kind == OffsetSpecKind.TIMESTAMPS and set(stamps) != set(tps):
            raise KafkaSourceOptionError(
                f"Option '{option}' must give a timestamp for every partition the query reads. "
                f"Given: {_names(stamps)}; the query reads: {_names(tps)}"
            )
        found = self.for_times(stamps)
        out = {}
        for tp in tps:
            off = found.get(tp, -1)
            if off < 0:
                if starting and self.opts.starting_by_timestamp_strategy == TimestampStrategy.ERROR:
                    raise KafkaSourceOptionError(
                        f"No offset of {tp[0]}-{tp[1]} has a timestamp >= {stamps[tp]} "
                        f"(option '{option}'). Set startingOffsetsByTimestampStrategy to "
                        "'latest' to start such partitions at their latest offset."
                    )
                off = marks[tp][1]
            out[tp] = off
        return out


def _names(tps) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "none"


def check_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise KafkaDataLossError, or (failOnDataLoss=false) warn and go on."""
    if fail_on_data_loss:
        raise KafkaDataLossError(f"{message} {_DATA_LOSS_HINT}")
    import warnings

    warnings.warn(f"{message} (failOnDataLoss=false: skipping)", stacklevel=2)


#: Why a read that made no progress for kafkaConsumer.pollTimeoutMs stopped, unless
#: it says otherwise.
NOT_READABLE = "they did not become readable (the partition's high watermark stayed below them)"


def check_read_stalled(
    name: str, start: int, until: int, opts: ReadOptions, why: str = NOT_READABLE
) -> None:
    """A read of [start, until) made no progress within kafkaConsumer.pollTimeoutMs:
    data loss, as failOnDataLoss says (both readers)."""
    check_data_loss(
        f"Cannot fetch records [{start}, {until}) of {name} within "
        f"kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}: {why}.",
        opts.fail_on_data_loss,
    )


def after_out_of_range(
    name: str, start: int, until: int, low: int, high: int, fail_on_data_loss: bool
) -> int | None:
    """Where a read answered OFFSET_OUT_OF_RANGE at `start` goes on, given the
    partition's earliest and latest offsets: at `start` again when it lies between
    them (a stale answer during a leader change), else (data loss, as
    failOnDataLoss says) at the earliest offset, or nowhere (None) when `start` is
    past the latest."""
    if low <= start < high:
        return start
    check_data_loss(
        f"Offset {start} of {name} is out of range (earliest {low}, latest "
        f"{high}); the query had to read up to {until}.",
        fail_on_data_loss,
    )
    return None if start >= high else low


# Executor consumers a Python worker keeps between a streaming query's
# micro-batches (Spark reuses its Python workers: spark.python.worker.reuse),
# one per consumer configuration, unassigned while idle: a worker runs one task
# at a time, so one is all it needs. Closed when the worker exits.
_IDLE_CONSUMERS: dict[tuple, object] = {}


def _close_idle_consumers() -> None:
    while _IDLE_CONSUMERS:
        _IDLE_CONSUMERS.popitem()[1].close()


atexit.register(_close_idle_consumers)


def read_range(opts: ReadOptions, r: OffsetRange, schema, reuse: bool = False) -> Iterator:
    """Yield Arrow record batches of `schema` holding records [from, until) of one
    topic partition, read with a librdkafka consumer assigned to it.

    Records below `until` that are not there yet (a new leader whose high
    watermark still lags after a failover) are waited for, up to
    kafkaConsumer.pollTimeoutMs; offsets that are gone (retention) or never come
    are data loss, handled as failOnDataLoss says.

    `reuse` (the streaming reader): take this worker's idle consumer of the same
    configuration if it has one, and give it back, unassigned, once the range has
    been read, so that a micro-batch does not pay for a new consumer's start
    (its threads, connections and metadata). A read that fails or stops early
    closes its consumer.

    With kafkalab's own fetch (ReadOptions.own_fetch) the same, through
    kafkalab.spark.fetcher: whole batches decoded into columns, a kafkalab
    client kept idle between micro-batches the same way."""
    if r.from_offset >= r.until_offset:
        return
    from kafkalab.spark.batch_columns import COMPILED

    if opts.own_fetch(COMPILED):
        yield from _read_range_fetched(opts, r, schema, reuse)
    else:
        yield from _read_range_librdkafka(opts, r, schema, reuse)


def _read_range_fetched(opts: ReadOptions, r: OffsetRange, schema, reuse: bool) -> Iterator:
    from kafkalab.spark import fetcher

    key = ("kafkalab", opts.bootstrap_servers, opts.consumer_config("executor")["isolation.level"])
    client = _IDLE_CONSUMERS.pop(key, None) if reuse else None
    if client is None:
        client = fetcher.new_client(opts)
    read_all = False
    try:
        yield from fetcher.read_range(opts, r, schema, client)
        read_all = True
    finally:
        if reuse and read_all and key not in _IDLE_CONSUMERS:
            _IDLE_CONSUMERS[key] = client
        else:
            client.close()


def _read_range_librdkafka(opts: ReadOptions, r: OffsetRange, schema, reuse: bool) -> Iterator:
    import numpy as np
    from confluent_kafka import Consumer, KafkaError, Message
    from confluent_kafka import TopicPartition as TP

    start, until = r.from_offset, r.until_offset
    name = f"{r.topic}-{r.partition}"
    config = opts.consumer_config("executor")
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    consumer = _IDLE_CONSUMERS.pop(key, None) if reuse else None
    if consumer is None:
        consumer = Consumer(config)
    read_all = False
    try:
        consumer.assign([TP(r.topic, r.partition, start)])
        columns = _Columns(r.topic, r.partition, schema)
        timeout_s = opts.poll_timeout_ms / 1000
        last_progress = time.monotonic()
        while start < until:
            with _gc_paused():
                msgs = consumer.consume(min(MESSAGES_PER_CONSUME, until - start + 1), timeout=0.2)
            records, eof_at = msgs, None
            if msgs and any(map(Message.error, msgs)):  # a KafkaError is truthy
                records = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        records.append(m)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        eof_at = m.offset()
                    elif err.code() in (
                        KafkaError._AUTO_OFFSET_RESET,
                        KafkaError.OFFSET_OUT_OF_RANGE,
                    ):
                        low, high = _watermarks(consumer, TP(r.topic, r.partition), timeout_s)
                        resume = after_out_of_range(
                            name, start, until, low, high, opts.fail_on_data_loss
                        )
                        if resume is None:
                            return
                        start = resume
                        consumer.assign([TP(r.topic, r.partition, start)])
                    elif err.fatal() or not err.retriable():
                        raise RuntimeError(f"Reading {name} failed: {err}")
            if records:
                # One partition's offsets only grow: those below `until` are a prefix.
                offsets = np.fromiter(map(Message.offset, records), np.int64, len(records))
                cut = int(np.searchsorted(offsets, until))
                if cut:
                    with _gc_paused():
                        batch = columns.batch(records[:cut], offsets[:cut])
                    yield batch
                start = until if cut < len(offsets) else int(offsets[-1]) + 1
                last_progress = time.monotonic()
            elif eof_at is not None and eof_at > start:
                # Offsets [start, eof) hold no records for us (transaction markers,
                # aborted or compacted records): the position moved past them.
                start = min(eof_at, until)
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                check_read_stalled(name, start, until, opts)
                return
        read_all = True
    finally:
        if reuse and read_all and key not in _IDLE_CONSUMERS:
            consumer.unassign()
            _IDLE_CONSUMERS[key] = consumer
        else:
            consumer.close()


@contextmanager
def _gc_paused():
    """Keep the cyclic garbage collector out of a block that allocates one object
    per record (librdkafka's Messages): none of them form cycles, yet every 700
    allocations would start a collection that walks them all again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _watermarks(consumer, tp, timeout_s: float) -> tuple[int, int]:
    """(earliest, latest) of one partition, retried through a leader change."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=5, cached=False)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class _Columns:
    """Builds Arrow record batches of the source schema from librdkafka messages."""

    def __init__(self, topic: str, partition: int, schema) -> None:
        from kafkalab.spark.schema import arrow_schema

        self.topic, self.partition = topic, partition
        self.schema = arrow_schema(schema)
        self.headers = "headers" in self.schema.names

    def batch(self, msgs: list, offsets):
        """`offsets`: the messages' offsets as a numpy int64 array."""
        import numpy as np
        import pyarrow as pa
        from confluent_kafka import Message

        n = len(msgs)
        # map() over Message's C methods: no Python frame per record; the
        # (type, millis) pairs go straight into one numpy array, none kept alive.
        stamps = np.fromiter(
            chain.from_iterable(map(Message.timestamp, msgs)), np.int64, 2 * n
        ).reshape(n, 2)
        arrays = [
            pa.array(list(map(Message.key, msgs)), pa.binary()),
            pa.array(list(map(Message.value, msgs)), pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            pa.array(stamps[:, 1] * 1000, self.schema.field(5).type),
            # librdkafka's timestamp types 0/1/2 -> Kafka's -1/0/1
            pa.array((stamps[:, 0] - 1).astype(np.int32), pa.int32()),
        ]
        if self.headers:
            hs = [h or None for h in map(Message.headers, msgs)]
            arrays.append(pa.array(hs, self.schema.field(7).type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def produce_batches(opts: WriteOptions, batches: Iterable, flush_timeout_s: float = 300) -> int:
    """Produce every row of Arrow record batches (columns value, and optionally key,
    topic, partition, headers); wait for every acknowledgement. Returns the number
    of records; raises KafkaWriteError with Kafka's error if any delivery failed.

    With kafkalab's own produce (WriteOptions.own_produce) through
    kafkalab.spark.sender: whole Arrow batches encoded into RecordBatches and sent
    with idempotent Produce requests; else through a librdkafka producer."""
    from kafkalab.spark.batch_columns import COMPILED

    if opts.own_produce(COMPILED):
        from kafkalab.spark import sender

        return sender.produce_batches(opts, batches)
    return _produce_batches_librdkafka(opts, batches, flush_timeout_s)


def _produce_batches_librdkafka(
    opts: WriteOptions, batches: Iterable, flush_timeout_s: float
) -> int:
    from confluent_kafka import Producer

    failures: list[str] = []
    failed = 0

    def on_delivery(err, msg) -> None:  # only failures: delivery.report.only.error
        nonlocal failed
        failed += 1
        if len(failures) < 5:
            failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    producer = Producer({**opts.producer_config(), "on_delivery": on_delivery})
    written = 0
    for batch in batches:
        written += produce_batch(producer, opts.topic, batch)
        producer.poll(0)
        if failures:
            break
    remaining = producer.flush(flush_timeout_s)
    if failures or failed:
        raise KafkaWriteError(
            f"{failed} records could not be delivered to {opts.bootstrap_servers}; first "
            f"errors: {'; '.join(failures)}"
        )
    if remaining:
        raise KafkaWriteError(
            f"{remaining} records still unacknowledged after {flush_timeout_s:.0f} s "
            f"(brokers {opts.bootstrap_servers}); check that the brokers are up"
        )
    return written


def produce_batch(producer, topic: str | None, batch) -> int:
    """Hand every row of one Arrow record batch to `producer.produce()` (columns
    value, and optionally key, topic, partition, headers; `topic` is the sink's
    topic option, None to take each row's). Returns the number of rows."""
    names = batch.schema.names
    n = batch.num_rows
    values = batch.column(names.index("value")).to_pylist()
    keys = batch.column(names.index("key")).to_pylist() if "key" in names else None
    if topic is not None:
        topics = None
    else:
        topics = batch.column(names.index("topic")).to_pylist()
        if None in topics:
            raise KafkaWriteError(
                "Null topic present in the data. Use the 'topic' option to set a topic."
            )
    parts = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
    headers = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
    if topics is None and parts is None and headers is None:
        # The hot path: one topic, the producer's partitioner, no headers.
        _produce_all(producer, topic, values, keys)
    else:
        produce = producer.produce
        if keys is None:
            keys = [None] * n
        for i in range(n):
            kwargs = {}
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            t = topic if topics is None else topics[i]
            try:
                produce(t, values[i], keys[i], **kwargs)
            except BufferError:
                _produce_when_room(producer, t, values[i], keys[i], **kwargs)
    return n


def _produce_all(producer, topic: str, values: list, keys: list | None) -> None:
    """produce() every value (with its key) to `topic`, in order, from a loop in C:
    map() calls produce() with no Python bytecode run per record. A full local
    queue raises BufferError out of map(); the values' list iterator, whose
    length hint is what it has left, tells which record did not fit: that one
    waits for room, and map() goes on with the rest."""
    produce = producer.produce
    rest = iter(values)
    keys_rest = None if keys is None else iter(keys)
    while True:
        try:
            if keys_rest is None:
                deque(map(produce, repeat(topic), rest), maxlen=0)
            else:
                deque(map(produce, repeat(topic), rest, keys_rest), maxlen=0)
            return
        except BufferError:
            i = len(values) - length_hint(rest) - 1
            _produce_when_room(producer, topic, values[i], None if keys is None else keys[i])


def _produce_when_room(producer, topic, value, key, **kwargs) -> None:
    """The local queue is full: serve delivery reports until it has room."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            continue
