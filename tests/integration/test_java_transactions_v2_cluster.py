"""Transactions v2 (KIP-890 part 2) on a three-broker LocalCluster, with Kafka's Java
client 4.3: the partition's leader and the transactional id's coordinator are
different brokers, so every partition of a transaction is added by the leader
asking the coordinator's broker (AddPartitionsToTxn v5 without verify_only, on
the BROKER listener), and every EndTxn v5 bumps the epoch the markers carry to
the leader. The coordinator's records show one epoch more per transaction, the
leader's producer state ends at the last one, read_committed sees exactly the
committed records."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_peer import require_java_peer
from test_java_transactions_v2 import (
    PATTERN,
    PER_TXN,
    TRANSACTIONS,
    prepared,
    producer_epoch,
    run_transactions,
    transaction_log,
)

from kafkalab.client.network_client import BrokerConnection
from kafkalab.cluster import LocalCluster
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys

pytestmark = pytest.mark.timeout(420)
STATE_PARTITIONS = 3


def coordinator_of(cluster, tid: str) -> int:
    """The broker FindCoordinator names for `tid` (retried while it loads)."""
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), timeout_s=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            found = conn._call(ApiKeys.FIND_COORDINATOR, 1, {"key": tid, "key_type": 1})[1]
            if found["error_code"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        conn.close()
    assert found["error_code"] == Errors.NONE, found
    return found["node_id"]


def topic_led_by(cluster, leader: int) -> str:
    """A one-partition topic on all three brokers, led by `leader`."""
    topic = f"tv2-{uuid.uuid4().hex[:8]}"
    others = [b for b in (1, 2, 3) if b != leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics(
        [NewTopic(topic, 1, replica_assignment=[[leader, *others]])]
    ).values():
        f.result(30)
    time.sleep(1)  # the leader learns of its partition from the metadata log
    return topic


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_java_peer()
    props = {
        "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
        "offsets.topic.num.partitions": "3",
    }  # transaction.version: the default, 2
    with LocalCluster(
        brokers=3, base_dir=tmp_path_factory.mktemp("txn-v2-cluster"), broker_props=props
    ) as c:
        yield c


def test_java_transactions_v2_across_brokers(cluster):
    tid = "java-tv2-cluster"
    coordinator = coordinator_of(cluster, tid)
    leader = next(b for b in (1, 2, 3) if b != coordinator)
    topic = topic_led_by(cluster, leader)
    committed, aborted = run_transactions(cluster.bootstrap_servers, topic, tid, create=False)
    assert len(committed) == PATTERN.count("c") * PER_TXN
    assert len(aborted) == PATTERN.count("a") * PER_TXN
    values = transaction_log(cluster.bootstrap_servers, tid, STATE_PARTITIONS)
    (init,) = [v for v in values if v.state == "Empty"]
    pid, first = init.producer_id, init.producer_epoch
    assert [(v.producer_id, v.producer_epoch) for v in prepared(values)] == [
        (pid, first + n) for n in range(1, TRANSACTIONS + 1)
    ]
    assert all(v.client_transaction_version == 2 for v in values if v.state != "Empty")
    assert producer_epoch(cluster.brokers[leader].bootstrap_servers, topic) == {
        pid: first + TRANSACTIONS
    }
