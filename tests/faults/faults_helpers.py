"""Helpers shared by the fault tests: the partition as clients and the controller see it."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.records import iter_batches
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir


def partition_state(bs: str, topic: str):
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
    if topic not in md.topics or 0 not in md.topics[topic].partitions:
        return -1, []  # the broker has not seen the topic's records yet
    p = md.topics[topic].partitions[0]
    return p.leader, sorted(p.isrs)


def controller_isr_history(cluster, topic: str) -> list[list[int]]:
    """Every ISR the controller wrote for the topic's partitions, oldest first (read
    from its metadata log files, which brokers may not have applied yet)."""
    history: list[list[int]] = []
    ids: set[str] = set()  # the records after a TopicRecord name the topic by its id
    for path in sorted(metadata_image_log_dir(cluster.base_dir / "controller").glob("*.log")):
        for batch in iter_batches(path.read_bytes()):
            for r in batch.records:
                record = deserialize(r.value)
                if record["type"] == "TopicRecord" and record["name"] == topic:
                    ids.add(record["topic_id"])
                elif record.get("topic_id") in ids and record["type"] in (
                    "PartitionRecord",
                    "PartitionChangeRecord",
                ):
                    history.append(sorted(record["isr"]))
    return history


def controller_isr(cluster, topic: str) -> list[int]:
    """The ISR as the controller last wrote it."""
    history = controller_isr_history(cluster, topic)
    return history[-1] if history else []


def wait_until(predicate, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def judged(history):
    """The Jepsen-grade checker's verdict (kafkalab.cluster.checker) on a history of
    kafkalab.cluster.history, through its adapter."""
    from kafkalab.cluster import checker

    return checker.check(*checker.from_history(history))


def assert_nothing_found(verdict) -> None:
    """Not one anomaly, not even an allowed one: these readers assign their
    partitions and read forward (no poll-skip, no nonmonotonic-poll), and every
    acknowledged record was polled by the end (unseen 0)."""
    assert not verdict.anomalies, verdict.summary()
    assert verdict.valid, verdict.summary()
    assert verdict.unseen_series, "no op the checker could judge"
    assert not any(verdict.unseen_series[-1][1].values()), verdict.unseen_series[-1]


def unseen_values(verdict) -> set[bytes]:
    """Every value the checker found acknowledged and never polled by the end."""
    return {v for case in verdict.anomalies.get("unseen", []) for v in case["values"]}
