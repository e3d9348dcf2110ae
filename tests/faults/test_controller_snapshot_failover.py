"""Three controllers and three brokers as processes, with snapshots every few KB
(metadata.log.max.record.bytes.between.snapshots): a controller killed while the
others snapshot and drop their Raft log comes back through FetchSnapshot and loads
the leader's snapshot; made the active controller, it serves the brokers: a topic is
created and written with acks=all, and a broker restarted reads its metadata log from
the start, where the snapshot's image begins, and sees the same topics."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import partition_state, wait_until

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_QUORUM
from kafkalab.server.quorum_meta_log_listener import METADATA_IMAGE_DIR


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        controllers=3,
        base_dir=tmp_path,
        session_timeout_ms=6000,
        controller_props={
            **LABS_QUORUM,
            # Kafka's binary records: about 75 bytes a topic created, 20 deleted
            "metadata.log.max.record.bytes.between.snapshots": "1000",
            "metadata.log.segment.bytes": "4096",
        },
    ) as c:
        yield c


def _caught_up(cluster):
    q = cluster.describe_quorum(timeout_s=20)
    return q if all(r.log_end_offset == q.high_watermark for r in q.current_voters) else None


def _image_log_start(cluster, controller_id: int) -> int:
    d = cluster.base_dir / f"controller-{controller_id}" / METADATA_IMAGE_DIR
    return min(int(p.stem) for p in (d / "__cluster_metadata-0").glob("*.log"))


def _create(admin: AdminClient, topic: NewTopic) -> None:
    """CreateTopics, asked again if the broker's connection to a controller that was
    restarted breaks under it (the broker answers that request with a closed
    connection: kafkalab's controller channel, not what this test is about)."""
    for attempt in range(5):
        try:
            admin.create_topics([topic])[topic.topic].result(30)
            return
        except KafkaException as e:
            code = e.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if code != KafkaError._TRANSPORT or attempt == 4:
                raise
            time.sleep(0.5)


def _topics(bootstrap: str) -> set[str]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {t for t in md.topics if not t.startswith("__")}


def _make_active(cluster, admin: AdminClient, wanted: int) -> None:
    """Make voter `wanted` the active controller by Raft's election rule, not by the
    chance of whose timeout fires first: a voter grants no (pre-)vote to a log behind
    its own. The third voter is paused (SIGSTOP) while the active one writes two
    records, each committed by the active one and `wanted` alone; then the active one
    is killed and the third resumed. The third may hold the first record (the answer
    to a fetch it had parked at the leader) but never the second, so `wanted` refuses
    it every vote and it grants `wanted` its own: `wanted` alone can win. A majority
    is up at every step but the election; the killed voter comes back and follows."""
    active = cluster.active_controller(timeout_s=20)
    if active == wanted:
        return
    third = next(c for c in cluster.controllers if c not in (active, wanted))
    cluster.pause(third)
    try:
        admin.create_topics([NewTopic("behind", 1, 1)])["behind"].result(30)
        admin.delete_topics(["behind"])["behind"].result(30)
        cluster.kill(active)
    finally:
        cluster.resume(third)
    wait_until(lambda: cluster.active_controller(timeout_s=20) == wanted, timeout=30)
    cluster.restart(active)


def test_a_controller_back_by_fetch_snapshot_leads_the_brokers(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    leader = wait_until(lambda: _caught_up(cluster), timeout=30).leader_id
    down = next(c for c in cluster.controllers if c != leader)
    cluster.kill(down)

    names = [f"t{i}" for i in range(40)]
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)
    doomed = names[::2]
    for future in admin.delete_topics(doomed).values():
        future.result(30)
    kept = set(names) - set(doomed)
    wait_until(lambda: _topics(cluster.bootstrap_servers) == kept, timeout=30)

    cluster.restart(down)
    wait_until(lambda: _caught_up(cluster), timeout=30)
    assert _image_log_start(cluster, down) > 0  # it loaded the leader's snapshot
    assert _image_log_start(cluster, leader) == 0  # the others keep their history

    _make_active(cluster, admin, down)
    wait_until(lambda: _caught_up(cluster), timeout=30)
    assert cluster.active_controller(timeout_s=20) == down

    _create(admin, NewTopic("after", 1, 3))
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "after")[1] == [1, 2, 3])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    acked: list[bytes] = []
    for i in range(50):
        producer.produce(
            "after",
            value=b"%d" % i,
            on_delivery=lambda err, msg: err is None and acked.append(msg.value()),
        )
    assert producer.flush(60) == 0 and len(acked) == 50

    # a broker restarted reads the active controller's metadata log from its start
    cluster.restart(1)
    one = cluster.brokers[1].bootstrap_servers
    wait_until(lambda: _topics(one) == kept | {"after"}, timeout=30)
    consumer = Consumer({"bootstrap.servers": one, "group.id": "check"})
    try:
        consumer.assign([TopicPartition("after", 0, 0)])
        got: list[bytes] = []
        deadline = time.time() + 30
        while len(got) < 50 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == acked
