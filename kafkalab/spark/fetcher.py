"""Fetcher: one Spark task's offset range read with kafkalab's own Fetch requests.

Kafka's class: the consumer's Fetcher, for one partition and one range: Fetch
requests to the partition's leader (kafkalab.client.network_client, the leader
from Metadata), each answer's records decoded whole into Arrow columns
(kafkalab.spark.batch_columns), the next fetch from the offset after the last
whole batch. What librdkafka's consumer does for the same range, without a
Python object per record:

- a leader change (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, a broken
  connection...): Metadata again, and fetch from the new leader;
- OFFSET_OUT_OF_RANGE: ListOffsets earliest and latest; an offset between them
  was a stale answer (fetch again), one outside is data loss (failOnDataLoss);
- records below the range's end that do not come within
  kafkaConsumer.pollTimeoutMs (a high watermark that stays below them) are
  data loss too;
- `kafka.isolation.level=read_committed`: Fetch with isolation_level 1 (up to
  the last stable offset) and aborted transactions' records dropped.

The driver still asks librdkafka for offsets (kafkalab.spark.kafka_io.DriverOffsets).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records.record_batch import peek_size
from kafkalab.spark.offsets import OffsetRange
from kafkalab.spark.options import IsolationLevel, ReadOptions

#: Errors that mean the leader moved or is moving: ask Metadata again and retry.
LEADER_CHANGE = frozenset(
    {
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.LEADER_NOT_AVAILABLE,
        Errors.REPLICA_NOT_AVAILABLE,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.KAFKA_STORAGE_ERROR,
        Errors.NETWORK_EXCEPTION,
        Errors.REQUEST_TIMED_OUT,
        Errors.OFFSET_NOT_AVAILABLE,
    }
)
RETRY_BACKOFF_S = 0.1


def _setting(config: dict, *names: str, default: int) -> int:
    for name in names:
        if name in config:
            return int(config[name])
    return default


def new_client(opts: ReadOptions):
    """The kafkalab consumer whose network client and ListOffsets a fetch uses:
    built without a connection, never assigned or subscribed."""
    from kafkalab.client.consumer import KafkaConsumer

    return KafkaConsumer(
        {
            "bootstrap.servers": opts.bootstrap_servers,
            "isolation.level": opts.consumer_config("executor")["isolation.level"],
            "auto.offset.reset": "none",
            "enable.auto.commit": False,
        }
    )


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    partition_max_bytes: int,
    read_committed: bool,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    max_bytes: int = 64 << 20,
) -> dict:
    """A consumer's Fetch request body for one partition from `offset` (no session)."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 1 if read_committed else 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "",
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
    }


def read_range(opts: ReadOptions, r: OffsetRange, schema, consumer) -> Iterator:
    """Yield Arrow record batches of `schema` (a pyspark StructType) holding the
    records [from, until) of one topic partition, fetched with `consumer`'s
    network client (see new_client). Raises on a non-retriable error."""
    from kafkalab.spark.batch_columns import BatchColumns
    from kafkalab.spark.kafka_io import NOT_READABLE, after_out_of_range, check_read_stalled
    from kafkalab.spark.schema import arrow_schema

    start, until = r.from_offset, r.until_offset
    name = f"{r.topic}-{r.partition}"
    config = opts.consumer_config("executor")
    committed = config["isolation.level"] == IsolationLevel.READ_COMMITTED.value
    columns = BatchColumns(r.topic, r.partition, arrow_schema(schema), read_committed=committed)
    partition_max = _setting(config, "max.partition.fetch.bytes", default=8 << 20)
    sizes = {
        "max_wait_ms": _setting(config, "fetch.wait.max.ms", "fetch.max.wait.ms", default=500),
        "min_bytes": _setting(config, "fetch.min.bytes", default=1),
        "max_bytes": _setting(config, "fetch.max.bytes", default=64 << 20),
    }
    client = consumer.client
    timeout_s = opts.poll_timeout_ms / 1000
    last_progress = time.monotonic()

    def stalled(why: str = NOT_READABLE) -> bool:
        """Past kafkaConsumer.pollTimeoutMs without progress: data loss (or raise)."""
        if time.monotonic() - last_progress <= timeout_s:
            return False
        check_read_stalled(name, start, until, opts, why)
        return True

    while start < until:
        body = fetch_request(r.topic, r.partition, start, partition_max, committed, **sizes)
        leader = None
        try:
            leader = client.leader_for(r.topic, r.partition)
            response = client.connection(leader).request(ApiKeys.FETCH, body)
            part = response["responses"][0]["partitions"][0]
            error = Errors(part["error_code"])
        except (KafkaError, OSError, KeyError) as e:
            # KeyError: Metadata does not know the leader's node (yet)
            code = getattr(e, "code", Errors.NETWORK_EXCEPTION)
            if isinstance(e, KafkaError) and code not in LEADER_CHANGE:
                raise RuntimeError(f"Reading {name} failed: {e}") from e
            error = Errors.NETWORK_EXCEPTION
            if leader is not None:
                client.drop(leader)
        if error in LEADER_CHANGE:
            client.partitions.pop(r.topic, None)  # Metadata again before the next fetch
            if stalled(f"its leader did not answer ({error.name})"):
                return
            time.sleep(RETRY_BACKOFF_S)
            continue
        if error == Errors.OFFSET_OUT_OF_RANGE:
            low, high = _watermarks(consumer, r, timeout_s)
            resume = after_out_of_range(name, start, until, low, high, opts.fail_on_data_loss)
            if resume is None:
                return
            if resume == start:  # a stale answer during a leader change: go on
                time.sleep(RETRY_BACKOFF_S)
            else:
                start, last_progress = resume, time.monotonic()
            continue
        if error != Errors.NONE:
            raise RuntimeError(f"Reading {name} failed: Kafka error {error.name}")
        data = part["records"] or b""
        aborted = [
            (a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"] or ()
        ]
        batch, next_offset = columns.decode(data, start, until, aborted)
        if batch is not None:
            yield batch
        if next_offset > start:
            # Past everything fetched: markers, aborted and compacted-away offsets too.
            start = next_offset
            last_progress = time.monotonic()
            continue
        first = peek_size(data)
        if first is not None and first > partition_max:
            partition_max = first  # one batch larger than asked for: ask for all of it
        elif stalled():
            return


def _watermarks(consumer, r: OffsetRange, timeout_s: float) -> tuple[int, int]:
    """(earliest, latest) of the partition, asked again through a leader change."""
    deadline = time.monotonic() + timeout_s
    tp = (r.topic, r.partition)
    while True:
        try:
            low = consumer.beginning_offsets([tp])
            high = consumer.end_offsets([tp])
            return next(iter(low.values())), next(iter(high.values()))
        except (KafkaError, OSError):
            if time.monotonic() > deadline:
                raise
            consumer.client.partitions.pop(r.topic, None)
            time.sleep(RETRY_BACKOFF_S)
