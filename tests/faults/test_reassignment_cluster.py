"""Leader elections and partition reassignment on the three-broker cluster, as an
operator does them during and after a failure, through real clients: confluent-kafka's
AdminClient (elect_leaders), kafka-python's KafkaAdminClient
(alter_partition_reassignments, list_partition_reassignments) and the `kafkalab
leader-election` / `kafkalab reassign-partitions` verbs.

- a preferred election gives leadership back to a restarted first replica;
- with the ISR gone, an unclean election chosen by hand brings an out-of-sync replica
  up, and the history checker shows its cost (what only the old leader had is lost);
- a replica moved away from the leader's broker under an acks=all load loses nothing;
- a reassignment whose new replica's broker is down waits (listed, shown as in
  progress), survives the kill of the old leader and a controller restart, and
  completes once the broker is back; the replica left behind is deleted when its broker returns."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import ElectionType as ConfluentElectionType
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import (
    assert_nothing_found,
    controller_isr,
    judged,
    partition_state,
    unseen_values,
    wait_until,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.errors import KafkaConnectionError

from kafkalab.cli import main
from kafkalab.cluster import LocalCluster
from kafkalab.cluster.cli import reassignments_in_progress
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import (
    ProducerWorkload,
    read_all,
    read_final_log,
    record_replicas,
    wait_for_replicas_in_sync,
)
from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.errors import Errors
from kafkalab.records import iter_batches
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir


def create(cluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[replicas])]
    ).values():
        future.result(30)
    wait_until(lambda: controller_isr(cluster, topic) == sorted(replicas))
    wait_until(lambda: partition_state(cluster.bootstrap_servers, topic)[0] == replicas[0])


def controller_partition(cluster, topic: str, partition: int = 0):
    """The partition as the controller's metadata log says now (its files replayed)."""
    image = MetadataImage()
    for path in sorted(metadata_image_log_dir(cluster.base_dir / "controller").glob("*.log")):
        for batch in iter_batches(path.read_bytes()):
            for r in batch.records:
                image.replay(deserialize(r.value))
    return image.topics[topic].partitions[partition]


def replicas_in_metadata(bs: str, topic: str) -> list[int]:
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=10)
    return list(md.topics[topic].partitions[0].replicas)


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def elect(admin: AdminClient, kind, topic: str) -> int:
    """The election's error code for topic-0 (0: done)."""
    tp = ConfluentTopicPartition(topic, 0)
    result = admin.elect_leaders(kind, [tp]).result(30)
    error = result[tp]  # None, or a KafkaError
    return 0 if error is None else error.code()


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "10000"},
    ) as c:
        yield c


def test_preferred_and_unclean_leader_elections_by_hand(cluster, capsys):
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    create(cluster, "pref", [1, 2, 3])
    create(cluster, "lossy", [1, 2])

    # Preferred: broker 1 restarts (its leaderships move away), comes back in sync,
    # and an election gives it its partition back.
    cluster.restart(1)
    wait_until(lambda: controller_isr(cluster, "pref") == [1, 2, 3], timeout=60)
    assert partition_state(bs, "pref")[0] in (2, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert elect(admin, ConfluentElectionType.PREFERRED, "pref") == 0
    wait_until(lambda: partition_state(cluster.bootstrap_servers, "pref")[0] == 1)
    assert elect(admin, ConfluentElectionType.PREFERRED, "pref") == Errors.ELECTION_NOT_NEEDED
    code, out = cli(
        capsys, "leader-election", "-b", cluster.bootstrap_servers,
        "--election-type", "preferred", "--topic", "pref", "--partition", "0",
    )  # fmt: skip
    assert code == 0 and "Valid replica already elected for partitions pref-0" in out

    # Unclean: the follower dies, the leader acknowledges records only it has, then
    # dies too; no ISR member is left.
    history = History()
    workload = ProducerWorkload(cluster.bootstrap_servers, "lossy", history, acks="all")
    for n in range(50):
        workload.send(n)
    assert workload.producer.flush(30) == 0
    cluster.kill(2)
    wait_until(lambda: controller_isr(cluster, "lossy") == [1], timeout=30)
    for n in range(50, 100):
        workload.send(n)
    assert workload.producer.flush(30) == 0
    cluster.kill(1)
    wait_until(lambda: controller_partition(cluster, "lossy").leader == -1, timeout=30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert elect(admin, ConfluentElectionType.UNCLEAN, "lossy") == (
        Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    cluster.restart(2)  # out of sync: the topic does not allow it to lead by itself
    time.sleep(1)
    assert controller_partition(cluster, "lossy").leader == -1
    code, out = cli(
        capsys, "leader-election", "-b", cluster.bootstrap_servers,
        "--election-type", "unclean", "--topic", "lossy", "--partition", "0",
    )  # fmt: skip
    assert code == 0, out
    assert "Successfully completed leader election (UNCLEAN) for partitions lossy-0" in out
    part = controller_partition(cluster, "lossy")
    assert (part.leader, part.isr) == (2, [2])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert elect(admin, ConfluentElectionType.UNCLEAN, "lossy") == Errors.ELECTION_NOT_NEEDED
    workload.producer.flush(5)
    # Its cost: the 50 records only broker 1 had are gone, and the checker says so.
    read_final_log(cluster.bootstrap_servers, "lossy", 0, history)
    verdict = check(history)
    assert not verdict.valid
    assert {item["value"] for item in verdict.lost} == {b"v-%d" % n for n in range(50, 100)}
    new = judged(history)  # nothing written since: unseen, no read went past them
    assert set(new.anomalies) == {"unseen"}, new.summary()
    assert unseen_values(new) == {b"v-%d" % n for n in range(50, 100)}, new.summary()


def test_a_replica_moved_away_under_acks_all_load_loses_nothing(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "10000", "min.insync.replicas": "2"},
    ) as cluster:
        create(cluster, "moving", [1, 2])
        kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        tp = KafkaPythonTopicPartition("moving", 0)
        history = History()
        try:
            with ProducerWorkload(cluster.bootstrap_servers, "moving", history, rate=300):
                time.sleep(2)
                # Off broker 1, the leader, onto broker 3: the leadership moves too.
                assert kp.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
                wait_until(lambda: kp.list_partition_reassignments() == {}, timeout=60)
                wait_until(
                    lambda: replicas_in_metadata(cluster.bootstrap_servers, "moving") == [2, 3]
                )
                time.sleep(2)
        finally:
            kp.close()
        part = controller_partition(cluster, "moving")
        assert (part.replicas, sorted(part.isr), part.leader) == ([2, 3], [2, 3], 2)
        wait_until(lambda: not (cluster.broker_dir(1) / "moving-0").exists())
        wait_for_replicas_in_sync(cluster, "moving", replicas=2)
        read_final_log(cluster.bootstrap_servers, "moving", 0, history)
        record_replicas(cluster, "moving", 0, history)
        verdict = check(history)
        assert verdict.valid, verdict.summary()
        assert verdict.acknowledged > 500
        assert sorted(history.replicas[("moving", 0)]) == [2, 3]
        assert_nothing_found(judged(history))


def test_a_reassignment_interrupted_by_broker_kills_completes_after_the_restart(
    cluster, capsys, tmp_path
):
    create(cluster, "interrupted", [1, 2])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for n in range(100):
        producer.produce("interrupted", value=b"r%d" % n, partition=0)
    assert producer.flush(30) == 0

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "interrupted"}], "version": 1}))
    code, out = cli(
        capsys, "reassign-partitions", "-b", cluster.bootstrap_servers, "--generate",
        "--topics-to-move-json-file", str(topics), "--broker-list", "2,3",
    )  # fmt: skip
    assert code == 0, out
    current, proposed = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    assert current["partitions"][0]["replicas"] == [1, 2]
    assert sorted(proposed["partitions"][0]["replicas"]) == [2, 3]

    cluster.kill(3)  # the broker the replica moves to is down
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "interrupted", "partition": 0, "replicas": [2, 3]}],
            }
        )
    )
    bs = cluster.bootstrap_servers
    code, out = cli(capsys, "reassign-partitions", "-b", bs, "--execute",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert code == 0, out
    assert "Successfully started partition reassignments for interrupted-0" in out
    assert '"replicas":[1,2]' in out  # the rollback plan
    code, out = cli(capsys, "reassign-partitions", "-b", bs, "--verify",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert "Reassignment of partition interrupted-0 is still in progress." in out
    tp = KafkaPythonTopicPartition("interrupted", 0)

    def listed():
        # kafka-python asks the controller id Metadata names: until broker 3's session
        # expires it may still be named (as a KRaft broker names any unfenced broker),
        # and a dead broker refuses the connection: ask again
        try:  # the brokers running now (a killed one refuses connections)
            kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        except KafkaConnectionError:
            return None
        try:
            return kp.list_partition_reassignments()
        except KafkaConnectionError:
            return None
        finally:
            kp.close()

    assert wait_until(listed, 30) == {
        tp: {"replicas": [2, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}
    }
    # `kafkalab cluster status` shows it from the controller's log.
    assert reassignments_in_progress(cluster.base_dir / "controller") == [
        ("interrupted", 0, [2, 3, 1], [3], [1])
    ]
    code, out = cli(capsys, "reassign-partitions", "-b", bs, "--list")
    assert "interrupted-0: replicas: 2,3,1. adding: 3. removing: 1." in out

    # The leader, a replica on its way out, dies too: broker 2 leads, still moving.
    cluster.kill(1)
    wait_until(lambda: controller_partition(cluster, "interrupted").leader == 2, timeout=30)
    assert controller_partition(cluster, "interrupted").adding_replicas == [3]

    # The controller restarts (on its address, the only one brokers know): the move
    # is in its metadata log, so it is still there.
    controller = cluster.controller
    address = controller.bootstrap_servers
    controller.kill()
    controller.props["listeners"] = f"CONTROLLER://{address}"
    controller.start()
    moving = wait_until(listed, timeout=30)  # a broker may still be reconnecting to it
    assert moving[tp]["adding_replicas"] == [3]

    cluster.restart(3)  # it fetches from 2, joins the ISR, and the move completes
    wait_until(
        lambda: controller_partition(cluster, "interrupted").adding_replicas == [], timeout=60
    )
    part = controller_partition(cluster, "interrupted")
    assert (part.replicas, sorted(part.isr), part.removing_replicas) == ([2, 3], [2, 3], [])
    bs = cluster.bootstrap_servers
    code, out = cli(capsys, "reassign-partitions", "-b", bs, "--verify",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert "Reassignment of partition interrupted-0 is completed." in out
    code, out = cli(capsys, "reassign-partitions", "-b", bs, "--cancel",
                    "--reassignment-json-file", str(plan))  # fmt: skip
    assert "None of the specified partition reassignments are active: interrupted-0" in out
    assert reassignments_in_progress(cluster.base_dir / "controller") == []

    cluster.restart(1)  # no longer a replica: its log goes
    wait_until(lambda: not (cluster.broker_dir(1) / "interrupted-0").exists(), timeout=30)
    assert read_all(cluster.bootstrap_servers, "interrupted", 1) == [b"r%d" % n for n in range(100)]
