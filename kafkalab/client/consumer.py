"""The teaching consumer: KafkaConsumer and its Fetcher.

Kafka's classes: KafkaConsumer, Fetcher, SubscriptionState. Partitions come
from `assign()` (manual), or from a consumer group with `subscribe()` (topics or
a pattern, `group.id` set): the ConsumerCoordinator joins the group, runs the
assignor when it leads, heartbeats, and says which partitions are ours after
each rebalance; a newly assigned partition starts at the group's committed
offset. `commit()` commits the positions; with `enable.auto.commit` they are
committed every `auto.commit.interval.ms`, before partitions are revoked, and on
close.

- **SubscriptionState**: for each assigned partition, the position (the next
  offset to return). A partition without one is reset with ListOffsets by
  `auto.offset.reset` (earliest or latest; none raises).
- **Fetcher**: one Fetch request per leader for all its assigned partitions,
  with `fetch.min.bytes`, `fetch.max.wait.ms`, `fetch.max.bytes` and
  `max.partition.fetch.bytes`. It pipelines: while `poll()` hands records to
  the application, the next fetch is already on its way (a background thread
  keeps one request in flight per broker), as Java's Fetcher sends the next
  fetch before returning records.
- Batches are decoded here (CRC checked); records before the position (the
  start of a batch fetched from its middle) are skipped; control records are
  never returned.
- `isolation.level`: read_uncommitted (the default) returns every record up to
  the high watermark; read_committed fetches with isolation_level 1 (the broker
  stops at the last stable offset, so no open transaction is read) and drops
  the records of aborted transactions (aborted_transactions.py).
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafkalab.client.aborted_transactions import AbortedTransactions
from kafkalab.client.consumer_coordinator import ConsumerCoordinator, RebalanceListener
from kafkalab.client.network_client import NetworkClient, merge_config
from kafkalab.errors import Errors, KafkaError
from kafkalab.kinds import Kind
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import iter_batches
from kafkalab.records.record import Header

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "auto.offset.reset": "latest",
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "max.partition.fetch.bytes": 1024 * 1024,
    "isolation.level": "read_uncommitted",
    "max.poll.records": 500,
    "group.id": None,
    "group.instance.id": None,
    "session.timeout.ms": 45_000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300_000,
    "partition.assignment.strategy": "range,cooperative-sticky",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
}


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    leader_epoch: int


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What a transactional producer's send_offsets_to_transaction needs to know
    of the consumer (Kafka: ConsumerGroupMetadata): the group coordinator refuses
    offsets from a member that is no longer in the generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetResetStrategy(Kind):
    """`auto.offset.reset`: where a partition without a position starts (Kafka's
    OffsetResetStrategy); `none` raises instead."""

    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


class IsolationLevel(Kind):
    """`isolation.level` (Kafka's IsolationLevel); `id` is what Fetch and ListOffsets
    carry on the wire."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"

    @property
    def id(self) -> int:
        return 1 if self is IsolationLevel.READ_COMMITTED else 0


ISOLATION_LEVELS = {level.value: level.id for level in IsolationLevel}


class KafkaConsumer:
    """`KafkaConsumer({"bootstrap.servers": ...})`, `assign([...])`, then `poll()`."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        conf = merge_config("consumer", DEFAULTS, config, kwargs)
        # Parsed once: UnknownKindError (a ValueError) names the valid values.
        self._offset_reset = OffsetResetStrategy.parse(
            conf["auto.offset.reset"], "auto.offset.reset"
        )
        self._isolation = IsolationLevel.parse(conf["isolation.level"], "isolation.level")
        self.config = conf
        self.client = NetworkClient(conf["bootstrap.servers"])
        # The next offset poll() returns, per partition (what commit() commits) ...
        self.positions: dict[TopicPartition, int | None] = {}
        # ... and where the next fetch starts: past what is buffered, not yet returned.
        self._fetch_offsets: dict[TopicPartition, int] = {}
        self._generation = 0  # bumped by assign/seek: fetches in flight become stale
        self._lock = threading.Lock()
        self._completed: queue.Queue = queue.Queue()
        self._buffer: list[ConsumerRecord] = []
        self._in_flight: set[int] = set()
        self._closed = False
        self.coordinator: ConsumerCoordinator | None = None
        self._next_auto_commit = 0.0

    # -- groups -------------------------------------------------------------------------------

    def subscribe(self, topics: list[str] | str, listener: RebalanceListener | None = None) -> None:
        """Join the consumer group `group.id` for these topics, or for every topic
        matching a regular expression (given as one string)."""
        if not self.config["group.id"]:
            raise ValueError("subscribe() needs group.id; use assign() to read without a group")
        if isinstance(topics, str):
            pattern = re.compile(topics)

            def wanted() -> set[str]:
                self.client.refresh_metadata(None, allow_auto_topic_creation=False)
                return {t for t in self.client.partitions if pattern.fullmatch(t)}
        else:
            fixed = set(topics)

            def wanted() -> set[str]:
                return fixed

        self.coordinator = ConsumerCoordinator(
            self.client, self.config, wanted, _CommitBeforeRevoke(self, listener)
        )

    def _poll_group(self) -> None:
        """Rejoin if the group rebalances, adopt the new assignment (positions from
        the committed offsets), and auto-commit when it is time."""
        added = self.coordinator.poll()
        if added is not None:
            owned = self.coordinator.owned
            committed = self.coordinator.committed(added) if added else {}
            with self._lock:
                self.positions = {
                    tp: self.positions.get(tp) for tp in map(TopicPartition._make, owned)
                }
                for tp in added:
                    offset = committed.get(tp, -1)
                    self.positions[TopicPartition(*tp)] = offset if offset >= 0 else None
                self._invalidate()
        if self.config["enable.auto.commit"] and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = (
                time.monotonic() + int(self.config["auto.commit.interval.ms"]) / 1000
            )
            self._commit_positions()

    def _commit_positions(self, partitions=None) -> None:
        offsets = {
            tp: pos
            for tp, pos in self.positions.items()
            if pos is not None and (partitions is None or tp in partitions)
        }
        if offsets and self.coordinator is not None and self.coordinator.generation >= 0:
            self.coordinator.commit(offsets)

    def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Commit `offsets` (the next offset to read, per partition), by default the
        positions of every partition we hold. Raises KafkaError when the group
        rebalanced in between (poll() rejoins; commit again after)."""
        if self.coordinator is None:
            raise ValueError("commit() needs a group: subscribe() first")
        if offsets is None:
            self._commit_positions()
        else:
            self.coordinator.commit({TopicPartition(*tp): o for tp, o in offsets.items()})

    def committed(self, partitions: list[tuple[str, int]]) -> dict[TopicPartition, int]:
        if self.coordinator is None:
            raise ValueError("committed() needs a group: subscribe() first")
        found = self.coordinator.committed({TopicPartition(*tp) for tp in partitions})
        return {TopicPartition(*tp): o for tp, o in found.items()}

    # -- assignment and positions ------------------------------------------------------------

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        with self._lock:
            self.positions = {TopicPartition(*tp): None for tp in partitions}
            self._invalidate()

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        with self._lock:
            self.positions[TopicPartition(*tp)] = offset
            self._invalidate()

    def seek_to_beginning(self, partitions: list[tuple[str, int]] | None = None) -> None:
        self._reset(partitions, -2)

    def seek_to_end(self, partitions: list[tuple[str, int]] | None = None) -> None:
        self._reset(partitions, -1)

    def position(self, tp: tuple[str, int]) -> int:
        tp = TopicPartition(*tp)
        if self.positions.get(tp) is None:
            self._reset([tp], self._reset_timestamp())
        return self.positions[tp]

    def _invalidate(self) -> None:
        self._generation += 1
        self._buffer = []
        self._fetch_offsets = {}

    def _reset_timestamp(self) -> int:
        if self._offset_reset == OffsetResetStrategy.NONE:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE, "no position and auto.offset.reset=none: seek() first"
            )
        return -2 if self._offset_reset == OffsetResetStrategy.EARLIEST else -1

    def _reset(self, partitions, timestamp: int) -> None:
        targets = [TopicPartition(*tp) for tp in (partitions or list(self.positions))]
        found = self.offsets_for_times({tp: timestamp for tp in targets})
        with self._lock:
            for tp in targets:
                self.positions[tp] = found[tp][0]
            self._invalidate()

    def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets: (offset, timestamp) of the first record at or after each
        timestamp; -1 latest, -2 earliest. Offset -1 when there is none."""
        by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, ts in timestamps.items():
            tp = TopicPartition(*tp)
            by_leader.setdefault(self.client.leader_for(*tp), []).append((tp, ts))
        out = {}
        isolation = self._isolation.id
        for leader, items in by_leader.items():
            topics: dict[str, list[dict]] = {}
            for tp, ts in items:
                topics.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "timestamp": ts}
                )
            response = self.client.connection(leader).request(
                ApiKeys.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": isolation,
                    "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
                },
            )
            for topic in response["topics"]:
                for p in topic["partitions"]:
                    if p["error_code"]:
                        raise KafkaError(
                            p["error_code"], f"ListOffsets {topic['name']}-{p['partition_index']}"
                        )
                    out[TopicPartition(topic["name"], p["partition_index"])] = (
                        p["offset"],
                        p["timestamp"],
                    )
        return out

    def end_offsets(self, partitions: list[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {
            tp: o for tp, (o, _) in self.offsets_for_times({tp: -1 for tp in partitions}).items()
        }

    def beginning_offsets(self, partitions: list[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {
            tp: o for tp, (o, _) in self.offsets_for_times({tp: -2 for tp in partitions}).items()
        }

    # -- poll and the fetcher ----------------------------------------------------------------

    def poll(self, timeout_ms: int = 1000) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most max.poll.records, waiting up
        to timeout_ms for some to arrive."""
        if self.coordinator is not None:
            self._poll_group()
        for tp, position in list(self.positions.items()):
            if position is None:
                self.position(tp)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self._drain_completed()
            if self._buffer:
                n = int(self.config["max.poll.records"])
                out, self._buffer = self._buffer[:n], self._buffer[n:]
                for record in out:  # in order per partition: the last one wins
                    self.positions[TopicPartition(record.topic, record.partition)] = (
                        record.offset + 1
                    )
                # A partition with nothing left buffered is at its fetch offset: past
                # the markers and aborted batches that followed its last record.
                left = {(r.topic, r.partition) for r in self._buffer}
                for tp in {TopicPartition(r.topic, r.partition) for r in out} - left:
                    self.positions[tp] = max(self.positions[tp], self._fetch_offsets.get(tp, 0))
                self._send_fetches()  # pipeline: the next fetch goes out now
                return out
            self._send_fetches()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            try:
                self._completed.put(self._completed.get(timeout=left))
            except queue.Empty:
                return []

    def _send_fetches(self) -> None:
        with self._lock:
            by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
            for tp, position in self.positions.items():
                if position is None:
                    continue
                position = self._fetch_offsets.get(tp, position)
                by_leader.setdefault(self.client.leader_for(*tp), []).append((tp, position))
            generation = self._generation
        for leader, items in by_leader.items():
            if leader in self._in_flight:
                continue
            self._in_flight.add(leader)
            threading.Thread(
                target=self._fetch,
                args=(leader, items, generation),
                daemon=True,
                name="kafkalab-fetcher",
            ).start()

    def _fetch(self, leader: int, items: list[tuple[TopicPartition, int]], generation: int) -> None:
        c = self.config
        topics: dict[str, list[dict]] = {}
        for tp, position in items:
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": -1,
                    "fetch_offset": position,
                    "log_start_offset": -1,
                    "partition_max_bytes": int(c["max.partition.fetch.bytes"]),
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": int(c["fetch.max.wait.ms"]),
            "min_bytes": int(c["fetch.min.bytes"]),
            "max_bytes": int(c["fetch.max.bytes"]),
            "isolation_level": self._isolation.id,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        try:
            response = self.client.connection(leader).request(ApiKeys.FETCH, body)
            self._completed.put((leader, generation, response, None))
        except Exception as e:  # handed to poll(), which raises it
            self.client.drop(leader)
            self._completed.put((leader, generation, None, e))

    def _drain_completed(self) -> None:
        while True:
            try:
                leader, generation, response, error = self._completed.get_nowait()
            except queue.Empty:
                return
            self._in_flight.discard(leader)
            if generation != self._generation:
                continue  # an assign/seek happened since: stale data
            if error is not None:
                raise error
            self._parse(response)

    def _parse(self, response: dict) -> None:
        buffered = {(r.topic, r.partition) for r in self._buffer}
        for topic in response["responses"]:
            for part in topic["partitions"]:
                tp = TopicPartition(topic["topic"], part["partition_index"])
                if self.positions.get(tp) is None:
                    continue
                position = self._fetch_offsets.get(tp, self.positions[tp])
                error = Errors(part["error_code"])
                if error == Errors.OFFSET_OUT_OF_RANGE:
                    self.positions[tp] = None  # reset by auto.offset.reset at the next poll
                    self._fetch_offsets.pop(tp, None)
                    continue
                if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION):
                    self.client.partitions.pop(tp.topic, None)
                    continue
                if error != Errors.NONE:
                    raise KafkaError(error, f"fetching {tp.topic}-{tp.partition}")
                data = part["records"]
                if not data:
                    continue
                committed_only = self._isolation == IsolationLevel.READ_COMMITTED
                added = False
                aborted = AbortedTransactions.from_response(part)
                for batch in iter_batches(bytes(data)):
                    h = batch.header
                    keep = aborted.keep(batch) if committed_only else not h.is_control_batch
                    if h.next_offset <= position:
                        continue
                    if keep:
                        for r in batch.records:
                            if r.offset >= position:
                                added = True
                                self._buffer.append(
                                    ConsumerRecord(
                                        tp.topic,
                                        tp.partition,
                                        r.offset,
                                        r.timestamp,
                                        int(h.timestamp_type),
                                        r.key,
                                        r.value,
                                        r.headers,
                                        h.partition_leader_epoch,
                                    )
                                )
                    position = h.next_offset
                self._fetch_offsets[tp] = position
                if not added and tp not in buffered:
                    # only markers or aborted batches: nothing to return, move past them
                    self.positions[tp] = max(self.positions[tp], position)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For KafkaProducer.send_offsets_to_transaction (consume-transform-produce)."""
        if not self.config["group.id"]:
            raise KafkaError(Errors.INVALID_GROUP_ID, "group_metadata() needs a group.id")
        c = self.coordinator
        return ConsumerGroupMetadata(
            self.config["group.id"],
            c.generation if c is not None else -1,
            c.member_id if c is not None else "",
            self.config["group.instance.id"],
        )

    def close(self) -> None:
        if self.coordinator is not None:
            if self.config["enable.auto.commit"]:
                try:
                    self._commit_positions()
                except KafkaError as e:
                    log.info("commit on close failed: %s", e)
            self.coordinator.close()
        self._closed = True
        self.client.close()

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _CommitBeforeRevoke(RebalanceListener):
    """With enable.auto.commit, commit what we read from partitions before they are
    revoked (Kafka: ConsumerCoordinator.onJoinPrepare), then tell the application."""

    def __init__(self, consumer: KafkaConsumer, listener: RebalanceListener | None) -> None:
        self.consumer = consumer
        self.listener = listener or RebalanceListener()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        if self.consumer.config["enable.auto.commit"]:
            try:
                self.consumer._commit_positions({TopicPartition(*tp) for tp in partitions})
            except KafkaError as e:
                log.info("commit before revoking failed: %s", e)
        self.listener.on_partitions_revoked(partitions)

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.listener.on_partitions_assigned(partitions)

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.listener.on_partitions_lost(partitions)
