"""KAFKA-17754 on the three-broker cluster: a delayed EndTxn ends the next transaction.

The transaction coordinator's broker holds the first attempt of a producer's
EndTxn(abort) (kafkalab's held-request fault, kafkalab.server.link_faults); the
producer retries on another connection, its transaction T1 aborts, and T2 begins
(same producer id; under transaction version 1 the same epoch) and writes b1 to
p0. Then the held request is delivered. Under version 1 it aborts T2; the
producer goes on, writes b2 to p1 and is told T2 committed. The history checker,
from what the client was told and what read_committed returns, finds b1 of the
committed T2 lost: a torn transaction (b2 is there); the Jepsen-grade checker
calls b1 unseen (acknowledged, never polled). Under version 2 the epoch
was bumped by T1's EndTxn, the held request names an epoch that is over, and the
history is valid.

The producer is built by hand (kafkalab.cluster.delayed_end_txn) rather than a
client library: the anomaly needs the held attempt to stay held while its retry
goes through on another connection and T2 begins, which no client's request
timeout and retry schedule makes happen on cue; hand-built requests put each
step in order, the broker's hold does the delaying. Transaction verification
(KIP-890 part 1) is off, as in Kafka 3.5; it would not help: b1 is written to a
partition T2 did add."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from faults_helpers import assert_nothing_found, judged

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.delayed_end_txn import delayed_end_txn, served_transaction_version

pytestmark = pytest.mark.timeout(300)
PROPS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.partition.verification.enable": "false",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(
        brokers=3, base_dir=tmp_path_factory.mktemp("delayed-end-txn"), broker_props=PROPS
    ) as c:
        yield c


def two_partition_topic(cluster) -> str:
    topic = f"kafka-17754-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for f in admin.create_topics([NewTopic(topic, 2, 3)]).values():
        f.result(30)
    time.sleep(1)  # the leaders learn of their partitions from the metadata log
    return topic


def test_under_transaction_version_1_a_delayed_end_txn_tears_the_next_transaction(cluster):
    topic = two_partition_topic(cluster)
    run = delayed_end_txn(cluster.bootstrap_servers, cluster.broker_dir, topic, version=1)
    verdict = run.verdict
    # one epoch for both transactions: the held request could not be told apart
    assert run.epochs["T1"] == run.epochs["T2"]
    assert run.held_answer == "NONE", "the coordinator accepted T1's late abort"
    assert not verdict.valid, verdict.summary()
    (lost,) = verdict.lost
    assert lost["value"] == b"b1" and lost["transaction"] == "T2", verdict.summary()
    # torn: T2's other record is there, under read_committed
    assert [v for _, v in run.history.committed_finals[(topic, 1)]] == [b"b2"]
    assert run.history.committed_finals[(topic, 0)] == []  # a1 aborted (T1), b1 with it
    # The Jepsen-grade checker: b1 of the committed T2 was acknowledged and no
    # read_committed poll ever returned it (none went past it on p0: unseen).
    new = judged(run.history)
    assert set(new.anomalies) == {"unseen"}, new.summary()
    (unseen,) = new.anomalies["unseen"]
    assert (unseen["key"], unseen["values"]) == ((topic, 0), [b"b1"]), new.summary()
    assert [w[1] for w in unseen["writers"]] == ["txn T2"], new.summary()


def test_under_transaction_version_2_the_delayed_end_txn_is_fenced(cluster):
    served = served_transaction_version(cluster.bootstrap_servers)
    if served < 2:
        pytest.skip(
            "transaction.version=2 not served: ApiVersions advertises no finalized "
            f"transaction.version of 2 or more (level {served}); issue 23 part 2"
        )
    topic = two_partition_topic(cluster)
    run = delayed_end_txn(cluster.bootstrap_servers, cluster.broker_dir, topic, version=2)
    assert run.epochs["T2"] > run.epochs["T1"]  # EndTxn bumped the epoch
    assert run.verdict.valid, run.verdict.summary()
    assert_nothing_found(judged(run.history))
    assert [v for _, v in run.history.committed_finals[(topic, 0)]] == [b"b1"]
    assert [v for _, v in run.history.committed_finals[(topic, 1)]] == [b"b2"]
