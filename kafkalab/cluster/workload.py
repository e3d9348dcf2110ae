"""Client workloads that write a History: a producer thread and a final read.

The clients are librdkafka's (confluent-kafka), a real Kafka client, so what the
history says is what an application would have seen:

    history = History()
    with ProducerWorkload(cluster.bootstrap_servers, "t", history, acks="all"):
        cluster.kill(leader)                 # faults while records flow
    read_final_log(cluster.bootstrap_servers, "t", 0, history)
    record_replicas(cluster, "t", 0, history)
    print(check(history).summary())
"""

from __future__ import annotations

import threading
import time
import uuid

from kafkalab.cluster.history import History, read_replica_batches
from kafkalab.cluster.local_cluster import ProcessState


class ProducerWorkload:
    """A thread sending unique values `<prefix>-<n>` to one partition at about
    `rate` records per second, recording every send and its outcome."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        history: History,
        partition: int = 0,
        acks: str = "all",
        rate: float = 200,
        prefix: str = "v",
        config: dict | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.topic, self.partition, self.history = topic, partition, history
        self.rate, self.prefix = rate, prefix
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": acks,
                "enable.idempotence": acks == "all",
                "message.timeout.ms": 30000,
                "linger.ms": 5,
                **(config or {}),
            }
        )
        self.sent = self.acked = self.failed = 0
        #: The offset after the last record acknowledged: what a replica must hold
        #: before a fault for none of them to be lost (wait_for_replicas_in_sync's
        #: log_end_offset).
        self.end_offset = 0
        #: librdkafka's error name -> how many sends failed with it
        self.failed_by_error: dict[str, int] = {}
        #: Wall-clock time (ms since the epoch, as the processes' events.jsonl) of
        #: every acknowledgement, in the order they came: failover times read them.
        self.ack_times_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="producer-workload")

    def _on_delivery(self, err, msg) -> None:
        value = msg.value()
        if err is None:
            self.acked += 1
            self.end_offset = max(self.end_offset, msg.offset() + 1)
            self.ack_times_ms.append(time.time() * 1000)
            self.history.ack(self.topic, msg.partition(), value, msg.offset())
        else:
            self.failed += 1
            self.failed_by_error[err.name()] = self.failed_by_error.get(err.name(), 0) + 1
            self.history.fail(self.topic, self.partition, value, err.name())

    def send(self, n: int) -> None:
        value = b"%s-%d" % (self.prefix.encode(), n)
        self.history.send(self.topic, self.partition, value)
        self.producer.produce(
            self.topic, value=value, partition=self.partition, on_delivery=self._on_delivery
        )
        self.sent += 1

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self.send(n)
            n += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)

    def start(self) -> ProducerWorkload:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60) -> int:
        """Stop sending and wait for every outcome; returns how many are unknown."""
        self._stop.set()
        self._thread.join()
        return self.producer.flush(timeout)

    def __enter__(self) -> ProducerWorkload:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _consumer(bootstrap_servers: str, isolation: str, group_id: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,  # librdkafka wants one; only assign() is used
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )


def _read_to_end(
    consumer, topic: str, starts: dict[int, int], ends: dict[int, int], timeout_s: float
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record `consumer` reads from `starts`
    until each partition's EOF at or past `ends` (0: the first EOF). Under
    read_committed the end is the EOF at the LSO: the last offsets may be markers
    or aborted records, never returned, so no offset can be waited for."""
    from confluent_kafka import KafkaError, TopicPartition

    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    out: list[tuple[int, int, bytes]] = []
    done: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(done) < len(starts):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{topic}: partitions {sorted(set(starts) - done)} not read to their end "
                f"in {timeout_s} s ({len(out)} records read)"
            )
        m = consumer.poll(0.2)
        if m is None:
            continue
        if m.error() is None:
            out.append((m.partition(), m.offset(), m.value()))
        elif m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
            done.add(m.partition())
    return out


def _watermarks(consumer, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
    """The partition's (log start, high watermark), asked again while its leadership
    moves (a restarted broker taking its preferred leadership back answers
    NOT_LEADER_OR_FOLLOWER for a moment)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    moving = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
        except KafkaException as e:
            if e.args[0].code() not in moving or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_final_log(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    history: History,
    timeout: float = 60,
    isolation: str = "read_uncommitted",
) -> list[tuple[int, bytes]]:
    """Read the partition from its start to its end, as a consumer with this
    `isolation.level` sees it now, and record it as the history's final log: up to
    the high watermark (read_uncommitted), or to the last stable offset, without
    aborted records and control markers (read_committed)."""
    consumer = _consumer(bootstrap_servers, isolation, "kafkalab-final-read")
    try:
        low, high = _watermarks(consumer, topic, partition, timeout)
        end = high if isolation == "read_uncommitted" else 0
        read = _read_to_end(consumer, topic, {partition: low}, {partition: end}, timeout)
    finally:
        consumer.close()
    out = [(offset, value) for _, offset, value in read]
    history.final_log(topic, partition, out, isolation=isolation)
    return out


def record_replicas(
    cluster, topic: str, partition: int, history: History, below: int | None = None
) -> None:
    """Add every replica's batches below `below`, by default the smallest HW the
    replicas report (wait until they agree first: `wait_for_replicas_in_sync`)."""
    df = cluster.describe(topic)
    rows = df[df.partition == partition]
    if below is None:
        below = int(rows.HW.min())
    for broker in rows.broker:
        path = cluster.broker_dir(int(broker)) / f"{topic}-{partition}"
        history.replica_batches(topic, partition, int(broker), read_replica_batches(path, below))


def wait_for_replicas_in_sync(
    cluster,
    topic: str,
    partition: int = 0,
    replicas: int = 3,
    timeout: float = 60,
    log_end_offset: int = 0,
):
    """Wait until `replicas` running replicas report the same LEO, at least
    `log_end_offset`, and HW = LEO.

    The reports are what each broker last wrote (`cluster.describe`), every 100 ms
    at best and later on a loaded machine: right after a producer's flush they may
    all still show the log as it was before the sends, in sync at the old end. A
    caller that needs its acknowledged records on every replica (before a fault
    that would otherwise lose them) passes the end it knows, `log_end_offset`: a
    report at or past it was written after the records came, and its HW = LEO
    held then and still holds (neither goes back without a fault)."""
    deadline = time.monotonic() + timeout
    while True:
        df = cluster.describe(topic)
        rows = df[(df.partition == partition) & (df.status == ProcessState.RUNNING)]
        if (
            len(rows) == replicas
            and rows.LEO.nunique() == 1
            and (rows.LEO >= log_end_offset).all()
            and (rows.HW == rows.LEO).all()
            and (rows.role == "leader").sum() == 1
        ):
            return rows
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"replicas of {topic}-{partition} not in sync at or past offset "
                f"{log_end_offset}:\n{df}"
            )
        time.sleep(0.2)


def read_all(
    bs: str, topic: str, partitions: int, isolation: str = "read_uncommitted", timeout_s: float = 30
) -> list[bytes]:
    """Every record value a librdkafka consumer with this `isolation.level` sees, read
    from offset 0 up to the end of each partition (the LSO under read_committed).
    Raises TimeoutError when a partition's end is not reached in `timeout_s`."""
    consumer = _consumer(bs, isolation, f"reader-{uuid.uuid4().hex[:6]}")
    try:
        starts = dict.fromkeys(range(partitions), 0)
        read = _read_to_end(consumer, topic, starts, dict(starts), timeout_s)
    finally:
        consumer.close()
    return [value for _, _, value in read]
