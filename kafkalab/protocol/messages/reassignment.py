"""Leadership and replica placement, the operator's APIs of a failure:
ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46)
(Kafka's `kafka-leader-election` and `kafka-reassign-partitions`, Admin.electLeaders,
alterPartitionReassignments, listPartitionReassignments).

Declared field for field from Kafka's `ElectLeadersRequest.json` (v1: KIP-460's
ElectionType; v2 the first flexible), `AlterPartitionReassignmentsRequest.json`
(KIP-455, flexible from v0; v1: KIP-860's AllowReplicationFactorChange) and
`ListPartitionReassignmentsRequest.json` (KIP-455, v0, flexible).
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import BOOL, INT8, INT16, INT32, STRING, ArrayOf

ELECT_LEADERS_REQUEST = Message(
    ApiKeys.ELECT_LEADERS,
    "ElectLeadersRequest",
    [
        F("election_type", INT8, "1+"),  # 0 preferred, 1 unclean (v0: preferred)
        F(
            "topic_partitions",
            [
                F("topic", STRING),
                F("partitions", ArrayOf(INT32)),  # Kafka: PartitionId
            ],
            nullable="0+",  # null: every partition of the cluster
        ),
        F("timeout_ms", INT32, default=60_000),
    ],
    flexible_from=2,
)

ELECT_LEADERS_RESPONSE = Message(
    ApiKeys.ELECT_LEADERS,
    "ElectLeadersResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16, "1+"),
        F(
            "replica_election_results",
            [
                F("topic", STRING),
                F(
                    "partition_result",
                    [
                        F("partition_id", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+", default=NULL),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=2,
)

ALTER_PARTITION_REASSIGNMENTS_REQUEST = Message(
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
    "AlterPartitionReassignmentsRequest",
    [
        F("timeout_ms", INT32, default=60_000),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        # null: cancel the partition's reassignment in progress
                        F("replicas", ArrayOf(INT32), nullable="0+", default=NULL),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
    "AlterPartitionReassignmentsResponse",
    [
        F("throttle_time_ms", INT32),
        F("allow_replication_factor_change", BOOL, "1+", default=True),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=NULL),
        F(
            "responses",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+", default=NULL),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

LIST_PARTITION_REASSIGNMENTS_REQUEST = Message(
    ApiKeys.LIST_PARTITION_REASSIGNMENTS,
    "ListPartitionReassignmentsRequest",
    [
        F("timeout_ms", INT32, default=60_000),
        F(
            "topics",
            [
                F("name", STRING),
                F("partition_indexes", ArrayOf(INT32)),
            ],
            nullable="0+",  # null: every reassignment in progress
            default=NULL,
        ),
    ],
    flexible_from=0,
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = Message(
    ApiKeys.LIST_PARTITION_REASSIGNMENTS,
    "ListPartitionReassignmentsResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=NULL),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("replicas", ArrayOf(INT32)),
                        F("adding_replicas", ArrayOf(INT32)),
                        F("removing_replicas", ArrayOf(INT32)),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

# Kafka 4.x serves ElectLeaders v0-v2, AlterPartitionReassignments v0-v1 (v1 from 4.1,
# KIP-860) and ListPartitionReassignments v0.
ELECT_LEADERS_API = Api(
    ApiKeys.ELECT_LEADERS, "ElectLeaders", 0, 2, ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE
)
ALTER_PARTITION_REASSIGNMENTS_API = Api(
    ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
    "AlterPartitionReassignments",
    0,
    1,
    ALTER_PARTITION_REASSIGNMENTS_REQUEST,
    ALTER_PARTITION_REASSIGNMENTS_RESPONSE,
)
LIST_PARTITION_REASSIGNMENTS_API = Api(
    ApiKeys.LIST_PARTITION_REASSIGNMENTS,
    "ListPartitionReassignments",
    0,
    0,
    LIST_PARTITION_REASSIGNMENTS_REQUEST,
    LIST_PARTITION_REASSIGNMENTS_RESPONSE,
)
REASSIGNMENT_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        ELECT_LEADERS_API,
        ALTER_PARTITION_REASSIGNMENTS_API,
        LIST_PARTITION_REASSIGNMENTS_API,
    )
}
