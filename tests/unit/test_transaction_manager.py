"""The teaching producer's TransactionManager against a scripted coordinator: the
requests of a transaction in Kafka's order, retries, fencing, abortable errors,
and (hypothesis) every sequence of calls stays on the state machine's edges."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from kafkalab.client.transaction_manager import (
    EDGES,
    VALID_PREVIOUS_STATES,
    ProducerFencedError,
    TransactionManager,
    TransactionStateError,
)
from kafkalab.client.transaction_manager import TransactionState as S
from kafkalab.errors import Errors as E
from kafkalab.errors import KafkaError
from kafkalab.protocol.api_keys import ApiKeys


class ScriptedBroker:
    """Answers like a transaction coordinator (node 1) and a group coordinator
    (node 2); `script[api]` lists error codes to answer first, one per request."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, ApiKeys, dict]] = []
        self.script: dict[ApiKeys, list[E]] = {}
        self.epoch = -1

    def error(self, api: ApiKeys) -> int:
        queue = self.script.get(api) or []
        return int(queue.pop(0)) if queue else 0

    def answer(self, node: int, api: ApiKeys, body: dict) -> dict:
        self.requests.append((node, api, body))
        error = self.error(api)
        if api == ApiKeys.FIND_COORDINATOR:
            return {"error_code": error, "node_id": 1 if body["key_type"] == 1 else 2}
        if api == ApiKeys.INIT_PRODUCER_ID:
            self.epoch += 0 if error else 1
            return {"error_code": error, "producer_id": 1000, "producer_epoch": self.epoch}
        if api == ApiKeys.ADD_PARTITIONS_TO_TXN:
            return {
                "results_by_topic_v3_and_below": [
                    {
                        "name": t["name"],
                        "results_by_partition": [
                            {"partition_index": p, "partition_error_code": error}
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["v3_and_below_topics"]
                ]
            }
        if api == ApiKeys.TXN_OFFSET_COMMIT:
            return {
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {"partition_index": p["partition_index"], "error_code": error}
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ]
            }
        return {"error_code": error}

    def apis(self, node: int | None = None) -> list[ApiKeys]:
        return [api for n, api, _ in self.requests if node is None or n == node]


class FakeConnection:
    def __init__(self, broker: ScriptedBroker, node: int) -> None:
        self.broker, self.node = broker, node

    def request(self, api, body):
        return self.broker.answer(self.node, ApiKeys(api), body)


class FakeClient:
    def __init__(self, broker: ScriptedBroker) -> None:
        self.broker = broker

    def any_connection(self):
        return FakeConnection(self.broker, 0)

    def connection(self, node):
        return FakeConnection(self.broker, node)

    def refresh_metadata(self, topics=None):
        return {}


def manager(broker: ScriptedBroker | None = None) -> tuple[TransactionManager, ScriptedBroker]:
    broker = broker or ScriptedBroker()
    tm = TransactionManager(
        "tx", 60_000, FakeClient(broker), max_block_ms=10_000, sleep=lambda s: None
    )
    return tm, broker


def test_a_committed_transaction_sends_kafkas_requests_in_order():
    tm, b = manager()
    tm.init_transactions()
    assert (tm.state, tm.producer_id, tm.producer_epoch) == (S.READY, 1000, 0)
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    tm.maybe_add_partition(("t", 0))  # once per partition and transaction
    tm.maybe_add_partition(("t", 1))
    tm.send_offsets_to_transaction({("in", 0): 42}, "g", generation_id=3, member_id="m")
    tm.end_transaction(committed=True)
    A = ApiKeys
    assert b.apis() == [
        A.FIND_COORDINATOR,
        A.INIT_PRODUCER_ID,
        A.ADD_PARTITIONS_TO_TXN,
        A.ADD_PARTITIONS_TO_TXN,
        A.ADD_OFFSETS_TO_TXN,
        A.FIND_COORDINATOR,
        A.TXN_OFFSET_COMMIT,
        A.END_TXN,
    ]
    assert b.apis(1) == [A.INIT_PRODUCER_ID] + [A.ADD_PARTITIONS_TO_TXN] * 2 + [
        A.ADD_OFFSETS_TO_TXN,
        A.END_TXN,
    ]
    assert b.apis(2) == [A.TXN_OFFSET_COMMIT]  # the group's coordinator
    find_txn, find_group = (body for _, api, body in b.requests if api == A.FIND_COORDINATOR)
    assert (find_txn["key"], find_txn["key_type"]) == ("tx", 1)
    assert (find_group["key"], find_group["key_type"]) == ("g", 0)
    (commit,) = (body for _, api, body in b.requests if api == A.TXN_OFFSET_COMMIT)
    assert commit["topics"][0]["partitions"][0]["committed_offset"] == 42
    assert (commit["generation_id"], commit["member_id"], commit["producer_epoch"]) == (3, "m", 0)
    (end,) = (body for _, api, body in b.requests if api == A.END_TXN)
    assert end == {
        "transactional_id": "tx",
        "producer_id": 1000,
        "producer_epoch": 0,
        "committed": True,
    }
    assert tm.transitions == [
        (S.UNINITIALIZED, S.INITIALIZING),
        (S.INITIALIZING, S.READY),
        (S.READY, S.IN_TRANSACTION),
        (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
        (S.COMMITTING_TRANSACTION, S.READY),
    ]


def test_retriable_errors_are_retried_and_a_moved_coordinator_found_again():
    tm, b = manager()
    b.script[ApiKeys.INIT_PRODUCER_ID] = [E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS]
    tm.init_transactions()
    assert b.apis().count(ApiKeys.INIT_PRODUCER_ID) == 3
    tm.begin_transaction()
    b.script[ApiKeys.ADD_PARTITIONS_TO_TXN] = [E.NOT_COORDINATOR]
    tm.maybe_add_partition(("t", 0))
    assert b.apis()[-3:] == [
        ApiKeys.ADD_PARTITIONS_TO_TXN,
        ApiKeys.FIND_COORDINATOR,
        ApiKeys.ADD_PARTITIONS_TO_TXN,
    ]
    b.script[ApiKeys.END_TXN] = [E.CONCURRENT_TRANSACTIONS]
    tm.end_transaction(committed=False)
    assert tm.state is S.READY and b.apis().count(ApiKeys.END_TXN) == 2


def test_a_fenced_producer_is_finished():
    tm, b = manager()
    tm.init_transactions()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    b.script[ApiKeys.END_TXN] = [E.PRODUCER_FENCED]
    with pytest.raises(ProducerFencedError) as raised:
        tm.end_transaction(committed=True)
    assert raised.value.code == E.PRODUCER_FENCED
    assert tm.state is S.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        tm.begin_transaction()


def test_an_abortable_error_allows_only_abort():
    tm, b = manager()
    tm.init_transactions()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    tm.fail(KafkaError(E.NOT_ENOUGH_REPLICAS, "a batch was refused"))
    assert tm.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionStateError, match="abort the transaction"):
        tm.end_transaction(committed=True)
    with pytest.raises(KafkaError):
        tm.maybe_add_partition(("t", 1))
    tm.end_transaction(committed=False)
    assert tm.state is S.READY
    assert [body["committed"] for _, api, body in b.requests if api == ApiKeys.END_TXN] == [False]


def test_a_transaction_that_wrote_nothing_ends_without_end_txn():
    tm, b = manager()
    tm.init_transactions()
    tm.begin_transaction()
    tm.end_transaction(committed=True)
    assert ApiKeys.END_TXN not in b.apis() and tm.state is S.READY


def test_calls_out_of_order_say_what_to_do():
    tm, _ = manager()
    with pytest.raises(TransactionStateError, match="init_transactions") as raised:
        tm.begin_transaction()
    assert raised.value.code == E.INVALID_TXN_STATE
    tm.init_transactions()
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        tm.maybe_add_partition(("t", 0))
    with pytest.raises(TransactionStateError):
        tm.init_transactions()


def test_the_edges_are_kafkas():
    edges = set(EDGES)
    assert (S.READY, S.IN_TRANSACTION) in edges
    assert (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION) in edges
    assert (S.ABORTING_TRANSACTION, S.INITIALIZING) in edges  # epoch bump after an abort
    assert (S.READY, S.COMMITTING_TRANSACTION) not in edges
    assert (S.ABORTABLE_ERROR, S.COMMITTING_TRANSACTION) not in edges
    assert all((s, S.FATAL_ERROR) in edges for s in S if s is not S.FATAL_ERROR)
    assert len(edges) == len(EDGES)


CALLS = st.sampled_from(["init", "begin", "add", "offsets", "commit", "abort", "fail", "fence"])


@settings(max_examples=300, deadline=None)
@given(st.lists(CALLS, max_size=25))
def test_every_sequence_of_calls_stays_on_the_edges(calls):
    tm, b = manager()
    for call in calls:
        before = tm.state
        try:
            if call == "init":
                tm.init_transactions()
            elif call == "begin":
                tm.begin_transaction()
            elif call == "add":
                tm.maybe_add_partition(("t", len(tm.transitions) % 3))
            elif call == "offsets":
                tm.send_offsets_to_transaction({("in", 0): 1}, "g")
            elif call in ("commit", "abort"):
                tm.end_transaction(committed=call == "commit")
            elif call == "fail":
                tm.fail(KafkaError(E.NOT_ENOUGH_REPLICAS))
            else:
                b.script[ApiKeys.ADD_PARTITIONS_TO_TXN] = [E.PRODUCER_FENCED]
                tm.maybe_add_partition(("fenced", 0))
        except KafkaError:
            pass
        if before is S.FATAL_ERROR:
            assert tm.state is S.FATAL_ERROR  # nothing leaves it
    for source, target in tm.transitions:
        assert source in VALID_PREVIOUS_STATES[target]
    path = [S.UNINITIALIZED] + [t for _, t in tm.transitions]
    assert [s for s, _ in tm.transitions] == path[:-1]  # one connected path
