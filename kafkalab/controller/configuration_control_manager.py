"""ConfigurationControlManager: a config change becomes ConfigRecords, checked first.

Kafka's class: org.apache.kafka.controller.ConfigurationControlManager (with
kafka.server.ControllerConfigurationValidator). The controller keeps every
dynamic config in its metadata log as a ConfigRecord (ResourceType,
ResourceName, Name, Value; a null Value deletes the key), for two kinds of
resource:

    TOPIC (2)   a topic's overrides (retention.ms, min.insync.replicas, ...)
    BROKER (4)  a broker's dynamic configs, under its id ("1"), or the
                cluster-wide default of every broker, under ""

Two requests change them. IncrementalAlterConfigs (44) names one operation a
key: SET, DELETE, APPEND or SUBTRACT (the last two only for LIST configs such as
cleanup.policy, on the current value or else the default). The legacy
AlterConfigs (33) gives the whole new set: keys it does not name are deleted.

Every function here is pure: it takes the resource's current configs and
returns the changes ({key: value or None}), or raises KafkaError with Kafka's
code and message (INVALID_CONFIG for an unknown key, a bad value, APPEND to a
non-list; INVALID_REQUEST for a resource that cannot have configs;
UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist). The
QuorumController turns the changes into records (`config_records`); a
standalone broker applies them itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

from kafkalab.errors import Errors, KafkaError
from kafkalab.storage.log_config import InvalidConfigError, LogConfig


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids (the resource types of the config APIs)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(IntEnum):
    """Kafka's AlterConfigOp.OpType: IncrementalAlterConfigs' config_operation."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


#: Topic configs of type LIST (Kafka: TopicConfig's ConfigDef.Type.LIST).
TOPIC_LIST_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)
#: Broker configs of type LIST that kafkalab knows.
BROKER_LIST_CONFIGS = frozenset(
    {"log.cleanup.policy", "listeners", "advertised.listeners", "log.dirs"}
)
_TOPIC_DEFAULTS = LogConfig().to_properties()


def is_list(resource_type: int, key: str) -> bool:
    """May APPEND/SUBTRACT change this key (Kafka: KafkaConfigSchema.isSplittable)?"""
    if resource_type == ResourceType.TOPIC:
        return key in TOPIC_LIST_CONFIGS
    return key in BROKER_LIST_CONFIGS


def check_resource(resource_type: int, name: str) -> None:
    """The resource may have configs here (Kafka: ControllerConfigurationValidator)."""
    if resource_type == ResourceType.TOPIC:
        if not name:
            raise KafkaError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    elif resource_type == ResourceType.BROKER:
        if name:
            try:
                broker_id = int(name)
            except ValueError:
                raise KafkaError(
                    Errors.INVALID_REQUEST, "Unable to parse broker name as a base 10 number."
                ) from None
            if broker_id < 0:
                raise KafkaError(Errors.INVALID_REQUEST, "Invalid negative broker ID.")
    else:
        raise KafkaError(
            Errors.INVALID_REQUEST,
            f"Unknown resource type {resource_type}: kafkalab keeps the configs of topics (2) "
            "and brokers (4) only",
        )


def incremental_changes(
    resource_type: int,
    name: str,
    current: Mapping[str, str],
    ops: list[tuple[str, int, str | None]],
) -> dict[str, str | None]:
    """The changes (key -> new value, None: deleted) that (key, op, value) operations
    make to `current` (Kafka: incrementalAlterConfigResource). Only keys whose value
    changes, except for brokers, whose records are written anyway (KAFKA-14136: the
    brokers reload on them)."""
    changes: dict[str, str | None] = {}
    for key, op, value in ops:
        old = current.get(key)
        if op == OpType.SET:
            new = value
        elif op == OpType.DELETE:
            new = None
        elif op in (OpType.APPEND, OpType.SUBTRACT):
            if not is_list(resource_type, key):
                raise KafkaError(
                    Errors.INVALID_CONFIG,
                    f"Can't {OpType(op).name} to key {key} because its type is not LIST.",
                )
            base = old if old is not None else _default(resource_type, key)
            parts = [p for p in (base or "").split(",") if p]
            for item in (value or "").split(","):
                if op == OpType.APPEND and item not in parts:
                    parts.append(item)
                elif op == OpType.SUBTRACT and item in parts:
                    parts.remove(item)
            new = ",".join(parts)
        else:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown operations type {op}")
        if new != old or resource_type == ResourceType.BROKER:
            changes[key] = new
    return changes


def legacy_changes(
    resource_type: int, name: str, current: Mapping[str, str], configs: Mapping[str, str]
) -> dict[str, str | None]:
    """AlterConfigs replaces the whole set: what it names is set, the rest deleted
    (Kafka: legacyAlterConfigResource)."""
    changes: dict[str, str | None] = {
        key: value
        for key, value in configs.items()
        if current.get(key) != value or resource_type == ResourceType.BROKER
    }
    for key in current:
        if key not in configs:
            changes[key] = None
    return changes


def validate(
    resource_type: int,
    name: str,
    current: Mapping[str, str],
    changes: Mapping[str, str | None],
    exists: bool,
) -> dict[str, str]:
    """Check the configs the resource would have; return them. A topic's must all be
    Kafka topic configs with valid values (INVALID_CONFIG), and the topic must exist
    (UNKNOWN_TOPIC_OR_PARTITION), checked in that order as Kafka's controller does.
    A broker's values are checked by the broker that receives the request
    (DynamicBrokerConfig), where its static config is known."""
    check_resource(resource_type, name)
    after = dict(current)
    for key, value in changes.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    if resource_type == ResourceType.TOPIC:
        for key in after:
            if key not in _TOPIC_DEFAULTS:
                raise KafkaError(Errors.INVALID_CONFIG, f"Unknown topic config name: {key}")
        try:
            LogConfig().with_overrides(after)
        except InvalidConfigError as e:
            raise KafkaError(Errors.INVALID_CONFIG, e.message) from None
        if not exists:
            raise KafkaError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
    return after


def config_records(resource_type: int, name: str, changes: Mapping[str, str | None]) -> list[dict]:
    """ConfigRecords for the changes, as the metadata log holds them."""
    return [
        {
            "type": "ConfigRecord",
            "resource_type": int(resource_type),
            "resource_name": name,
            "name": key,
            "value": value,
        }
        for key, value in changes.items()
    ]


def _default(resource_type: int, key: str) -> str | None:
    if resource_type == ResourceType.TOPIC:
        return _TOPIC_DEFAULTS.get(key)
    if key == "log.cleanup.policy":
        return _TOPIC_DEFAULTS["cleanup.policy"]
    return None
