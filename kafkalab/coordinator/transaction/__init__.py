"""The transaction coordinator: TransactionStateMachine, per transactional.id."""

from kafkalab.coordinator.transaction.transaction_state_machine import (
    TransactionState,
    TransactionStateMachine,
)

__all__ = ["TransactionState", "TransactionStateMachine"]
