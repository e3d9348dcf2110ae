"""The cluster's promises under partitions, elections and leader changes, on real
processes: ISR shrink and expand over cut links, min.insync.replicas, unclean
and preferred leader elections, and real clients (kafka-python, librdkafka's
consumer offset validation) across a leader kill."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import assert_nothing_found, controller_isr, judged, unseen_values, wait_until
from test_checked_histories import create, leader_of

from kafkalab.client import KafkaProducer
from kafkalab.cluster import LocalCluster
from kafkalab.cluster.history import History, check
from kafkalab.cluster.workload import ProducerWorkload, read_final_log
from kafkalab.errors import Errors, KafkaError


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(
        brokers=3,
        base_dir=tmp_path,
        session_timeout_ms=2000,
        broker_props={"replica.lag.time.max.ms": "2000"},
        controller_props={"leader.imbalance.check.interval.seconds": "1"},
    ) as c:
        yield c


def test_cut_links_shrink_the_isr_and_acks_all_refuses_below_min_insync_replicas(cluster):
    create(cluster, "cut", configs={"min.insync.replicas": "2"})
    producer = KafkaProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0}
    )
    leader_only = KafkaProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    try:
        assert producer.send("cut", b"before", partition=0).result(10).offset == 0
        cluster.cut_link(1, 2, both_ways=False)  # only 2 stops hearing 1
        time.sleep(0.5)
        # 2's fetches still reach 1, and with nothing new 2 counts as caught up.
        # A write 2 cannot receive makes it fall behind.
        assert leader_only.send("cut", b"one", partition=0).result(10).offset == 1
        wait_until(lambda: controller_isr(cluster, "cut") == [1, 3])
        assert producer.send("cut", b"two of three", partition=0).result(10).offset == 2
        cluster.cut_link(1, 3)  # both ways: 1 hears neither follower's fetches
        wait_until(lambda: controller_isr(cluster, "cut") == [1])
        # Followers learn ISR changes from the metadata log, not from the leader
        # they can no longer hear: every replica reports the controller's ISR.
        wait_until(lambda: [sorted(i) for i in cluster.describe("cut").ISR] == [[1]] * 3)
        with pytest.raises(KafkaError) as refused:
            producer.send("cut", b"alone", partition=0).result(10)
        assert refused.value.code == Errors.NOT_ENOUGH_REPLICAS
        cluster.heal_links()
        wait_until(lambda: controller_isr(cluster, "cut") == [1, 2, 3], timeout=30)
        wait_until(lambda: [sorted(i) for i in cluster.describe("cut").ISR] == [[1, 2, 3]] * 3)
        assert producer.send("cut", b"healed", partition=0).result(10).offset == 3
    finally:
        producer.close()
        leader_only.close()


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_leader_election_trades_committed_data_for_availability(cluster, unclean):
    create(cluster, "unclean", configs={"unclean.leader.election.enable": str(unclean).lower()})
    cluster.cut_link(1, 2)
    cluster.cut_link(1, 3)
    wait_until(lambda: controller_isr(cluster, "unclean") == [1])
    history = History()
    workload = ProducerWorkload(cluster.bootstrap_servers, "unclean", history, acks="all")
    for n in range(20):
        workload.send(n)  # committed with the ISR = [1]: min.insync.replicas is 1
    assert workload.producer.flush(30) == 0
    cluster.kill(1)
    cluster.heal_links()
    if not unclean:
        time.sleep(4)  # fenced; nobody in the ISR is alive: the partition is offline
        df = cluster.describe("unclean")
        assert set(df[df.status == "running"].leader) == {-1}
        cluster.restart(1)  # only the last in-sync replica can bring it back
        assert leader_of(cluster, "unclean") == 1
    else:
        assert leader_of(cluster, "unclean", not_in=[1]) in (2, 3)  # out of sync, yet leads
        cluster.restart(1)
    wait_until(lambda: controller_isr(cluster, "unclean") == [1, 2, 3], timeout=60)
    read_final_log(cluster.bootstrap_servers, "unclean", 0, history)
    verdict = check(history)
    new = judged(history)
    if unclean:
        assert len(verdict.lost) == 20, verdict.summary()  # the price of availability
        # The out-of-sync leader never had them, and nothing was written since: no
        # read went past them, so they are unseen (not lost-write).
        assert set(new.anomalies) == {"unseen"}, new.summary()
        assert unseen_values(new) == {b"v-%d" % n for n in range(20)}, new.summary()
    else:
        assert verdict.valid, verdict.summary()
        assert_nothing_found(new)


def test_preferred_leader_election_gives_leadership_back(cluster):
    create(cluster, "preferred")
    assert leader_of(cluster, "preferred") == 1
    cluster.kill(1)
    assert leader_of(cluster, "preferred", not_in=[1]) == 2
    cluster.restart(1)
    wait_until(lambda: 1 in controller_isr(cluster, "preferred"), timeout=30)
    # leader.imbalance.check.interval.seconds=1: the controller moves it back.
    wait_until(lambda: leader_of(cluster, "preferred") == 1, timeout=30)
    assert "preferred leader election" in "".join(cluster.controller.output)


def test_a_restarted_broker_listens_where_it_did_before(cluster):
    """As a Kafka broker with its listeners in its config: a client's bootstrap
    list stays good through kills and restarts. (With a new port each time, a
    librdkafka client that re-bootstraps after losing its connections finds none
    of the brokers it was given and waits forever: the exactly-once fault test
    hung so.)"""
    before = {b: cluster.brokers[b].bootstrap_servers for b in (1, 2, 3)}
    cluster.kill(2)
    cluster.start_broker(2)
    cluster.restart(3)  # SIGTERM, then started again
    assert {b: cluster.brokers[b].bootstrap_servers for b in (1, 2, 3)} == before
    for b in (2, 3):
        admin = AdminClient({"bootstrap.servers": before[b]})
        assert sorted(admin.list_topics(timeout=30).brokers) == [1, 2, 3]


def test_kafka_python_produces_and_consumes_across_a_leader_kill(cluster):
    from kafka import KafkaConsumer as PyConsumer
    from kafka import KafkaProducer as PyProducer
    from kafka import TopicPartition as PyTopicPartition

    create(cluster, "kpy")
    producer = PyProducer(
        bootstrap_servers=cluster.bootstrap_servers.split(","),
        acks="all",
        retries=20,
        retry_backoff_ms=200,
        max_in_flight_requests_per_connection=1,
        request_timeout_ms=5000,
    )
    try:
        acked = [producer.send("kpy", b"a-%d" % i, partition=0).get(10).offset for i in range(50)]
        cluster.kill(1)
        acked += [producer.send("kpy", b"b-%d" % i, partition=0).get(30).offset for i in range(50)]
    finally:
        producer.close(5)
    assert acked == list(range(100))
    consumer = PyConsumer(
        bootstrap_servers=[cluster.brokers[2].bootstrap_servers], consumer_timeout_ms=10000
    )
    try:
        tp = PyTopicPartition("kpy", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 100:
                break
    finally:
        consumer.close()
    assert values == [b"a-%d" % i for i in range(50)] + [b"b-%d" % i for i in range(50)]


def test_librdkafka_validates_its_position_with_the_new_leader_after_a_leader_change(cluster):
    """KIP-320: after a leader change a consumer asks the new leader, with
    OffsetForLeaderEpoch, whether its position is still on the log; then goes on."""
    create(cluster, "validate")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("validate", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "v",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    try:
        consumer.assign([TopicPartition("validate", 0, 0)])
        got = []
        while len(got) < 100:
            m = consumer.poll(1)
            if m is not None and m.error() is None:
                got.append(m.value())
        cluster.kill(1)
        assert leader_of(cluster, "validate", not_in=[1]) == 2
        for i in range(100, 150):
            producer.produce("validate", value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        deadline = time.time() + 60
        while len(got) < 150 and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == [b"%d" % i for i in range(150)]
    validations = [
        line for line in cluster.brokers[2].output if "consumer offset validation" in line
    ]
    assert validations, "librdkafka did not send OffsetForLeaderEpoch to the new leader"
    assert "validate-0" in validations[0]


def test_list_offsets_is_answered_by_the_leader_only_as_in_kafka(cluster):
    """ListOffsets on a follower: a consumer (replica id -1) gets NOT_LEADER_OR_FOLLOWER
    there, as from Kafka (it must ask the leader); a debugging request (replica id -2)
    gets the follower's own view. The leader answers with the current leader epoch
    for "latest", and a request fenced by an older epoch is refused (KIP-320)."""
    from kafkalab.client.network_client import BrokerConnection
    from kafkalab.protocol.api_keys import ApiKeys

    create(cluster, "offsets")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for n in range(5):
        producer.produce("offsets", b"%d" % n, partition=0)
    assert producer.flush(30) == 0
    wait_until(lambda: list(cluster.describe("offsets").HW) == [5, 5, 5])
    leader = leader_of(cluster, "offsets")
    epoch = int(cluster.describe("offsets").set_index("broker").loc[leader, "leader epoch"])
    follower = next(b for b in (1, 2, 3) if b != leader)

    def ask(broker, replica_id, timestamp, current_epoch=-1):
        host, port = cluster.brokers[broker].bootstrap_servers.rsplit(":", 1)
        conn = BrokerConnection(host, int(port))
        try:
            body = conn.request(
                ApiKeys.LIST_OFFSETS,
                {
                    "replica_id": replica_id,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": "offsets",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "current_leader_epoch": current_epoch,
                                    "timestamp": timestamp,
                                }
                            ],
                        }
                    ],
                },
            )
        finally:
            conn.close()
        return body["topics"][0]["partitions"][0]

    latest = ask(leader, -1, -1)
    assert (latest["error_code"], latest["offset"], latest["leader_epoch"]) == (0, 5, epoch)
    earliest = ask(leader, -1, -2)
    assert (earliest["error_code"], earliest["offset"]) == (0, 0)
    assert ask(follower, -1, -1)["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
    assert ask(follower, -1, -2)["error_code"] == Errors.NOT_LEADER_OR_FOLLOWER
    debug = ask(follower, -2, -1)
    assert (debug["error_code"], debug["offset"]) == (0, 5)
    if epoch > 0:
        assert ask(leader, -1, -1, epoch - 1)["error_code"] == Errors.FENCED_LEADER_EPOCH
    assert ask(leader, -1, -1, epoch + 1)["error_code"] == Errors.UNKNOWN_LEADER_EPOCH


def test_a_topic_of_many_partitions_does_not_get_busy_brokers_fenced(tmp_path):
    """Found by the soak: the first consumer group creates __consumer_offsets, 50
    partitions of 3 replicas, and each broker opened its share in one go, without
    letting its heartbeats out; with the labs' 500 ms session timeout the
    controller fenced all three brokers, and every leadership moved while the
    soak's load began. The broker now yields between partitions."""
    from kafkalab.cluster.failover import LABS_FAILOVER

    with LocalCluster(brokers=3, base_dir=tmp_path, **LABS_FAILOVER) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        new = NewTopic("wide", 50, 3)  # as many as __consumer_offsets
        for future in admin.create_topics([new]).values():
            future.result(60)

        def all_led() -> bool:
            rows = cluster.describe("wide")
            return len(rows[(rows.role == "leader") & (rows.status == "running")]) == 50

        wait_until(all_led, 60)
        cluster.wait_fully_replicated(60)
        fenced = [line for line in cluster.controller.output if "fenced brokers" in line]
        assert fenced == [], "".join(fenced)
