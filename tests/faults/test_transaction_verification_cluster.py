"""Transaction verification (KIP-890 part 1) on the three-broker cluster, where the
partition's leader and the transactional id's coordinator are different brokers:
the leader asks the coordinator's broker (AddPartitionsToTxn v4, verify_only, on the
BROKER listener). librdkafka's transactions commit as before; a late write after an
abort is refused on the leader and the partition's LSO is not held back."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client.network_client import BrokerConnection
from kafkalab.cluster import LocalCluster
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch

pytestmark = pytest.mark.timeout(300)
PROPS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.partition.verification.enable": "true",
}
RETRIABLE = {
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.NOT_COORDINATOR,
    Errors.CONCURRENT_TRANSACTIONS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(
        brokers=3, base_dir=tmp_path_factory.mktemp("verify-cluster"), broker_props=PROPS
    ) as c:
        yield c


def connect(address: str) -> BrokerConnection:
    host, port = address.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout_s=30)


def until_done(call):
    deadline = time.monotonic() + 60
    while True:
        answer = call()
        if Errors(answer["error_code"]) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def coordinator_of(cluster, tid: str) -> int:
    conn = connect(cluster.brokers[1].bootstrap_servers)
    try:
        found = until_done(
            lambda: conn._call(ApiKeys.FIND_COORDINATOR, 1, {"key": tid, "key_type": 1})[1]
        )
    finally:
        conn.close()
    assert found["error_code"] == 0, found
    return found["node_id"]


def topic_led_by(cluster, leader: int) -> str:
    """A one-partition topic, replicated on all three, led by `leader`."""
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    others = [b for b in (1, 2, 3) if b != leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, 1, replica_assignment=[[leader, *others]])
    for f in admin.create_topics([new]).values():
        f.result(30)
    time.sleep(1)  # the leader learns of its partition from the metadata log
    return topic


def test_a_transaction_commits_when_its_leader_asks_another_broker(cluster):
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, tid)
    topic = topic_led_by(cluster, next(b for b in (1, 2, 3) if b != coordinator))
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid})
    p.init_transactions(60)
    for n in range(3):
        p.begin_transaction()
        p.produce(topic, value=b"v%d" % n, partition=0)
        p.commit_transaction(60)
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    c.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert seen == [b"v0", b"v1", b"v2"]


def test_a_late_write_after_an_abort_is_refused_by_a_leader_on_another_broker(cluster):
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    coordinator = coordinator_of(cluster, tid)
    leader = next(b for b in (1, 2, 3) if b != coordinator)
    topic = topic_led_by(cluster, leader)
    to_coordinator = connect(cluster.brokers[coordinator].bootstrap_servers)
    to_leader = connect(cluster.brokers[leader].bootstrap_servers)
    try:
        init = until_done(
            lambda: to_coordinator._call(
                ApiKeys.INIT_PRODUCER_ID,
                1,
                {"transactional_id": tid, "transaction_timeout_ms": 60_000},
            )[1]
        )
        assert init["error_code"] == 0, init
        pid, epoch = init["producer_id"], init["producer_epoch"]
        added = to_coordinator._call(
            ApiKeys.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": tid,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            },
        )[1]
        (r,) = added["results_by_topic_v3_and_below"][0]["results_by_partition"]
        assert r["partition_error_code"] == 0

        def produce(seq: int) -> dict:
            batch = build_batch(
                [SimpleRecord(b"s%d" % seq)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                is_transactional=True,
            )
            body = {
                "transactional_id": tid,
                "acks": -1,
                "timeout_ms": 30_000,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "records": batch}]}
                ],
            }
            (answer,) = to_leader._call(ApiKeys.PRODUCE, 8, body)[1]["responses"][0]["partitions"]
            return answer

        assert produce(0)["error_code"] == 0
        ended = until_done(
            lambda: to_coordinator._call(
                ApiKeys.END_TXN,
                1,
                {
                    "transactional_id": tid,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "committed": False,
                },
            )[1]
        )
        assert ended["error_code"] == 0

        def end_offset(isolation_level: int) -> int:
            body = {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                        ],
                    }
                ],
            }
            (p,) = to_leader._call(ApiKeys.LIST_OFFSETS, 5, body)[1]["topics"][0]["partitions"]
            return p["offset"]

        deadline = time.monotonic() + 60
        while end_offset(1) != end_offset(0) or end_offset(0) < 2:  # the ABORT marker is in
            assert time.monotonic() < deadline, "the abort marker did not reach the leader"
            time.sleep(0.1)
        before = end_offset(0)
        late = produce(1)
        assert late["error_code"] == Errors.INVALID_TXN_STATE, late
        assert (end_offset(0), end_offset(1)) == (before, before)
    finally:
        to_coordinator.close()
        to_leader.close()
