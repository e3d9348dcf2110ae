"""AuthHelper: which operations a request may perform on a resource.

Kafka's classes: kafka.server.AuthHelper (`authorizedOperations`) and
org.apache.kafka.security.authorizer.AclEntry (`supportedOperations`). kafkalab
runs no authorizer, so, as a Kafka broker without `authorizer.class.name`, it
allows everything: a request that asks for its authorized operations
(Metadata v8+ `include_topic_authorized_operations`, DescribeCluster, ...) gets
every operation the resource type supports, as a 32-bit field with bit `code`
set for each AclOperation code.

    >>> authorized_operations(ResourceType.TOPIC) == 0b1101_1111_1000
    True
"""

from __future__ import annotations

from enum import IntEnum


class AclOperation(IntEnum):
    """Kafka: org.apache.kafka.common.acl.AclOperation, by code."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """Kafka: org.apache.kafka.common.resource.ResourceType, by code."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_A = AclOperation
#: AclEntry.supportedOperations: what each resource type has operations for.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_A.READ, _A.WRITE, _A.CREATE, _A.DESCRIBE, _A.DELETE, _A.ALTER}
        | {_A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset(
        {_A.READ, _A.DESCRIBE, _A.DELETE, _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {_A.CREATE, _A.CLUSTER_ACTION, _A.DESCRIBE_CONFIGS, _A.ALTER_CONFIGS}
        | {_A.IDEMPOTENT_WRITE, _A.ALTER, _A.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_A.DESCRIBE, _A.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_A.DESCRIBE}),
    ResourceType.USER: frozenset({_A.CREATE_TOKENS, _A.DESCRIBE_TOKENS}),
}

#: What a response carries when the operations were not asked for (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def authorized_operations(resource_type: ResourceType) -> int:
    """The bit field of the operations allowed on a resource of this type: all
    it supports, since no authorizer runs (Kafka: AuthHelper.authorizedOperations
    with no authorizer, then Utils.to32BitField)."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        bits |= 1 << operation
    return bits


__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "SUPPORTED_OPERATIONS",
    "AclOperation",
    "ResourceType",
    "authorized_operations",
]
