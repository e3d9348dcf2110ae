"""BrokerMetadataListener and ConfigRecords: a topic's new overrides and the
brokers' dynamic configs reach the logs the broker has at once; a topic deleted
and created again under its name does not keep the old overrides."""

from __future__ import annotations

import asyncio

from kafkalab.controller.metadata_image import name_based_topic_id
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalab.server.events import EventLog
from kafkalab.server.metadata_listener import BrokerMetadataListener, MetadataDelta
from kafkalab.storage import LogConfig, LogManager


class Timers:
    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        return self.Handle()


class Fetchers:
    def add(self, leader, follower) -> None:
        pass

    def remove(self, tp) -> None:
        pass


def topic_id(name: str) -> str:
    return str(name_based_topic_id(name))


def led_here(name: str) -> list[dict]:
    return [
        {"type": "TopicRecord", "name": name, "topic_id": topic_id(name)},
        {
            "type": "PartitionRecord",
            "topic_id": topic_id(name),
            "partition": 0,
            "replicas": [1],
            "isr": [1],
            "leader": 1,
            "leader_epoch": 0,
            "partition_epoch": 0,
        },
    ]


def config(resource_type: int, name: str, key: str, value: str | None) -> dict:
    return {
        "type": "ConfigRecord",
        "resource_type": resource_type,
        "resource_name": name,
        "name": key,
        "value": value,
    }


def listener(tmp_path):
    rm = ReplicaManager(LogManager(tmp_path / "logs", LogConfig()), Timers(), broker_id=1)
    lst = BrokerMetadataListener(1, None, rm, Fetchers(), EventLog(tmp_path, "broker-1"))
    dynamic = DynamicBrokerConfig(1, {})
    lst.on_broker_configs = lambda configs: rm.log_manager.update_default_config(
        dynamic.update(configs)
    )
    return lst, rm


def apply(lst: BrokerMetadataListener, records: list[dict]) -> None:
    delta = MetadataDelta()
    for r in records:
        delta.replay(r, lst.image)
        lst.image.replay(r)
    asyncio.run(lst._publish(delta))


def test_topic_overrides_reach_the_log_and_their_deletion_too(tmp_path):
    lst, rm = listener(tmp_path)
    apply(lst, led_here("t"))
    log = rm.partition(("t", 0)).log
    apply(lst, [config(2, "t", "min.insync.replicas", "2"), config(2, "t", "retention.ms", "5")])
    assert (log.config.min_insync_replicas, log.config.retention_ms) == (2, 5)
    apply(lst, [config(2, "t", "retention.ms", None)])
    assert log.config.retention_ms == LogConfig().retention_ms
    assert log.config.min_insync_replicas == 2


def test_broker_defaults_reach_every_log_without_its_own(tmp_path):
    lst, rm = listener(tmp_path)
    apply(lst, led_here("plain") + led_here("own") + [config(2, "own", "retention.ms", "7")])
    apply(
        lst,
        [config(4, "", "log.retention.ms", "60000"), config(4, "1", "log.segment.bytes", "999")],
    )
    plain, own = rm.partition(("plain", 0)).log, rm.partition(("own", 0)).log
    assert (plain.config.retention_ms, plain.config.segment_bytes) == (60000, 999)
    assert (own.config.retention_ms, own.config.segment_bytes) == (7, 999)
    apply(lst, [config(4, "2", "log.segment.bytes", "5000")])  # another broker's: not ours
    assert plain.config.segment_bytes == 999


def test_a_topic_created_again_starts_from_the_defaults(tmp_path):
    lst, rm = listener(tmp_path)
    apply(lst, led_here("t") + [config(2, "t", "min.insync.replicas", "2")])
    assert rm.partition(("t", 0)).log.config.min_insync_replicas == 2
    apply(lst, [{"type": "RemoveTopicRecord", "topic_id": topic_id("t")}])
    apply(lst, led_here("t"))
    assert rm.partition(("t", 0)).log.config.min_insync_replicas == 1
