"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): the admin APIs for topics."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import NULL, Message
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
                F("topic_id", UUID, "7+"),
                F("error_code", INT16),
                F("error_message", STRING, "1+", nullable="0+"),
                # v5+ also has topic_config_error_code, tagged field 0 (default 0, NONE):
                # Kafka sets it only when the caller may not describe the topic's configs;
                # kafkalab has no ACLs, so it is never sent (a received one stays in _tagged).
                F("num_partitions", INT32, "5+", default=-1),
                F("replication_factor", INT16, "5+", default=-1),
                F(
                    "configs",
                    [
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                        F("read_only", BOOL),
                        F("config_source", INT8, default=-1),
                        F("is_sensitive", BOOL),
                    ],
                    "5+",
                    nullable="5+",
                    default=NULL,
                ),
            ],
        ),
    ],
    flexible_from=5,
)

CREATE_TOPICS_API = Api(
    ApiKeys.CREATE_TOPICS,
    "CreateTopics",
    0,
    7,
    CREATE_TOPICS_REQUEST,
    CREATE_TOPICS_RESPONSE,
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

DELETE_TOPICS_API = Api(
    ApiKeys.DELETE_TOPICS,
    "DeleteTopics",
    0,
    3,
    DELETE_TOPICS_REQUEST,
    DELETE_TOPICS_RESPONSE,
)

# -- CreatePartitions (37) -----------------------------------------------------------------

CREATE_PARTITIONS_REQUEST = Message(
    ApiKeys.CREATE_PARTITIONS,
    "CreatePartitionsRequest",
    [
        F(
            "topics",
            [
                F("name", STRING),
                F("count", INT32),
                F(
                    "assignments",
                    [
                        F("broker_ids", ArrayOf(INT32)),
                    ],
                    nullable="0+",
                ),
            ],
        ),
        F("timeout_ms", INT32),
        F("validate_only", BOOL),
    ],
    flexible_from=2,
)

CREATE_PARTITIONS_RESPONSE = Message(
    ApiKeys.CREATE_PARTITIONS,
    "CreatePartitionsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "results",
            [
                F("name", STRING),
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+", default=NULL),
            ],
        ),
    ],
    flexible_from=2,
)

# Kafka 4.0 serves v0-v3 (v3 may answer THROTTLING_QUOTA_EXCEEDED; no quotas here).
CREATE_PARTITIONS_API = Api(
    ApiKeys.CREATE_PARTITIONS,
    "CreatePartitions",
    0,
    3,
    CREATE_PARTITIONS_REQUEST,
    CREATE_PARTITIONS_RESPONSE,
)
