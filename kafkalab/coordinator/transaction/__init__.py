"""The transaction coordinator: TransactionStateMachine (one transactional.id),
TransactionCoordinator (every id of the __transaction_state partitions a broker
leads, sans-IO) and the __transaction_state records."""

from kafkalab.coordinator.transaction.results import (
    AddPartitionsToTxnResult,
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    ListTransactionsResult,
    SendTxnMarkers,
    TxnResult,
)
from kafkalab.coordinator.transaction.transaction_config import (
    INIT_EPOCH_RULE_KEY,
    InitEpochRule,
    TransactionConfig,
)
from kafkalab.coordinator.transaction.transaction_coordinator import (
    TransactionCoordinator,
    TransactionMetadata,
)
from kafkalab.coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from kafkalab.coordinator.transaction.transaction_state_machine import (
    TransactionState,
    TransactionStateMachine,
)

__all__ = [
    "INIT_EPOCH_RULE_KEY",
    "TRANSACTION_STATE_TOPIC",
    "AddPartitionsToTxnResult",
    "DescribedTransaction",
    "InitEpochRule",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "ListedTransaction",
    "SendTxnMarkers",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionState",
    "TransactionStateMachine",
    "TxnResult",
]
