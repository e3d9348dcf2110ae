"""CoordinatorRuntime: a sans-IO coordinator running on the broker, over its state topic.

Kafka's class: org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime, the
half of it that does I/O (the sans-IO half, shared by both coordinators, is
kafkalab.coordinator.runtime). A coordinator (the group or the transaction
coordinator, typed by the `Coordinator` protocol there) decides; this carries out
what it decides, on the broker's event loop:

    Respond(request, result)       the waiting request gets `result`
    AppendRecords(partition, ...)  one batch appended to <state topic>-<partition>
                                   through the ReplicaManager (origin COORDINATOR),
                                   acks=all: the coordinator hears `append_completed`
                                   once the ISR has it (a DelayedProduce), so nothing
                                   is acknowledged that a failover could lose
    any other effect               to `effect_handler` (the transaction coordinator's
                                   SendTxnMarkers go to its marker channel)
    next_deadline_ms()             one timer that calls tick()

and it follows leadership of the state topic's partitions, as a ReplicaManager
leadership listener (registered at construction, when it also takes over the
partitions already led): elected leader of a partition, it reads the partition's
records into the coordinator (`complete_load`; requests for its keys answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile); resigned, it unloads them
(NOT_COORDINATOR: clients look for the new coordinator).

A request runs as `await runtime.run(operation, ResultType)`: `operation(now_ms,
request)` calls the coordinator with the request's handle and returns its
effects; the answer is whatever the coordinator responds under that handle, now
or after a write or a rebalance. The services (GroupCoordinatorService,
TransactionCoordinatorService) wrap each API in one such call.

`leader_of()` creates the state topic on first use (`StateTopic`: the partitions,
the replication factor capped by the live brokers, `min_isr` capped by that,
cleanup.policy=compact, the segment size): for `__consumer_offsets`
offsets.topic.num.partitions / .replication.factor / min.insync.replicas 2; for
`__transaction_state` the transaction.state.log.* settings.

`sync_topic_metadata()` hands a coordinator that wants it (`topic_metadata`: the
group coordinator's update_topic_metadata) the cluster's topics, partition counts
and topic ids from the MetadataCache (Kafka: the coordinator's
onNewMetadataImage): KIP-848 assigns partitions on the broker and writes them by
topic id. It runs before every KIP-848 call and before a partition's records are
loaded, and costs one comparison when nothing changed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kafkalab.coordinator.group.results import AppendRecords, Effects, Respond, TxnMarker
from kafkalab.coordinator.runtime import Coordinator
from kafkalab.errors import Errors
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.control_record import ControlRecordType, control_record_type
from kafkalab.replication.delayed_produce import DelayedProduce
from kafkalab.replication.partition import Role
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.apis.topics import create_topics_request
from kafkalab.server.metadata_cache import MetadataCache
from kafkalab.storage.unified_log import AppendOrigin

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
READ_CHUNK_BYTES = 1 << 20
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes

#: a state topic's record as a coordinator loads it: plain (key, value); in a
#: transactional batch (key, value, producer id); the marker ending a transaction
LoadedRecord = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int] | TxnMarker
)
CoordinatorT = TypeVar("CoordinatorT", bound=Coordinator[Effects, LoadedRecord])
ResultT = TypeVar("ResultT")
#: a coordinator call for one request: (now_ms, request handle) -> its effects
Operation = Callable[[int, Hashable], Effects]
#: the group coordinator's update_topic_metadata(partitions per topic, topic ids, now_ms)
TopicMetadataSink = Callable[[dict[str, int], dict[str, uuid.UUID], int], Effects]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class StateTopic:
    """The coordinator's topic and how it is created and written."""

    name: str
    num_partitions: int
    replication_factor: int
    min_isr: int = 2
    segment_bytes: int = OFFSETS_TOPIC_SEGMENT_BYTES
    append_timeout_ms: int = 5000  # an append not in the ISR by then fails


class CoordinatorRuntime(Generic[CoordinatorT]):
    def __init__(
        self,
        coordinator: CoordinatorT,
        topic: StateTopic,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        *,
        effect_handler: Callable[[object], None] | None = None,
        topic_metadata: TopicMetadataSink | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.state_topic = topic
        self.topic = topic.name
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.effect_handler = effect_handler
        self.topic_metadata = topic_metadata
        self._waiting: dict[Hashable, asyncio.Future[object]] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._creating: asyncio.Task[None] | None = None
        self._topics_seen: dict[str, tuple[int, uuid.UUID]] | None = None
        replica_manager.add_leadership_listener(self)
        for tp, epoch in self._led_now():  # led before we listened (a standalone broker)
            self.on_election(tp, epoch)

    def _led_now(self) -> list[tuple[TopicPartition, int]]:
        return [
            (tp, p.leader_epoch)
            for tp, p in sorted(self.replica_manager.partitions.items())
            if tp[0] == self.topic and p.role == Role.LEADER
        ]

    # -- requests ------------------------------------------------------------------------------

    async def run(self, operation: Operation, result_type: type[ResultT]) -> ResultT:
        """Run `operation(now_ms, handle)` on the coordinator and wait for its answer
        to this request (now, or after a rebalance or a write), a `result_type`."""
        handle = next(self._ids)
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._waiting[handle] = future
        try:
            self.execute(operation(now_ms(), handle))
        except BaseException:
            self._waiting.pop(handle, None)
            raise
        result = await future
        if not isinstance(result, result_type):
            raise TypeError(f"{self.topic}: expected a {result_type.__name__}, got {result!r}")
        return result

    def sync_topic_metadata(self) -> None:
        """Tell the coordinator about topics created, deleted or grown since last time."""
        if self.topic_metadata is None:
            return
        seen = {
            name: (len(info.partitions), info.topic_id)
            for name, info in self.metadata_cache.topics().items()
            if name != self.topic
        }
        if seen == self._topics_seen:
            return
        self._topics_seen = seen
        self.execute(
            self.topic_metadata(
                {name: n for name, (n, _) in seen.items()},
                {name: topic_id for name, (_, topic_id) in seen.items()},
                now_ms(),
            )
        )

    def execute(self, effects: Iterable[object]) -> None:
        """Carry out a coordinator call's effects, then re-arm the timer."""
        for effect in effects:
            if isinstance(effect, Respond):
                self._respond(effect)
            elif isinstance(effect, AppendRecords):
                self._append(effect)
            elif self.effect_handler is not None:
                self.effect_handler(effect)
            else:
                log.warning("%s: no one carries out %r", self.topic, effect)
        self._arm_timer()

    def _respond(self, effect: Respond) -> None:
        future = self._waiting.pop(effect.request, None)
        if future is not None and not future.done():
            future.set_result(effect.result)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.coordinator.next_deadline_ms()
        if due is not None:
            delay = max(0.0, (due - now_ms()) / 1000)
            self._timer = asyncio.get_running_loop().call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.execute(self.coordinator.tick(now_ms()))

    # -- writes to the state topic ----------------------------------------------------------------

    def _append(self, effect: AppendRecords) -> None:
        tp = (self.topic, effect.partition)
        # TxnOffsetCommit's records go as a transactional batch of the producer
        # (no sequence: Kafka's coordinator writes them so); its marker ends them.
        batch = build_batch(
            [
                SimpleRecord(value, key=key, timestamp=effect.timestamp_ms)
                for key, value in effect.records
            ],
            producer_id=effect.producer_id,
            producer_epoch=effect.producer_epoch,
            is_transactional=effect.is_transactional,
        )
        result = self.replica_manager.append_records(
            *tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR
        )
        append_id = effect.append_id
        if append_id is None:
            return
        loop = asyncio.get_running_loop()

        def completed(error: Errors) -> None:
            # Later, not inside the append: the coordinator is not re-entrant.
            loop.call_soon(
                lambda: self.execute(self.coordinator.append_completed(append_id, error, now_ms()))
            )

        if result.error != Errors.NONE:
            log.info("%s-%d: coordinator write refused: %s", *tp, result.error.name)
            completed(result.error)
            return
        op = DelayedProduce(
            self.state_topic.append_timeout_ms,
            self.replica_manager.partition,
            {tp: result},
            lambda results: completed(results[tp].error),
        )
        self.replica_manager.delayed_produce.try_complete_else_watch(op, [tp])

    # -- leadership of the state topic ----------------------------------------------------------

    def on_election(self, tp: TopicPartition, leader_epoch: int) -> None:
        if tp[0] != self.topic:
            return
        self.execute(self.coordinator.on_become_leader(tp[1], leader_epoch))
        asyncio.get_running_loop().call_soon(self._load, tp, leader_epoch)

    def _load(self, tp: TopicPartition, leader_epoch: int) -> None:
        part = self.replica_manager.partition(tp)
        if part is None or part.leader_epoch != leader_epoch:
            return  # resigned meanwhile: on_resignation unloaded it
        records = self._read(part.log)
        log.info("%s-%d: loading %d records into the coordinator", *tp, len(records))
        self.sync_topic_metadata()  # KIP-848 records name partitions by topic id
        self.execute(self.coordinator.complete_load(tp[1], records, now_ms()))

    @staticmethod
    def _read(log_) -> list[LoadedRecord]:
        """Every record of the partition, oldest first, as LoadedRecord says."""
        records: list[LoadedRecord] = []
        position = log_.log_start_offset
        while position < log_.log_end_offset:
            data = log_.read(position, READ_CHUNK_BYTES).read_bytes()
            batches = list(iter_batches(data))
            if not batches:
                break
            for batch in batches:
                header = batch.header
                if header.is_control_batch:
                    records += [
                        TxnMarker(header.producer_id, kind is ControlRecordType.COMMIT)
                        for r in batch.records
                        if r.offset >= position
                        and (kind := control_record_type(r))
                        in (ControlRecordType.COMMIT, ControlRecordType.ABORT)
                    ]
                elif header.is_transactional:
                    records += [
                        (r.key, r.value, header.producer_id)
                        for r in batch.records
                        if r.offset >= position
                    ]
                else:
                    records += [(r.key, r.value) for r in batch.records if r.offset >= position]
                position = max(position, batch.last_offset + 1)
        return records

    def on_resignation(self, tp: TopicPartition, leader_epoch: int) -> None:
        if tp[0] == self.topic:
            self.execute(self.coordinator.on_resign(tp[1], leader_epoch))

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for effect in self.coordinator.shutdown():
            if isinstance(effect, Respond):
                self._respond(effect)

    # -- the state topic --------------------------------------------------------------------

    def leader_of(self, partition: int) -> int:
        """The broker leading the state topic's partition, -1 if none (yet), after
        starting its creation when the topic does not exist."""
        info = self.metadata_cache.topics().get(self.topic)
        if info is None:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.ensure_future(self._create())
            return -1
        registration = info.partitions.get(partition)
        return -1 if registration is None else registration.leader

    async def _create(self) -> None:
        t = self.state_topic
        alive = len(self.metadata_cache.alive_brokers())
        factor = max(1, min(t.replication_factor, alive))
        configs = {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min(t.min_isr, factor)),
            "segment.bytes": str(t.segment_bytes),
        }
        response = await self.metadata_cache.create_topics(
            create_topics_request([t.name], t.num_partitions, factor, configs)
        )
        error = Errors(response["topics"][0]["error_code"])
        if error not in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s failed: %s", t.name, error.name)
        else:
            log.info(
                "created %s: %d partitions, replication factor %d",
                t.name,
                t.num_partitions,
                factor,
            )
