"""DescribeCluster (60): the cluster's id, its brokers and its controller, for admin clients.

KIP-700 gave admin clients this API so that they no longer borrow Metadata's
fields for it. v1 names the endpoint type asked for (KIP-919: 1 brokers,
2 controllers); v2 may ask for fenced brokers too and says of each broker
whether it is fenced (KIP-1073). Every version is flexible.
"""

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
)

# -- DescribeCluster (60) ------------------------------------------------------------------

#: EndpointType (Kafka: org.apache.kafka.common.requests.DescribeClusterRequest's
#: endpoint types): what a request asks to be described.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2

DESCRIBE_CLUSTER_REQUEST = Message(
    ApiKeys.DESCRIBE_CLUSTER,
    "DescribeClusterRequest",
    [
        F("include_cluster_authorized_operations", BOOL),
        F("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
        F("include_fenced_brokers", BOOL, "2+"),
    ],
    flexible_from=0,
)

DESCRIBE_CLUSTER_RESPONSE = Message(
    ApiKeys.DESCRIBE_CLUSTER,
    "DescribeClusterResponse",
    [
        F("throttle_time_ms", INT32),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=NULL),
        F("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
        F("cluster_id", STRING),
        F("controller_id", INT32, default=-1),
        F(
            "brokers",
            [
                F("broker_id", INT32),
                F("host", STRING),
                F("port", INT32),
                F("rack", STRING, nullable="0+", default=NULL),
                F("is_fenced", BOOL, "2+"),
            ],
        ),
        F("cluster_authorized_operations", INT32, default=-(2**31)),
    ],
    flexible_from=0,
)

# Kafka 4.0 serves v0-v2.
DESCRIBE_CLUSTER_API = Api(
    ApiKeys.DESCRIBE_CLUSTER,
    "DescribeCluster",
    0,
    2,
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CLUSTER_RESPONSE,
)
