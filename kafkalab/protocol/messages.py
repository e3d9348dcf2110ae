"""The requests and responses kafkalab speaks, declared once, as data.

Each declaration follows Kafka's JSON schema of the same name
(`clients/src/main/resources/common/message/<Name>Request.json`), field for
field, in order, with the versions each field exists in. `API_VERSIONS` holds
the version range the broker advertises for each API: the non-flexible ranges
that every client in shared/kafka-protocol-notes.md can use (ApiVersions
also at v3, the first flexible one, which librdkafka and kafka-python send).

Field order matters: fields are encoded in declaration order, which is why
`throttle_time_ms` comes last in Produce and ApiVersions responses.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.schema import NULL, Message, Struct
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
)


@dataclass(frozen=True)
class Api:
    """One API: its key, name, the versions kafkalab supports, and both schemas."""

    key: ApiKeys
    name: str
    min_version: int
    max_version: int
    request: Message
    response: Message

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


# -- ApiVersions (18) ----------------------------------------------------------------------

API_VERSIONS_REQUEST = Message(
    ApiKeys.API_VERSIONS,
    "ApiVersionsRequest",
    [
        F("client_software_name", STRING, "3+"),
        F("client_software_version", STRING, "3+"),
    ],
    flexible_from=3,
)

API_VERSIONS_RESPONSE = Message(
    ApiKeys.API_VERSIONS,
    "ApiVersionsResponse",
    [
        F("error_code", INT16),
        F(
            "api_keys",
            [
                F("api_key", INT16),
                F("min_version", INT16),
                F("max_version", INT16),
            ],
        ),
        F("throttle_time_ms", INT32, "1+"),
    ],
    flexible_from=3,
)

# -- Metadata (3) --------------------------------------------------------------------------

METADATA_REQUEST = Message(
    ApiKeys.METADATA,
    "MetadataRequest",
    [
        F(
            "topics",
            [
                F("topic_id", UUID, "10+"),
                F("name", STRING, nullable="10+"),
            ],
            nullable="1+",
        ),
        F("allow_auto_topic_creation", BOOL, "4+", default=True),
        F("include_cluster_authorized_operations", BOOL, "8-10"),
        F("include_topic_authorized_operations", BOOL, "8+"),
    ],
    flexible_from=9,
)

METADATA_RESPONSE = Message(
    ApiKeys.METADATA,
    "MetadataResponse",
    [
        F("throttle_time_ms", INT32, "3+"),
        F(
            "brokers",
            [
                F("node_id", INT32),
                F("host", STRING),
                F("port", INT32),
                F("rack", STRING, "1+", nullable="1+"),
            ],
        ),
        F("cluster_id", STRING, "2+", nullable="2+"),
        F("controller_id", INT32, "1+", default=-1),
        F(
            "topics",
            [
                F("error_code", INT16),
                F("name", STRING, nullable="12+"),
                F("topic_id", UUID, "10+"),
                F("is_internal", BOOL, "1+"),
                F(
                    "partitions",
                    [
                        F("error_code", INT16),
                        F("partition_index", INT32),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32, "7+", default=-1),
                        F("replica_nodes", ArrayOf(INT32)),
                        F("isr_nodes", ArrayOf(INT32)),
                        F("offline_replicas", ArrayOf(INT32), "5+"),
                    ],
                ),
                F("topic_authorized_operations", INT32, "8+", default=-(2**31)),
            ],
        ),
        F("cluster_authorized_operations", INT32, "8-10", default=-(2**31)),
    ],
    flexible_from=9,
)

# -- Produce (0) ---------------------------------------------------------------------------

PRODUCE_REQUEST = Message(
    ApiKeys.PRODUCE,
    "ProduceRequest",
    [
        F("transactional_id", STRING, "3+", nullable="0+"),
        F("acks", INT16),
        F("timeout_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("records", RECORDS, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=9,
)

PRODUCE_RESPONSE = Message(
    ApiKeys.PRODUCE,
    "ProduceResponse",
    [
        F(
            "responses",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("base_offset", INT64),
                        F("log_append_time_ms", INT64, "2+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F(
                            "record_errors",
                            [
                                F("batch_index", INT32),
                                F("batch_index_error_message", STRING, nullable="8+"),
                            ],
                            "8+",
                        ),
                        F("error_message", STRING, "8+", nullable="8+"),
                    ],
                ),
            ],
        ),
        F("throttle_time_ms", INT32, "1+"),
    ],
    flexible_from=9,
)

# -- Fetch (1) -----------------------------------------------------------------------------

FETCH_REQUEST = Message(
    ApiKeys.FETCH,
    "FetchRequest",
    [
        F("replica_id", INT32),
        F("max_wait_ms", INT32),
        F("min_bytes", INT32),
        F("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        F("isolation_level", INT8, "4+"),
        F("session_id", INT32, "7+"),
        F("session_epoch", INT32, "7+", default=-1),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "9+", default=-1),
                        F("fetch_offset", INT64),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F("partition_max_bytes", INT32),
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            [
                F("topic", STRING),
                F("partitions", ArrayOf(INT32)),
            ],
            "7+",
        ),
        F("rack_id", STRING, "11+"),
    ],
    flexible_from=12,
)

FETCH_RESPONSE = Message(
    ApiKeys.FETCH,
    "FetchResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "7+"),
        F("session_id", INT32, "7+"),
        F(
            "responses",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("high_watermark", INT64),
                        F("last_stable_offset", INT64, "4+", default=-1),
                        F("log_start_offset", INT64, "5+", default=-1),
                        F(
                            "aborted_transactions",
                            [
                                F("producer_id", INT64),
                                F("first_offset", INT64),
                            ],
                            "4+",
                            nullable="4+",
                        ),
                        F("preferred_read_replica", INT32, "11+", default=-1),
                        F("records", RECORDS, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=12,
)

# -- ListOffsets (2) -----------------------------------------------------------------------

LIST_OFFSETS_REQUEST = Message(
    ApiKeys.LIST_OFFSETS,
    "ListOffsetsRequest",
    [
        F("replica_id", INT32),
        F("isolation_level", INT8, "2+"),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("current_leader_epoch", INT32, "4+", default=-1),
                        F("timestamp", INT64),
                        F("max_num_offsets", INT32, "0", default=1),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=6,
)

LIST_OFFSETS_RESPONSE = Message(
    ApiKeys.LIST_OFFSETS,
    "ListOffsetsResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("old_style_offsets", ArrayOf(INT64), "0"),
                        F("timestamp", INT64, "1+", default=-1),
                        F("offset", INT64, "1+", default=-1),
                        F("leader_epoch", INT32, "4+", default=-1),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=6,
)

# -- CreateTopics (19) ---------------------------------------------------------------------

CREATE_TOPICS_REQUEST = Message(
    ApiKeys.CREATE_TOPICS,
    "CreateTopicsRequest",
    [
        F(
            "topics",
            [
                F("name", STRING),
                F("num_partitions", INT32),
                F("replication_factor", INT16),
                F(
                    "assignments",
                    [
                        F("partition_index", INT32),
                        F("broker_ids", ArrayOf(INT32)),
                    ],
                ),
                F(
                    "configs",
                    [
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
        F("timeout_ms", INT32, default=60000),
        F("validate_only", BOOL, "1+"),
    ],
    flexible_from=5,
)

CREATE_TOPICS_RESPONSE = Message(
    ApiKeys.CREATE_TOPICS,
    "CreateTopicsResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            [
                F("name", STRING),
                F("error_code", INT16),
                F("error_message", STRING, "1+", nullable="0+"),
            ],
        ),
    ],
    flexible_from=5,
)

# -- DeleteTopics (20) ---------------------------------------------------------------------

DELETE_TOPICS_REQUEST = Message(
    ApiKeys.DELETE_TOPICS,
    "DeleteTopicsRequest",
    [
        F("topic_names", ArrayOf(STRING), "0-5"),
        F("timeout_ms", INT32),
    ],
    flexible_from=4,
)

DELETE_TOPICS_RESPONSE = Message(
    ApiKeys.DELETE_TOPICS,
    "DeleteTopicsResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F(
            "responses",
            [
                F("name", STRING),
                F("error_code", INT16),
            ],
        ),
    ],
    flexible_from=4,
)

# -- InitProducerId (22) -------------------------------------------------------------------

INIT_PRODUCER_ID_REQUEST = Message(
    ApiKeys.INIT_PRODUCER_ID,
    "InitProducerIdRequest",
    [
        F("transactional_id", STRING, nullable="0+"),
        F("transaction_timeout_ms", INT32),
        F("producer_id", INT64, "3+", default=-1),
        F("producer_epoch", INT16, "3+", default=-1),
    ],
    flexible_from=2,
)

INIT_PRODUCER_ID_RESPONSE = Message(
    ApiKeys.INIT_PRODUCER_ID,
    "InitProducerIdResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id", INT64, default=-1),
        F("producer_epoch", INT16, default=-1),
    ],
    flexible_from=2,
)

# -- OffsetForLeaderEpoch (23) -------------------------------------------------------------

OFFSET_FOR_LEADER_EPOCH_REQUEST = Message(
    ApiKeys.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpochRequest",
    [
        F("replica_id", INT32, "3+", default=-2),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("partition", INT32),
                        F("current_leader_epoch", INT32, "2+", default=-1),
                        F("leader_epoch", INT32),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=4,
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = Message(
    ApiKeys.OFFSET_FOR_LEADER_EPOCH,
    "OffsetForLeaderEpochResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F(
            "topics",
            [
                F("topic", STRING),
                F(
                    "partitions",
                    [
                        F("error_code", INT16),
                        F("partition", INT32),
                        F("leader_epoch", INT32, "1+", default=-1),
                        F("end_offset", INT64),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=4,
)


APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(ApiKeys.PRODUCE, "Produce", 0, 7, PRODUCE_REQUEST, PRODUCE_RESPONSE),
        Api(ApiKeys.FETCH, "Fetch", 0, 11, FETCH_REQUEST, FETCH_RESPONSE),
        Api(ApiKeys.LIST_OFFSETS, "ListOffsets", 0, 5, LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE),
        Api(ApiKeys.METADATA, "Metadata", 0, 12, METADATA_REQUEST, METADATA_RESPONSE),
        Api(ApiKeys.API_VERSIONS, "ApiVersions", 0, 3, API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
        Api(
            ApiKeys.CREATE_TOPICS,
            "CreateTopics",
            0,
            4,
            CREATE_TOPICS_REQUEST,
            CREATE_TOPICS_RESPONSE,
        ),
        Api(
            ApiKeys.DELETE_TOPICS,
            "DeleteTopics",
            0,
            3,
            DELETE_TOPICS_REQUEST,
            DELETE_TOPICS_RESPONSE,
        ),
        Api(
            ApiKeys.INIT_PRODUCER_ID,
            "InitProducerId",
            0,
            1,
            INIT_PRODUCER_ID_REQUEST,
            INIT_PRODUCER_ID_RESPONSE,
        ),
        Api(
            ApiKeys.OFFSET_FOR_LEADER_EPOCH,
            "OffsetForLeaderEpoch",
            0,
            3,
            OFFSET_FOR_LEADER_EPOCH_REQUEST,
            OFFSET_FOR_LEADER_EPOCH_RESPONSE,
        ),
    )
}


def api_versions_body(apis: dict[int, Api], error: int = 0) -> dict:
    """An ApiVersions response body listing `apis` (with `error`, e.g. UNSUPPORTED_VERSION)."""
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(apis.values(), key=lambda a: a.key)
        ],
        "throttle_time_ms": 0,
    }


# -- Controller APIs (served on the controller's listener only, never advertised
#    to clients): how brokers register, stay alive and change ISRs (KRaft). ------------------

BROKER_REGISTRATION_REQUEST = Message(
    ApiKeys.BROKER_REGISTRATION,
    "BrokerRegistrationRequest",
    [
        F("broker_id", INT32),
        F("cluster_id", STRING),
        F("incarnation_id", UUID),
        F(
            "listeners",
            [
                F("name", STRING),
                F("host", STRING),
                F("port", UINT16),
                F("security_protocol", INT16),
            ],
        ),
        F(
            "features",
            [
                F("name", STRING),
                F("min_supported_version", INT16),
                F("max_supported_version", INT16),
            ],
        ),
        F("rack", STRING, nullable="0+"),
    ],
    flexible_from=0,
)

BROKER_REGISTRATION_RESPONSE = Message(
    ApiKeys.BROKER_REGISTRATION,
    "BrokerRegistrationResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("broker_epoch", INT64, default=-1),
    ],
    flexible_from=0,
)

BROKER_HEARTBEAT_REQUEST = Message(
    ApiKeys.BROKER_HEARTBEAT,
    "BrokerHeartbeatRequest",
    [
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
        F("current_metadata_offset", INT64),
        F("want_fence", BOOL),
        F("want_shut_down", BOOL),
    ],
    flexible_from=0,
)

BROKER_HEARTBEAT_RESPONSE = Message(
    ApiKeys.BROKER_HEARTBEAT,
    "BrokerHeartbeatResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("is_caught_up", BOOL),
        F("is_fenced", BOOL, default=True),
        F("should_shut_down", BOOL),
    ],
    flexible_from=0,
)

ALTER_PARTITION_REQUEST = Message(
    ApiKeys.ALTER_PARTITION,
    "AlterPartitionRequest",
    [
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
        F(
            "topics",
            [
                F("topic_name", STRING, "0-1"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("leader_epoch", INT32),
                        F("new_isr", ArrayOf(INT32)),
                        F("leader_recovery_state", INT8, "1+"),
                        F("partition_epoch", INT32),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

ALTER_PARTITION_RESPONSE = Message(
    ApiKeys.ALTER_PARTITION,
    "AlterPartitionResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F(
            "topics",
            [
                F("topic_name", STRING, "0-1"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("leader_id", INT32),
                        F("leader_epoch", INT32),
                        F("isr", ArrayOf(INT32)),
                        F("leader_recovery_state", INT8, "1+"),
                        F("partition_epoch", INT32),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

CONTROLLER_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        APIS[ApiKeys.FETCH],  # Fetch: brokers read the metadata log with it
        APIS[ApiKeys.API_VERSIONS],
        APIS[ApiKeys.CREATE_TOPICS],
        APIS[ApiKeys.DELETE_TOPICS],
        Api(
            ApiKeys.ALTER_PARTITION,
            "AlterPartition",
            0,
            1,
            ALTER_PARTITION_REQUEST,
            ALTER_PARTITION_RESPONSE,
        ),
        Api(
            ApiKeys.BROKER_REGISTRATION,
            "BrokerRegistration",
            0,
            0,
            BROKER_REGISTRATION_REQUEST,
            BROKER_REGISTRATION_RESPONSE,
        ),
        Api(
            ApiKeys.BROKER_HEARTBEAT,
            "BrokerHeartbeat",
            0,
            0,
            BROKER_HEARTBEAT_REQUEST,
            BROKER_HEARTBEAT_RESPONSE,
        ),
    )
}


# -- Classic consumer-group APIs: the group coordinator's requests (the "classic"
#    rebalance protocol, before KIP-848). Declared here; the broker serves them once
#    their handlers are in APIS. Fields that exist only in versions above the declared
#    range are left out, as elsewhere in this file. -----------------------------------------

# -- FindCoordinator (10) ------------------------------------------------------------------

FIND_COORDINATOR_REQUEST = Message(
    ApiKeys.FIND_COORDINATOR,
    "FindCoordinatorRequest",
    [
        F("key", STRING, "0-3"),
        F("key_type", INT8, "1+"),
    ],
    flexible_from=3,
)

FIND_COORDINATOR_RESPONSE = Message(
    ApiKeys.FIND_COORDINATOR,
    "FindCoordinatorResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16, "0-3"),
        F("error_message", STRING, "1-3", nullable="1-3"),
        F("node_id", INT32, "0-3"),
        F("host", STRING, "0-3"),
        F("port", INT32, "0-3"),
    ],
    flexible_from=3,
)

# -- JoinGroup (11) ------------------------------------------------------------------------

JOIN_GROUP_REQUEST = Message(
    ApiKeys.JOIN_GROUP,
    "JoinGroupRequest",
    [
        F("group_id", STRING),
        F("session_timeout_ms", INT32),
        F("rebalance_timeout_ms", INT32, "1+", default=-1),
        F("member_id", STRING),
        F("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
        F("protocol_type", STRING),
        F(
            "protocols",
            [
                F("name", STRING),
                F("metadata", BYTES),
            ],
        ),
    ],
    flexible_from=6,
)

JOIN_GROUP_RESPONSE = Message(
    ApiKeys.JOIN_GROUP,
    "JoinGroupResponse",
    [
        F("throttle_time_ms", INT32, "2+"),
        F("error_code", INT16),
        F("generation_id", INT32, default=-1),
        F("protocol_name", STRING, nullable="7+"),
        F("leader", STRING),
        F("member_id", STRING),
        F(
            "members",
            [
                F("member_id", STRING),
                F("group_instance_id", STRING, "5+", nullable="5+", default=NULL),
                F("metadata", BYTES),
            ],
        ),
    ],
    flexible_from=6,
)

# -- Heartbeat (12) ------------------------------------------------------------------------

HEARTBEAT_REQUEST = Message(
    ApiKeys.HEARTBEAT,
    "HeartbeatRequest",
    [
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
    ],
    flexible_from=4,
)

HEARTBEAT_RESPONSE = Message(
    ApiKeys.HEARTBEAT,
    "HeartbeatResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
    ],
    flexible_from=4,
)

# -- LeaveGroup (13) -----------------------------------------------------------------------

LEAVE_GROUP_REQUEST = Message(
    ApiKeys.LEAVE_GROUP,
    "LeaveGroupRequest",
    [
        F("group_id", STRING),
        F("member_id", STRING, "0-2"),
        F(
            "members",
            [
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
            ],
            "3+",
        ),
    ],
    flexible_from=4,
)

LEAVE_GROUP_RESPONSE = Message(
    ApiKeys.LEAVE_GROUP,
    "LeaveGroupResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F(
            "members",
            [
                F("member_id", STRING, "3+"),
                F("group_instance_id", STRING, "3+", nullable="3+"),
                F("error_code", INT16, "3+"),
            ],
            "3+",
        ),
    ],
    flexible_from=4,
)

# -- SyncGroup (14) ------------------------------------------------------------------------

SYNC_GROUP_REQUEST = Message(
    ApiKeys.SYNC_GROUP,
    "SyncGroupRequest",
    [
        F("group_id", STRING),
        F("generation_id", INT32),
        F("member_id", STRING),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        F(
            "assignments",
            [
                F("member_id", STRING),
                F("assignment", BYTES),
            ],
        ),
    ],
    flexible_from=4,
)

SYNC_GROUP_RESPONSE = Message(
    ApiKeys.SYNC_GROUP,
    "SyncGroupResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F("assignment", BYTES),
    ],
    flexible_from=4,
)

# -- OffsetCommit (8) ----------------------------------------------------------------------

OFFSET_COMMIT_REQUEST = Message(
    ApiKeys.OFFSET_COMMIT,
    "OffsetCommitRequest",
    [
        F("group_id", STRING),
        F("generation_id_or_member_epoch", INT32, "1+", default=-1),
        F("member_id", STRING, "1+"),
        F("group_instance_id", STRING, "7+", nullable="7+", default=NULL),
        F("retention_time_ms", INT64, "2-4", default=-1),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "6+", default=-1),
                        F("commit_timestamp", INT64, "1", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=8,
)

OFFSET_COMMIT_RESPONSE = Message(
    ApiKeys.OFFSET_COMMIT,
    "OffsetCommitResponse",
    [
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=8,
)

# -- OffsetFetch (9) -----------------------------------------------------------------------

OFFSET_FETCH_REQUEST = Message(
    ApiKeys.OFFSET_FETCH,
    "OffsetFetchRequest",
    [
        F("group_id", STRING, "0-7"),
        F(
            "topics",
            [
                F("name", STRING, "0-7"),
                F("partition_indexes", ArrayOf(INT32), "0-7"),
            ],
            "0-7",
            nullable="2-7",
        ),
        F("require_stable", BOOL, "7"),
    ],
    flexible_from=6,
)

OFFSET_FETCH_RESPONSE = Message(
    ApiKeys.OFFSET_FETCH,
    "OffsetFetchResponse",
    [
        F("throttle_time_ms", INT32, "3+"),
        F(
            "topics",
            [
                F("name", STRING, "0-7"),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32, "0-7"),
                        F("committed_offset", INT64, "0-7"),
                        F("committed_leader_epoch", INT32, "5-7", default=-1),
                        F("metadata", STRING, "0-7", nullable="0-7"),
                        F("error_code", INT16, "0-7"),
                    ],
                    "0-7",
                ),
            ],
            "0-7",
        ),
        F("error_code", INT16, "2-7", default=0),
    ],
    flexible_from=6,
)

# -- DescribeGroups (15) -------------------------------------------------------------------

DESCRIBE_GROUPS_REQUEST = Message(
    ApiKeys.DESCRIBE_GROUPS,
    "DescribeGroupsRequest",
    [
        F("groups", ArrayOf(STRING)),
        F("include_authorized_operations", BOOL, "3+"),
    ],
    flexible_from=5,
)

DESCRIBE_GROUPS_RESPONSE = Message(
    ApiKeys.DESCRIBE_GROUPS,
    "DescribeGroupsResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F(
            "groups",
            [
                F("error_code", INT16),
                F("group_id", STRING),
                F("group_state", STRING),
                F("protocol_type", STRING),
                F("protocol_data", STRING),
                F(
                    "members",
                    [
                        F("member_id", STRING),
                        F("group_instance_id", STRING, "4+", nullable="4+", default=NULL),
                        F("client_id", STRING),
                        F("client_host", STRING),
                        F("member_metadata", BYTES),
                        F("member_assignment", BYTES),
                    ],
                ),
                F("authorized_operations", INT32, "3+", default=-(2**31)),
            ],
        ),
    ],
    flexible_from=5,
)

# -- ListGroups (16) -----------------------------------------------------------------------

LIST_GROUPS_REQUEST = Message(
    ApiKeys.LIST_GROUPS,
    "ListGroupsRequest",
    [],  # v0-3 have no fields; StatesFilter comes in v4, TypesFilter in v5
    flexible_from=3,
)

LIST_GROUPS_RESPONSE = Message(
    ApiKeys.LIST_GROUPS,
    "ListGroupsResponse",
    [
        F("throttle_time_ms", INT32, "1+"),
        F("error_code", INT16),
        F(
            "groups",
            [
                F("group_id", STRING),
                F("protocol_type", STRING),
            ],
        ),
    ],
    flexible_from=3,
)

# -- DeleteGroups (42) ---------------------------------------------------------------------

DELETE_GROUPS_REQUEST = Message(
    ApiKeys.DELETE_GROUPS,
    "DeleteGroupsRequest",
    [
        F("groups_names", ArrayOf(STRING)),
    ],
    flexible_from=2,
)

DELETE_GROUPS_RESPONSE = Message(
    ApiKeys.DELETE_GROUPS,
    "DeleteGroupsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "results",
            [
                F("group_id", STRING),
                F("error_code", INT16),
            ],
        ),
    ],
    flexible_from=2,
)

# -- OffsetDelete (47) ---------------------------------------------------------------------

OFFSET_DELETE_REQUEST = Message(
    ApiKeys.OFFSET_DELETE,
    "OffsetDeleteRequest",
    [
        F("group_id", STRING),
        F(
            "topics",
            [
                F("name", STRING),
                F("partitions", [F("partition_index", INT32)]),
            ],
        ),
    ],
    flexible_from=None,  # Kafka: "flexibleVersions": "none"
)

OFFSET_DELETE_RESPONSE = Message(
    ApiKeys.OFFSET_DELETE,
    "OffsetDeleteResponse",
    [
        F("error_code", INT16),
        F("throttle_time_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=None,
)

# Declared, not yet served: the lead moves each into APIS with its handler.
GROUP_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.FIND_COORDINATOR,
            "FindCoordinator",
            0,
            3,
            FIND_COORDINATOR_REQUEST,
            FIND_COORDINATOR_RESPONSE,
        ),
        Api(ApiKeys.JOIN_GROUP, "JoinGroup", 0, 5, JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
        Api(ApiKeys.HEARTBEAT, "Heartbeat", 0, 3, HEARTBEAT_REQUEST, HEARTBEAT_RESPONSE),
        Api(ApiKeys.LEAVE_GROUP, "LeaveGroup", 0, 3, LEAVE_GROUP_REQUEST, LEAVE_GROUP_RESPONSE),
        Api(ApiKeys.SYNC_GROUP, "SyncGroup", 0, 3, SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
        Api(
            ApiKeys.OFFSET_COMMIT,
            "OffsetCommit",
            0,
            7,
            OFFSET_COMMIT_REQUEST,
            OFFSET_COMMIT_RESPONSE,
        ),
        Api(
            ApiKeys.OFFSET_FETCH,
            "OffsetFetch",
            0,
            5,
            OFFSET_FETCH_REQUEST,
            OFFSET_FETCH_RESPONSE,
        ),
        Api(
            ApiKeys.DESCRIBE_GROUPS,
            "DescribeGroups",
            0,
            4,
            DESCRIBE_GROUPS_REQUEST,
            DESCRIBE_GROUPS_RESPONSE,
        ),
        Api(ApiKeys.LIST_GROUPS, "ListGroups", 0, 2, LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE),
        Api(
            ApiKeys.DELETE_GROUPS,
            "DeleteGroups",
            0,
            1,
            DELETE_GROUPS_REQUEST,
            DELETE_GROUPS_RESPONSE,
        ),
        Api(
            ApiKeys.OFFSET_DELETE,
            "OffsetDelete",
            0,
            0,
            OFFSET_DELETE_REQUEST,
            OFFSET_DELETE_RESPONSE,
        ),
    )
}

# The broker serves them (kafkalab.server.apis.group), so it advertises them too.
APIS.update(GROUP_APIS)


# -- Transactions: group side (TxnOffsetCommit) --------------------------------------------

TXN_OFFSET_COMMIT_REQUEST = Message(
    ApiKeys.TXN_OFFSET_COMMIT,
    "TxnOffsetCommitRequest",
    [
        F("transactional_id", STRING),
        F("group_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("generation_id", INT32, "3+", default=-1),
        F("member_id", STRING, "3+", default=""),
        F("group_instance_id", STRING, "3+", nullable="3+", default=NULL),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("committed_offset", INT64),
                        F("committed_leader_epoch", INT32, "2+", default=-1),
                        F("committed_metadata", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=3,
)

TXN_OFFSET_COMMIT_RESPONSE = Message(
    ApiKeys.TXN_OFFSET_COMMIT,
    "TxnOffsetCommitResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=3,
)

TXN_GROUP_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.TXN_OFFSET_COMMIT,
            "TxnOffsetCommit",
            0,
            3,
            TXN_OFFSET_COMMIT_REQUEST,
            TXN_OFFSET_COMMIT_RESPONSE,
        ),
        # v6 (flexible) and v7 (require_stable: read_committed consumers) with the
        # transactional offsets that make a commit unstable
        Api(
            ApiKeys.OFFSET_FETCH,
            "OffsetFetch",
            0,
            7,
            OFFSET_FETCH_REQUEST,
            OFFSET_FETCH_RESPONSE,
        ),
    )
}
APIS.update(TXN_GROUP_APIS)

# -- KIP-848: the consumer group protocol. Flexible from v0. -------------------------------

# -- ConsumerGroupHeartbeat (68) -----------------------------------------------------------
#    v1 (Kafka 4.0) adds SubscribedTopicRegex and has the consumer make up its own member
#    id (KIP-1082); librdkafka 2.16 sends v1 only. Kafka 4.0 dropped v0's ClientAssignors
#    before the API was stable, so v0 here is 4.0's v0.

_TOPIC_PARTITIONS = [F("topic_id", UUID), F("partitions", ArrayOf(INT32))]

CONSUMER_GROUP_HEARTBEAT_REQUEST = Message(
    ApiKeys.CONSUMER_GROUP_HEARTBEAT,
    "ConsumerGroupHeartbeatRequest",
    [
        F("group_id", STRING),
        F("member_id", STRING),
        F("member_epoch", INT32),
        F("instance_id", STRING, nullable="0+", default=NULL),
        F("rack_id", STRING, nullable="0+", default=NULL),
        F("rebalance_timeout_ms", INT32, default=-1),
        F("subscribed_topic_names", ArrayOf(STRING), nullable="0+", default=NULL),
        F("subscribed_topic_regex", STRING, "1+", nullable="1+", default=NULL),
        F("server_assignor", STRING, nullable="0+", default=NULL),
        F("topic_partitions", _TOPIC_PARTITIONS, nullable="0+", default=NULL),
    ],
    flexible_from=0,
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = Message(
    ApiKeys.CONSUMER_GROUP_HEARTBEAT,
    "ConsumerGroupHeartbeatResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=NULL),
        F("member_id", STRING, nullable="0+", default=NULL),
        F("member_epoch", INT32),
        F("heartbeat_interval_ms", INT32),
        F(
            "assignment",
            Struct([F("topic_partitions", _TOPIC_PARTITIONS)]),
            nullable="0+",
            default=NULL,
        ),
    ],
    flexible_from=0,
)

# -- ConsumerGroupDescribe (69) ------------------------------------------------------------
#    v1 adds each member's MemberType (KIP-1099: 1 consumer, 0 classic, -1 unknown).

_DESCRIBED_ASSIGNMENT = Struct(
    [
        F(
            "topic_partitions",
            [
                F("topic_id", UUID),
                F("topic_name", STRING),
                F("partitions", ArrayOf(INT32)),
            ],
        )
    ]
)

CONSUMER_GROUP_DESCRIBE_REQUEST = Message(
    ApiKeys.CONSUMER_GROUP_DESCRIBE,
    "ConsumerGroupDescribeRequest",
    [
        F("group_ids", ArrayOf(STRING)),
        F("include_authorized_operations", BOOL),
    ],
    flexible_from=0,
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = Message(
    ApiKeys.CONSUMER_GROUP_DESCRIBE,
    "ConsumerGroupDescribeResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "groups",
            [
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=NULL),
                F("group_id", STRING),
                F("group_state", STRING),
                F("group_epoch", INT32),
                F("assignment_epoch", INT32),
                F("assignor_name", STRING),
                F(
                    "members",
                    [
                        F("member_id", STRING),
                        F("instance_id", STRING, nullable="0+", default=NULL),
                        F("rack_id", STRING, nullable="0+", default=NULL),
                        F("member_epoch", INT32),
                        F("client_id", STRING),
                        F("client_host", STRING),
                        F("subscribed_topic_names", ArrayOf(STRING)),
                        F("subscribed_topic_regex", STRING, nullable="0+", default=NULL),
                        F("assignment", _DESCRIBED_ASSIGNMENT),
                        F("target_assignment", _DESCRIBED_ASSIGNMENT),
                        F("member_type", INT8, "1+", default=-1),
                    ],
                ),
                F("authorized_operations", INT32, default=-(2**31)),
            ],
        ),
    ],
    flexible_from=0,
)

CONSUMER_GROUP_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.CONSUMER_GROUP_HEARTBEAT,
            "ConsumerGroupHeartbeat",
            0,
            1,
            CONSUMER_GROUP_HEARTBEAT_REQUEST,
            CONSUMER_GROUP_HEARTBEAT_RESPONSE,
        ),
        Api(
            ApiKeys.CONSUMER_GROUP_DESCRIBE,
            "ConsumerGroupDescribe",
            0,
            1,
            CONSUMER_GROUP_DESCRIBE_REQUEST,
            CONSUMER_GROUP_DESCRIBE_RESPONSE,
        ),
    )
}

# The broker serves them (kafkalab.server.apis.consumer_group).
APIS.update(CONSUMER_GROUP_APIS)


# -- Transactions: partition side ---------------------------------------------------------

# DescribeProducers (61): the producer state of partitions (kafka-transactions.sh
# describe-producers; Kafka's DescribeProducersRequest/Response.json, v0, flexible).
DESCRIBE_PRODUCERS_REQUEST = Message(
    ApiKeys.DESCRIBE_PRODUCERS,
    "DescribeProducersRequest",
    [
        F(
            "topics",
            [
                F("name", STRING),
                F("partition_indexes", ArrayOf(INT32)),
            ],
        ),
    ],
    flexible_from=0,
)

DESCRIBE_PRODUCERS_RESPONSE = Message(
    ApiKeys.DESCRIBE_PRODUCERS,
    "DescribeProducersResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "topics",
            [
                F("name", STRING),
                F(
                    "partitions",
                    [
                        F("partition_index", INT32),
                        F("error_code", INT16),
                        F("error_message", STRING, nullable="0+", default=NULL),
                        F(
                            "active_producers",
                            [
                                F("producer_id", INT64),
                                F("producer_epoch", INT32),
                                F("last_sequence", INT32, default=-1),
                                F("last_timestamp", INT64, default=-1),
                                F("coordinator_epoch", INT32),
                                F("current_txn_start_offset", INT64, default=-1),
                            ],
                        ),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=0,
)

APIS.update(
    {
        ApiKeys.DESCRIBE_PRODUCERS: Api(
            ApiKeys.DESCRIBE_PRODUCERS,
            "DescribeProducers",
            0,
            0,
            DESCRIBE_PRODUCERS_REQUEST,
            DESCRIBE_PRODUCERS_RESPONSE,
        )
    }
)


# -- Transactions: coordinator --------------------------------------------------------------
#    What clients ask the transaction coordinator (kafkalab.server.apis.txn), and what the
#    coordinator asks partition leaders (WriteTxnMarkers). Versions as in
#    clients/src/main/resources/common/message/*.json; AddPartitionsToTxn stops at 3 (4+ is
#    the brokers' batched form, KIP-890). InitProducerId goes up to 4: v3 adds the
#    producer's current id and epoch (KIP-360), v4 the PRODUCER_FENCED error.

# -- AddPartitionsToTxn (24) ---------------------------------------------------------------

ADD_PARTITIONS_TO_TXN_REQUEST = Message(
    ApiKeys.ADD_PARTITIONS_TO_TXN,
    "AddPartitionsToTxnRequest",
    [
        F("v3_and_below_transactional_id", STRING),
        F("v3_and_below_producer_id", INT64),
        F("v3_and_below_producer_epoch", INT16),
        F("v3_and_below_topics", [F("name", STRING), F("partitions", ArrayOf(INT32))]),
    ],
    flexible_from=3,
)

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(
    ApiKeys.ADD_PARTITIONS_TO_TXN,
    "AddPartitionsToTxnResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "results_by_topic_v3_and_below",
            [
                F("name", STRING),
                F(
                    "results_by_partition",
                    [F("partition_index", INT32), F("partition_error_code", INT16)],
                ),
            ],
        ),
    ],
    flexible_from=3,
)

# -- AddOffsetsToTxn (25) ------------------------------------------------------------------

ADD_OFFSETS_TO_TXN_REQUEST = Message(
    ApiKeys.ADD_OFFSETS_TO_TXN,
    "AddOffsetsToTxnRequest",
    [
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("group_id", STRING),
    ],
    flexible_from=3,
)

ADD_OFFSETS_TO_TXN_RESPONSE = Message(
    ApiKeys.ADD_OFFSETS_TO_TXN,
    "AddOffsetsToTxnResponse",
    [F("throttle_time_ms", INT32), F("error_code", INT16)],
    flexible_from=3,
)

# -- EndTxn (26) ---------------------------------------------------------------------------

END_TXN_REQUEST = Message(
    ApiKeys.END_TXN,
    "EndTxnRequest",
    [
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("committed", BOOL),
    ],
    flexible_from=3,
)

END_TXN_RESPONSE = Message(
    ApiKeys.END_TXN,
    "EndTxnResponse",
    [F("throttle_time_ms", INT32), F("error_code", INT16)],
    flexible_from=3,
)

# -- WriteTxnMarkers (27) ------------------------------------------------------------------

WRITE_TXN_MARKERS_REQUEST = Message(
    ApiKeys.WRITE_TXN_MARKERS,
    "WriteTxnMarkersRequest",
    [
        F(
            "markers",
            [
                F("producer_id", INT64),
                F("producer_epoch", INT16),
                F("transaction_result", BOOL),
                F("topics", [F("name", STRING), F("partition_indexes", ArrayOf(INT32))]),
                F("coordinator_epoch", INT32),
            ],
        ),
    ],
    flexible_from=1,
)

WRITE_TXN_MARKERS_RESPONSE = Message(
    ApiKeys.WRITE_TXN_MARKERS,
    "WriteTxnMarkersResponse",
    [
        F(
            "markers",
            [
                F("producer_id", INT64),
                F(
                    "topics",
                    [
                        F("name", STRING),
                        F("partitions", [F("partition_index", INT32), F("error_code", INT16)]),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=1,
)

# -- DescribeTransactions (65) -------------------------------------------------------------

DESCRIBE_TRANSACTIONS_REQUEST = Message(
    ApiKeys.DESCRIBE_TRANSACTIONS,
    "DescribeTransactionsRequest",
    [F("transactional_ids", ArrayOf(STRING))],
    flexible_from=0,
)

DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    ApiKeys.DESCRIBE_TRANSACTIONS,
    "DescribeTransactionsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "transaction_states",
            [
                F("error_code", INT16),
                F("transactional_id", STRING),
                F("transaction_state", STRING),
                F("transaction_timeout_ms", INT32),
                F("transaction_start_time_ms", INT64),
                F("producer_id", INT64),
                F("producer_epoch", INT32),
                F("topic_partitions", [F("name", STRING), F("partition_indexes", ArrayOf(INT32))]),
            ],
        ),
    ],
    flexible_from=0,
)

# -- ListTransactions (66) -----------------------------------------------------------------

LIST_TRANSACTIONS_REQUEST = Message(
    ApiKeys.LIST_TRANSACTIONS,
    "ListTransactionsRequest",
    [F("state_filters", ArrayOf(STRING)), F("producer_id_filters", ArrayOf(INT64))],
    flexible_from=0,
)

LIST_TRANSACTIONS_RESPONSE = Message(
    ApiKeys.LIST_TRANSACTIONS,
    "ListTransactionsResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("unknown_state_filters", ArrayOf(STRING)),
        F(
            "transaction_states",
            [
                F("transactional_id", STRING),
                F("producer_id", INT64),
                F("transaction_state", STRING),
            ],
        ),
    ],
    flexible_from=0,
)

TXN_COORDINATOR_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        Api(
            ApiKeys.INIT_PRODUCER_ID,
            "InitProducerId",
            0,
            4,
            INIT_PRODUCER_ID_REQUEST,
            INIT_PRODUCER_ID_RESPONSE,
        ),
        Api(
            ApiKeys.ADD_PARTITIONS_TO_TXN,
            "AddPartitionsToTxn",
            0,
            3,
            ADD_PARTITIONS_TO_TXN_REQUEST,
            ADD_PARTITIONS_TO_TXN_RESPONSE,
        ),
        Api(
            ApiKeys.ADD_OFFSETS_TO_TXN,
            "AddOffsetsToTxn",
            0,
            3,
            ADD_OFFSETS_TO_TXN_REQUEST,
            ADD_OFFSETS_TO_TXN_RESPONSE,
        ),
        Api(ApiKeys.END_TXN, "EndTxn", 0, 3, END_TXN_REQUEST, END_TXN_RESPONSE),
        Api(
            ApiKeys.WRITE_TXN_MARKERS,
            "WriteTxnMarkers",
            0,
            1,
            WRITE_TXN_MARKERS_REQUEST,
            WRITE_TXN_MARKERS_RESPONSE,
        ),
        Api(
            ApiKeys.DESCRIBE_TRANSACTIONS,
            "DescribeTransactions",
            0,
            0,
            DESCRIBE_TRANSACTIONS_REQUEST,
            DESCRIBE_TRANSACTIONS_RESPONSE,
        ),
        Api(
            ApiKeys.LIST_TRANSACTIONS,
            "ListTransactions",
            0,
            0,
            LIST_TRANSACTIONS_REQUEST,
            LIST_TRANSACTIONS_RESPONSE,
        ),
    )
}

APIS.update(TXN_COORDINATOR_APIS)
