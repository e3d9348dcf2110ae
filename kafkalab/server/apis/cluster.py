"""DescribeCluster (60): the cluster id, the brokers and the controller, for admin clients.

Kafka: KafkaApis.handleDescribeCluster -> AuthHelper.computeDescribeClusterResponse.
A broker describes brokers (endpoint type 1): asked for controllers (2) it answers
MISMATCHED_ENDPOINT_TYPE, for a type Kafka does not know UNSUPPORTED_ENDPOINT_TYPE
(v0 has no endpoint type: it always asks for brokers). The brokers are the live ones;
v2 with `include_fenced_brokers` adds the fenced ones and says which are
(KIP-1073). The controller id is what Metadata names (a live broker, as a KRaft
broker answers: clients send it their controller requests), -1 when it is not
among the brokers listed. `include_cluster_authorized_operations` gets every
operation on the cluster, as a Kafka broker without an authorizer answers
(kafkalab.server.auth_helper); otherwise the field stays Integer.MIN_VALUE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages.cluster import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER
from kafkalab.server.auth_helper import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ResourceType,
    authorized_operations,
)

if TYPE_CHECKING:
    from kafkalab.server.kafka_apis import KafkaApis

ENDPOINT_TYPE_NAMES = {ENDPOINT_TYPE_BROKER: "brokers", ENDPOINT_TYPE_CONTROLLER: "controllers"}


def handle_describe_cluster(apis: KafkaApis, header: RequestHeader, body: dict) -> dict:
    asked = body["endpoint_type"]
    if asked != ENDPOINT_TYPE_BROKER:
        return endpoint_type_error(asked)
    cache = apis.metadata_cache
    if body["include_fenced_brokers"]:
        brokers = cache.registered_brokers()
    else:
        brokers = cache.alive_brokers()
    ids = {b.broker_id for b in brokers}
    controller_id = cache.controller_id()
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": ENDPOINT_TYPE_BROKER,
        "cluster_id": apis.config.cluster_id,
        "controller_id": controller_id if controller_id in ids else -1,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": None,
                "is_fenced": b.fenced,
            }
            for b in sorted(brokers, key=lambda b: b.broker_id)
        ],
        "cluster_authorized_operations": authorized_operations(ResourceType.CLUSTER)
        if body["include_cluster_authorized_operations"]
        else AUTHORIZED_OPERATIONS_OMITTED,
    }


def endpoint_type_error(asked: int) -> dict:
    """A request for an endpoint type a broker does not describe."""
    if asked in ENDPOINT_TYPE_NAMES:
        error = Errors.MISMATCHED_ENDPOINT_TYPE
        message = f"this is a broker: it describes brokers, not {ENDPOINT_TYPE_NAMES[asked]}"
    else:
        error = Errors.UNSUPPORTED_ENDPOINT_TYPE
        message = f"unsupported endpoint type {asked} (1: brokers, 2: controllers)"
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "error_message": message,
        "endpoint_type": ENDPOINT_TYPE_BROKER,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
