"""MetadataImage: the cluster as the metadata log describes it, built by replaying records.

Kafka's classes: org.apache.kafka.image.MetadataImage / MetadataDelta. The
controller and every broker hold one and apply the same records in the same
order, so they agree on brokers, topics, leaders, ISRs and epochs at every
offset of the log.

Topic ids: the controller gives every topic a random UUID when it creates it
(Kafka: Uuid.randomUuid() in ReplicationControlManager), written in its
TopicRecord, so a topic deleted and created again under the same name is a
different topic. Clients of the KIP-848 protocol and Metadata v10+ name topics
by id, and so do the records after a topic's TopicRecord, as in Kafka:
PartitionRecord, PartitionChangeRecord and RemoveTopicRecord carry its `topic_id`,
and replay finds the topic by it (`topics_by_id`, Kafka: TopicsImage.topicsById).
A TopicRecord built by hand without an id gets `name_based_topic_id(name)`.

The records are dicts (kafkalab/controller/metadata_record_serde.py turns them into
Kafka's binary records and back, and lists their fields).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

#: kafkalab's marker (not a Kafka record type: apiKey 10000 on disk, far outside
#: Kafka's range; dump-log names it KAFKALAB_METADATA_SNAPSHOT_RECORD): the records
#: after it, up to its `end_offset`, are a snapshot of the image at that offset
#: (MetadataImage.write_records), written where a controller loaded a KRaft snapshot
#: into its metadata log; replaying it empties the image, so the records after it
#: rebuild it whole. (Kafka's snapshots open with a SnapshotHeader control record, but
#: it names no offset, and this marker sits in the metadata-image log, not a snapshot.)
SNAPSHOT_RECORD = "MetadataSnapshotRecord"
#: ConfigRecord resource types (Kafka: ConfigResource.Type).
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


@dataclass
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    incarnation_id: str
    broker_epoch: int
    fenced: bool = True
    last_heartbeat_ms: int = 0
    #: Every listener it registered, by name (Kafka: RegisterBrokerRecord.EndPoints);
    #: `host`/`port` are the first, the one clients are told.
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def endpoint(self, listener: str) -> tuple[str, int]:
        """Where it listens on `listener` (a registration that named none: host, port)."""
        return self.endpoints.get(listener, (self.host, self.port))


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    #: A reassignment in progress (KIP-455): the replicas joining and leaving;
    #: `replicas` holds both meanwhile. Empty: none in progress.
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


def name_based_topic_id(name: str) -> uuid.UUID:
    """A topic id derived from the name: for topics whose creation recorded no id (a
    standalone broker's, whose topics are only directories, and metadata logs written
    before ids). Stable across restarts; not Kafka's (Kafka's ids are random)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalab-topic:{name}")


@dataclass
class TopicInfo:
    name: str
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        if self.topic_id is None:
            self.topic_id = name_based_topic_id(self.name)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicInfo] = {}
        #: The same topics by id (a UUID string), as the records name them.
        self.topics_by_id: dict[str, TopicInfo] = {}
        self.offset = -1  # the last record applied
        #: The first producer id no broker has been given yet (Kafka:
        #: ProducerIdControlManager's nextProducerBlock, from ProducerIdsRecord).
        self.next_producer_id = 0
        #: Dynamic broker configs, by resource name: a broker's id ("1"), or "" for
        #: the cluster-wide default (ConfigRecords of resource type BROKER).
        self.broker_configs: dict[str, dict[str, str]] = {}

    def write_records(self) -> list[dict]:
        """The image as the records that rebuild it, replayed into an empty image
        (Kafka: MetadataImage.write(ImageWriter), what a snapshot holds): each broker's
        registration (its broker epoch kept, Fenced as it is now), each topic with its configs
        and its partitions as they are now (a reassignment in progress in its
        PartitionRecord's AddingReplicas and RemovingReplicas, as Kafka writes it), the
        brokers' dynamic configs, the next producer id."""
        out: list[dict] = []
        for b in self.brokers.values():
            endpoints = [[n, h, p] for n, (h, p) in b.endpoints.items()]
            record: dict = {
                "type": "RegisterBrokerRecord",
                "broker_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "incarnation_id": b.incarnation_id,
                "broker_epoch": b.broker_epoch,
                "endpoints": endpoints or [["PLAINTEXT", b.host, b.port]],
            }
            if not b.fenced:
                record["fenced"] = False
            out.append(record)
        for t in self.topics.values():
            topic_id = str(t.topic_id)
            out.append({"type": "TopicRecord", "name": t.name, "topic_id": topic_id})
            out += [
                {
                    "type": "ConfigRecord",
                    "resource_type": TOPIC_RESOURCE,
                    "resource_name": t.name,
                    "name": k,
                    "value": v,
                }
                for k, v in t.configs.items()
            ]
            for p, part in t.partitions.items():
                record = {
                    "type": "PartitionRecord",
                    "topic_id": topic_id,
                    "partition": p,
                    "replicas": list(part.replicas),
                    "isr": list(part.isr),
                    "leader": part.leader,
                    "leader_epoch": part.leader_epoch,
                    "partition_epoch": part.partition_epoch,
                }
                if part.adding_replicas:
                    record["adding_replicas"] = list(part.adding_replicas)
                if part.removing_replicas:
                    record["removing_replicas"] = list(part.removing_replicas)
                out.append(record)
        for name, configs in self.broker_configs.items():
            out += [
                {
                    "type": "ConfigRecord",
                    "resource_type": BROKER_RESOURCE,
                    "resource_name": name,
                    "name": k,
                    "value": v,
                }
                for k, v in configs.items()
            ]
        if self.next_producer_id:
            out.append(
                {
                    "type": "ProducerIdsRecord",
                    "broker_id": -1,
                    "broker_epoch": -1,
                    "next_producer_id": self.next_producer_id,
                }
            )
        return out

    def topic_name(self, topic_id: str) -> str | None:
        """The name of the topic with this id (a UUID string), None if there is none."""
        topic = self.topics_by_id.get(topic_id)
        return None if topic is None else topic.name

    def replay(self, r: dict) -> None:
        kind = r["type"]
        if kind == SNAPSHOT_RECORD:
            # what follows, up to r["end_offset"], is the whole image: start empty
            # (in place: a QuorumController holds these dicts)
            self.brokers.clear()
            self.topics.clear()
            self.topics_by_id.clear()
            self.broker_configs.clear()
            self.next_producer_id = 0
        elif kind == "RegisterBrokerRecord":
            self.brokers[r["broker_id"]] = BrokerRegistration(
                r["broker_id"],
                r["host"],
                r["port"],
                r["incarnation_id"],
                r["broker_epoch"],
                # Kafka's RegisterBrokerRecord.Fenced (default true): a snapshot writes
                # an unfenced broker as one record
                fenced=r.get("fenced", True),
                endpoints={name: (host, port) for name, host, port in r.get("endpoints", ())},
            )
        elif kind == "UnfenceBrokerRecord":
            self.brokers[r["broker_id"]].fenced = False
        elif kind == "FenceBrokerRecord":
            self.brokers[r["broker_id"]].fenced = True
        elif kind == "TopicRecord":
            topic_id = r.get("topic_id")
            topic = TopicInfo(r["name"], topic_id=uuid.UUID(topic_id) if topic_id else None)
            self.topics[r["name"]] = topic
            self.topics_by_id[str(topic.topic_id)] = topic
        elif kind == "ConfigRecord":
            self._replay_config(r)
        elif kind == "PartitionRecord":
            self.topics_by_id[r["topic_id"]].partitions[r["partition"]] = PartitionRegistration(
                r["replicas"],
                r["isr"],
                r["leader"],
                r["leader_epoch"],
                r["partition_epoch"],
                adding_replicas=r.get("adding_replicas", []),
                removing_replicas=r.get("removing_replicas", []),
            )
        elif kind == "PartitionChangeRecord":
            # Kafka's PartitionRegistration.merge: the record holds only what changes;
            # the partition epoch goes up by one, the leader epoch by one when the
            # record names a leader (the same one too: a replica left, KIP-455)
            part = self.topics_by_id[r["topic_id"]].partitions[r["partition"]]
            part.partition_epoch += 1
            if "leader" in r:
                part.leader = r["leader"]
                part.leader_epoch += 1
            if "isr" in r:
                part.isr = r["isr"]
            if "replicas" in r:
                part.replicas = r["replicas"]
            if "adding_replicas" in r:
                part.adding_replicas = r["adding_replicas"]
            if "removing_replicas" in r:
                part.removing_replicas = r["removing_replicas"]
        elif kind == "RemoveTopicRecord":
            topic = self.topics_by_id.pop(r["topic_id"], None)
            if topic is not None:
                self.topics.pop(topic.name, None)
        elif kind == "ProducerIdsRecord":
            self.next_producer_id = r["next_producer_id"]
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")

    def _replay_config(self, r: dict) -> None:
        """A ConfigRecord (Kafka's fields): resource_type 2 a topic, 4 a broker (its
        id, or "" for the cluster-wide default); a None value deletes the key."""
        if r["resource_type"] == TOPIC_RESOURCE:
            topic = self.topics.get(r["resource_name"])
            if topic is None:
                return  # deleted since
            configs = topic.configs
        else:
            configs = self.broker_configs.setdefault(r["resource_name"], {})
        if r["value"] is None:
            configs.pop(r["name"], None)
        else:
            configs[r["name"]] = r["value"]
