"""The teaching producer: KafkaProducer, RecordAccumulator and Sender.

Kafka's classes: KafkaProducer, RecordAccumulator, Sender, ProducerBatch. The
path of a record, as in the Java client:

1. `send()` picks a partition (murmur2 of the key, or the sticky partition)
   and appends the record to the accumulator's open batch for that partition.
   It returns a Future of RecordMetadata at once.
2. The **RecordAccumulator** holds one deque of batches per partition. A batch
   is *ready* when it is full (`batch.size`) or has waited `linger.ms`. The
   bytes of all waiting records are bounded by `buffer.memory`: `send()` blocks
   (up to `max.block.ms`) when it is used up.
3. The **Sender** thread drains ready batches, groups them by the leader of
   their partition, and sends one Produce request per broker. Responses
   complete the futures; retriable errors put the batch back after
   `retry.backoff.ms`, up to `retries` times (refreshing metadata when the
   leader moved).
4. With `enable.idempotence=true` (the default, as in Kafka 3+), the producer
   gets a producer id from InitProducerId and numbers each partition's batches
   with sequences, so the broker can drop retries it already has. One request
   in flight per broker keeps batches in order.
5. With `transactional.id`, the TransactionManager (transaction_manager.py)
   takes over: `init_transactions()` gets the producer id and a new epoch from
   the transaction coordinator (fencing older producers of the same id),
   `begin_transaction()`, `send()` (AddPartitionsToTxn before a partition's
   first record; batches go out transactional), `send_offsets_to_transaction()`
   (a consumer's offsets, committed only with the transaction),
   `commit_transaction()` / `abort_transaction()` (flush, then EndTxn: the
   coordinator writes COMMIT or ABORT markers into every partition).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kafkalab.client.network_client import NetworkClient, merge_config
from kafkalab.client.partitioner import StickyPartitioner, partition_for_key
from kafkalab.client.transaction_manager import (
    TransactionAbortableError,
    TransactionManager,
    TransactionState,
)
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import CompressionType, Header, SimpleRecord, build_batch

RETRIABLE = {
    Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.LEADER_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT,
    Errors.NETWORK_EXCEPTION,
    Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
    Errors.KAFKA_STORAGE_ERROR,
    Errors.CORRUPT_MESSAGE,
}

DEFAULTS: dict[str, Any] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "acks": "all",
    "batch.size": 16384,
    "linger.ms": 5,
    "buffer.memory": 32 * 1024 * 1024,
    "max.block.ms": 60_000,
    "compression.type": "none",
    "retries": 2**31 - 1,
    "retry.backoff.ms": 100,
    "delivery.timeout.ms": 120_000,
    "request.timeout.ms": 30_000,
    "enable.idempotence": True,
    "transactional.id": None,
    "transaction.timeout.ms": 60_000,
}


def produce_results(response: dict) -> dict[tuple[str, int], dict]:
    """A Produce response's partition results by (topic, partition)."""
    return {
        (t["name"], r["partition_index"]): r for t in response["responses"] for r in t["partitions"]
    }


@dataclass(frozen=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass
class ProducerBatch:
    """Records waiting to go to one partition (Kafka: ProducerBatch)."""

    topic: str
    partition: int
    created: float
    records: list[SimpleRecord] = field(default_factory=list)
    futures: list[Future] = field(default_factory=list)
    size: int = 61
    attempts: int = 0
    retry_at: float = 0.0
    base_sequence: int = -1
    sealed: bool = False  # drained by the Sender: no more records may join it
    encoded: bytes | None = None

    def complete(self, base_offset: int, log_append_time: int) -> None:
        for i, (record, future) in enumerate(zip(self.records, self.futures, strict=True)):
            ts = log_append_time if log_append_time >= 0 else record.timestamp
            future.set_result(RecordMetadata(self.topic, self.partition, base_offset + i, ts))

    def fail(self, error: Exception) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(error)


class RecordAccumulator:
    """Batches per partition, `linger.ms`, `batch.size` and `buffer.memory`."""

    def __init__(
        self, batch_size: int, linger_ms: int, buffer_memory: int, max_block_ms: int
    ) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self.batches: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self.used = 0
        self.cond = threading.Condition()
        self.closed = False

    def needs_new_batch(self, topic: str, partition: int, size: int) -> bool:
        with self.cond:
            queue = self.batches.get((topic, partition))
            return not queue or self._sealed(queue[-1], size)

    def _sealed(self, batch: ProducerBatch, size: int) -> bool:
        return batch.sealed or (batch.size + size > self.batch_size and bool(batch.records))

    def append(self, topic: str, partition: int, record: SimpleRecord, size: int) -> Future:
        """Add a record to the partition's open batch (a new one if needed)."""
        with self.cond:
            deadline = time.monotonic() + self.max_block_s
            while self.used + size > self.buffer_memory:  # buffer.memory: block the caller
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaError(
                        Errors.REQUEST_TIMED_OUT,
                        f"buffer.memory full for max.block.ms={self.max_block_s * 1000:.0f}",
                    )
                self.cond.wait(left)
            queue = self.batches.setdefault((topic, partition), deque())
            if not queue or self._sealed(queue[-1], size):
                queue.append(ProducerBatch(topic, partition, time.monotonic()))
            batch = queue[-1]
            future: Future = Future()
            batch.records.append(record)
            batch.futures.append(future)
            batch.size += size
            self.used += size
            self.cond.notify_all()
            return future

    def ready(self, now: float, flushing: bool) -> list[ProducerBatch]:
        """The first batch of each partition that is full, lingered long enough, or
        being flushed, and not waiting for a retry backoff."""
        out = []
        with self.cond:
            for queue in self.batches.values():
                if not queue:
                    continue
                batch = queue[0]
                if batch.retry_at > now:
                    continue
                full = batch.size >= self.batch_size or len(queue) > 1
                if full or flushing or self.closed or now - batch.created >= self.linger_s:
                    batch.sealed = True  # under the lock: send() cannot add to it any more
                    out.append(batch)
        return out

    def next_wakeup(self, now: float) -> float:
        with self.cond:
            times = [
                max(q[0].created + self.linger_s, q[0].retry_at) for q in self.batches.values() if q
            ]
        return max(0.0, min(times) - now) if times else 0.1

    def done(self, batch: ProducerBatch) -> None:
        with self.cond:
            queue = self.batches[(batch.topic, batch.partition)]
            if queue and queue[0] is batch:
                queue.popleft()
            self.used -= batch.size - 61
            self.cond.notify_all()

    def pending(self) -> int:
        with self.cond:
            return sum(len(q) for q in self.batches.values())


class Sender(threading.Thread):
    """Drains ready batches and sends them, one Produce request per leader."""

    def __init__(self, producer: KafkaProducer) -> None:
        super().__init__(name="kafkalab-producer-sender", daemon=True)
        self.producer = producer
        self.running = True

    def run(self) -> None:
        p = self.producer
        while self.running or p.accumulator.pending():
            now = time.monotonic()
            ready = p.accumulator.ready(now, p.flushing.is_set() or not self.running)
            if not ready:
                with p.accumulator.cond:
                    p.accumulator.cond.wait(min(0.05, p.accumulator.next_wakeup(now)) or 0.001)
                continue
            by_leader: dict[int, list[ProducerBatch]] = {}
            for batch in ready:
                try:
                    leader = p.client.leader_for(batch.topic, batch.partition)
                except KafkaError as e:
                    self._retry_or_fail(batch, e.code, str(e))
                    continue
                by_leader.setdefault(leader, []).append(batch)
            for leader, batches in by_leader.items():
                self._send(leader, batches)

    def _send(self, leader: int, batches: list[ProducerBatch]) -> None:
        p = self.producer
        topics: dict[str, list[dict]] = {}
        for batch in batches:
            if batch.encoded is None:
                if p.producer_id >= 0:
                    batch.base_sequence = p.next_sequence(
                        batch.topic, batch.partition, len(batch.records)
                    )
                batch.encoded = build_batch(
                    batch.records,
                    compression=p.compression,
                    producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch,
                    base_sequence=batch.base_sequence,
                    is_transactional=p.transaction_manager is not None,
                )
            topics.setdefault(batch.topic, []).append(
                {"partition_index": batch.partition, "records": batch.encoded}
            )
        body = {
            "transactional_id": p.config["transactional.id"],
            "acks": p.acks,
            "timeout_ms": p.request_timeout_ms,
            "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()],
        }
        try:
            response = p.client.connection(leader).request(
                ApiKeys.PRODUCE, body, expect_response=p.acks != 0
            )
        except (KafkaError, OSError) as e:
            p.client.drop(leader)
            for batch in batches:
                self._retry_or_fail(batch, Errors.NETWORK_EXCEPTION, str(e))
            return
        if response is None:  # acks=0: offsets are unknown
            for batch in batches:
                batch.complete(-1, -1)
                p.accumulator.done(batch)
            return
        results = produce_results(response)
        for batch in batches:
            r = results.get((batch.topic, batch.partition))
            error = Errors(r["error_code"]) if r else Errors.UNKNOWN_SERVER_ERROR
            if error == Errors.NONE:
                batch.complete(r["base_offset"], r["log_append_time_ms"])
                p.accumulator.done(batch)
            else:
                self._retry_or_fail(batch, error, (r or {}).get("error_message") or "")

    def _retry_or_fail(self, batch: ProducerBatch, error: Errors, message: str) -> None:
        p = self.producer
        batch.attempts += 1
        expired = time.monotonic() - batch.created > p.delivery_timeout_ms / 1000
        if error in RETRIABLE and batch.attempts <= p.retries and not expired:
            batch.retry_at = time.monotonic() + p.retry_backoff_ms / 1000
            p.client.partitions.pop(batch.topic, None)  # refresh metadata before retrying
            return
        if batch.base_sequence >= 0 and error != Errors.NETWORK_EXCEPTION:
            # The broker refused the batch, so it is not in the log: give its sequence
            # numbers back if nothing was numbered after it, or the next batch would
            # leave a gap (Kafka's producer adjusts sequences the same way). After a
            # network error nobody knows; Kafka then bumps the epoch (KIP-360).
            p.rewind_sequence(batch.topic, batch.partition, batch.base_sequence, len(batch.records))
        failure = KafkaError(error, message or f"producing to {batch.topic}-{batch.partition}")
        if p.transaction_manager is not None:
            p.transaction_manager.fail(failure)  # the transaction can only abort now
        batch.fail(failure)
        p.accumulator.done(batch)


class KafkaProducer:
    """`KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"})`, then `send()`."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        conf = merge_config("producer", DEFAULTS, config, kwargs)
        self.config = conf
        self.acks = {"all": -1, "-1": -1, "1": 1, "0": 0}[str(conf["acks"])]
        self.compression = CompressionType[str(conf["compression.type"]).upper()]
        self.retries = int(conf["retries"])
        self.retry_backoff_ms = int(conf["retry.backoff.ms"])
        self.delivery_timeout_ms = int(conf["delivery.timeout.ms"])
        self.request_timeout_ms = int(conf["request.timeout.ms"])
        explicit = {**(config or {}), **{k.replace("_", "."): v for k, v in kwargs.items()}}
        if conf["transactional.id"] is not None and (
            self.acks != -1 or not conf["enable.idempotence"]
        ):
            raise ValueError("transactional.id needs enable.idempotence=true and acks=all (Kafka)")
        if conf["enable.idempotence"] and self.acks != -1:
            if "enable.idempotence" in explicit:
                raise ValueError("enable.idempotence=true needs acks=all (as in Kafka)")
            conf["enable.idempotence"] = False  # Kafka 3.2+: the default yields to acks
        self.client = NetworkClient(conf["bootstrap.servers"])
        self.accumulator = RecordAccumulator(
            int(conf["batch.size"]),
            int(conf["linger.ms"]),
            int(conf["buffer.memory"]),
            int(conf["max.block.ms"]),
        )
        self.partitioner = StickyPartitioner()
        self.flushing = threading.Event()
        self.producer_id, self.producer_epoch = -1, -1
        self._sequences: dict[tuple[str, int], int] = {}
        self.transaction_manager: TransactionManager | None = None
        if conf["transactional.id"] is not None:  # the id comes with init_transactions()
            self.transaction_manager = TransactionManager(
                str(conf["transactional.id"]),
                int(conf["transaction.timeout.ms"]),
                self.client,
                retry_backoff_ms=self.retry_backoff_ms,
                max_block_ms=int(conf["max.block.ms"]),
            )
        elif conf["enable.idempotence"]:
            response = self.client.any_connection().request(
                22, {"transactional_id": None, "transaction_timeout_ms": 60_000}
            )
            if response["error_code"]:
                raise KafkaError(response["error_code"], "InitProducerId")
            self.producer_id, self.producer_epoch = (
                response["producer_id"],
                response["producer_epoch"],
            )
        self.sender = Sender(self)
        self.sender.start()

    def rewind_sequence(self, topic: str, partition: int, base: int, count: int) -> None:
        """Return a failed batch's sequence numbers when it was the last one numbered."""
        if self._sequences.get((topic, partition)) == (base + count) % 2**31:
            self._sequences[(topic, partition)] = base

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        first = self._sequences.get((topic, partition), 0)
        self._sequences[(topic, partition)] = (first + count) % 2**31
        return first

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
        callback: Callable[[RecordMetadata | None, Exception | None], None] | None = None,
    ) -> Future:
        """Queue a record; the Future gives its RecordMetadata once written.
        `callback(metadata, exception)` runs on the Sender thread when it is
        (Kafka: send(record, callback))."""
        if not self.sender.running:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, "the producer is closed")
        partitions = self.client.partitions_for(topic)
        n = len(partitions)
        record = SimpleRecord(
            value,
            key,
            tuple(Header(k, v) for k, v in headers or ()),
            timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
        )
        size = (
            21
            + len(key or b"")
            + len(value or b"")
            + sum(len(k) + len(v or b"") for k, v in headers or ())
        )
        if partition is None and key is not None:
            partition = partition_for_key(key, n)
        elif partition is None:
            # Sticky partitioning (KIP-480): stay on one partition until its batch is
            # full, then move on, so unkeyed records make few, full batches.
            partition = self.partitioner.partition(topic, n)
            if self.accumulator.needs_new_batch(topic, partition, size):
                self.partitioner.on_new_batch(topic, n, partition)
                partition = self.partitioner.partition(topic, n)
        elif not 0 <= partition < n:
            raise ValueError(f"{topic} has partitions 0..{n - 1}, not {partition}")
        if self.transaction_manager is not None:
            self.transaction_manager.maybe_add_partition((topic, partition))
        future = self.accumulator.append(topic, partition, record, size)
        if callback is not None:
            future.add_done_callback(
                lambda f: callback(None if f.exception() else f.result(), f.exception())
            )
        return future

    # -- transactions ------------------------------------------------------------------------

    def _transactions(self) -> TransactionManager:
        if self.transaction_manager is None:
            raise KafkaError(
                Errors.INVALID_TXN_STATE,
                "this producer has no transactional.id: set one to use transactions",
            )
        return self.transaction_manager

    def init_transactions(self) -> None:
        """InitProducerId with transactional.id: once, before the first transaction.
        Any older producer with the same id is fenced from now on."""
        tm = self._transactions()
        tm.init_transactions()
        self.producer_id, self.producer_epoch = tm.producer_id, tm.producer_epoch
        self._sequences = {}

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: dict[tuple[str, int], int], group_metadata: Any
    ) -> None:
        """Commit a consumer's positions (the next offsets to read) with this
        transaction. `group_metadata`: the consumer's `group_metadata()` (so a
        zombie member is refused), or a group id."""
        if isinstance(group_metadata, str):
            self._transactions().send_offsets_to_transaction(offsets, group_metadata)
            return
        self._transactions().send_offsets_to_transaction(
            offsets,
            group_metadata.group_id,
            generation_id=group_metadata.generation_id,
            member_id=group_metadata.member_id,
            group_instance_id=group_metadata.group_instance_id,
        )

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Flush the transaction's records, then EndTxn(commit). A record refused
        on the way raises TransactionAbortableError: abort_transaction() then."""
        tm = self._transactions()
        tm.require_state(TransactionState.IN_TRANSACTION, doing="commit_transaction")
        self.flush(timeout_s)
        if tm.state is TransactionState.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                Errors.INVALID_TXN_STATE, f"the transaction cannot commit: {tm.last_error}"
            )
        tm.end_transaction(committed=True)

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        """Let what is in flight finish (its failures no longer matter), then
        EndTxn(abort): read_committed consumers never see these records."""
        tm = self._transactions()
        tm.require_state(
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
            doing="abort_transaction",
        )
        self.flush(timeout_s)
        tm.end_transaction(committed=False)

    def flush(self, timeout_s: float | None = None) -> None:
        """Send everything now and wait until every queued record is answered."""
        self.flushing.set()
        with self.accumulator.cond:
            self.accumulator.cond.notify_all()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while self.accumulator.pending():
                if deadline is not None and time.monotonic() > deadline:
                    raise KafkaError(Errors.REQUEST_TIMED_OUT, "flush timed out")
                time.sleep(0.002)
        finally:
            self.flushing.clear()

    def close(self, timeout_s: float = 30.0) -> None:
        """Send what is queued, stop the Sender, close connections."""
        self.sender.running = False
        with self.accumulator.cond:
            self.accumulator.closed = True
            self.accumulator.cond.notify_all()
        self.sender.join(timeout_s)
        self.client.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
