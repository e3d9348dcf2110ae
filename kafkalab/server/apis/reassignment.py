"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

Kafka: KafkaApis.handleElectLeaders / handleAlterPartitionReassignmentsRequest /
handleListPartitionReassignmentsRequest, which a KRaft broker forwards to the
controller (ReplicationControlManager decides; `kafkalab.controller.
partition_reassignment` holds the steps). Here the MetadataCache forwards (a broker
in a cluster) or answers as the only broker (standalone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalab.protocol.header import RequestHeader

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis


def handle_elect_leaders(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.elect_leaders(body)


def handle_alter_partition_reassignments(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.alter_partition_reassignments(body)


def handle_list_partition_reassignments(apis: KafkaApis, header: RequestHeader, body: dict) -> Any:
    return apis.metadata_cache.list_partition_reassignments(body)
