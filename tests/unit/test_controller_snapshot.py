"""The QuorumController's image as the records of a KRaft snapshot (KIP-630):
snapshot_records rebuilds the same image, load_snapshot puts them in the metadata log so
that every offset from the snapshot's end on means what it means on the controller that
wrote it (the next record, a broker epoch), and a broker's image replayed from such a
log (from its start, whose MetadataSnapshotRecord empties it) is the controller's."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from kafkalab.controller.metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from kafkalab.controller.quorum_controller import QuorumController


def _busy_controller(path) -> QuorumController:
    c = QuorumController(path, session_timeout_ms=1000)
    epochs = {
        b: c.register_broker(b, "127.0.0.1", 9090 + b, f"inc-{b}", 0, [("PLAINTEXT", "h", b)])
        for b in (1, 2, 3, 4)
    }
    for b, e in epochs.items():
        c.heartbeat(b, e, 0)
    c.create_topic("orders", 3, 3, configs={"cleanup.policy": "compact"})
    c.create_topic("gone", 2, 2)
    c.create_topic("moving", 1, 2, assignments={0: [1, 2]})
    c.alter_configs([(TOPIC_RESOURCE, "orders", {"retention.ms": "1000"})], incremental=False)
    c.alter_configs([(BROKER_RESOURCE, "2", {"log.retention.ms": "5000"})], incremental=False)
    c.allocate_producer_ids(1, epochs[1])
    c.delete_topic("gone")
    c.fence_broker(4, 10)
    c.alter_partition_reassignments([("moving", 0, [3, 4])])  # in progress: 4 is fenced
    assert c.topics["moving"].partitions[0].adding_replicas
    return c


def _state(c: QuorumController | MetadataImage) -> dict:
    image = c.image if isinstance(c, QuorumController) else c
    brokers = {b: {**asdict(r), "last_heartbeat_ms": 0} for b, r in image.brokers.items()}
    topics = {
        t: (str(i.topic_id), dict(i.configs), {p: asdict(r) for p, r in i.partitions.items()})
        for t, i in image.topics.items()
    }
    return {
        "brokers": brokers,
        "topics": topics,
        "broker_configs": image.broker_configs,
        "next_producer_id": image.next_producer_id,
    }


def test_snapshot_records_rebuild_the_same_image(tmp_path):
    c = _busy_controller(tmp_path / "a")
    records = c.snapshot_records()
    assert records[0] == {"type": "MetadataSnapshotRecord", "end_offset": c.metadata_offset}
    assert len(records) < c.metadata_offset  # the image is smaller than its history
    image = MetadataImage()
    for r in records:
        image.replay(r)
    assert _state(image) == _state(c)
    assert list(image.topics) == list(c.topics)


def test_a_loaded_snapshot_continues_the_same_offsets_and_broker_epochs(tmp_path):
    c = _busy_controller(tmp_path / "a")
    other = QuorumController(tmp_path / "b")
    other.register_broker(9, "x", 1, "stale", 0)  # whatever it had goes
    end, records = c.metadata_offset, c.snapshot_records()
    other.load_snapshot(records)
    assert _state(other) == _state(c)
    assert other.metadata_offset == c.metadata_offset
    assert other.snapshot_end_offset == c.metadata_offset
    assert other.log.high_watermark == other.log.log_end_offset
    # the next registration gets the same broker epoch on both
    assert other.register_broker(5, "h", 1, "inc-5", 0) == c.register_broker(5, "h", 1, "inc-5", 0)
    assert other.records_since(c.metadata_offset - 1)[-1] == c.records_since(0)[-1]
    # a restart reads the snapshot back from the log
    other.close()
    again = QuorumController(tmp_path / "b")
    assert _state(again) == _state(c) and again.snapshot_end_offset == end
    assert again.log.log_start_offset == end - len(records)
    # and a broker replaying it from the log start, over a stale image, gets the same
    stale = MetadataImage()
    stale.replay({"type": "TopicRecord", "name": "ghost"})
    for _offset, r in again.records_since(0):
        stale.replay(r)
    assert _state(stale) == _state(c)
    again.close()


def test_a_snapshot_is_refused_while_uncommitted_records_are_applied(tmp_path):
    c = _busy_controller(tmp_path / "a")
    c.record_sink = lambda records: None  # as on an active controller of a quorum
    c.create_topic("pending", 1, 1)
    with pytest.raises(Exception, match="uncommitted"):
        c.snapshot_records()
