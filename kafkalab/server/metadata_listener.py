"""BrokerMetadataListener: the broker reads the controller's metadata log and acts on it.

Kafka's classes: BrokerMetadataListener (read and replay `__cluster_metadata`
into a MetadataImage) and BrokerMetadataPublisher (apply the image:
ReplicaManager.applyDelta). On every new batch of records:

    for each partition the records name (MetadataDelta) with a replica here:
        leader is us, and we were not leading in this epoch  -> become leader
        leader is another broker (new epoch or new leader)    -> become follower:
                                                                 the replica fetcher
                                                                 truncates, then fetches
        no leader (every ISR member is down)                  -> follower of nobody:
                                                                 offline here
        same leader and epoch, another ISR                    -> apply the ISR change
        same leader and epoch, other replicas (a reassignment) -> track the new ones
        not a replica (any more: a reassignment moved it)     -> stop it, delete its log
    partitions of deleted topics                               -> removed with their logs
    a topic's or the brokers' configs changed (ConfigRecord)  -> the logs take them live

A controller that loaded a KRaft snapshot holds, at the start of its metadata log, the
image rather than its history (quorum_meta_log_listener.py): a fetch from before or
inside it is answered OFFSET_OUT_OF_RANGE, and the broker starts over at the log
start, whose MetadataSnapshotRecord empties its image; the records after it rebuild
it, and the topics it no longer lists are removed as a RemoveTopicRecord would.

It reads on its own connection to the controller, in a loop of long polls
(`run`): a fetch that has everything waits at the controller until the next
record is written, so a fence or an election reaches the broker as soon as it
is committed, not at its next heartbeat. Leaderships it applies are recorded
in the broker's EventLog.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafkalab.controller.metadata_image import SNAPSHOT_RECORD, TOPIC_RESOURCE, MetadataImage
from kafkalab.controller.metadata_record_serde import MetadataParseError, deserialize
from kafkalab.controller.quorum_controller import METADATA_TOPIC
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import iter_batches
from kafkalab.replication.partition import Role
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.events import EventLog
from kafkalab.server.inter_broker_connection import (
    REPLICA_FETCH_VERSION,
    InterBrokerConnection,
    replica_fetch_request,
)
from kafkalab.server.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)
#: How long _publish works before it lets the broker's other tasks run.
YIELD_EVERY_S = 0.01


class MetadataDelta:
    """What a run of metadata records changed, as far as a broker's replicas care
    (Kafka: MetadataDelta): the partitions they name and the topics they removed."""

    def __init__(self) -> None:
        self.partitions_named: set[tuple[str, int]] = set()
        self.removed_topics: set[str] = set()
        #: Topics whose overrides an AlterConfigs changed; whether broker configs changed.
        self.config_topics: set[str] = set()
        self.broker_configs_changed = False

    def replay(self, record: dict, image: MetadataImage) -> None:
        """Note what `record` changes; `image` is the image before it is replayed
        (records name topics by id: a removed topic's name is found there)."""
        kind = record["type"]
        if kind in ("PartitionRecord", "PartitionChangeRecord"):
            name = image.topic_name(record["topic_id"])
            if name is not None:
                self.partitions_named.add((name, record["partition"]))
        elif kind == "ConfigRecord" and record["resource_type"] == TOPIC_RESOURCE:
            self.config_topics.add(record["resource_name"])
        elif kind == "ConfigRecord":
            self.broker_configs_changed = True
        elif kind == "RemoveTopicRecord":
            name = image.topic_name(record["topic_id"])
            if name is not None:
                self.removed_topics.add(name)

    def partitions(self, image: MetadataImage) -> list[tuple[str, int]]:
        """The partitions to look at, in the image's order (topics as created)."""
        order = {name: i for i, name in enumerate(image.topics)}
        named = (tp for tp in self.partitions_named if tp[0] in order)
        return sorted(named, key=lambda tp: (order[tp[0]], tp[1]))


class BrokerMetadataListener:
    def __init__(
        self,
        broker_id: int,
        controller: InterBrokerConnection,
        replica_manager: ReplicaManager,
        fetchers: ReplicaFetcherManager,
        events: EventLog,
        long_poll_ms: int = 500,
        fetch_version: int = REPLICA_FETCH_VERSION,
    ) -> None:
        """`fetch_version`: v11 from a single controller; v12 from a quorum, whose
        answer names the leader (CurrentLeader; see controller_channel.py)."""
        self.broker_id = broker_id
        self.controller = controller
        self.replica_manager = replica_manager
        self.fetchers = fetchers
        self.events = events
        self.long_poll_ms = long_poll_ms
        self.fetch_version = fetch_version
        self.image = MetadataImage()
        self.next_offset = 0
        self._lock = asyncio.Lock()  # one catch-up at a time: records apply once, in order
        self._applied = asyncio.Condition()
        #: Partitions this broker holds that the image, part way through the log, no
        #: longer lists it as a replica of: deleted only once caught up (see _publish).
        self._strays: set[tuple[str, int]] = set()
        self._task: asyncio.Task | None = None
        self._stopping = False
        #: Called with the image's broker configs when a ConfigRecord changed them.
        self.on_broker_configs: Callable[[dict[str, dict[str, str]]], None] | None = None

    @property
    def last_applied_offset(self) -> int:
        return self.next_offset - 1

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        self._stopping = True  # should a cancellation be lost, the loop still ends
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.controller.close()

    async def run(self) -> None:
        """Fetch and apply until stopped. A record this broker cannot read (a JSON one
        from a metadata log written before Kafka's binary records: MetadataParseError,
        whose message says what to do) ends it: fetching it again cannot help."""
        while not self._stopping:
            try:
                await self.catch_up(self.long_poll_ms)
            except MetadataParseError as e:
                log.error("cannot read the controller's metadata log: %s", e.message)
                raise
            except KafkaError as e:
                log.warning("metadata fetch from the controller failed (%s); retrying", e)
                await asyncio.sleep(0.1)

    async def wait_until(self, done: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until the applied image satisfies `done` (a topic we asked the
        controller to create is in it, say). False on timeout."""
        async with self._applied:
            try:
                await asyncio.wait_for(self._applied.wait_for(lambda: done(self.image)), timeout_s)
                return True
            except TimeoutError:
                return False

    async def catch_up(self, max_wait_ms: int = 0) -> int:
        """Fetch and apply the metadata records we do not have yet, waiting up to
        `max_wait_ms` for the first one. Returns the offset of the last record
        applied (-1 for none)."""
        async with self._lock:
            while True:
                body = replica_fetch_request(
                    self.broker_id,
                    [(METADATA_TOPIC, 0, self.next_offset, -1)],
                    max_wait_ms=max_wait_ms,
                    min_bytes=1,
                    partition_max_bytes=10 << 20,
                )
                max_wait_ms = 0  # after the first answer, take what is there and stop
                response = await self.controller.request(ApiKeys.FETCH, self.fetch_version, body)
                part = response["responses"][0]["partitions"][0]
                if (
                    part["error_code"] == Errors.OFFSET_OUT_OF_RANGE
                    and part["log_start_offset"] >= 0
                    and part["log_start_offset"] != self.next_offset
                ):
                    self.next_offset = part["log_start_offset"]  # the image starts over
                    continue
                if part["error_code"]:  # no controller answered as the active one
                    raise KafkaError(part["error_code"], "metadata fetch")
                records = [
                    (r.offset, deserialize(r.value, r.offset))
                    for b in iter_batches(bytes(part["records"] or b""))
                    for r in b.records
                    if r.offset >= self.next_offset
                ]
                if not records:
                    return self.next_offset - 1
                delta = MetadataDelta()
                for offset, record in records:
                    if record["type"] == SNAPSHOT_RECORD:  # every topic may be gone
                        delta.removed_topics |= set(self.image.topics)
                    delta.replay(record, self.image)
                    self.image.replay(record)
                    self.next_offset = offset + 1
                await self._publish(delta, caught_up=self.next_offset >= part["high_watermark"])
                async with self._applied:
                    self._applied.notify_all()

    async def _publish(self, delta: MetadataDelta, caught_up: bool = True) -> None:
        """Make the ReplicaManager match the image for what `delta` changed (Kafka:
        BrokerMetadataPublisher applying a MetadataDelta): only the partitions the
        new records name are looked at, so an ISR change of one partition costs one
        partition, not every partition of the cluster.

        It yields to the event loop every YIELD_EVERY_S of work: a new topic of many
        partitions (the 50 of __consumer_offsets), or the leaderships a fenced
        broker lost, take a leader epoch checkpoint (an fsync) a partition, and the
        broker's requests must go on meanwhile (its heartbeats have a thread of
        their own).

        A partition this broker is not (or no longer) a replica of is stopped and its
        log deleted only when the image is the whole log (`caught_up`): a broker
        replaying a long history in several fetches may pass through a reassignment
        that moved the replica away and a later one that moved it back, and must not
        delete a log the end of the history still needs."""
        rm, me = self.replica_manager, self.broker_id
        # Config changes first: the logs take them live (Kafka: DynamicConfigPublisher).
        if delta.broker_configs_changed and self.on_broker_configs is not None:
            self.on_broker_configs(self.image.broker_configs)
        for name in delta.config_topics:
            topic = self.image.topics.get(name)
            if topic is not None:
                rm.log_manager.update_topic_config(name, topic.configs)
        loop = asyncio.get_running_loop()
        worked_since = loop.time()
        for tp in delta.partitions(self.image):
            if loop.time() - worked_since > YIELD_EVERY_S:
                await asyncio.sleep(0)
                worked_since = loop.time()
            topic = self.image.topics.get(tp[0])
            reg = topic.partitions.get(tp[1]) if topic is not None else None
            if reg is None:
                continue
            if me not in reg.replicas:
                # Not (or no longer) a replica here: a reassignment moved it away. Stop
                # fetching and delete the log (Kafka: stopPartitions with delete), also
                # a stray log found at startup; once the image is the whole log.
                if rm.partition(tp) is not None or rm.log_manager.get_log(*tp) is not None:
                    self._strays.add(tp)
                continue
            part = rm.partition(tp)
            if reg.leader == me:
                if (
                    part is None
                    or part.role != Role.LEADER
                    or part.leader_epoch != reg.leader_epoch
                ):
                    self.fetchers.remove(tp)
                    rm.make_leader(
                        tp,
                        reg.leader_epoch,
                        reg.isr,
                        reg.replicas,
                        reg.partition_epoch,
                        topic.configs,
                    )
                    self.events.record(
                        "leader", topic=tp[0], partition=tp[1], leader_epoch=reg.leader_epoch
                    )
                    continue
            elif (
                part is None
                or part.role != Role.FOLLOWER
                or part.leader_epoch != reg.leader_epoch
                or part.leader_id != reg.leader
            ):
                self.fetchers.remove(tp)
                follower = rm.make_follower(
                    tp,
                    reg.leader,
                    reg.leader_epoch,
                    reg.isr,
                    reg.replicas,
                    reg.partition_epoch,
                    topic.configs,
                )
                if reg.leader >= 0:
                    self.fetchers.add(reg.leader, follower)
                self.events.record(
                    "follower",
                    topic=tp[0],
                    partition=tp[1],
                    leader=reg.leader,
                    leader_epoch=reg.leader_epoch,
                )
                continue
            # Same leader and epoch: an ISR change (AlterPartition, or the controller
            # fencing a broker), or new replicas (a reassignment started or was
            # cancelled: the leader tracks the adding ones). The leader computes its
            # HW over the new ISR; a follower only keeps it current, so what it
            # reports is what the metadata says.
            if part.replicas != reg.replicas and part.partition_epoch <= reg.partition_epoch:
                rm.update_assignment(tp, reg.replicas, reg.isr, reg.partition_epoch)
            elif part.isr != reg.isr or part.partition_epoch != reg.partition_epoch:
                rm.apply_isr_change(tp, reg.isr, reg.partition_epoch)
        if caught_up and self._strays:
            for tp in sorted(self._strays):
                topic = self.image.topics.get(tp[0])
                reg = topic.partitions.get(tp[1]) if topic is not None else None
                if reg is not None and me not in reg.replicas:
                    self.fetchers.remove(tp)
                    rm.remove_partition(tp)
                    self.events.record("replica_removed", topic=tp[0], partition=tp[1])
                    await asyncio.sleep(0)
            self._strays.clear()
        if delta.removed_topics:
            for tp in [tp for tp in rm.partitions if tp[0] not in self.image.topics]:
                self.fetchers.remove(tp)
                rm.remove_partition(tp)
                await asyncio.sleep(0)
            for name in delta.removed_topics - self.image.topics.keys():
                # its overrides go too: a topic created again under the name has its own
                rm.log_manager.topic_configs.pop(name, None)

    def broker_address(self, broker_id: int, listener: str | None = None) -> tuple[str, int]:
        """Where a broker listens (on `listener`, when named: the inter-broker one for
        a follower), as it registered last (a restarted broker may listen on another
        port)."""
        reg = self.image.brokers[broker_id]
        return reg.endpoint(listener) if listener else (reg.host, reg.port)
