"""The controller's APIs (KRaft): BrokerRegistration (62), BrokerHeartbeat (63),
AlterPartition (56), AllocateProducerIds (67), and CONTROLLER_APIS (with AlterConfigs
and IncrementalAlterConfigs, which brokers send on), what the
controller's listener serves.
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.messages.api_versions import API_VERSIONS_API
from kafkalab.protocol.messages.configs import ALTER_CONFIGS_API, INCREMENTAL_ALTER_CONFIGS_API
from kafkalab.protocol.messages.fetch import FETCH_API
from kafkalab.protocol.messages.reassignment import REASSIGNMENT_APIS
from kafkalab.protocol.messages.topics import (
    CREATE_PARTITIONS_API,
    CREATE_TOPICS_API,
    DELETE_TOPICS_API,
)
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
)

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

# AllocateProducerIds (KIP-730): a broker asks the controller for its next block of
# producer ids; the controller records it (ProducerIdsRecord) before it answers.
ALLOCATE_PRODUCER_IDS_REQUEST = Message(
    ApiKeys.ALLOCATE_PRODUCER_IDS,
    "AllocateProducerIdsRequest",
    [
        F("broker_id", INT32),
        F("broker_epoch", INT64, default=-1),
    ],
    flexible_from=0,
)

ALLOCATE_PRODUCER_IDS_RESPONSE = Message(
    ApiKeys.ALLOCATE_PRODUCER_IDS,
    "AllocateProducerIdsResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("producer_id_start", INT64),
        F("producer_id_len", INT32),
    ],
    flexible_from=0,
)

CONTROLLER_APIS: dict[ApiKeys, Api] = {
    api.key: api
    for api in (
        FETCH_API,  # Fetch: brokers read the metadata log with it
        API_VERSIONS_API,
        CREATE_TOPICS_API,
        DELETE_TOPICS_API,
        CREATE_PARTITIONS_API,
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
        Api(
            ApiKeys.ALLOCATE_PRODUCER_IDS,
            "AllocateProducerIds",
            0,
            0,
            ALLOCATE_PRODUCER_IDS_REQUEST,
            ALLOCATE_PRODUCER_IDS_RESPONSE,
        ),
    )
}
# Brokers forward them here (Kafka's ControllerApis serves them).
CONTROLLER_APIS.update(REASSIGNMENT_APIS)
# A broker sends config changes on to the controller as they came (ControllerApis'
# handleAlterConfigs / handleIncrementalAlterConfigs), after its own checks.
CONTROLLER_APIS[ApiKeys.ALTER_CONFIGS] = ALTER_CONFIGS_API
CONTROLLER_APIS[ApiKeys.INCREMENTAL_ALTER_CONFIGS] = INCREMENTAL_ALTER_CONFIGS_API
