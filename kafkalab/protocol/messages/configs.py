"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44): the configs of a
resource (a topic, a broker, the cluster-wide broker default), read and changed."""

from __future__ import annotations

from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages.api import Api
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    ArrayOf,
)

# -- DescribeConfigs (32) ------------------------------------------------------------------

DESCRIBE_CONFIGS_REQUEST = Message(
    ApiKeys.DESCRIBE_CONFIGS,
    "DescribeConfigsRequest",
    [
        F(
            "resources",
            [
                F("resource_type", INT8),
                F("resource_name", STRING),
                F("configuration_keys", ArrayOf(STRING), nullable="0+"),
            ],
        ),
        F("include_synonyms", BOOL, "1+"),
        F("include_documentation", BOOL, "3+"),
    ],
    flexible_from=4,
)

DESCRIBE_CONFIGS_RESPONSE = Message(
    ApiKeys.DESCRIBE_CONFIGS,
    "DescribeConfigsResponse",
    [
        F("throttle_time_ms", INT32),
        F(
            "results",
            [
                F("error_code", INT16),
                F("error_message", STRING, nullable="0+"),
                F("resource_type", INT8),
                F("resource_name", STRING),
                F(
                    "configs",
                    [
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                        F("read_only", BOOL),
                        F("is_default", BOOL, "0"),
                        F("config_source", INT8, "1+", default=-1),
                        F("is_sensitive", BOOL),
                        F(
                            "synonyms",
                            [
                                F("name", STRING),
                                F("value", STRING, nullable="0+"),
                                F("source", INT8),
                            ],
                            "1+",
                        ),
                        F("config_type", INT8, "3+", default=0),
                        F("documentation", STRING, "3+", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
    flexible_from=4,
)

# Kafka 4.0 serves v1-v4 (KIP-896 removed v0).
DESCRIBE_CONFIGS_API = Api(
    ApiKeys.DESCRIBE_CONFIGS,
    "DescribeConfigs",
    1,
    4,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
)

# -- AlterConfigs (33) and IncrementalAlterConfigs (44) -------------------------------------

ALTER_CONFIGS_REQUEST = Message(
    ApiKeys.ALTER_CONFIGS,
    "AlterConfigsRequest",
    [
        F(
            "resources",
            [
                F("resource_type", INT8),
                F("resource_name", STRING),
                F(
                    "configs",
                    [
                        F("name", STRING),
                        F("value", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", BOOL),
    ],
    flexible_from=2,
)

_ALTER_CONFIGS_RESPONSES = [
    F("throttle_time_ms", INT32),
    F(
        "responses",
        [
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+"),
            F("resource_type", INT8),
            F("resource_name", STRING),
        ],
    ),
]

ALTER_CONFIGS_RESPONSE = Message(
    ApiKeys.ALTER_CONFIGS, "AlterConfigsResponse", _ALTER_CONFIGS_RESPONSES, flexible_from=2
)

INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    "IncrementalAlterConfigsRequest",
    [
        F(
            "resources",
            [
                F("resource_type", INT8),
                F("resource_name", STRING),
                F(
                    "configs",
                    [
                        F("name", STRING),
                        F("config_operation", INT8),  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
                        F("value", STRING, nullable="0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", BOOL),
    ],
    flexible_from=1,
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(
    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    "IncrementalAlterConfigsResponse",
    _ALTER_CONFIGS_RESPONSES,
    flexible_from=1,
)

# Kafka 4.0 serves AlterConfigs v0-v2 and IncrementalAlterConfigs v0-v1 (all there are).
ALTER_CONFIGS_API = Api(
    ApiKeys.ALTER_CONFIGS, "AlterConfigs", 0, 2, ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE
)
INCREMENTAL_ALTER_CONFIGS_API = Api(
    ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    "IncrementalAlterConfigs",
    0,
    1,
    INCREMENTAL_ALTER_CONFIGS_REQUEST,
    INCREMENTAL_ALTER_CONFIGS_RESPONSE,
)
