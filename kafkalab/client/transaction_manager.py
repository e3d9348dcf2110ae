"""TransactionManager: the transactional producer's side of a transaction.

Kafka's class: org.apache.kafka.clients.producer.internals.TransactionManager.
A producer with `transactional.id` goes through these states; the allowed
transitions are data (`VALID_PREVIOUS_STATES`, `EDGES`) so a lab can draw the
machine and the path a producer took (`transitions`):

    UNINITIALIZED --init_transactions--> INITIALIZING --InitProducerId--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --EndTxn--> READY
    IN_TRANSACTION --abort_transaction--> ABORTING_TRANSACTION --EndTxn--> READY
    IN_TRANSACTION / COMMITTING / INITIALIZING --an abortable error--> ABORTABLE_ERROR
    ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION
    any --PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...--> FATAL_ERROR (close the producer)

The requests, in a transaction's order (each to the transaction coordinator,
found with FindCoordinator key type 1, except TxnOffsetCommit which goes to the
group's coordinator):

    InitProducerId(transactional.id)   a producer id and a new epoch: older producers
                                       with the same id are fenced; an open
                                       transaction of theirs is aborted first
    AddPartitionsToTxn                 before the first record to a partition
    AddOffsetsToTxn + TxnOffsetCommit  send_offsets_to_transaction()
    EndTxn(committed)                  the coordinator writes the markers

CONCURRENT_TRANSACTIONS (the previous transaction is still completing),
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR (find
the coordinator again) are retried after `retry.backoff.ms`, until `max.block.ms`.

This is transactions version 1, also against a broker that finalizes
`transaction.version` 2 (KIP-890 part 2, kafkalab.server.features): the client
adds partitions itself and keeps its epoch from InitProducerId to the next
InitProducerId; it stays below Produce v12, EndTxn v5 and TxnOffsetCommit v5,
the versions that mean version 2 (network_client.CLIENT_MAX_VERSIONS). Kafka's
Java client 4 speaks version 2 there: no AddPartitionsToTxn (the partition
leader adds the partition), and the epoch EndTxn v5 answers for every next
transaction.

The teaching client sends AddPartitionsToTxn from send(), synchronously, before
the first record of a partition joins a batch (the Java client's Sender sends it
ahead of the batches); every record of the transaction is therefore in a
partition the coordinator knows of before it is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from kafkalab.errors import Errors, KafkaError, KafkaErrorWithCode
from kafkalab.protocol.api_keys import ApiKeys

TopicPartition = tuple[str, int]
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1


class TransactionState(StrEnum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState
# Kafka: TransactionManager.State.isTransitionValid, as data: target -> sources.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.UNINITIALIZED: frozenset({S.UNINITIALIZED}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TransactionState),
}
EDGES: tuple[tuple[TransactionState, TransactionState], ...] = tuple(
    (source, target)
    for target, sources in VALID_PREVIOUS_STATES.items()
    for source in sorted(sources, key=list(TransactionState).index)
    if source is not target
)

# retried after retry.backoff.ms; the NOT_COORDINATOR family after finding it again
RETRIABLE = {
    Errors.CONCURRENT_TRANSACTIONS,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR,
    Errors.NETWORK_EXCEPTION,
    Errors.REQUEST_TIMED_OUT,
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
}
LOST_COORDINATOR = {Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR}
# the producer can do nothing more: Kafka's fatal errors
FATAL = {
    Errors.PRODUCER_FENCED,
    Errors.INVALID_PRODUCER_EPOCH,
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    Errors.INVALID_PRODUCER_ID_MAPPING,
    Errors.INVALID_TXN_STATE,
    Errors.TRANSACTION_COORDINATOR_FENCED,
    Errors.INVALID_TRANSACTION_TIMEOUT,
    Errors.UNSUPPORTED_VERSION,
}


class TransactionStateError(KafkaErrorWithCode):
    """A transactional call made in a state that does not allow it (begin twice,
    commit without begin, anything before init_transactions)."""

    code = Errors.INVALID_TXN_STATE


class ProducerFencedError(KafkaErrorWithCode):
    """A newer producer with the same transactional.id called init_transactions:
    this one is a zombie and must be closed."""

    code = Errors.PRODUCER_FENCED


class TransactionAbortableError(KafkaError):
    """The transaction cannot commit (a record was refused): abort_transaction(),
    then begin a new one."""


class TransactionManager:
    """The transactional state of one producer, and the requests that move it.

    `client` is the producer's NetworkClient (any_connection(), connection(node),
    refresh_metadata()); `clock` and `sleep` are injectable for tests."""

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        client: Any,
        *,
        retry_backoff_ms: int = 100,
        max_block_ms: int = 60_000,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.client = client
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.max_block_s = max_block_ms / 1000
        self.clock, self.sleep = clock, sleep
        self.state = TransactionState.UNINITIALIZED
        self.transitions: list[tuple[TransactionState, TransactionState]] = []
        self.producer_id, self.producer_epoch = -1, -1
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.transaction_started = False  # AddPartitionsToTxn or AddOffsetsToTxn sent
        self.last_error: KafkaError | None = None
        self._coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node id

    # -- the state machine ---------------------------------------------------------------------

    def transition_to(self, target: TransactionState, error: KafkaError | None = None) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise TransactionStateError(
                f"transactional.id {self.transactional_id!r}: cannot go from {self.state} to "
                f"{target} (allowed from {sorted(map(str, VALID_PREVIOUS_STATES[target]))})"
            )
        if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR):
            self.last_error = error
        self.transitions.append((self.state, target))
        self.state = target

    def require_state(self, *states: TransactionState, doing: str) -> None:
        if self.state is S.FATAL_ERROR:
            raise self.last_error or TransactionStateError("the producer is in FATAL_ERROR")
        if self.state not in states:
            hint = {
                S.UNINITIALIZED: "call init_transactions() first",
                S.READY: "call begin_transaction() first",
                S.ABORTABLE_ERROR: f"abort the transaction: {self.last_error}",
            }.get(self.state, "")
            raise TransactionStateError(
                f"cannot {doing} in state {self.state}" + (f": {hint}" if hint else "")
            )

    def is_transactional_send_allowed(self) -> None:
        """send() in a transactional producer: only inside a transaction."""
        if self.state is S.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                Errors.INVALID_TXN_STATE,
                f"the transaction must be aborted first: {self.last_error}",
            )
        self.require_state(S.IN_TRANSACTION, doing="send")

    def fail(self, error: KafkaError) -> None:
        """A record of the transaction was refused: the transaction can only abort
        (or, fenced, the producer is finished)."""
        if error.code in FATAL:
            self.transition_to(S.FATAL_ERROR, error)
        elif self.state in VALID_PREVIOUS_STATES[S.ABORTABLE_ERROR]:
            self.transition_to(S.ABORTABLE_ERROR, error)

    # -- requests ----------------------------------------------------------------------------

    def _coordinator(self, key_type: int, key: str) -> Any:
        node = self._coordinators.get((key_type, key))
        if node is None:
            r = self.client.any_connection().request(
                ApiKeys.FIND_COORDINATOR, {"key": key, "key_type": key_type}
            )
            error = Errors(r["error_code"])
            if error != Errors.NONE:
                raise KafkaError(error, f"FindCoordinator({key!r}, key type {key_type})")
            self.client.refresh_metadata([])
            node = self._coordinators[(key_type, key)] = r["node_id"]
        return self.client.connection(node)

    def _call(
        self,
        api: ApiKeys,
        body: dict,
        errors_of: Callable[[dict], list[Errors]],
        *,
        key_type: int = TRANSACTION_KEY_TYPE,
        key: str | None = None,
    ) -> dict:
        """Send `body` to the coordinator until it answers without a retriable error
        (finding the coordinator again when it moved). Raises the first other error."""
        key = self.transactional_id if key is None else key
        deadline = self.clock() + self.max_block_s
        while True:
            try:
                conn = self._coordinator(key_type, key)
                response = conn.request(api, body)
                errors = [e for e in errors_of(response) if e != Errors.NONE]
            except KafkaError as e:
                if e.code not in RETRIABLE:
                    raise
                errors, response = [e.code], None
                if e.code == Errors.NETWORK_EXCEPTION:
                    self._coordinators.pop((key_type, key), None)
            if not errors:
                return response
            error = errors[0]
            if error in LOST_COORDINATOR:
                self._coordinators.pop((key_type, key), None)
            if error not in RETRIABLE:
                raise KafkaError(
                    error, f"{api.name} for transactional.id {self.transactional_id!r}"
                )
            if self.clock() >= deadline:
                raise KafkaError(
                    error,
                    f"{api.name} still answered {error.name} after max.block.ms="
                    f"{self.max_block_s * 1000:.0f}",
                )
            self.sleep(self.retry_backoff_s)

    def _fatal_or_abortable(self, e: KafkaError) -> KafkaError:
        if e.code in (Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_EPOCH):
            e = ProducerFencedError(
                f"transactional.id {self.transactional_id!r} has a newer producer "
                f"(epoch > {self.producer_epoch}): this one is fenced, close it"
            )
        self.fail(e)
        return e

    def init_transactions(self) -> None:
        """InitProducerId with the transactional id: the producer id and a new epoch."""
        self.require_state(S.UNINITIALIZED, doing="init_transactions")
        self.transition_to(S.INITIALIZING)
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.transaction_timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        try:
            r = self._call(ApiKeys.INIT_PRODUCER_ID, body, lambda r: [Errors(r["error_code"])])
        except KafkaError as e:
            raise self._fatal_or_abortable(e) from None
        self.producer_id, self.producer_epoch = r["producer_id"], r["producer_epoch"]
        self.transition_to(S.READY)

    def begin_transaction(self) -> None:
        self.require_state(S.READY, doing="begin_transaction")
        self.partitions_in_transaction = set()
        self.transaction_started = False
        self.transition_to(S.IN_TRANSACTION)

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """AddPartitionsToTxn for a partition the transaction has not written to yet."""
        self.is_transactional_send_allowed()
        if tp in self.partitions_in_transaction:
            return
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": tp[0], "partitions": [tp[1]]}],
        }

        def errors(r: dict) -> list[Errors]:
            return [
                Errors(p["partition_error_code"])
                for t in r["results_by_topic_v3_and_below"]
                for p in t["results_by_partition"]
            ]

        try:
            self._call(ApiKeys.ADD_PARTITIONS_TO_TXN, body, errors)
        except KafkaError as e:
            raise self._fatal_or_abortable(e) from None
        self.partitions_in_transaction.add(tp)
        self.transaction_started = True

    def send_offsets_to_transaction(
        self,
        offsets: dict[TopicPartition, int],
        group_id: str,
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> None:
        """The consumer's positions, committed for `group_id` only if the transaction
        commits: AddOffsetsToTxn to the transaction coordinator, then
        TxnOffsetCommit to the group coordinator."""
        self.require_state(S.IN_TRANSACTION, doing="send_offsets_to_transaction")
        ids = {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
        }
        try:
            self._call(
                ApiKeys.ADD_OFFSETS_TO_TXN,
                {**ids, "group_id": group_id},
                lambda r: [Errors(r["error_code"])],
            )
            self.transaction_started = True
            topics: dict[str, list[dict]] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                topics.setdefault(topic, []).append(
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                )
            body = {
                **ids,
                "group_id": group_id,
                "generation_id": generation_id,
                "member_id": member_id,
                "group_instance_id": group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            self._call(
                ApiKeys.TXN_OFFSET_COMMIT,
                body,
                lambda r: [Errors(p["error_code"]) for t in r["topics"] for p in t["partitions"]],
                key_type=GROUP_KEY_TYPE,
                key=group_id,
            )
        except KafkaError as e:
            raise self._fatal_or_abortable(e) from None

    def end_transaction(self, committed: bool) -> None:
        """EndTxn. The caller flushed the transaction's records first."""
        if committed:
            self.require_state(S.IN_TRANSACTION, doing="commit_transaction")
            self.transition_to(S.COMMITTING_TRANSACTION)
        else:
            self.require_state(S.IN_TRANSACTION, S.ABORTABLE_ERROR, doing="abort_transaction")
            self.transition_to(S.ABORTING_TRANSACTION)
        if self.transaction_started:  # Kafka: nothing written, nothing to end
            body = {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "committed": committed,
            }
            try:
                self._call(ApiKeys.END_TXN, body, lambda r: [Errors(r["error_code"])])
            except KafkaError as e:
                raise self._fatal_or_abortable(e) from None
        self.partitions_in_transaction = set()
        self.transaction_started = False
        self.transition_to(S.READY)
