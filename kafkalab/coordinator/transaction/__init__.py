"""The transaction coordinator, sans-IO:

transaction_state           TxnState (Kafka's TransactionState): the states and
                            their transition table, VALID_PREVIOUS_STATES
transaction_state_machine   TransactionStateMachine: the rules of one transactional.id
transaction_log             the __transaction_state records, byte for byte
transaction_coordinator_shard  TransactionCoordinatorShard: every id, handlers that
                            return (record, response), one `replay(record)`
transaction_coordinator     TransactionCoordinator: the shard on the shared
                            CoordinatorRuntimeCore (kafkalab.coordinator.runtime),
                            answering with effects
"""

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
from kafkalab.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from kafkalab.coordinator.transaction.transaction_coordinator_shard import (
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionRecord,
    TransactionResult,
    TxnAppendKind,
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
    "TransactionCoordinatorShard",
    "TransactionMetadata",
    "TransactionRecord",
    "TransactionResult",
    "TransactionState",
    "TransactionStateMachine",
    "TxnAppendKind",
    "TxnResult",
    "TxnState",
]
