"""Transaction verification (KIP-890 part 1) on one broker, with raw requests.

A transactional producer's write that arrives after its transaction was aborted
(a late retry, a zombie) used to be appended: it opened a transaction in the
partition that no coordinator knows, so no marker ever ends it and the last
stable offset stays behind it for good (a hanging transaction; read_committed
consumers stop there). With `transaction.partition.verification.enable=true` the
leader asks the coordinator (AddPartitionsToTxn v4, verify_only, over the
inter-broker listener) and refuses the write with INVALID_TXN_STATE.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.client.network_client import BrokerConnection, NetworkClient
from kafkalab.cluster.delayed_end_txn import RETRIABLE, HandBuiltProducer
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.server.broker import BrokerThread

pytestmark = pytest.mark.timeout(180)


def start(tmp_path_factory, verification: bool) -> BrokerThread:
    return BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("verify")),
            "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "inter.broker.listener.name": "BROKER",
            "transaction.state.log.num.partitions": "2",
            "offsets.topic.num.partitions": "2",
            "transaction.partition.verification.enable": str(verification).lower(),
        }
    ).start()


@pytest.fixture(scope="module")
def unverified(tmp_path_factory):
    broker = start(tmp_path_factory, verification=False)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    broker = start(tmp_path_factory, verification=True)
    yield broker
    broker.stop()


def connect(address: str) -> BrokerConnection:
    host, port = address.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout_s=30)


def make_topic(bs: str) -> str:
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(10)
    return topic


def until_done(call, error_of=lambda r: r["error_code"]):
    """Call until the answer is not a retriable coordinator error (30 s)."""
    deadline = time.monotonic() + 30
    while True:
        answer = call()
        if Errors(error_of(answer)) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def ended(producer: HandBuiltProducer, commit: bool) -> dict:
    """EndTxn, which must succeed; its answer once the markers are written."""
    answer = producer.end(commit)
    assert answer["error_code"] == 0, answer
    return answer


def end_offset(conn: BrokerConnection, topic: str, isolation_level: int) -> int:
    """ListOffsets latest: the high watermark (0, read_uncommitted) or the last
    stable offset (1, read_committed)."""
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    }
    (p,) = conn._call(ApiKeys.LIST_OFFSETS, 5, body)[1]["topics"][0]["partitions"]
    assert p["error_code"] == 0
    return p["offset"]


def late_write_after_abort(broker: BrokerThread) -> tuple[dict, int, int, int]:
    """A transaction writes, aborts, and then one more write of that producer and
    epoch arrives: (its answer, the end of the log before it, HW, LSO)."""
    topic = make_topic(broker.bootstrap_servers)
    conn = connect(broker.bootstrap_servers)
    client = NetworkClient(broker.bootstrap_servers)
    try:
        producer = HandBuiltProducer(client, topic, version=1)
        producer.add_partition(0)
        assert producer.produce(0, b"in the transaction")["error_code"] == 0
        ended(producer, commit=False)
        before = end_offset(conn, topic, 0)
        assert end_offset(conn, topic, 1) == before, "the aborted transaction still holds the LSO"
        late = producer.produce(0, b"late, after the abort")
        return late, before, end_offset(conn, topic, 0), end_offset(conn, topic, 1)
    finally:
        conn.close()
        client.close()


def test_without_verification_a_late_write_hangs_the_partition(unverified):
    late, before, hw, lso = late_write_after_abort(unverified)
    assert late["error_code"] == 0 and late["base_offset"] == before
    assert hw == before + 1
    # the write opened a transaction no coordinator knows: nothing will ever end it
    assert lso == before, "the LSO should stay behind the hanging write"


def test_with_verification_the_late_write_is_refused(verified):
    late, before, hw, lso = late_write_after_abort(verified)
    assert late["error_code"] == Errors.INVALID_TXN_STATE, late
    assert (hw, lso) == (before, before), "the refused write is in the log or holds the LSO"


def test_with_verification_a_transaction_still_commits(verified):
    """The first write of each transaction to a partition waits for the coordinator's
    yes; a real client (librdkafka) commits as before and read_committed sees it."""
    bs = verified.bootstrap_servers
    topic = make_topic(bs)
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for n in range(2):
        p.begin_transaction()
        p.produce(topic, value=b"v%d" % n)
        p.commit_transaction(30)
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    c.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert seen == [b"v0", b"v1"]


def verify_only_request(tid: str, pid: int, epoch: int, topic: str) -> dict:
    return {
        "transactions": [
            {
                "transactional_id": tid,
                "producer_id": pid,
                "producer_epoch": epoch,
                "verify_only": True,
                "topics": [{"name": topic, "partitions": [0]}],
            }
        ]
    }


def test_the_verify_only_request_is_for_brokers_only(verified):
    """AddPartitionsToTxn v4 on the client listener: CLUSTER_AUTHORIZATION_FAILED;
    on the inter-broker listener: the coordinator's answer, per partition."""
    topic = make_topic(verified.bootstrap_servers)
    client = connect(verified.bootstrap_servers)
    host, port = verified.broker.advertised_endpoints["BROKER"]
    broker_side = connect(f"{host}:{port}")
    network = NetworkClient(verified.bootstrap_servers)
    try:
        producer = HandBuiltProducer(network, topic, version=1)
        request = verify_only_request(producer.tid, producer.pid, producer.epoch, topic)
        for version in (4, 5):
            refused = client._call(ApiKeys.ADD_PARTITIONS_TO_TXN, version, request)[1]
            assert refused["error_code"] == Errors.CLUSTER_AUTHORIZATION_FAILED
            assert refused["results_by_transaction"] == []

        def partition_answer() -> int:
            answer = broker_side._call(ApiKeys.ADD_PARTITIONS_TO_TXN, 4, request)[1]
            assert answer["error_code"] == 0
            (txn,) = answer["results_by_transaction"]
            (p,) = txn["topic_results"][0]["results_by_partition"]
            return p["partition_error_code"]

        assert partition_answer() == Errors.INVALID_TXN_STATE  # not added yet
        producer.add_partition(0)
        assert partition_answer() == Errors.NONE
        ended(producer, commit=False)
        assert partition_answer() == Errors.INVALID_TXN_STATE
    finally:
        client.close()
        broker_side.close()
        network.close()


def test_with_verification_an_empty_or_cut_batch_is_still_answered_as_corrupt(verified):
    """The leader reads the batch header to know whom to verify: a request with no
    batch, or half a header, gets the log's answer, as without verification."""
    topic = make_topic(verified.bootstrap_servers)
    conn = connect(verified.bootstrap_servers)
    network = NetworkClient(verified.bootstrap_servers)
    try:
        producer = HandBuiltProducer(network, topic, version=1)
        whole = build_batch(
            [SimpleRecord(b"x")], producer_id=producer.pid, producer_epoch=0, is_transactional=True
        )
        for records in (b"", whole[:40]):
            body = {
                "transactional_id": producer.tid,
                "acks": 1,
                "timeout_ms": 10_000,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "records": records}]}
                ],
            }
            (p,) = conn._call(ApiKeys.PRODUCE, 8, body)[1]["responses"][0]["partitions"]
            assert p["error_code"] == Errors.CORRUPT_MESSAGE, p
    finally:
        conn.close()
        network.close()
