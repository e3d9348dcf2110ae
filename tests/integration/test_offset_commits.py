"""OffsetCommit as Kafka answers it, with librdkafka (issue 28's findings):

- a commit to a topic (or partition) the cluster does not have answers
  UNKNOWN_TOPIC_OR_PARTITION for it and writes nothing to __consumer_offsets
  (Kafka's KafkaApis answers those itself; the coordinator sees only the rest);
- AdminClient.alter_consumer_group_offsets (an OffsetCommit with generation -1 and
  no member) answers the same per partition: refused for a topic or partition the
  cluster does not have, stored for the others, and list_consumer_group_offsets
  reads the stored ones back;
- librdkafka's KIP-848 consumer (`group.protocol=consumer`) commits outside an
  assignment with generation -1 and a member id it made itself: Kafka accepts that
  while the group is Empty (ClassicGroup.validateOffsetCommit), so a manual commit
  works.
"""

from __future__ import annotations

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client import Admin
from kafkalab.coordinator.group.coordinator_records import OFFSETS_TOPIC, OffsetKey, read_key
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import iter_batches
from kafkalab.server.broker import BrokerThread


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("broker")


@pytest.fixture(scope="module")
def bootstrap(log_dir):
    with BrokerThread(
        {
            "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1",
            "auto.create.topics.enable": "false",
        }
    ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic("known", 2, 1)]).values():
            future.result(10)
        yield broker.bootstrap_servers


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **extra}
    )


def test_a_commit_to_a_topic_that_does_not_exist_is_refused_per_partition(bootstrap):
    partition = {"committed_offset": 7, "committed_metadata": ""}
    with Admin(bootstrap) as admin:
        answer = admin.coordinator("commits-raw").request(
            ApiKeys.OFFSET_COMMIT,
            {
                "group_id": "commits-raw",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {"name": "known", "partitions": [{"partition_index": i, **partition} for i in (0, 5)]},
                    {"name": "nowhere", "partitions": [{"partition_index": 0, **partition}]},
                ],
            },
        )  # fmt: skip
    errors = {
        (t["name"], p["partition_index"]): Errors(p["error_code"])
        for t in answer["topics"]
        for p in t["partitions"]
    }
    assert errors == {
        ("known", 0): Errors.NONE,
        ("known", 5): Errors.UNKNOWN_TOPIC_OR_PARTITION,  # no such partition
        ("nowhere", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,  # no such topic
    }
    # librdkafka, as a user meets it: the commit fails (it reports the error on every
    # partition of the request), the partition that exists is stored, "nowhere" is not.
    results = []
    c = consumer(bootstrap, "commits-unknown", on_commit=lambda err, tps: results.append(err))
    try:
        c.commit(offsets=[TopicPartition("known", 0, 7), TopicPartition("nowhere", 0, 7)])
        while not results:
            c.poll(0.1)
        committed = c.committed(
            [TopicPartition("known", 0), TopicPartition("nowhere", 0)], timeout=10
        )
    finally:
        c.close()
    assert results[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert [tp.offset for tp in committed] == [7, OFFSET_INVALID]


def test_a_kip848_consumer_commits_outside_an_assignment(bootstrap):
    c = consumer(bootstrap, "commits-kip848", **{"group.protocol": "consumer"})
    try:
        c.assign([TopicPartition("known", 1)])  # no subscription: no member in the group
        c.commit(offsets=[TopicPartition("known", 1, 11)], asynchronous=False)
        (back,) = c.committed([TopicPartition("known", 1)], timeout=10)
    finally:
        c.close()
    assert back.offset == 11


def offset_keys_on_disk(log_dir, group: str) -> set[tuple[str, int]]:
    """The (topic, partition) of every offset commit record of `group` in the files of
    __consumer_offsets (one partition here)."""
    keys = set()
    for segment in sorted((log_dir / f"{OFFSETS_TOPIC}-0").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            for record in batch.records:
                key = read_key(record.key)
                if isinstance(key, OffsetKey) and key.group == group:
                    keys.add((key.topic, key.partition))
    return keys


def test_admin_alters_offsets_of_the_partitions_that_exist(bootstrap, log_dir):
    group = "alter-offsets"
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def alter(*partitions: TopicPartition) -> dict:
        request = ConsumerGroupTopicPartitions(group, list(partitions))
        answered = admin.alter_consumer_group_offsets([request])[group].result(10)
        return {
            (tp.topic, tp.partition): tp.error.code() if tp.error else None
            for tp in answered.topic_partitions
        }

    assert alter(TopicPartition("nowhere", 0, 5)) == {
        ("nowhere", 0): KafkaError.UNKNOWN_TOPIC_OR_PART
    }
    assert alter(
        TopicPartition("known", 0, 5),
        TopicPartition("known", 1, 6),
        TopicPartition("known", 9, 6),  # the topic has 2 partitions
        TopicPartition("nowhere", 1, 6),
    ) == {
        ("known", 0): None,
        ("known", 1): None,
        ("known", 9): KafkaError.UNKNOWN_TOPIC_OR_PART,
        ("nowhere", 1): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    asked = ConsumerGroupTopicPartitions(
        group,
        [TopicPartition("known", 0), TopicPartition("known", 1), TopicPartition("nowhere", 0)],
    )
    listed = admin.list_consumer_group_offsets([asked])[group].result(10)
    assert [(tp.topic, tp.partition, tp.offset) for tp in listed.topic_partitions] == [
        ("known", 0, 5),
        ("known", 1, 6),
        ("nowhere", 0, OFFSET_INVALID),
    ]
    # written to __consumer_offsets: the two partitions that exist, nothing else
    assert offset_keys_on_disk(log_dir, group) == {("known", 0), ("known", 1)}
