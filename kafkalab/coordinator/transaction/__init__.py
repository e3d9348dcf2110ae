"""The transaction coordinator: TxnState (Kafka's TransactionState: the states and
their transition table), TransactionStateMachine (one transactional.id),
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
from kafkalab.coordinator.transaction.transaction_state import (
    VALID_PREVIOUS_STATES,
    IllegalTransactionTransition,
    TxnState,
)
from kafkalab.coordinator.transaction.transaction_state_machine import (
    TransactionState,
    TransactionStateMachine,
)

__all__ = [
    "INIT_EPOCH_RULE_KEY",
    "TRANSACTION_STATE_TOPIC",
    "VALID_PREVIOUS_STATES",
    "AddPartitionsToTxnResult",
    "DescribedTransaction",
    "IllegalTransactionTransition",
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
    "TxnState",
]
