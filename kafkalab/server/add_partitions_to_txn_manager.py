"""AddPartitionsToTxnManager: a partition leader asks the transaction coordinator.

Kafka's class: kafka.server.AddPartitionsToTxnManager (KIP-890 parts 1 and 2).

Transactions v2 (part 2): a transactional Produce v12+ (or a TxnOffsetCommit
v5+) comes from a client that no longer sends AddPartitionsToTxn (or
AddOffsetsToTxn); the leader adds the partition itself, AddPartitionsToTxn v5
without verify_only (`add_to_transaction`; Kafka: the `addPartition` transaction
supported operation), whatever `transaction.partition.verification.enable` says.

Part 1: with `transaction.partition.verification.enable`, before a producer's first
transactional batch in a partition (no transaction of its epoch ongoing there),
the leader asks the coordinator of the producer's transactional id whether the
partition is in its ongoing transaction: AddPartitionsToTxn v4 with
verify_only, one request per question (Kafka batches the questions of many
produce requests per coordinator; one at a time is enough here).

The coordinator is found as a client finds it (FindCoordinator): the leader of
the `__transaction_state` partition of the id, in the MetadataCache. The request
goes over an InterBrokerConnection on the inter-broker listener, also when the
coordinator is this broker (as the marker channel writes to its own partitions).
Kafka keeps that connection in its inter-broker NetworkClient; kafkalab closes it
once no question is in flight on it, so a broker holds no connection it is not
using (tests/integration/test_protocol_fuzz.py counts the broker's sockets after
thousands of hostile frames, Produce v12 among them).

The answer, per partition, becomes the Produce error (Kafka: ReplicaManager's
mapping): NONE appends; INVALID_TXN_STATE and the other refusals go to the
client as they are (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, which every
producer knows on Produce); a coordinator that cannot answer now
(CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, or no answer) becomes NOT_ENOUGH_REPLICAS, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kafkalab.coordinator.transaction import TRANSACTION_STATE_TOPIC
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
VERIFY_VERSION = 4  # the first version with verify_only
ADD_VERSION = 5  # what a leader of transactions v2 sends to add a partition
#: The broker setting (Kafka's name); kafkalab's default is false (README, Transactions).
VERIFICATION_ENABLE = "transaction.partition.verification.enable"

#: What the client gets on Produce when the coordinator could not answer (retriable).
RETRIABLE = frozenset(
    {
        Errors.CONCURRENT_TRANSACTIONS,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_COORDINATOR,
    }
)


def produce_error(error: Errors, add: bool = False) -> tuple[Errors, str | None]:
    """The Produce error (and message) for the coordinator's answer on a partition.
    With `add` (transactions v2) CONCURRENT_TRANSACTIONS stays itself, as Kafka's
    leader leaves it (the last transaction's markers are being written; a client of
    version 2 retries it)."""
    if error == Errors.NONE:
        return Errors.NONE, None
    if add and error == Errors.CONCURRENT_TRANSACTIONS:
        return error, None
    if error in RETRIABLE:
        return (
            Errors.NOT_ENOUGH_REPLICAS,
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}",
        )
    if error == Errors.PRODUCER_FENCED:
        error = Errors.INVALID_PRODUCER_EPOCH
    if error == Errors.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    return error, None


class AddPartitionsToTxnManager:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        transaction_state_partitions: int,
        connect: Callable[[str, int], InterBrokerConnection],
        listener: str | None = None,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.metadata_cache = metadata_cache
        self.partitions = transaction_state_partitions
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self._connect = connect
        self._connections: dict[tuple[int, str, int], InterBrokerConnection] = {}
        self._in_flight: dict[tuple[int, str, int], int] = {}

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _coordinator(self, transactional_id: str) -> tuple[int, str, int] | None:
        """(node id, host, port) of the id's transaction coordinator, None if none now."""
        partition = tlog.partition_for(transactional_id, self.partitions)
        info = self.metadata_cache.topics().get(TRANSACTION_STATE_TOPIC)
        if info is None or partition not in info.partitions:
            return None
        leader = info.partitions[partition].leader
        for b in self.metadata_cache.alive_brokers():
            if b.broker_id == leader:
                host, port = b.endpoint(self.listener) if self.listener else (b.host, b.port)
                return leader, host, port
        return None

    async def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, Errors]:
        """The coordinator's answer per partition (Kafka: verifyTransaction)."""
        return await self._ask(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=True
        )

    async def add_to_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, Errors]:
        """Transactions v2: the coordinator adds the partitions to the producer's
        transaction (beginning one if none is ongoing); its answer per partition."""
        return await self._ask(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=False
        )

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        verify_only: bool,
    ) -> dict[TopicPartition, Errors]:
        wanted = sorted(set(partitions))
        key = self._coordinator(transactional_id)
        if key is None:
            return dict.fromkeys(wanted, Errors.COORDINATOR_NOT_AVAILABLE)
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = self._connect(key[1], key[2])
        by_topic: dict[str, list[int]] = {}
        for topic, p in wanted:
            by_topic.setdefault(topic, []).append(p)
        body = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": verify_only,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        try:
            response = await asyncio.wait_for(
                conn.request(
                    ApiKeys.ADD_PARTITIONS_TO_TXN,
                    VERIFY_VERSION if verify_only else ADD_VERSION,
                    body,
                ),
                self.request_timeout_ms / 1000,
            )
        except (KafkaError, TimeoutError) as e:
            log.info("asking %s's coordinator %d: %s", transactional_id, key[0], e or "timeout")
            conn.close()
            if self._connections.get(key) is conn:
                del self._connections[key]
            return dict.fromkeys(wanted, Errors.NOT_COORDINATOR)
        finally:
            self._in_flight[key] -= 1
            if not self._in_flight[key]:
                del self._in_flight[key]
                if self._connections.get(key) is conn:  # idle: let it go
                    del self._connections[key]
                    conn.close()
        if response["error_code"] != 0:
            return dict.fromkeys(wanted, Errors(response["error_code"]))
        answers = dict.fromkeys(wanted, Errors.UNKNOWN_SERVER_ERROR)  # unless answered
        for txn in response["results_by_transaction"]:
            for topic in txn["topic_results"]:
                for p in topic["results_by_partition"]:
                    tp = (topic["name"], p["partition_index"])
                    if tp in answers:
                        answers[tp] = Errors(p["partition_error_code"])
        return answers
