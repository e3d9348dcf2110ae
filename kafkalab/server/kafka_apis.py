"""KafkaApis: the broker's request dispatch, one handler per API key.

Kafka's class: kafka.server.KafkaApis. It holds what the handlers need (the
config, the ReplicaManager, the MetadataCache, the producer id manager, the
link faults) and sends each request to its handler in `kafkalab.server.apis`,
one module per API family:

    apis/api_versions.py  ApiVersions
    apis/metadata.py      Metadata (auto-creating topics when allowed)
    apis/topics.py        CreateTopics, DeleteTopics, CreatePartitions
    apis/delete_records.py DeleteRecords (waits in a DelayedDeleteRecords)
    apis/configs.py       DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topic
                          and broker configs, their sources; changes go to the controller)
    apis/cluster.py       DescribeCluster (the brokers, the controller, the cluster id)
    apis/reassignment.py  ElectLeaders, AlterPartitionReassignments,
                          ListPartitionReassignments (forwarded to the controller)
    apis/produce.py       Produce (acks=all waits in a DelayedProduce)
    apis/fetch.py         Fetch (waits in a DelayedFetch; followers report their LEO)
    apis/list_offsets.py  ListOffsets
    apis/epochs.py        OffsetForLeaderEpoch
    apis/txn.py           InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
                          WriteTxnMarkers, DescribeTransactions, ListTransactions
                          (the transaction coordinator)
    apis/producers.py     DescribeProducers (a partition leader's producer state)
    apis/group.py         FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
                          OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
                          DeleteGroups, OffsetDelete, TxnOffsetCommit (the group
                          coordinator)
    apis/consumer_group.py ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848, the
                          same group coordinator)

Requests only a broker may send (a follower's Fetch, WriteTxnMarkers) are served
only on the inter-broker listener (`from_broker`), and a follower's Fetch only from a
broker registered with the controller in the broker epoch it names
(`follower_error`); see those methods for the errors Kafka answers otherwise.

A handler gets the request header and body (dicts as declared in
kafkalab.protocol.messages) and returns the response body, or an awaitable of
it when the request waits (a purgatory, the controller), or None when no
response is sent (acks=0 produce), or CLOSE_CONNECTION. Handlers never touch
sockets, and never ask whether a controller exists: the MetadataCache answers
the same questions either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from kafkalab.server.apis import (
    api_versions,
    cluster,
    configs,
    consumer_group,
    delete_records,
    epochs,
    fetch,
    group,
    list_offsets,
    metadata,
    produce,
    producers,
    quorum,
    reassignment,
    topics,
    txn,
)
from kafkalab.server.config import KafkaConfig
from kafkalab.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalab.server.fetch_session import (
    DEFAULT_CACHE_SLOTS,
    DEFAULT_EVICTION_MS,
    FetchManager,
    FetchSessionCache,
)
from kafkalab.server.group_coordinator_service import GroupCoordinatorService
from kafkalab.server.inter_broker_connection import parse_broker_client_id
from kafkalab.server.link_faults import CutMode, LinkFaults
from kafkalab.server.metadata_cache import MetadataCache
from kafkalab.server.producer_ids import ProducerIdManager, RPCProducerIdManager
from kafkalab.server.socket_server import CLOSE_CONNECTION, DROP_REQUEST
from kafkalab.server.transaction_coordinator_service import TransactionCoordinatorService

log = logging.getLogger(__name__)

Handler = Callable[["KafkaApis", RequestHeader, dict], Any]

HANDLERS: dict[ApiKeys, Handler] = {
    ApiKeys.PRODUCE: produce.handle_produce,
    ApiKeys.FETCH: fetch.handle_fetch,
    ApiKeys.LIST_OFFSETS: list_offsets.handle_list_offsets,
    ApiKeys.METADATA: metadata.handle_metadata,
    ApiKeys.API_VERSIONS: api_versions.handle_api_versions,
    ApiKeys.CREATE_TOPICS: topics.handle_create_topics,
    ApiKeys.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKeys.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKeys.DELETE_RECORDS: delete_records.handle_delete_records,
    ApiKeys.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKeys.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKeys.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKeys.INIT_PRODUCER_ID: txn.handle_init_producer_id,
    ApiKeys.ADD_PARTITIONS_TO_TXN: txn.handle_add_partitions_to_txn,
    ApiKeys.ADD_OFFSETS_TO_TXN: txn.handle_add_offsets_to_txn,
    ApiKeys.END_TXN: txn.handle_end_txn,
    ApiKeys.WRITE_TXN_MARKERS: txn.handle_write_txn_markers,
    ApiKeys.DESCRIBE_TRANSACTIONS: txn.handle_describe_transactions,
    ApiKeys.LIST_TRANSACTIONS: txn.handle_list_transactions,
    ApiKeys.OFFSET_FOR_LEADER_EPOCH: epochs.handle_offset_for_leader_epoch,
    ApiKeys.FIND_COORDINATOR: group.handle_find_coordinator,
    ApiKeys.JOIN_GROUP: group.handle_join_group,
    ApiKeys.SYNC_GROUP: group.handle_sync_group,
    ApiKeys.HEARTBEAT: group.handle_heartbeat,
    ApiKeys.LEAVE_GROUP: group.handle_leave_group,
    ApiKeys.OFFSET_COMMIT: group.handle_offset_commit,
    ApiKeys.OFFSET_FETCH: group.handle_offset_fetch,
    ApiKeys.DESCRIBE_GROUPS: group.handle_describe_groups,
    ApiKeys.LIST_GROUPS: group.handle_list_groups,
    ApiKeys.DELETE_GROUPS: group.handle_delete_groups,
    ApiKeys.OFFSET_DELETE: group.handle_offset_delete,
    ApiKeys.TXN_OFFSET_COMMIT: group.handle_txn_offset_commit,
    ApiKeys.CONSUMER_GROUP_HEARTBEAT: consumer_group.handle_consumer_group_heartbeat,
    ApiKeys.CONSUMER_GROUP_DESCRIBE: consumer_group.handle_consumer_group_describe,
    ApiKeys.DESCRIBE_PRODUCERS: producers.handle_describe_producers,
    ApiKeys.DESCRIBE_QUORUM: quorum.handle_describe_quorum,
    ApiKeys.ELECT_LEADERS: reassignment.handle_elect_leaders,
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS: reassignment.handle_alter_partition_reassignments,
    ApiKeys.LIST_PARTITION_REASSIGNMENTS: reassignment.handle_list_partition_reassignments,
}


class KafkaApis:
    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        producer_ids: ProducerIdManager | RPCProducerIdManager,
        link_faults: LinkFaults | None = None,
        group_coordinator: GroupCoordinatorService | None = None,
        transaction_coordinator: TransactionCoordinatorService | None = None,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.producer_ids = producer_ids
        self.link_faults = link_faults
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        # the leader asks the transaction coordinator: before a producer's first
        # transactional write (transaction.partition.verification.enable), and to add a
        # partition of transactions v2 (Produce v12+, TxnOffsetCommit v5+); None: a
        # KafkaApis built without one (a unit test), which does neither
        self.add_partitions_to_txn_manager: AddPartitionsToTxnManager | None = None
        self.transaction_verification_enable = False
        # fetch sessions (KIP-227), for consumers and followers
        extra = getattr(config, "extra", None) or {}
        self.fetch_manager = FetchManager(
            FetchSessionCache(
                int(extra.get("max.incremental.fetch.session.cache.slots", DEFAULT_CACHE_SLOTS)),
                int(extra.get("min.incremental.fetch.session.eviction.ms", DEFAULT_EVICTION_MS)),
            ),
            getattr(replica_manager, "clock", None) or (lambda: int(time.time() * 1000)),
        )
        # the broker's config layers (static, dynamic); the broker sets the one it applies
        self._dynamic_config: DynamicBrokerConfig | None = None

    @property
    def dynamic_config(self) -> DynamicBrokerConfig:
        """This broker's configs in layers (DescribeConfigs, AlterConfigs): the one
        the broker applies, else one of its static config alone."""
        if self._dynamic_config is None:
            self._dynamic_config = DynamicBrokerConfig(self.config.node_id, self.config.extra)
        return self._dynamic_config

    @dynamic_config.setter
    def dynamic_config(self, value: DynamicBrokerConfig) -> None:
        self._dynamic_config = value

    def handle(self, header: RequestHeader, body: dict) -> Any:
        return HANDLERS[ApiKeys(header.api_key)](self, header, body)

    def from_broker(self, header: RequestHeader) -> bool:
        """Did the request arrive on the listener brokers use among themselves
        (inter.broker.listener.name)? Kafka asks its authorizer whether the
        principal may CLUSTER_ACTION; with no authentication here, the listener is
        the credential. A header with no listener was made in this process (a test
        calling a handler), not read from a socket."""
        return header.listener in ("", self.config.inter_broker_listener)

    def follower_error(self, header: RequestHeader, replica_id: int) -> Errors:
        """NONE if this request may act as replica `replica_id` (a follower's Fetch,
        which moves the follower's fetch state and so the HW and the ISR); else the
        error Kafka answers for every partition:

        - TOPIC_AUTHORIZATION_FAILED: not from a broker (Kafka: a follower fetch
          whose principal lacks CLUSTER_ACTION, KafkaApis.handleFetchRequest);
        - NOT_LEADER_OR_FOLLOWER: no broker `replica_id` is registered with the
          controller in the broker epoch the request names, in its client id
          `broker-<id>-epoch-<epoch>` (KIP-903: Kafka fences a follower fetch with
          a stale broker epoch, Replica.updateFetchStateOrThrow, with this error;
          Fetch v15+ carries the epoch in ReplicaState, our v11 in the client id).
        """
        if not header.listener:
            return Errors.NONE  # in-process, not from a socket
        if not self.from_broker(header):
            return Errors.TOPIC_AUTHORIZATION_FAILED
        registered = self.metadata_cache.broker_epoch(replica_id)
        if registered is None or parse_broker_client_id(header.client_id) != (
            replica_id,
            registered,
        ):
            return Errors.NOT_LEADER_OR_FOLLOWER
        return Errors.NONE

    def held(self, header: RequestHeader):
        """An awaitable that holds this client request (kafkalab's held-request
        fault, link_faults.py), or None: go on now. Requests between brokers are
        never held."""
        if self.link_faults is None or self.from_broker(header):
            return None
        seconds = self.link_faults.take_hold(header.api_key)
        if seconds is None:
            return None
        log.info(
            "holding %s v%d from %s (correlation id %d) for up to %.1f s",
            ApiKeys(header.api_key).name,
            header.api_version,
            header.client_host,
            header.correlation_id,
            seconds,
        )
        return self.link_faults.wait_held(seconds)

    def client_cut(self, header: RequestHeader) -> object | None:
        """CLOSE_CONNECTION or DROP_REQUEST for a client request while this broker is
        deaf to that client (kafkalab's `isolate_clients`, link_faults.py), else
        None. Requests between brokers are never cut this way."""
        if self.link_faults is None or self.from_broker(header):
            return None
        self.link_faults.refresh()
        mode = self.link_faults.client_cut(header.client_id)
        if mode is None:
            return None
        return DROP_REQUEST if mode == CutMode.DROP else CLOSE_CONNECTION

    def unheard(self, replica_id: int) -> object:
        """The answer to a request from a replica this broker is deaf to: the
        connection closed (a refused cut) or the request dropped (link_faults.py)."""
        assert self.link_faults is not None
        return (
            DROP_REQUEST if self.link_faults.mode(replica_id) == CutMode.DROP else CLOSE_CONNECTION
        )

    def hears(self, replica_id: int) -> bool:
        """Does a request from this replica reach us, or is the link cut (kafkalab's
        link faults)? Clients (replica id < 0) always do."""
        return replica_id < 0 or self.link_faults is None or self.link_faults.hears(replica_id)


__all__ = ["HANDLERS", "KafkaApis"]
