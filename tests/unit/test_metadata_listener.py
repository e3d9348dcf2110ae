"""BrokerMetadataListener applies what new metadata records change (a
MetadataDelta), not the whole image: a fence or an ISR change of one partition
costs one partition on every broker, not every partition of the cluster."""

from __future__ import annotations

import asyncio
import json

import pytest

from kafkalab.controller.metadata_image import MetadataImage, name_based_topic_id
from kafkalab.controller.metadata_record_serde import JsonMetadataRecordError
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.partition import Role
from kafkalab.replication.replica_manager import ReplicaManager
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
    def __init__(self) -> None:
        self.added: list[tuple[int, tuple[str, int]]] = []

    def add(self, leader, follower) -> None:
        self.added.append((leader, (follower.topic, follower.partition)))

    def remove(self, tp) -> None:
        pass


def topic_id(name: str) -> str:
    return str(name_based_topic_id(name))


def topic(name: str, partitions: int, leaders: list[int]) -> list[dict]:
    out = [{"type": "TopicRecord", "name": name, "topic_id": topic_id(name)}]
    for p in range(partitions):
        leader = leaders[p % len(leaders)]
        replicas = [leader] + [b for b in (1, 2, 3) if b != leader]
        out.append(
            {
                "type": "PartitionRecord",
                "topic_id": topic_id(name),
                "partition": p,
                "replicas": replicas,
                "isr": replicas,
                "leader": leader,
                "leader_epoch": 0,
                "partition_epoch": 0,
            }
        )
    return out


def listener(tmp_path):
    rm = ReplicaManager(LogManager(tmp_path / "logs", LogConfig()), Timers(), broker_id=1)
    fetchers = Fetchers()
    events = EventLog(tmp_path, "broker-1")
    return BrokerMetadataListener(1, None, rm, fetchers, events), rm, fetchers


def apply(lst: BrokerMetadataListener, records: list[dict]) -> None:
    delta = MetadataDelta()
    for r in records:
        delta.replay(r, lst.image)
        lst.image.replay(r)
    asyncio.run(lst._publish(delta))


def topic_config(name: str, key: str, value: str) -> dict:
    return {
        "type": "ConfigRecord",
        "resource_type": 2,
        "resource_name": name,
        "name": key,
        "value": value,
    }


def test_a_delta_names_the_partitions_its_records_change():
    image = MetadataImage()
    for r in topic("a", 3, [1]) + topic("c", 1, [1]):
        image.replay(r)
    delta = MetadataDelta()
    for r in topic("a", 3, [1])[1:] + [
        topic_config("b", "retention.ms", "1"),
        {"type": "RemoveTopicRecord", "topic_id": topic_id("c")},  # named by id
        {"type": "FenceBrokerRecord", "broker_id": 2, "broker_epoch": 0},
    ]:
        delta.replay(r, image)
    assert delta.partitions_named == {("a", 0), ("a", 1), ("a", 2)}
    assert delta.config_topics == {"b"} and delta.removed_topics == {"c"}


def test_one_partition_changed_is_one_partition_looked_at(tmp_path):
    lst, rm, fetchers = listener(tmp_path)
    apply(lst, topic("a", 12, [1, 2]) + topic("b", 12, [2, 3]))
    assert len(rm.partitions) == 24
    assert sum(p.role == Role.LEADER for p in rm.partitions.values()) == 6
    assert len(fetchers.added) == 18

    looked_at = []
    partition = rm.partition
    rm.partition = lambda tp: looked_at.append(tp) or partition(tp)
    change = {  # a new leader: the leader epoch goes from 0 to 1
        "type": "PartitionChangeRecord",
        "topic_id": topic_id("b"),
        "partition": 7,
        "leader": 1,
        "isr": [1, 3],
    }
    apply(lst, [change])
    assert looked_at == [("b", 7)]
    assert rm.partitions[("b", 7)].role == Role.LEADER
    assert rm.partitions[("b", 7)].leader_epoch == 1

    looked_at.clear()
    apply(lst, [topic_config("a", "retention.ms", "9")])
    assert looked_at == []  # the topic's logs take it live, no partition is looked at
    assert rm.partitions[("a", 0)].log.config.retention_ms == 9

    apply(lst, [{"type": "RemoveTopicRecord", "topic_id": topic_id("a")}])
    assert sorted({tp[0] for tp in rm.partitions}) == ["b"]


def test_stop_ends_the_fetch_loop_even_when_a_fetch_swallows_the_cancellation(tmp_path):
    """Python 3.11's asyncio.wait_for returns the answer instead of raising when the
    answer arrives just as the waiting task is cancelled: the listener's loop then
    fetched on and a broker's stop hung until its supervisor killed it (30 s, in one
    stop of six). stop() now also tells the loop to end."""
    lst, _, _ = listener(tmp_path)
    fetches = []

    class Controller:
        def close(self) -> None:
            pass

    async def catch_up(long_poll_ms: int) -> None:  # an answer racing the cancellation
        fetches.append(long_poll_ms)
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            return  # what wait_for did: the cancellation is lost

    async def main() -> None:
        lst.controller, lst.catch_up = Controller(), catch_up
        lst.start()
        await asyncio.sleep(0.05)
        async with asyncio.timeout(10):  # a hang fails the test instead of blocking it
            await lst.stop()

    asyncio.run(main())
    assert fetches  # it was fetching when stopped


def test_a_json_metadata_record_ends_the_fetch_loop_with_what_to_do(tmp_path):
    """A controller serving a metadata log from before Kafka's binary records (issue
    25): the broker does not fetch it again and again, its listener stops with the
    typed error that says to re-create the cluster directory."""
    lst, rm, _ = listener(tmp_path)
    old = {"type": "TopicRecord", "name": "a", "topic_id": topic_id("a")}
    records = build_batch([SimpleRecord(json.dumps(old).encode())])
    fetches = []

    class Controller:
        async def request(self, api_key, version, body):
            fetches.append(body)
            partition = {
                "error_code": 0,
                "high_watermark": 1,
                "log_start_offset": 0,
                "records": records,
            }
            return {"responses": [{"partitions": [partition]}]}

    lst.controller = Controller()
    with pytest.raises(JsonMetadataRecordError, match="Re-create the cluster directory"):
        asyncio.run(lst.run())
    assert len(fetches) == 1 and lst.image.topics == {} and not rm.partitions
