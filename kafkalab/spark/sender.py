"""Sender: one Spark task's write with kafkalab's own idempotent Produce requests.

Kafka's class: the producer's Sender (with its TransactionManager's sequence
bookkeeping), for one task: the sink's Arrow batches encoded into RecordBatches
(kafkalab.spark.batch_encoder), sent to each partition's leader
(kafkalab.client.network_client, leaders from Metadata) in Produce requests, up
to max.in.flight.requests.per.connection (5 at most when idempotent, as Kafka's
producer keeps it) unanswered on each connection, so the brokers replicate one
request while the next is encoded. What librdkafka's producer does for the same
rows, without a Python call per record:

- InitProducerId first (`enable.idempotence`, the default): each partition's
  batches carry the producer id, its epoch and gap-free sequence numbers, so a
  batch sent twice is written once;
- a leader change (NOT_LEADER_OR_FOLLOWER, a broken connection, a timeout...):
  every answer still due is read, Metadata is asked again, and every batch not
  yet written goes again, unchanged (the same sequence), in sequence order to
  the partition's new leader; OUT_OF_ORDER_SEQUENCE_NUMBER for a batch behind
  one that goes again is the same case; until `delivery.timeout.ms`
  (`message.timeout.ms`, librdkafka's name) has passed;
- DUPLICATE_SEQUENCE_NUMBER: the broker has the batch already: written;
- any other error: KafkaWriteError naming the partition and Kafka's error.

Plaintext only, batches uncompressed or compressed with `kafka.compression.type`
(gzip, snappy, lz4, zstd at their default levels), never transactional: options
that need more go to librdkafka (kafkalab.spark.options.librdkafka_only_produce).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable

from kafkalab.client.producer import RETRIABLE as PRODUCER_RETRIABLE
from kafkalab.client.producer import produce_results
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.types import RecordsView
from kafkalab.records.record_batch import CompressionType
from kafkalab.spark.batch_encoder import BatchEncoder, EncodedBatch
from kafkalab.spark.errors import KafkaWriteError
from kafkalab.spark.options import WriteOptions

#: Errors after which a batch goes again, unchanged, once Metadata is asked again:
#: the producer's (kafkalab.client.producer), and what Metadata and InitProducerId
#: may answer while leaders or the producer id's source move.
RETRIABLE = frozenset(PRODUCER_RETRIABLE) | {
    Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH,
    Errors.CONCURRENT_TRANSACTIONS,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR,
}
#: Kafka's producer allows no more unanswered requests per connection when idempotent.
MAX_IN_FLIGHT_IDEMPOTENT = 5
#: What to do about a few errors a write meets (the rest say it themselves).
_WHAT_TO_DO = {
    Errors.MESSAGE_TOO_LARGE: "a record (or batch) is too large for the topic's "
    "max.message.bytes: write smaller records, lower kafka.batch.size, or raise the "
    "topic's max.message.bytes",
    Errors.RECORD_LIST_TOO_LARGE: "a batch is too large for the broker: lower kafka.batch.size",
    Errors.TOPIC_AUTHORIZATION_FAILED: "the principal may not write to this topic",
    Errors.INVALID_REQUIRED_ACKS: "kafka.acks must be all, -1 or 1",
}
RETRY_BACKOFF_MS = 100


def _setting(config: dict, *names: str, default: int) -> int:
    for name in names:
        if name in config:
            return int(config[name])
    return default


_ACKS = {"all": -1, "-1": -1, "1": 1}


class Sender:
    """Produces one task's Arrow batches: `send()` each, then `flush()` waits for
    every acknowledgement (raising KafkaWriteError if a record cannot be written);
    `close()` always."""

    def __init__(self, opts: WriteOptions) -> None:
        from kafkalab.client.network_client import NetworkClient

        config = opts.producer_config()
        self.topic = opts.topic
        raw_acks = str(config["acks"]).strip().lower()
        if raw_acks not in _ACKS:
            raise KafkaWriteError(
                f"Option 'kafka.acks' is {config['acks']!r}: kafkalab's own produce takes all, "
                "-1 or 1 (acks=0 writes through librdkafka)"
            )
        self.acks = _ACKS[raw_acks]
        idempotent = str(config["enable.idempotence"]).strip().lower() == "true"
        if idempotent and self.acks != -1:
            raise KafkaWriteError(
                f"kafka.acks={config['acks']} needs kafka.enable.idempotence=false: an "
                "idempotent producer needs acks=all (as librdkafka and Kafka's producer say)"
            )
        self.request_timeout_ms = _setting(config, "request.timeout.ms", default=30_000)
        self.delivery_timeout_s = (
            _setting(config, "delivery.timeout.ms", "message.timeout.ms", default=300_000) / 1000
        )
        self.retry_backoff_s = _setting(config, "retry.backoff.ms", default=RETRY_BACKOFF_MS) / 1000
        in_flight = _setting(
            config,
            "max.in.flight.requests.per.connection",
            "max.in.flight",
            default=MAX_IN_FLIGHT_IDEMPOTENT,
        )
        self.max_in_flight = (
            max(1, min(in_flight, MAX_IN_FLIGHT_IDEMPOTENT)) if idempotent else max(1, in_flight)
        )
        self.bootstrap_servers = opts.bootstrap_servers
        self.client = NetworkClient(opts.bootstrap_servers)
        producer_id, epoch = self._init_producer_id() if idempotent else (-1, -1)
        codec = str(config.get("compression.type", config.get("compression.codec", "none")))
        self.encoder = BatchEncoder(
            producer_id,
            epoch,
            _setting(config, "batch.size", default=1_000_000),
            compression=CompressionType[codec.strip().upper()],
        )
        # node -> requests sent and not yet answered, oldest first:
        # (connection, correlation id, version, batches)
        self.in_flight: dict[int, deque] = {}
        self.failed: list[tuple[EncodedBatch, Errors, str]] = []
        self.written = 0

    # -- the task's side -------------------------------------------------------------------

    def send(self, batch) -> int:
        """Encode one Arrow batch and send its RecordBatches; returns its rows.
        Earlier requests' answers are read as room is needed."""
        encoded = self.encoder.encode(batch, self.topic, self._partition_count)
        self._dispatch(encoded)
        if self.failed:
            self._recover()
        return batch.num_rows

    def flush(self) -> None:
        """Read every answer still due, sending again what must go again."""
        self._drain()
        if self.failed:
            self._recover()

    def close(self) -> None:
        self.client.close()

    # -- sending ---------------------------------------------------------------------------

    def _dispatch(self, batches: Iterable[EncodedBatch]) -> None:
        """Send batches, in order, one Produce per leader holding at most one batch
        of a partition (Kafka's rule); after a failure, only queue them."""
        by_leader: dict[int, list[list[EncodedBatch]]] = {}
        for b in batches:
            if self.failed:
                self.failed.append((b, Errors.NONE, "not sent: an earlier batch goes again"))
                continue
            try:
                leader = self.client.leader_for(b.topic, b.partition)
            except (KafkaError, OSError, KeyError) as e:
                self.failed.append((b, getattr(e, "code", Errors.NETWORK_EXCEPTION), str(e)))
                continue
            requests = by_leader.setdefault(leader, [])
            for request in requests:  # the first request without this partition
                if all((x.topic, x.partition) != (b.topic, b.partition) for x in request):
                    request.append(b)
                    break
            else:
                requests.append([b])
        for leader, requests in by_leader.items():
            for i, request in enumerate(requests):
                if self.failed:
                    for rest in requests[i:]:
                        self.failed.extend((b, Errors.NONE, "not sent") for b in rest)
                    break
                self._send(leader, request)

    def _send(self, leader: int, batches: list[EncodedBatch]) -> None:
        queue = self.in_flight.setdefault(leader, deque())
        while len(queue) >= self.max_in_flight:
            self._receive_oldest(leader)
        if self.failed:  # an answer said a batch goes again: this one waits for it
            self.failed.extend((b, Errors.NONE, "not sent") for b in batches)
            return
        topics: dict[str, list[dict]] = {}
        for b in batches:
            topics.setdefault(b.topic, []).append(
                {"partition_index": b.partition, "records": RecordsView(b.data)}
            )
        body = {
            "transactional_id": None,
            "acks": self.acks,
            "timeout_ms": self.request_timeout_ms,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
        }
        try:
            conn = self.client.connection(leader)
            correlation_id, version = conn.send(ApiKeys.PRODUCE, body)
        except (KafkaError, OSError, KeyError) as e:
            self._connection_lost(leader, str(e))
            self.failed.extend((b, Errors.NETWORK_EXCEPTION, str(e)) for b in batches)
            return
        queue.append((conn, correlation_id, version, batches))

    def _receive_oldest(self, leader: int) -> None:
        conn, correlation_id, version, batches = self.in_flight[leader][0]
        try:
            response = conn.receive(ApiKeys.PRODUCE, version, correlation_id)
        except (KafkaError, OSError) as e:
            self._connection_lost(leader, str(e))
            return
        self.in_flight[leader].popleft()
        results = produce_results(response)
        for b in batches:
            r = results.get((b.topic, b.partition))
            error = Errors(r["error_code"]) if r else Errors.UNKNOWN_SERVER_ERROR
            if error in (Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER):
                self.written += b.count
            else:
                self.failed.append((b, error, (r or {}).get("error_message") or ""))

    def _connection_lost(self, leader: int, why: str) -> None:
        """Every request still unanswered on the connection goes again."""
        queue = self.in_flight.get(leader, ())
        for _conn, _cid, _v, batches in queue:
            self.failed.extend((b, Errors.NETWORK_EXCEPTION, why) for b in batches)
        if queue:
            queue.clear()
        self.client.drop(leader)

    def _drain(self) -> None:
        for leader in list(self.in_flight):
            while self.in_flight.get(leader):
                self._receive_oldest(leader)

    def _recover(self) -> None:
        """Batches must go again: read every answer still due, ask Metadata again,
        and send every batch not written, in sequence order per partition, until
        none fails or delivery.timeout.ms has passed."""
        started = time.monotonic()
        while True:
            self._drain()
            if not self.failed:
                return
            failed, self.failed = self.failed, []
            again = {(b.topic, b.partition, b.base_sequence) for b, e, _ in failed}
            for b, error, message in failed:
                behind = error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and any(
                    (t, p) == (b.topic, b.partition) and s < b.base_sequence for t, p, s in again
                )
                if error not in RETRIABLE and error != Errors.NONE and not behind:
                    hint = _WHAT_TO_DO.get(error)
                    raise KafkaWriteError(
                        f"Writing to {b.topic}-{b.partition} failed: Kafka's error "
                        f"{error.name}{': ' + message if message else ''}"
                        f"{'; ' + hint if hint else ''} (brokers {self.bootstrap_servers})"
                    )
            if time.monotonic() - started > self.delivery_timeout_s:
                b, error, message = next((f for f in failed if f[1] != Errors.NONE), failed[0])
                raise KafkaWriteError(
                    f"{sum(f[0].count for f in failed)} records could not be delivered within "
                    f"delivery.timeout.ms={self.delivery_timeout_s * 1000:.0f}; "
                    f"{b.topic}-{b.partition}: Kafka's error {error.name} {message} (brokers "
                    f"{self.bootstrap_servers}); check that the brokers are up"
                )
            time.sleep(self.retry_backoff_s)
            self.client.partitions.clear()  # Metadata again before sending
            self._dispatch(
                sorted(
                    (f[0] for f in failed), key=lambda b: (b.topic, b.partition, b.base_sequence)
                )
            )

    # -- metadata --------------------------------------------------------------------------

    def _partition_count(self, topic: str) -> int:
        """How many partitions `topic` has (created on first use where the brokers
        allow it, as librdkafka's producer asks for it), waiting out a topic being
        created or a broker that does not answer, up to delivery.timeout.ms."""
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            try:
                return len(self.client.partitions_for(topic))
            except (KafkaError, OSError) as e:
                code = getattr(e, "code", Errors.NETWORK_EXCEPTION)
                if code not in RETRIABLE or time.monotonic() > deadline:
                    hint = (
                        ": create it first, or let the brokers create it "
                        "(auto.create.topics.enable)"
                        if code == Errors.UNKNOWN_TOPIC_OR_PARTITION
                        else ""
                    )
                    raise KafkaWriteError(
                        f"Cannot write to topic {topic!r}: Kafka's error {Errors(code).name} "
                        f"within delivery.timeout.ms={self.delivery_timeout_s * 1000:.0f}"
                        f"{hint} ({e}; brokers {self.bootstrap_servers})"
                    ) from e
                time.sleep(self.retry_backoff_s)

    def _init_producer_id(self) -> tuple[int, int]:
        """InitProducerId without a transactional id: any broker hands out an id."""
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            try:
                response = self.client.any_connection().request(
                    ApiKeys.INIT_PRODUCER_ID,
                    {"transactional_id": None, "transaction_timeout_ms": 60_000},
                )
                error = Errors(response["error_code"])
            except (KafkaError, OSError) as e:
                error = getattr(e, "code", Errors.NETWORK_EXCEPTION)
            if error == Errors.NONE:
                return response["producer_id"], response["producer_epoch"]
            if error not in RETRIABLE or time.monotonic() > deadline:
                raise KafkaWriteError(
                    f"InitProducerId failed: Kafka's error {error.name} (brokers "
                    f"{self.bootstrap_servers})"
                )
            time.sleep(self.retry_backoff_s)


def produce_batches(opts: WriteOptions, batches: Iterable) -> int:
    """Produce every row of Arrow record batches with kafkalab's own Produce and
    wait for every acknowledgement. Returns the number of records."""
    sender = Sender(opts)
    try:
        written = sum(sender.send(b) for b in batches)
        sender.flush()
        return written
    finally:
        sender.close()
