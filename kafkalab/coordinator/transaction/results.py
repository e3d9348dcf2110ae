"""What the transaction coordinator answers, and the effect it adds to the group
coordinator's (kafkalab.coordinator.group.results: Respond, AppendRecords, Effects).

    SendTxnMarkers(...)   write a COMMIT or ABORT marker for this producer into each
                          of `partitions` (WriteTxnMarkers to each partition's leader),
                          retrying until written; report each written partition with
                          `coordinator.markers_written(transactional_id, producer_id,
                          producer_epoch, partitions, now_ms)`. Once all are written the
                          coordinator writes Complete* (Kafka: the
                          TransactionMarkerChannelManager and its completion callback).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.errors import Errors

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class SendTxnMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class AddPartitionsToTxnResult:
    """Per partition: NONE, or the one error every partition of the request gets
    (Kafka answers OPERATION_NOT_ATTEMPTED for the others when some partition is
    refused on its own, e.g. UNKNOWN_TOPIC_OR_PARTITION)."""

    errors: dict[TopicPartition, Errors]


@dataclass(frozen=True)
class TxnResult:
    """AddOffsetsToTxn and EndTxn: one error; EndTxn of transactions v2 (v5+) also
    the producer id and epoch the next transaction uses (-1 with an error)."""

    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class DescribedTransaction:
    error: Errors
    transactional_id: str
    state: TxnState | str = ""  # "" with an error
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: TxnState


@dataclass(frozen=True)
class ListTransactionsResult:
    error: Errors
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = field(default_factory=tuple)
