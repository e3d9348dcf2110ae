"""TransactionCoordinatorService: the transaction coordinator as the API modules see it.

Kafka's class: kafka.coordinator.transaction.TransactionCoordinator, as KafkaApis
calls it (handleInitProducerId, handleAddPartitionsToTransaction,
handleEndTransaction, handleDescribeTransactions, handleListTransactions), the
counterpart of GroupCoordinatorService. One typed async method per request, each
one call of the sans-IO TransactionCoordinator run by its CoordinatorRuntime on
`__transaction_state`; the TransactionMarkerChannelManager it owns delivers the
SendTxnMarkers the coordinator asks for and reports back here
(`markers_pending`, `markers_written`).

Built complete by the broker: the coordinator, its runtime over the state topic
(transaction.state.log.* settings) and its marker channel, in one constructor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kafkalab.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    AddPartitionsToTxnResult,
    DescribedTransaction,
    InitProducerIdResult,
    ListTransactionsResult,
    SendTxnMarkers,
    TransactionConfig,
    TransactionCoordinator,
    TxnResult,
)
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.coordinator_runtime import CoordinatorRuntime, StateTopic, now_ms
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.metadata_cache import MetadataCache
from kafkalab.server.transaction_marker_channel_manager import TransactionMarkerChannelManager

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


class TransactionCoordinatorService:
    def __init__(
        self,
        config: TransactionConfig,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        producer_ids: Callable[[], int],
        *,
        append_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        connect: Callable[[str, int], InterBrokerConnection] | None = None,
        listener: str | None = None,
    ) -> None:
        self.coordinator = TransactionCoordinator(config, partitions=(), producer_ids=producer_ids)
        self.marker_channel = TransactionMarkerChannelManager(
            metadata_cache, self, retry_backoff_ms, connect, request_timeout_ms, listener=listener
        )
        topic = StateTopic(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            config.transaction_state_log_min_isr,
            config.transaction_state_log_segment_bytes,
            append_timeout_ms,
        )
        self.runtime = CoordinatorRuntime(
            self.coordinator,
            topic,
            replica_manager,
            metadata_cache,
            effect_handler=self._carry_out,
        )

    def _carry_out(self, effect: object) -> None:
        if isinstance(effect, SendTxnMarkers):
            self.marker_channel.send(effect)
        else:
            log.warning("transaction coordinator: no one carries out %r", effect)

    def shutdown(self) -> None:
        self.marker_channel.shutdown()
        self.runtime.shutdown()

    # -- FindCoordinator ----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    def leader_of(self, partition: int) -> int:
        """The broker leading __transaction_state-<partition> (-1: none yet; the topic
        is created on first use)."""
        return self.runtime.leader_of(partition)

    # -- the requests -------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitProducerIdResult:
        c = self.coordinator
        return await self.runtime.run(
            lambda now, request: c.init_producer_id(
                transactional_id,
                transaction_timeout_ms,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                now_ms=now,
                request=request,
            ),
            InitProducerIdResult,
        )

    async def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        transaction_version: int = 1,
    ) -> AddPartitionsToTxnResult:
        c = self.coordinator
        return await self.runtime.run(
            lambda now, request: c.add_partitions_to_txn(
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                now_ms=now,
                request=request,
                transaction_version=transaction_version,
            ),
            AddPartitionsToTxnResult,
        )

    def verify_partitions_in_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> AddPartitionsToTxnResult:
        """Read only (nothing is written): answered from the coordinator's state."""
        return self.coordinator.verify_partitions_in_txn(
            transactional_id, producer_id, producer_epoch, partitions
        )

    async def add_offsets_to_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> TxnResult:
        c = self.coordinator
        return await self.runtime.run(
            lambda now, request: c.add_offsets_to_txn(
                transactional_id, producer_id, producer_epoch, group_id, now_ms=now, request=request
            ),
            TxnResult,
        )

    async def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        transaction_version: int = 1,
    ) -> TxnResult:
        c = self.coordinator
        return await self.runtime.run(
            lambda now, request: c.end_txn(
                transactional_id,
                producer_id,
                producer_epoch,
                committed,
                now_ms=now,
                request=request,
                transaction_version=transaction_version,
            ),
            TxnResult,
        )

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[DescribedTransaction]:
        return self.coordinator.describe_transactions(transactional_ids)

    def list_transactions(
        self, state_filters: Iterable[str], producer_id_filters: Iterable[int]
    ) -> ListTransactionsResult:
        return self.coordinator.list_transactions(state_filters, producer_id_filters)

    # -- the marker channel's reports -----------------------------------------------------------

    def markers_pending(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> frozenset[TopicPartition]:
        return self.coordinator.markers_pending(transactional_id, producer_id, producer_epoch)

    def markers_written(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        self.runtime.execute(
            self.coordinator.markers_written(
                transactional_id, producer_id, producer_epoch, partitions, now_ms()
            )
        )
