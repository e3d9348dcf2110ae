"""QuorumController: the cluster's metadata as an ordered log of records (KRaft in spirit).

Kafka's classes: org.apache.kafka.controller.QuorumController,
ClusterControlManager, ReplicationControlManager, PartitionChangeBuilder.
Every change to the cluster is a *record* appended to the metadata log
(`__cluster_metadata-0`, kept with kafkalab.storage); the controller's state is
nothing but those records replayed in order. Brokers learn the same state by
reading the same log from the offset they last saw, so a broker that restarts
or lags simply catches up.

Record types (KRaft's names): RegisterBrokerRecord, UnfenceBrokerRecord,
FenceBrokerRecord, TopicRecord, PartitionRecord, PartitionChangeRecord,
RemoveTopicRecord, ConfigRecord (a topic's or a broker's config:
configuration_control_manager), ProducerIdsRecord. In memory they are dicts; in the log
they are Kafka's binary records (metadata_record_serde.py, which lists the fields), so
`kafkalab dump-log --cluster-metadata-decoder` prints them as Kafka's kafka-dump-log
does. Records after a TopicRecord name the topic by its id (`topic_id`), as Kafka's do.
A PartitionChangeRecord holds only what changes (Kafka's tagged fields): `isr`,
`leader` (there only when the leader epoch goes up), and for a reassignment
`replicas`, `adding_replicas`, `removing_replicas`; replaying it adds one to the
partition epoch. `partition_reassignment.py` works out a reassignment's steps. Why a
partition changed (a fence, an AlterPartition, an election) is not in Kafka's record:
the controller keeps it beside the log for the events log (`partition_changes`).

With a KRaft quorum the controller's image is also a snapshot's records
(`snapshot_records`: a MetadataSnapshotRecord naming the metadata log offset, then
MetadataImage.write_records), and `load_snapshot` makes a controller that installed
another's snapshot continue the same offsets (kafkalab/server/quorum_meta_log_listener.py).

Sans-IO: methods take the time in ms and return results; the network layer
(and the labs, by hand) call them.

Invariants kept here:
- A leader is always in the ISR and always an unfenced broker (or there is no
  leader, -1). Every leader change bumps the leader epoch; every change of a
  partition bumps its partition epoch.
- Clean election picks from the ISR only; `unclean.leader.election.enable`
  allows an out-of-sync replica, whose ISR then starts again as just itself.
- The ISR never becomes empty: when its last member is fenced it stays, so the
  partition can come back with it without losing committed data.
- AlterPartition is accepted only from the current leader, at the current
  leader epoch and partition epoch, with an ISR that contains the leader and
  only unfenced replicas.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kafkalab.controller import configuration_control_manager as config_control
from kafkalab.controller.metadata_image import (
    SNAPSHOT_RECORD,
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicInfo,
)
from kafkalab.controller.metadata_record_serde import deserialize, serialize
from kafkalab.controller.partition_reassignment import (
    PartitionReassignmentReplicas,
    revert,
    validate_target,
)
from kafkalab.errors import Errors, KafkaError
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_manager import check_topic_name
from kafkalab.storage.unified_log import AppendOrigin, UnifiedLog

METADATA_TOPIC = "__cluster_metadata"
#: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (KAFKA-17870): more
#: partitions than this in one CreateTopics request is refused with POLICY_VIOLATION,
#: so a hostile num_partitions (2**31 - 1) never becomes records, files or memory.
MAX_PARTITIONS_PER_BATCH = 10_000
NO_LEADER = -1
#: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: producer ids a broker gets at a time.
PRODUCER_ID_BLOCK_SIZE = 1000
#: How many recent partition changes `partition_changes` keeps for the events log.
PARTITION_CHANGES_KEPT = 10_000


#: The messages Kafka's ApiError gives these election errors (their default messages).
_ELECTION_MESSAGES = {
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    Errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


def incarnation_uuid(incarnation_id: str) -> str:
    """A broker incarnation's id as a UUID string (Kafka's IncarnationId is a UUID): the
    UUID it is, or one derived from it (a by-hand registration's "inc-1"), the same for
    the same string."""
    try:
        return str(uuid.UUID(incarnation_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalab-incarnation:{incarnation_id}"))


def assign_replicas_rack_unaware(
    broker_ids: list[int], partitions: int, replication_factor: int, start_index: int, shift: int
) -> dict[int, list[int]]:
    """Kafka's rack-unaware assignment: the first replica of partition p goes
    round robin from a start index; the others follow at a shift that grows
    every time the partitions wrap around the brokers, so followers spread too."""
    n = len(broker_ids)
    brokers = sorted(broker_ids)
    out = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out


class QuorumController:
    def __init__(
        self,
        directory: str | Path,
        *,
        session_timeout_ms: int = 9000,
        unclean_leader_election_enable: bool = False,
        seed: int = 0,
        clock: Callable[[], int] | None = None,
    ) -> None:
        """`clock`: the wall time (ms) the metadata log's batches are stamped with
        (kafkalab's clock faults, kafkalab.server.clock); the real time when None.
        Session timers do not read it: they are given `now_ms` by the caller."""
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.unclean_default = unclean_leader_election_enable
        self.image = MetadataImage()
        self.brokers: dict[int, BrokerRegistration] = self.image.brokers
        self.topics: dict[str, TopicInfo] = self.image.topics
        self._rng = random.Random(seed)
        self.log = UnifiedLog(Path(directory) / f"{METADATA_TOPIC}-0", LogConfig(retention_ms=-1))
        #: Where the snapshot this log starts with ends (its log start offset if none):
        #: a fetch from inside it must start over from the log start (load_snapshot).
        self.snapshot_end_offset = self.log.log_start_offset
        #: offset -> a PartitionChangeRecord's partition as it left it: {"topic",
        #: "partition", "leader", "leader_epoch", "isr", "reason"} (the reason is
        #: kafkalab's note, not in Kafka's record; "" for records another controller
        #: wrote). What ControllerChanges puts in the events log; the newest
        #: PARTITION_CHANGES_KEPT are kept.
        self.partition_changes: dict[int, dict] = {}
        for _, record in self.records_since(0):
            self._replay(record)
        self.log.update_high_watermark(self.log.log_end_offset)
        #: On a KRaft quorum (kafkalab/server/quorum_meta_log_listener.py, the
        #: controller process always): called with every batch before it is written,
        #: to append it to Raft (it raises NOT_CONTROLLER on a controller that is not
        #: active); the high watermark of this log then moves only as Raft commits,
        #: and this log is not flushed (Raft's is). None: a QuorumController on its
        #: own (by hand, in tests and labs), whose every flushed write is committed.
        self.record_sink: Callable[[tuple[dict, ...]], None] | None = None

    # -- the metadata log --------------------------------------------------------------------

    def _write(self, *records: dict) -> int:
        """Append records as one batch, flush, then apply them (on a quorum, the
        record sink appends them to Raft's log first, which is flushed instead).
        Returns the offset of the first one (a broker's epoch is the offset of its
        registration)."""
        reasons = [r.pop("reason", "") for r in records]  # not a field of Kafka's record
        if self.record_sink is None:
            return self._append(records, flush=True, reasons=reasons)
        self.record_sink(records)  # durable in Raft's log before it goes on
        return self._append(records, flush=False, reasons=reasons)

    def apply_committed(self, records: list[dict] | tuple[dict, ...]) -> None:
        """Records the quorum committed that this controller did not write (another
        controller's, or its own before a restart): appended to this log and
        applied. Not flushed: Raft's log holds them, and this log is rebuilt from
        it at every start."""
        self._append(tuple(records), flush=False)

    def _append(
        self, records: tuple[dict, ...], flush: bool, reasons: list[str] | None = None
    ) -> int:
        now = self.clock() if self.clock is not None else None  # None: the real time
        batch = build_batch([SimpleRecord(serialize(r), timestamp=now) for r in records])
        info = self.log.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        if flush:  # a controller on its own: nothing is acknowledged that could be lost
            self.log.flush()
            self.log.update_high_watermark(self.log.log_end_offset)
        for i, record in enumerate(records):
            self._replay(record)
            if record["type"] == "PartitionChangeRecord":
                self._note_change(info.first_offset + i, record, reasons[i] if reasons else "")
        return info.first_offset

    def _note_change(self, offset: int, record: dict, reason: str) -> None:
        topic = self.image.topics_by_id[record["topic_id"]]
        part = topic.partitions[record["partition"]]
        self.partition_changes[offset] = {
            "topic": topic.name,
            "partition": record["partition"],
            "leader": part.leader,
            "leader_epoch": part.leader_epoch,
            "isr": list(part.isr),
            "reason": reason,
        }
        if len(self.partition_changes) > PARTITION_CHANGES_KEPT:
            del self.partition_changes[next(iter(self.partition_changes))]

    def records_since(self, offset: int) -> list[tuple[int, dict]]:
        """(offset, record) from `offset` on: what a broker fetches to catch up."""
        out: list[tuple[int, dict]] = []
        position = max(offset, self.log.log_start_offset)
        while position < self.log.log_end_offset:
            data = self.log.read(position, 1 << 20).read_bytes()
            got = [
                (r.offset, deserialize(r.value, r.offset))
                for batch in iter_batches(data)
                for r in batch.records
                if r.offset >= position
            ]
            if not got:
                break
            out += got
            position = got[-1][0] + 1
        return out

    @property
    def metadata_offset(self) -> int:
        return self.log.log_end_offset

    def _replay(self, r: dict) -> None:
        if r["type"] == SNAPSHOT_RECORD:
            self.snapshot_end_offset = r["end_offset"]
        self.image.replay(r)

    # -- snapshots (KIP-630) -----------------------------------------------------------------

    def snapshot_records(self) -> list[dict]:
        """The image as records, for a KRaft snapshot of this controller at its high
        watermark: a MetadataSnapshotRecord naming the metadata log offset the image
        is at, then the records that rebuild it (MetadataImage.write_records). Only
        committed state: refused while uncommitted records are applied."""
        if self.log.high_watermark != self.log.log_end_offset:
            raise KafkaError(
                Errors.NOT_CONTROLLER,
                "uncommitted records are applied: snapshot once they commit",
            )
        end = self.log.log_end_offset
        return [{"type": SNAPSHOT_RECORD, "end_offset": end}, *self.image.write_records()]

    def load_snapshot(self, records: list[dict]) -> None:
        """Become the state of a KRaft snapshot (snapshot_records of another
        controller, at its metadata log offset `end_offset`): this metadata log is
        emptied and holds the snapshot's records, placed so that the last one is at
        end_offset - 1. Every offset from end_offset on means what it means on every
        controller (the next record, a broker epoch); below it the log holds the image
        instead of its history, so a fetch from inside it starts over at the log start
        (whose MetadataSnapshotRecord empties the fetcher's image)."""
        if not records or records[0].get("type") != SNAPSHOT_RECORD:
            raise ValueError("a metadata snapshot starts with its MetadataSnapshotRecord")
        end = records[0]["end_offset"]
        start = end - len(records)
        if start < 0:
            raise ValueError(f"{len(records)} snapshot records do not fit below offset {end}")
        self.log.truncate_fully_and_start_at(start)
        batch = build_batch([SimpleRecord(serialize(r)) for r in records], base_offset=start)
        self.log.append_as_follower(batch)
        self.log.flush()
        self.log.update_high_watermark(end)
        self._rebuild()

    def _rebuild(self) -> None:
        self.image = MetadataImage()
        self.brokers = self.image.brokers
        self.topics = self.image.topics
        self.snapshot_end_offset = self.log.log_start_offset
        for _, record in self.records_since(0):
            self._replay(record)

    # -- brokers -----------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        incarnation_id: str,
        now_ms: int,
        endpoints: list[tuple[str, str, int]] | None = None,
    ) -> int:
        """A broker (re)starts: a new registration and a new broker epoch. It
        stays fenced until its first heartbeat (Kafka: registerBroker).
        `endpoints`: (listener name, host, port) of each of its listeners; the first is
        the one clients are told (`host` and `port` then are its). None: one, PLAINTEXT
        at `host`, `port`. `incarnation_id`: a UUID string (Kafka's IncarnationId is
        a UUID); any other string names the UUID `incarnation_uuid` derives from it."""
        incarnation_id = incarnation_uuid(incarnation_id)
        existing = self.brokers.get(broker_id)
        if existing and existing.incarnation_id == incarnation_id:
            return existing.broker_epoch
        epoch = self.metadata_offset
        listeners = [list(e) for e in endpoints] if endpoints else [["PLAINTEXT", host, port]]
        record = {
            "type": "RegisterBrokerRecord",
            "broker_id": broker_id,
            "host": listeners[0][1],
            "port": listeners[0][2],
            "incarnation_id": incarnation_id,
            "broker_epoch": epoch,
            "endpoints": listeners,
        }
        self._write(record)
        self.brokers[broker_id].last_heartbeat_ms = now_ms
        self._elect_where_needed(now_ms, f"broker {broker_id} re-registered")
        return epoch

    def _registered(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        """The broker's registration, if `broker_epoch` is its current one (else
        BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH, as Kafka's controller answers)."""
        broker = self.brokers.get(broker_id)
        if broker is None:
            raise KafkaError(Errors.BROKER_ID_NOT_REGISTERED, f"broker {broker_id}")
        if broker.broker_epoch != broker_epoch:
            raise KafkaError(
                Errors.STALE_BROKER_EPOCH,
                f"broker {broker_id} epoch {broker_epoch} != {broker.broker_epoch}",
            )
        return broker

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int) -> bool:
        """Returns whether the broker is fenced. The first heartbeat of a new
        registration unfences it; a stale epoch is refused."""
        broker = self._registered(broker_id, broker_epoch)
        broker.last_heartbeat_ms = now_ms
        if broker.fenced:
            self._write(
                {
                    "type": "UnfenceBrokerRecord",
                    "broker_id": broker_id,
                    "broker_epoch": broker.broker_epoch,
                }
            )
            self._elect_where_needed(now_ms, f"broker {broker_id} unfenced")
        return broker.fenced

    def note_contact(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat of this registration arrived (it will be handled later): the
        broker is alive now, whatever the controller is busy with (Kafka:
        BrokerHeartbeatTracker.updateContactTime). Only the handled heartbeat
        unfences a fenced broker."""
        broker = self.brokers.get(broker_id)
        if broker is not None and broker.broker_epoch == broker_epoch:
            broker.last_heartbeat_ms = max(broker.last_heartbeat_ms, now_ms)

    def tick(self, now_ms: int) -> list[int]:
        """Fence brokers silent for broker.session.timeout.ms; move their leaderships."""
        fenced = []
        for broker in self.brokers.values():
            if not broker.fenced and now_ms - broker.last_heartbeat_ms > self.session_timeout_ms:
                fenced.append(broker.broker_id)
                self.fence_broker(broker.broker_id, now_ms)
        return fenced

    def fence_broker(self, broker_id: int, now_ms: int) -> None:
        """Fence a broker (missed heartbeats, or a controlled shutdown): it leaves
        every ISR it is in (unless it is the last member) and loses its leaderships."""
        broker = self.brokers[broker_id]
        if broker.fenced:
            return
        self._write(
            {
                "type": "FenceBrokerRecord",
                "broker_id": broker_id,
                "broker_epoch": broker.broker_epoch,
            }
        )
        self._elect_where_needed(now_ms, f"broker {broker_id} fenced")

    def alive(self) -> set[int]:
        return {b.broker_id for b in self.brokers.values() if not b.fenced}

    # -- producer ids ------------------------------------------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """AllocateProducerIds (KIP-730): the next block of producer ids, (first id,
        how many), for a broker registered in `broker_epoch`. The block is a
        ProducerIdsRecord in the metadata log before it is handed out, so no
        controller restart and no broker that lost its disk ever gets it again
        (Kafka: ProducerIdControlManager.generateNextProducerId)."""
        self._registered(broker_id, broker_epoch)  # or raise
        start = self.image.next_producer_id
        self._write(
            {
                "type": "ProducerIdsRecord",
                "broker_id": broker_id,
                "broker_epoch": broker_epoch,
                "next_producer_id": start + PRODUCER_ID_BLOCK_SIZE,
            }
        )
        return start, PRODUCER_ID_BLOCK_SIZE

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> tuple[uuid.UUID, dict[int, list[int]]]:
        """Create a topic, its replicas placed by Kafka's rack-unaware assignment or,
        with `assignments` ({partition: [broker, ...]}), where the caller says; the
        first replica of each partition is its preferred leader. Returns the topic id
        (its TopicRecord's) and the replicas of each partition. With `validate_only`,
        checks everything (name, existence, partitions, replication factor against the
        live brokers, assignments, configs) and writes nothing; the id returned is then
        the one the topic would have had (Kafka's validate-only answer carries one too).
        Raises KafkaError with Kafka's code."""
        try:
            check_topic_name(name)  # a broker could not create its directory
        except ValueError as e:
            raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, str(e)) from None
        if name in self.topics:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        if max(partitions, len(assignments or ())) > MAX_PARTITIONS_PER_BATCH:
            raise KafkaError(
                Errors.POLICY_VIOLATION,
                f"Excessively large number of partitions per request ({partitions}; at most "
                f"{MAX_PARTITIONS_PER_BATCH}): create them in several requests",
            )
        alive = sorted(self.alive())
        if assignments:
            if sorted(assignments) != list(range(len(assignments))):
                raise KafkaError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"partitions {sorted(assignments)} must be numbered 0..{len(assignments) - 1}",
                )
            for p, replicas in assignments.items():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"partition {p}: replicas {replicas} must be distinct and not empty",
                    )
                if not set(replicas) <= set(alive):
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"partition {p}: replicas {replicas} include brokers that are not "
                        f"registered and unfenced (live brokers: {alive})",
                    )
        if partitions <= 0 and not assignments:
            raise KafkaError(Errors.INVALID_PARTITIONS, "number of partitions must be > 0")
        if not assignments and (replication_factor <= 0 or replication_factor > len(alive)):
            raise KafkaError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} with {len(alive)} live brokers",
            )
        if configs:
            LogConfig().with_overrides(configs)  # refuse bad configs before writing anything
        assignment = (
            {p: list(r) for p, r in assignments.items()}
            if assignments
            else (
                assign_replicas_rack_unaware(
                    alive,
                    partitions,
                    replication_factor,
                    self._rng.randrange(len(alive)),
                    self._rng.randrange(len(alive)),
                )
            )
        )
        topic_id = uuid.uuid4()
        if validate_only:
            return topic_id, assignment
        records = [{"type": "TopicRecord", "name": name, "topic_id": str(topic_id)}]
        records += config_control.config_records(
            config_control.ResourceType.TOPIC,
            name,
            {k: str(v) for k, v in (configs or {}).items()},
        )
        records += [
            {
                "type": "PartitionRecord",
                "topic_id": str(topic_id),
                "partition": p,
                "replicas": replicas,
                "isr": replicas,
                "leader": replicas[0],
                "leader_epoch": 0,
                "partition_epoch": 0,
            }
            for p, replicas in assignment.items()
        ]
        self._write(*records)
        return topic_id, assignment

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> list[dict]:
        """Grow topic `name` to `count` partitions (Kafka: ReplicationControlManager.
        createPartitions): one PartitionRecord a new partition, placed by the
        rack-unaware assignment or, with `assignments` (one replica list a new
        partition), where the caller says; each new partition has the topic's
        replication factor, its ISR is its unfenced replicas, its leader the first
        of them. Raises KafkaError with Kafka's code and message; with
        `validate_only`, checks and writes nothing. Returns the records written."""
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic named '{name}'")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(
                Errors.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not "
                "be an increase.",
            )
        if count == current:
            raise KafkaError(
                Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
            )
        additional = count - current
        if additional > MAX_PARTITIONS_PER_BATCH:
            raise KafkaError(
                Errors.POLICY_VIOLATION,
                f"Excessively large number of partitions per request ({additional}; at most "
                f"{MAX_PARTITIONS_PER_BATCH}): create them in several requests",
            )
        factor = len(topic.partitions[min(topic.partitions)].replicas)
        alive = self.alive()
        if assignments is not None:
            if len(assignments) != additional:
                raise KafkaError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {additional} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            placed = {}
            for i, replicas in enumerate(assignments):
                p = current + i
                if not replicas:
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes an empty replica list "
                        f"(partition {p}).",
                    )
                if len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment {replicas} of partition {p} names "
                        "a broker more than once.",
                    )
                unknown = [b for b in replicas if b not in self.brokers]
                if unknown:
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes broker {unknown[0]}, but "
                        "no such broker is registered.",
                    )
                if len(replicas) != factor:
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes a partition with "
                        f"{len(replicas)} replica(s), but this is not consistent with previous "
                        f"partitions, which have {factor} replica(s).",
                    )
                if not set(replicas) & alive:
                    raise KafkaError(
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                        f"All brokers specified in the manual partition assignment for "
                        f"partition {p} are fenced or in controlled shutdown.",
                    )
                placed[p] = list(replicas)
        else:
            if factor > len(alive):
                raise KafkaError(
                    Errors.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {factor} time(s): only {len(alive)} "
                    "broker(s) are unfenced.",
                )
            ordered = sorted(alive)
            fresh = assign_replicas_rack_unaware(
                ordered,
                additional,
                factor,
                self._rng.randrange(len(ordered)),
                self._rng.randrange(len(ordered)),
            )
            placed = {current + i: replicas for i, replicas in fresh.items()}
        records = []
        for p, replicas in placed.items():
            isr = [b for b in replicas if b in alive]
            records.append(
                {
                    "type": "PartitionRecord",
                    "topic_id": str(topic.topic_id),
                    "partition": p,
                    "replicas": replicas,
                    "isr": isr,
                    "leader": isr[0],
                    "leader_epoch": 0,
                    "partition_epoch": 0,
                }
            )
        if not validate_only:
            self._write(*records)
        return records

    def delete_topic(self, name: str) -> None:
        if name not in self.topics:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, name)
        self._write({"type": "RemoveTopicRecord", "topic_id": str(self.topics[name].topic_id)})

    # -- partitions --------------------------------------------------------------------------

    def _unclean_allowed(self, topic: TopicInfo) -> bool:
        """The topic's unclean.leader.election.enable, else the cluster-wide dynamic
        broker default, else the controller's own config."""
        value = topic.configs.get("unclean.leader.election.enable")
        if value is None:
            value = self.image.broker_configs.get("", {}).get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.lower() == "true"

    def _change(self, topic: str, partition: int, leader: int, isr: list[int]) -> dict | None:
        """The PartitionChangeRecord giving the partition this leader and ISR (None if it
        has them): `leader` only when it changes, which bumps the leader epoch."""
        info = self.topics[topic]
        part = info.partitions[partition]
        if leader == part.leader and isr == part.isr:
            return None
        record = {
            "type": "PartitionChangeRecord",
            "topic_id": str(info.topic_id),
            "partition": partition,
            "isr": isr,
        }
        if leader != part.leader:
            record["leader"] = leader
        return record

    def _elect_where_needed(self, now_ms: int, reason: str) -> list[dict]:
        """After a fence or unfence: drop fenced brokers from ISRs (keeping the last
        member), and elect a leader wherever the leader is gone or there is none."""
        alive = self.alive()
        records = []
        for topic in self.topics.values():
            for p, part in topic.partitions.items():
                isr = [b for b in part.isr if b in alive] or part.isr[-1:]
                leader = part.leader
                if leader not in alive or leader not in isr:
                    candidates = [r for r in part.replicas if r in isr and r in alive]
                    if candidates:
                        leader = candidates[0]
                    elif self._unclean_allowed(topic):
                        unclean = [r for r in part.replicas if r in alive]
                        leader = unclean[0] if unclean else NO_LEADER
                        if unclean:
                            isr = [leader]  # an unclean leader starts the ISR again
                    else:
                        leader = NO_LEADER
                change = self._change(topic.name, p, leader, isr)
                if change is not None:
                    change["reason"] = reason
                    records.append(change)
        if records:
            self._write(*records)
        return records

    def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: list[int],
    ) -> PartitionRegistration:
        """A leader asks to change its ISR (Kafka: AlterPartition). Raises KafkaError
        with Kafka's code when the request is stale or unsafe."""
        change = self._alter_partition_change(
            broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr
        )
        if change is not None:
            self._write(change)
        return self.topics[topic].partitions[partition]

    def alter_partitions(
        self, broker_id: int, broker_epoch: int, changes: list[tuple[str, int, int, int, list[int]]]
    ) -> list[PartitionRegistration | KafkaError]:
        """One AlterPartition request of many partitions, each (topic, partition,
        leader epoch, partition epoch, new ISR): every accepted change goes into
        the metadata log as one batch with one flush, as Kafka's controller
        commits one request's records together. Answers in order: the partition
        as changed, or the KafkaError that refused it."""
        pending: list[dict] = []
        named: set[tuple[str, int]] = set()
        outcomes: list[tuple[str, int] | KafkaError] = []
        for topic, partition, leader_epoch, partition_epoch, new_isr in changes:
            if (topic, partition) in named and pending:
                self._write(*pending)  # the same partition twice: judge it after the first
                pending, named = [], set()
            try:
                change = self._alter_partition_change(
                    broker_id,
                    broker_epoch,
                    topic,
                    partition,
                    leader_epoch,
                    partition_epoch,
                    new_isr,
                )
            except KafkaError as e:
                outcomes.append(e)
                continue
            if change is not None:
                pending.append(change)
                named.add((topic, partition))
            outcomes.append((topic, partition))
        if pending:
            self._write(*pending)
        return [
            o if isinstance(o, KafkaError) else self.topics[o[0]].partitions[o[1]] for o in outcomes
        ]

    def _alter_partition_change(
        self,
        broker_id: int,
        broker_epoch: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: list[int],
    ) -> dict | None:
        """The PartitionChangeRecord an AlterPartition asks for (None: nothing
        changes), or KafkaError with Kafka's code when it is stale or unsafe."""
        broker = self.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise KafkaError(Errors.STALE_BROKER_EPOCH, f"broker {broker_id}")
        info = self.topics.get(topic)
        if info is None or partition not in info.partitions:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        part = info.partitions[partition]
        if part.leader != broker_id:
            raise KafkaError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {broker_id} is not the leader of {topic}-{partition}",
            )
        if leader_epoch != part.leader_epoch:
            raise KafkaError(
                Errors.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} != {part.leader_epoch}"
            )
        if partition_epoch != part.partition_epoch:
            raise KafkaError(
                Errors.INVALID_UPDATE_VERSION,
                f"partition epoch {partition_epoch} != {part.partition_epoch}",
            )
        if broker_id not in new_isr or any(b not in part.replicas for b in new_isr):
            raise KafkaError(
                Errors.INVALID_REQUEST, f"ISR {new_isr} must hold the leader and only replicas"
            )
        ineligible = sorted(set(new_isr) - self.alive())
        if ineligible:
            # Kafka answers INELIGIBLE_REPLICA from AlterPartition v2, and
            # OPERATION_NOT_ATTEMPTED to v0-1, the versions spoken here.
            raise KafkaError(
                Errors.OPERATION_NOT_ATTEMPTED,
                f"ISR {new_isr} holds fenced brokers {ineligible}: not eligible",
            )
        change = self._complete_reassignment(topic, partition, sorted(new_isr))
        if change is None:
            change = self._change(topic, partition, part.leader, sorted(new_isr))
        if change is not None:
            change["reason"] = f"AlterPartition from broker {broker_id}" + (
                ": reassignment completed" if "replicas" in change else ""
            )
        return change

    def elect_preferred_leaders(self) -> list[dict]:
        """Give each partition back to its first replica when that one is alive and in
        sync (Kafka: preferred leader election)."""
        alive = self.alive()
        records = []
        for topic in self.topics.values():
            for p, part in topic.partitions.items():
                preferred = part.replicas[0]
                if part.leader != preferred and preferred in alive and preferred in part.isr:
                    change = self._change(topic.name, p, preferred, part.isr)
                    change["reason"] = "preferred leader election"
                    records.append(change)
        if records:
            self._write(*records)
        return records

    # -- leader elections and reassignments (ElectLeaders, AlterPartitionReassignments,
    # -- ListPartitionReassignments; Kafka: ReplicationControlManager) ------------------------

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> list[tuple[str, int, Errors, str | None]]:
        """ElectLeaders (KIP-460): `election_type` 0 is PREFERRED (the first replica, if
        it is alive and in the ISR), 1 is UNCLEAN (only where there is no leader: an
        ISR member if one is alive, else the first live replica, whose ISR then
        starts again as itself, whatever the topic's unclean.leader.election.enable;
        the operator chose it). `partitions` None: every partition, and those
        already led as asked are left out of the answer, as Kafka does. Answers
        (topic, partition, error, message) a partition; the elections are one batch."""
        if election_type not in (0, 1):
            raise KafkaError(Errors.INVALID_REQUEST, f"unknown election type {election_type}")
        every = partitions is None
        if every:
            partitions = [(t.name, p) for t in self.topics.values() for p in t.partitions]
        alive = self.alive()
        results: list[tuple[str, int, Errors, str | None]] = []
        records: list[dict] = []
        for name, p in partitions:
            topic = self.topics.get(name)
            if topic is None:
                results.append(
                    (name, p, Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
                )
                continue
            part = topic.partitions.get(p)
            if part is None:
                results.append(
                    (name, p, Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{p}")
                )
                continue
            change = None
            if election_type == 0:
                preferred = part.replicas[0]
                if part.leader == preferred:
                    error = Errors.ELECTION_NOT_NEEDED
                elif preferred in alive and preferred in part.isr:
                    change = self._change(name, p, preferred, part.isr)
                    error = Errors.NONE
                else:
                    error = Errors.PREFERRED_LEADER_NOT_AVAILABLE
            elif part.leader != NO_LEADER:
                error = Errors.ELECTION_NOT_NEEDED
            else:
                clean = [r for r in part.replicas if r in part.isr and r in alive]
                unclean = [r for r in part.replicas if r in alive]
                if clean:
                    change = self._change(name, p, clean[0], [b for b in part.isr if b in alive])
                elif unclean:
                    change = self._change(name, p, unclean[0], [unclean[0]])
                error = Errors.NONE if change else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
            if change is not None:
                change["reason"] = ("preferred" if election_type == 0 else "unclean") + (
                    " leader election (ElectLeaders)"
                )
                records.append(change)
            if not (every and error == Errors.ELECTION_NOT_NEEDED):
                message = None if error == Errors.NONE else _ELECTION_MESSAGES.get(error)
                results.append((name, p, error, message))
        if records:
            self._write(*records)
        return results

    def alter_partition_reassignments(
        self,
        reassignments: list[tuple[str, int, list[int] | None]],
        allow_replication_factor_change: bool = True,
    ) -> list[tuple[str, int, Errors, str | None]]:
        """AlterPartitionReassignments (KIP-455): (topic, partition, target replicas, or
        None to cancel) each. A reassignment starts with one PartitionChangeRecord
        (replicas, adding, removing), completes when its adding replicas are in the
        ISR (here at once if there are none, else on the AlterPartition that adds the
        last one) and a cancel reverts it. Answers (topic, partition, error, message)
        each, with Kafka's errors: UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, and
        INVALID_REPLICATION_FACTOR when the factor would change and that is not
        allowed (KIP-860)."""
        results: list[tuple[str, int, Errors, str | None]] = []
        for name, p, target in reassignments:
            try:
                record = self._reassignment_record(name, p, target, allow_replication_factor_change)
            except KafkaError as e:
                results.append((name, p, e.code, e.message))
                continue
            if record is not None:
                self._write(record)  # one at a time: a later entry sees this one done
            results.append((name, p, Errors.NONE, None))
        return results

    def list_partition_reassignments(
        self, partitions: list[tuple[str, list[int]]] | None = None
    ) -> dict[str, dict[int, PartitionRegistration]]:
        """The reassignments in progress, {topic: {partition: registration}}, of the named
        partitions (None: all of them); unknown topics and partitions are left out,
        as Kafka leaves them out."""
        out: dict[str, dict[int, PartitionRegistration]] = {}
        wanted = (
            [(t.name, list(t.partitions)) for t in self.topics.values()]
            if partitions is None
            else partitions
        )
        for name, indexes in wanted:
            topic = self.topics.get(name)
            for p in indexes if topic is not None else ():
                part = topic.partitions.get(p)
                if part is not None and (part.adding_replicas or part.removing_replicas):
                    out.setdefault(name, {})[p] = part
        return out

    def _reassignment_record(
        self, name: str, p: int, target: list[int] | None, allow_rf_change: bool
    ) -> dict | None:
        topic = self.topics.get(name)
        if topic is None or p not in topic.partitions:
            raise KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{p}."
            )
        part = topic.partitions[p]
        if target is None:
            if not (part.adding_replicas or part.removing_replicas):
                raise KafkaError(
                    Errors.NO_REASSIGNMENT_IN_PROGRESS,
                    f"No ongoing reassignment for partition {name}-{p}.",
                )
            replicas, isr = revert(part.replicas, part.isr, part.adding_replicas)
            if not isr:
                raise KafkaError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {name}:{p} because it would "
                    "require an unclean leader election.",
                )
            record = self._reassignment_change(name, p, replicas, isr, [], [])
            record["reason"] = "reassignment cancelled"
            return record
        validate_target(target, set(self.brokers))
        original = [r for r in part.replicas if r not in part.adding_replicas]
        if not allow_rf_change and len(target) != len(original):
            raise KafkaError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {len(original)} to {len(target)}",
            )
        moving = PartitionReassignmentReplicas.of(part.replicas, target)
        done = moving.completed(part.isr)
        if done is not None:
            record = self._reassignment_change(name, p, done[0], done[1], [], [])
            record["reason"] = "reassignment completed at once (its targets are in sync)"
        else:
            record = self._reassignment_change(
                name, p, moving.replicas, part.isr, moving.adding, moving.removing
            )
            record["reason"] = f"reassignment to {target} started"
        return record

    def _complete_reassignment(self, name: str, p: int, isr: list[int]) -> dict | None:
        """The record that completes the partition's reassignment with this ISR (Kafka:
        PartitionChangeBuilder.completeReassignmentIfNeeded), or None when none is in
        progress or it cannot complete yet."""
        part = self.topics[name].partitions[p]
        if not (part.adding_replicas or part.removing_replicas):
            return None
        moving = PartitionReassignmentReplicas(
            part.replicas, part.adding_replicas, part.removing_replicas
        )
        done = moving.completed(isr)
        if done is None:
            return None
        return self._reassignment_change(name, p, done[0], done[1], [], [])

    def _reassignment_change(
        self,
        name: str,
        p: int,
        replicas: list[int],
        isr: list[int],
        adding: list[int],
        removing: list[int],
    ) -> dict:
        """A PartitionChangeRecord that also sets replicas, adding and removing. The
        leader stays if it is still a replica in the ISR, else the first replica in
        the ISR that is alive leads; the leader epoch goes up when the leader changes
        or a replica leaves (Kafka: triggerLeaderEpochBumpIfNeeded), which fences a
        removed replica's fetches."""
        part = self.topics[name].partitions[p]
        alive = self.alive()
        leader = part.leader
        if leader not in replicas or leader not in isr:
            candidates = [r for r in replicas if r in isr and r in alive]
            leader = candidates[0] if candidates else NO_LEADER
        bump = leader != part.leader or any(r not in replicas for r in part.replicas)
        record = {
            "type": "PartitionChangeRecord",
            "topic_id": str(self.topics[name].topic_id),
            "partition": p,
            "isr": isr,
        }
        if bump:  # Kafka: the Leader field set, to the same leader too, bumps the epoch
            record["leader"] = leader
        if replicas != part.replicas:
            record["replicas"] = replicas
        if adding != part.adding_replicas:
            record["adding_replicas"] = adding
        if removing != part.removing_replicas:
            record["removing_replicas"] = removing
        return record

    # -- configs -----------------------------------------------------------------------------

    def alter_configs(
        self,
        resources: list[tuple[int, str, Any]],
        incremental: bool,
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """AlterConfigs (`incremental` False: each resource's configs as a dict, the
        whole new set) or IncrementalAlterConfigs (a list of (key, op, value)), one
        (resource type, name, configs) a resource. Each resource is judged alone
        (Kafka: ConfigurationControlManager); the accepted ones' ConfigRecords are
        written as one batch, unless `validate_only`. Answers, in order, None or the
        KafkaError that refused the resource. When unclean.leader.election.enable
        changes, a partition with no leader gets one now if it may."""
        records: list[dict] = []
        outcomes: list[KafkaError | None] = []
        for resource_type, name, configs in resources:
            try:
                current = self._configs_of(resource_type, name)
                if incremental:
                    changes = config_control.incremental_changes(
                        resource_type, name, current, configs
                    )
                else:
                    changes = config_control.legacy_changes(resource_type, name, current, configs)
                config_control.validate(
                    resource_type, name, current, changes, exists=name in self.topics
                )
            except KafkaError as e:
                outcomes.append(e)
                continue
            records += config_control.config_records(resource_type, name, changes)
            outcomes.append(None)
        if records and not validate_only:
            self._write(*records)
            if any(r["name"] == "unclean.leader.election.enable" for r in records):
                self._elect_where_needed(0, "unclean.leader.election.enable changed")
        return outcomes

    def _configs_of(self, resource_type: int, name: str) -> dict[str, str]:
        if resource_type == config_control.ResourceType.TOPIC:
            topic = self.topics.get(name)
            return dict(topic.configs) if topic is not None else {}
        return dict(self.image.broker_configs.get(name, {}))

    def describe(self) -> dict:
        """Brokers and partitions as plain data (for tables in the labs)."""
        return {
            "brokers": {b: asdict(r) for b, r in self.brokers.items()},
            "topics": {
                t: {p: asdict(r) for p, r in info.partitions.items()}
                for t, info in self.topics.items()
            },
        }

    def reset_to(self, offset: int) -> None:
        """Cut the metadata log at `offset` (all of it committed) and rebuild the
        image from what stays (a controller of a quorum at start: Raft replays the
        rest)."""
        self.log.truncate_to(offset)
        self.log.update_high_watermark(offset)
        self._rebuild()

    def revert_to_committed(self) -> None:
        """Drop the records past the high watermark and rebuild the image from the log
        (a controller that stops being active: its uncommitted writes may never
        commit; Kafka reverts to its last committed snapshot in renounce())."""
        self.log.truncate_to(self.log.high_watermark)
        self._rebuild()

    def close(self) -> None:
        self.log.close()
