"""The partition leader's side of transaction verification (AddPartitionsToTxnManager):
which broker it asks (the leader of the id's __transaction_state partition, on the
inter-broker listener, another broker as much as this one), what it sends
(AddPartitionsToTxn v4, verify_only), and what the producer then gets on Produce."""

from __future__ import annotations

import asyncio

import pytest

from kafkalab.controller.metadata_image import BrokerRegistration, PartitionRegistration, TopicInfo
from kafkalab.coordinator.transaction import TRANSACTION_STATE_TOPIC
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    produce_error,
)

N = 4  # __transaction_state partitions
TP0, TP1 = ("orders", 0), ("orders", 1)


class Metadata:
    """Brokers 1 and 2; broker 2 leads the __transaction_state partition of "app",
    broker 1 the others."""

    def __init__(self, coordinator_leader: int = 2, with_state_topic: bool = True) -> None:
        self.leader = coordinator_leader
        self.with_state_topic = with_state_topic

    def topics(self) -> dict[str, TopicInfo]:
        if not self.with_state_topic:
            return {}
        mine = tlog.partition_for("app", N)
        parts = {
            p: PartitionRegistration([1, 2], [1, 2], self.leader if p == mine else 1)
            for p in range(N)
        }
        return {TRANSACTION_STATE_TOPIC: TopicInfo(TRANSACTION_STATE_TOPIC, parts)}

    def alive_brokers(self) -> list[BrokerRegistration]:
        return [
            BrokerRegistration(
                b,
                "127.0.0.1",
                9090 + b,
                "x",
                1,
                fenced=False,
                endpoints={"PLAINTEXT": ("127.0.0.1", 9090 + b), "BROKER": ("127.0.0.1", 9190 + b)},
            )
            for b in (1, 2)
        ]


class Connection:
    """Stands for the InterBrokerConnection: records what was sent, answers as told."""

    def __init__(self, address, sent, answer) -> None:
        self.address, self.sent, self.answer = address, sent, answer
        self.closed = False

    async def request(self, api_key, version, body):
        self.sent.append((self.address, api_key, version, body))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(body)

    def close(self) -> None:
        self.closed = True


def coordinator_says(errors: dict[tuple[str, int], Errors], top: Errors = Errors.NONE):
    def answer(body):
        (txn,) = body["transactions"]
        by_topic: dict[str, list[dict]] = {}
        for topic in txn["topics"]:
            for p in topic["partitions"]:
                error = errors.get((topic["name"], p), Errors.NONE)
                by_topic.setdefault(topic["name"], []).append(
                    {"partition_index": p, "partition_error_code": int(error)}
                )
        results = [
            {
                "transactional_id": txn["transactional_id"],
                "topic_results": [
                    {"name": t, "results_by_partition": ps} for t, ps in by_topic.items()
                ],
            }
        ]
        return {
            "throttle_time_ms": 0,
            "error_code": int(top),
            "results_by_transaction": [] if top != Errors.NONE else results,
        }

    return answer


def manager(answer, metadata=None):
    sent: list = []
    connections: list[Connection] = []

    def connect(host, port):
        connections.append(Connection((host, port), sent, answer))
        return connections[-1]

    m = AddPartitionsToTxnManager(metadata or Metadata(), N, connect, listener="BROKER")
    return m, sent, connections


def verify(m, tid="app", partitions=(TP0, TP1)):
    return asyncio.run(m.verify_transaction(tid, 7, 3, partitions))


def test_the_question_goes_to_the_coordinators_broker_on_the_inter_broker_listener():
    m, sent, _ = manager(coordinator_says({TP0: Errors.NONE, TP1: Errors.INVALID_TXN_STATE}))
    assert verify(m) == {TP0: Errors.NONE, TP1: Errors.INVALID_TXN_STATE}
    ((address, key, version, body),) = sent
    assert address == ("127.0.0.1", 9192), "broker 2's BROKER listener: app's coordinator"
    assert (key, version) == (ApiKeys.ADD_PARTITIONS_TO_TXN, 4)
    assert body == {
        "transactions": [
            {
                "transactional_id": "app",
                "producer_id": 7,
                "producer_epoch": 3,
                "verify_only": True,
                "topics": [{"name": "orders", "partitions": [0, 1]}],
            }
        ]
    }


def test_no_coordinator_yet_and_a_lost_connection_are_retriable_on_produce():
    m, sent, _ = manager(coordinator_says({}), Metadata(with_state_topic=False))
    assert verify(m) == dict.fromkeys([TP0, TP1], Errors.COORDINATOR_NOT_AVAILABLE)
    assert sent == []
    m, _, connections = manager(KafkaError(Errors.NETWORK_EXCEPTION, "gone"))
    assert verify(m) == dict.fromkeys([TP0, TP1], Errors.NOT_COORDINATOR)
    assert connections[0].closed, "a broken connection is dropped, the next question reconnects"
    verify(m)
    assert len(connections) == 2


def test_a_top_level_error_applies_to_every_partition():
    m, _, _ = manager(coordinator_says({}, top=Errors.CLUSTER_AUTHORIZATION_FAILED))
    assert verify(m) == dict.fromkeys([TP0, TP1], Errors.CLUSTER_AUTHORIZATION_FAILED)


@pytest.mark.parametrize(
    ("coordinator", "produce"),
    [
        (Errors.NONE, Errors.NONE),
        (Errors.INVALID_TXN_STATE, Errors.INVALID_TXN_STATE),
        (Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH),
        (Errors.INVALID_PRODUCER_ID_MAPPING, Errors.INVALID_PRODUCER_ID_MAPPING),
        (Errors.CONCURRENT_TRANSACTIONS, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.NOT_COORDINATOR, Errors.NOT_ENOUGH_REPLICAS),
    ],
)
def test_what_the_producer_gets_on_produce(coordinator, produce):
    """Kafka's mapping (ReplicaManager): a producer does not know coordinator errors
    on Produce, so the ones that mean "ask again" become NOT_ENOUGH_REPLICAS."""
    assert produce_error(coordinator)[0] == produce
