"""CoordinatorRuntime: a sans-IO coordinator running on the broker, over its state topic.

Kafka's classes: org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime
and GroupCoordinatorService. The group coordinator (kafkalab.coordinator.group)
decides; this carries out what it decides, on the broker's event loop:

    Respond(request, result)       the waiting handler gets `result`
    AppendRecords(partition, ...)  one batch appended to <state topic>-<partition>
                                   through the ReplicaManager (origin COORDINATOR),
                                   acks=all: the coordinator hears `append_completed`
                                   once the ISR has it (a DelayedProduce), so nothing
                                   is acknowledged that a failover could lose
    next_deadline_ms()             one timer that calls tick()

and it follows leadership of the state topic's partitions, as a ReplicaManager
leadership listener: elected leader of a partition, it loads the partition's
records into the coordinator (requests for its groups answer
COORDINATOR_LOAD_IN_PROGRESS meanwhile); resigned, it unloads them
(NOT_COORDINATOR: clients look for the new coordinator).

`leader_of()` creates the state topic on first use (`num_partitions`, the
replication factor capped by the live brokers, `min_isr` capped by that,
cleanup.policy=compact, `segment_bytes`): for `__consumer_offsets`
offsets.topic.num.partitions / .replication.factor / min.insync.replicas 2; for
`__transaction_state` the transaction.state.log.* settings.

Effects other than Respond and AppendRecords (the transaction coordinator's
SendTxnMarkers) go to `effect_handler`.

`sync_topic_metadata()` hands a coordinator that asks for it (`topic_metadata=True`:
the group coordinator) the cluster's topics, partition counts and topic ids from the MetadataCache (Kafka: the coordinator's
onNewMetadataImage): KIP-848 assigns partitions on the broker and writes them by
topic id. It runs before every KIP-848 call and before a partition's groups are
loaded, and costs one comparison when nothing changed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from kafkalab.coordinator.group.results import AppendRecords, Respond, TxnMarker
from kafkalab.errors import Errors
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.control_record import ControlRecordType, control_record_type
from kafkalab.replication.delayed_produce import DelayedProduce
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.apis.topics import create_topics_request
from kafkalab.server.metadata_cache import MetadataCache
from kafkalab.storage.unified_log import AppendOrigin

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
READ_CHUNK_BYTES = 1 << 20
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes


def now_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorRuntime:
    def __init__(
        self,
        coordinator: Any,
        topic: str,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache | None,
        num_partitions: int,
        replication_factor: int,
        append_timeout_ms: int = 5000,
        *,
        min_isr: int = 2,
        segment_bytes: int = OFFSETS_TOPIC_SEGMENT_BYTES,
        effect_handler: Callable[[Any], None] | None = None,
        topic_metadata: bool = False,
    ) -> None:
        self.coordinator = coordinator
        self.topic = topic
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.append_timeout_ms = append_timeout_ms
        self.min_isr = min_isr
        self.segment_bytes = segment_bytes
        self.effect_handler = effect_handler
        self.topic_metadata = topic_metadata  # the coordinator has update_topic_metadata
        self._waiting: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._creating: asyncio.Task | None = None
        self._topics_seen: dict[str, tuple[int, Any]] | None = None
        replica_manager.add_leadership_listener(self)  # before any partition is led

    # -- requests ------------------------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """Run `fn(*args, now_ms=..., request=handle, **kwargs)` on the coordinator and
        wait for its answer to this request (now, or after a rebalance or a write)."""
        handle = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[handle] = future
        try:
            self.execute(fn(*args, now_ms=now_ms(), request=handle, **kwargs))
        except BaseException:
            self._waiting.pop(handle, None)
            raise
        return await future

    def sync_topic_metadata(self) -> None:
        """Tell the coordinator about topics created, deleted or grown since last time."""
        if self.metadata_cache is None or not self.topic_metadata:
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
            self.coordinator.update_topic_metadata(
                {name: n for name, (n, _) in seen.items()},
                {name: topic_id for name, (_, topic_id) in seen.items()},
                now_ms(),
            )
        )

    def execute(self, effects) -> None:
        """Carry out a coordinator call's effects, then re-arm the timer."""
        for effect in effects:
            if isinstance(effect, Respond):
                future = self._waiting.pop(effect.request, None)
                if future is not None and not future.done():
                    future.set_result(effect.result)
            elif isinstance(effect, AppendRecords):
                self._append(effect)
            elif self.effect_handler is not None:
                self.effect_handler(effect)
            else:
                log.warning("%s: no one carries out %r", self.topic, effect)
        self._arm_timer()

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

    def _append(self, effect) -> None:
        tp = (self.topic, effect.partition)
        # TxnOffsetCommit's records go as a transactional batch of the producer
        # (no sequence: Kafka's coordinator writes them so); its marker ends them.
        batch = build_batch(
            [
                SimpleRecord(value, key=key, timestamp=effect.timestamp_ms)
                for key, value in effect.records
            ],
            producer_id=getattr(effect, "producer_id", -1),
            producer_epoch=getattr(effect, "producer_epoch", -1),
            is_transactional=getattr(effect, "producer_id", -1) >= 0,
        )
        result = self.replica_manager.append_records(
            *tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR
        )
        if effect.append_id is None:
            return
        loop = asyncio.get_running_loop()

        def completed(error: Errors) -> None:
            # Later, not inside the append: the coordinator is not re-entrant.
            loop.call_soon(
                lambda: self.execute(
                    self.coordinator.append_completed(effect.append_id, error, now_ms())
                )
            )

        if result.error != Errors.NONE:
            log.info("%s-%d: coordinator write refused: %s", *tp, result.error.name)
            completed(result.error)
            return
        op = DelayedProduce(
            self.append_timeout_ms,
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
        log_ = part.log
        # plain records as (key, value); a transactional batch's as (key, value,
        # producer id); the COMMIT/ABORT marker ending a transaction as a TxnMarker
        records: list = []
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
        log.info("%s-%d: loading %d records into the coordinator", *tp, len(records))
        self.sync_topic_metadata()  # KIP-848 records name partitions by topic id
        self.execute(self.coordinator.complete_load(tp[1], records, now_ms()))

    def on_resignation(self, tp: TopicPartition, leader_epoch: int) -> None:
        if tp[0] == self.topic:
            self.execute(self.coordinator.on_resign(tp[1], leader_epoch))

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for effect in self.coordinator.shutdown():
            if isinstance(effect, Respond):
                future = self._waiting.pop(effect.request, None)
                if future is not None and not future.done():
                    future.set_result(effect.result)

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
        alive = len(self.metadata_cache.alive_brokers())
        factor = max(1, min(self.replication_factor, alive))
        configs = {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min(self.min_isr, factor)),
            "segment.bytes": str(self.segment_bytes),
        }
        response = await self.metadata_cache.create_topics(
            create_topics_request([self.topic], self.num_partitions, factor, configs)
        )
        error = Errors(response["topics"][0]["error_code"])
        if error not in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            log.warning("creating %s failed: %s", self.topic, error.name)
        else:
            log.info(
                "created %s: %d partitions, replication factor %d",
                self.topic,
                self.num_partitions,
                factor,
            )
