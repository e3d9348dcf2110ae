"""Metadata (3): brokers, topics, partitions and their leaders."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    BOOL,
    INT16,
    INT32,
    STRING,
    UUID,
    ArrayOf,
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

METADATA_API = Api(
    ApiKeys.METADATA,
    "Metadata",
    0,
    12,
    METADATA_REQUEST,
    METADATA_RESPONSE,
)
