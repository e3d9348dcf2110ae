"""MetadataImage: the cluster as the metadata log describes it, built by replaying records.

Kafka's classes: org.apache.kafka.image.MetadataImage / MetadataDelta. The
controller and every broker hold one and apply the same records in the same
order, so they agree on brokers, topics, leaders, ISRs and epochs at every
offset of the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    incarnation_id: str
    broker_epoch: int
    fenced: bool = True
    last_heartbeat_ms: int = 0


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class TopicInfo:
    name: str
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.offset = -1  # the last record applied

    def replay(self, r: dict) -> None:
        kind = r["type"]
        if kind == "RegisterBrokerRecord":
            self.brokers[r["broker_id"]] = BrokerRegistration(
                r["broker_id"], r["host"], r["port"], r["incarnation_id"], r["broker_epoch"]
            )
        elif kind == "UnfenceBrokerRecord":
            self.brokers[r["broker_id"]].fenced = False
        elif kind == "FenceBrokerRecord":
            self.brokers[r["broker_id"]].fenced = True
        elif kind == "TopicRecord":
            self.topics[r["name"]] = TopicInfo(r["name"])
        elif kind == "ConfigRecord":
            self.topics[r["topic"]].configs[r["name"]] = r["value"]
        elif kind == "PartitionRecord":
            self.topics[r["topic"]].partitions[r["partition"]] = PartitionRegistration(
                r["replicas"], r["isr"], r["leader"], r["leader_epoch"], r["partition_epoch"]
            )
        elif kind == "PartitionChangeRecord":
            part = self.topics[r["topic"]].partitions[r["partition"]]
            part.isr, part.leader = r["isr"], r["leader"]
            part.leader_epoch, part.partition_epoch = r["leader_epoch"], r["partition_epoch"]
        elif kind == "RemoveTopicRecord":
            self.topics.pop(r["name"], None)
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")
