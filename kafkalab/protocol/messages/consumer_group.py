"""KIP-848, the consumer group protocol: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69).
"""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message, Struct
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    UUID,
    ArrayOf,
)

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
